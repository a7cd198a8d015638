import { Coalescer, type Settled } from '../coalesce.ts';
import type { Migration } from '../db/migrations.ts';
import type { Pool } from '../db/pool.ts';
import type { Claim, ClaimRequest, RegistryEntry, WalletKey } from './port.ts';

/**
 * transactionId is unique per provider across all rounds (contract section 5). The round stream
 * enforces the rules inside a round; this index (provider, transactionId) → (content hash, round)
 * finds the round of a resubmission and refuses the same id with other content in another round.
 */
export const registryMigrations: Migration[] = [
  {
    // The dispatch lease lives on the row (one wallet attempt at a time per transaction, taken in the
    // claim's statement). The wallet key (operator, player, id) is unique too: the operator's wallet
    // deduplicates on (playerRef, transactionId), whoever sends it (contract section 8, rule 1).
    id: 'registry-baseline',
    replaces: ['ledger-001-registry', 'ledger-002-lease', 'ledger-003-record-batch', 'ledger-004-record-batch-append-one', 'ledger-005-wallet-key'],
    sql: `
      CREATE TABLE tx_registry (
        provider_id text NOT NULL,
        transaction_id text NOT NULL,
        content_hash text NOT NULL,
        round_stream text NOT NULL,
        registered_at timestamptz NOT NULL DEFAULT now(),
        lease_token text,
        leased_until timestamptz,
        operator_id text,
        player_ref text,
        PRIMARY KEY (provider_id, transaction_id)
      );
      CREATE UNIQUE INDEX tx_registry_wallet_key ON tx_registry (operator_id, player_ref, transaction_id);
    `,
  },
];

/** Whether a claim is this submission's own: anything else is the id used before with different content (409). */
export const claimIsOwn = (claim: Claim, mine: RegistryEntry): boolean =>
  !claim.taken && claim.entry.contentHash === mine.contentHash && claim.entry.roundStream === mine.roundStream;

/**
 * Registers (provider, transactionId) for this content and round and takes its dispatch lease, in one
 * statement; or reports who holds the id (for this provider, or for this wallet key) and whether its
 * lease is taken. The lease is only taken for the same content: a conflicting submission never blocks
 * the real one. Concurrent claims share a round trip (see claimBatch).
 */
export async function claimTransaction(pool: Pool, registryKey: string, transactionId: string, entry: RegistryEntry, wallet: WalletKey, token: string, ttlMs: number): Promise<Claim> {
  let claims = claimers.get(pool);
  if (!claims) {
    claims = new Coalescer((batch) => claimBatch(pool, batch), { maxInFlight: 2, maxBatch: 200 });
    claimers.set(pool, claims);
  }
  for (;;) {
    const claim = await claims.submit({ registryKey, transactionId, entry, wallet, token, ttlMs });
    if (claim) return claim;
  }
}


const claimers = new WeakMap<Pool, Coalescer<ClaimRequest, Claim | undefined>>();

/**
 * Two registrants inserted one wallet key at once: the second statement fails on the unique index.
 * Asked again, its check finds the first (committed) one, so a retry answers it.
 */
export const walletKeyRace = (err: unknown): boolean =>
  typeof err === 'object' && err !== null && (err as { code?: string }).code === '23505' && (err as { constraint?: string }).constraint === 'tx_registry_wallet_key';

/**
 * Claims a batch in one statement. Rows are inserted in key order, so two batches cannot deadlock. An
 * id that appears twice in a batch (for one registrant, or for one wallet key) is claimed once; its
 * repeats are answered undefined (ask again, in the next batch), as is a claim whose row a concurrent
 * claim committed after this statement's snapshot.
 */
