import type { Migration } from '../../shared/db/migrations.ts';
import type { Pool } from '../../shared/db/pool.ts';

/**
 * transactionId is unique per provider across all rounds (contract section 5). The round stream
 * enforces the rules inside a round; this index (provider, transactionId) → (content hash, round)
 * finds the round of a resubmission and refuses the same id with other content in another round.
 */
export const registryMigrations: Migration[] = [
  {
    id: 'ledger-001-registry',
    sql: `
      CREATE TABLE tx_registry (
        provider_id text NOT NULL,
        transaction_id text NOT NULL,
        content_hash text NOT NULL,
        round_stream text NOT NULL,
        registered_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (provider_id, transaction_id)
      );
    `,
  },
  {
    // The dispatch lease lives on the registry row: one wallet attempt at a time per transaction,
    // taken in the same statement as the claim.
    id: 'ledger-002-lease',
    sql: `ALTER TABLE tx_registry ADD COLUMN lease_token text, ADD COLUMN leased_until timestamptz;`,
  },
];

export interface RegistryEntry {
  contentHash: string;
  roundStream: string;
}

export interface Claim {
  /** True when this call registered the id; false when it was registered before. */
  inserted: boolean;
  /** True when this call holds the dispatch lease (until released or ttl). */
  leased: boolean;
  entry: RegistryEntry;
}

/**
 * Registers (provider, transactionId) for this content and round and takes its dispatch lease, in one
 * statement; or reports who holds the id and whether its lease is taken. The lease is only taken for
 * the same content: a conflicting submission never blocks the real one.
 */
export async function claimTransaction(pool: Pool, registryKey: string, transactionId: string, entry: RegistryEntry, token: string, ttlMs: number): Promise<Claim> {
  const { rows } = await pool.query<{ content_hash: string; round_stream: string; inserted: boolean; leased: boolean }>({
    name: 'tx_claim',
    text: `WITH claim AS (
       INSERT INTO tx_registry AS r (provider_id, transaction_id, content_hash, round_stream, lease_token, leased_until)
       VALUES ($1, $2, $3, $4, $5, clock_timestamp() + $6 * interval '1 millisecond')
       ON CONFLICT (provider_id, transaction_id) DO UPDATE SET lease_token = EXCLUDED.lease_token, leased_until = EXCLUDED.leased_until
         WHERE r.content_hash = EXCLUDED.content_hash AND r.round_stream = EXCLUDED.round_stream
           AND (r.leased_until IS NULL OR r.leased_until < clock_timestamp())
       RETURNING content_hash, round_stream, (xmax = 0) AS inserted, true AS leased
     )
     SELECT * FROM claim
     UNION ALL
     SELECT content_hash, round_stream, false, false FROM tx_registry
     WHERE provider_id = $1 AND transaction_id = $2 AND NOT EXISTS (SELECT 1 FROM claim)`,
    values: [registryKey, transactionId, entry.contentHash, entry.roundStream, token, ttlMs],
  });
  const row = rows[0];
  // None: a concurrent claim committed after this statement's snapshot; ask again.
  if (!row) return claimTransaction(pool, registryKey, transactionId, entry, token, ttlMs);
  return { inserted: row.inserted, leased: row.leased, entry: { contentHash: row.content_hash, roundStream: row.round_stream } };
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