async function claimBatch(pool: Pool, batch: ClaimRequest[]): Promise<Array<Settled<Claim | undefined>>> {
  const seen = new Set<string>();
  const first = batch.map((c) => {
    const keys = [`r\n${c.registryKey}\n${c.transactionId}`, `w\n${c.wallet.operatorId}\n${c.wallet.playerRef}\n${c.transactionId}`];
    const isFirst = keys.every((k) => !seen.has(k));
    for (const k of keys) seen.add(k);
    return isFirst;
  });
  const sent = batch.filter((_, i) => first[i]);
  let rows: Array<{ i: string; content_hash: string; round_stream: string; inserted: boolean; leased: boolean; taken: boolean }>;
  try {
    ({ rows } = await pool.query({
      name: 'tx_claim_batch_v2',
      text: `WITH input AS (
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::int[]) WITH ORDINALITY
           AS x(provider_id, transaction_id, content_hash, round_stream, operator_id, player_ref, token, ttl_ms, i)
       ),
       taken AS (
         SELECT i.i, i.provider_id, i.transaction_id, t.content_hash, t.round_stream FROM input i
         CROSS JOIN LATERAL (
           SELECT content_hash, round_stream FROM tx_registry t
           WHERE t.operator_id = i.operator_id AND t.player_ref = i.player_ref AND t.transaction_id = i.transaction_id AND t.provider_id <> i.provider_id
             AND NOT EXISTS (SELECT 1 FROM tx_registry o WHERE o.provider_id = i.provider_id AND o.transaction_id = i.transaction_id) OFFSET 0
         ) t
       ),
       claim AS (
         INSERT INTO tx_registry AS r (provider_id, transaction_id, content_hash, round_stream, operator_id, player_ref, lease_token, leased_until)
         SELECT provider_id, transaction_id, content_hash, round_stream, operator_id, player_ref, token, clock_timestamp() + ttl_ms * interval '1 millisecond'
         FROM input WHERE NOT EXISTS (SELECT 1 FROM taken k WHERE k.i = input.i) ORDER BY provider_id, transaction_id
         ON CONFLICT (provider_id, transaction_id) DO UPDATE SET lease_token = EXCLUDED.lease_token, leased_until = EXCLUDED.leased_until
           WHERE r.content_hash = EXCLUDED.content_hash AND r.round_stream = EXCLUDED.round_stream
             AND (r.leased_until IS NULL OR r.leased_until < clock_timestamp())
         RETURNING r.provider_id, r.transaction_id, r.content_hash, r.round_stream, (r.xmax = 0) AS inserted
       )
       SELECT i.i, c.content_hash, c.round_stream, c.inserted, true AS leased, false AS taken FROM input i JOIN claim c USING (provider_id, transaction_id)
       UNION ALL
       SELECT k.i, k.content_hash, k.round_stream, false, false, true FROM taken k
       UNION ALL
       SELECT i.i, t.content_hash, t.round_stream, false, false, false FROM input i
       CROSS JOIN LATERAL (
         -- OFFSET 0: one index lookup per id (a flattened join may hash the whole table in a generic plan)
         SELECT content_hash, round_stream FROM tx_registry t WHERE t.provider_id = i.provider_id AND t.transaction_id = i.transaction_id OFFSET 0
       ) t
       WHERE NOT EXISTS (SELECT 1 FROM claim c WHERE c.provider_id = i.provider_id AND c.transaction_id = i.transaction_id)
         AND NOT EXISTS (SELECT 1 FROM taken k WHERE k.i = i.i)`,
      values: [
        sent.map((c) => c.registryKey),
        sent.map((c) => c.transactionId),
        sent.map((c) => c.entry.contentHash),
        sent.map((c) => c.entry.roundStream),
        sent.map((c) => c.wallet.operatorId),
        sent.map((c) => c.wallet.playerRef),
        sent.map((c) => c.token),
        sent.map((c) => c.ttlMs),
      ],
    }));
  } catch (err) {
    if (walletKeyRace(err)) return batch.map(() => ({ ok: true, value: undefined }));
    throw err;
  }
  const byIndex = new Map(rows.map((r) => [Number(r.i), r]));
  let k = 0;
  return batch.map((_, i) => {
    if (!first[i]) return { ok: true, value: undefined };
    const row = byIndex.get(++k);
    return {
      ok: true,
      value: row && { inserted: row.inserted, leased: row.leased, taken: row.taken, entry: { contentHash: row.content_hash, roundStream: row.round_stream } },
    };
  });
}

/** Takes the dispatch lease of a registered transaction (the worker's way in); false when it is held. */
export async function takeLease(pool: Pool, registryKey: string, transactionId: string, token: string, ttlMs: number): Promise<boolean> {
  const { rowCount } = await pool.query(
    `UPDATE tx_registry SET lease_token = $3, leased_until = clock_timestamp() + $4 * interval '1 millisecond'
     WHERE provider_id = $1 AND transaction_id = $2 AND (leased_until IS NULL OR leased_until < clock_timestamp())`,
    [registryKey, transactionId, token, ttlMs],
  );
  return rowCount === 1;
}

/**
 * Extends a lease this holder still has, right before a wallet call: a holder that lost it (it
 * outlived its ttl and another process took it) must not call. False when the lease is gone.
 */
export async function renewLease(pool: Pool, registryKey: string, transactionId: string, token: string, ttlMs: number): Promise<boolean> {
  const { rowCount } = await pool.query(
    `UPDATE tx_registry SET leased_until = clock_timestamp() + $4 * interval '1 millisecond'
     WHERE provider_id = $1 AND transaction_id = $2 AND lease_token = $3`,
    [registryKey, transactionId, token, ttlMs],
  );
  return rowCount === 1;
}

/** Whether this registrant has claimed the transaction id (it was recorded, or is being recorded). */
export async function isClaimed(pool: Pool, registryKey: string, transactionId: string): Promise<boolean> {
  const { rowCount } = await pool.query('SELECT 1 FROM tx_registry WHERE provider_id = $1 AND transaction_id = $2', [registryKey, transactionId]);
  return rowCount === 1;
}

/** Whether someone is attempting this transaction right now (its lease is taken and unexpired). */
export async function leaseHeld(pool: Pool, registryKey: string, transactionId: string): Promise<boolean> {
  const { rows } = await pool.query<{ held: boolean }>(
    'SELECT leased_until > clock_timestamp() AS held FROM tx_registry WHERE provider_id = $1 AND transaction_id = $2',
    [registryKey, transactionId],
  );
  return rows[0]?.held === true;
}

export async function releaseLease(pool: Pool, registryKey: string, transactionId: string, token: string): Promise<void> {
  await pool.query('UPDATE tx_registry SET lease_token = NULL, leased_until = NULL WHERE provider_id = $1 AND transaction_id = $2 AND lease_token = $3', [
    registryKey,
    transactionId,
    token,
  ]);
}

/** Undoes a claim whose submission was refused, so the id stays free for a valid one. */
export async function releaseClaim(pool: Pool, registryKey: string, transactionId: string, token: string): Promise<void> {
  await pool.query('DELETE FROM tx_registry WHERE provider_id = $1 AND transaction_id = $2 AND lease_token = $3', [registryKey, transactionId, token]);
}
