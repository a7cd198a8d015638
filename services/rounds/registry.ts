import type { Migration } from '../../shared/db/migrations.ts';
import { Coalescer, type Settled } from '../../shared/coalesce.ts';
import type { Pool } from '../../shared/db/pool.ts';
import type { AppendResult, NewEvent, StreamGuard } from '../../shared/eventstore/port.ts';
import { eventArrays } from '../../shared/eventstore/postgres.ts';

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
  {
    // The claim, the session check and the write-ahead record of a new transaction in one statement,
    // when the event store is this database (see claimAndRecord). Per item, in registry key order (two
    // batches never take each other's rows in opposite orders), after every round stream's lock (taken
    // before anything is written, as the event store requires): refused when the guard stream holds the
    // guard event (a kick), and then nothing is claimed; otherwise claimed as claimBatch claims; and a
    // claim that registered the id appends its record at the expected revision (conflict: nothing
    // appended, the claim stands).
    id: 'ledger-003-record-batch',
    sql: `
      CREATE FUNCTION ledger_record_batch(
        p_keys text[], p_tx_ids text[], p_hashes text[], p_rounds text[], p_tokens text[], p_ttls int[],
        p_guard_streams text[], p_guard_from bigint[], p_guard_types text[],
        p_expected bigint[], p_counts int[], p_ids uuid[], p_types text[], p_data jsonb[], p_meta jsonb[])
      RETURNS TABLE (o_index int, o_refused boolean, o_inserted boolean, o_leased boolean, o_content_hash text, o_round_stream text,
        o_conflict boolean, o_revision bigint, o_position text) LANGUAGE plpgsql AS $$
      DECLARE
        v_starts int[] := '{}';
        v_next int := 1;
        v_from int;
        v_to int;
        i int;
      BEGIN
        PERFORM es_lock_streams(p_rounds);
        FOR i IN 1 .. cardinality(p_keys) LOOP
          v_starts := v_starts || v_next;
          v_next := v_next + p_counts[i];
        END LOOP;
        FOR i IN SELECT x.o FROM unnest(p_keys, p_tx_ids) WITH ORDINALITY AS x(k, t, o) ORDER BY x.k, x.t, x.o LOOP
          o_index := i;
          o_inserted := false;
          o_leased := false;
          o_content_hash := NULL;
          o_round_stream := NULL;
          o_conflict := NULL;
          o_revision := NULL;
          o_position := NULL;
          o_refused := p_guard_streams[i] IS NOT NULL AND es_stream_has(p_guard_streams[i], p_guard_from[i], p_guard_types[i]);
          IF NOT o_refused THEN
            INSERT INTO tx_registry AS r (provider_id, transaction_id, content_hash, round_stream, lease_token, leased_until)
            VALUES (p_keys[i], p_tx_ids[i], p_hashes[i], p_rounds[i], p_tokens[i], clock_timestamp() + p_ttls[i] * interval '1 millisecond')
            ON CONFLICT (provider_id, transaction_id) DO UPDATE SET lease_token = EXCLUDED.lease_token, leased_until = EXCLUDED.leased_until
              WHERE r.content_hash = EXCLUDED.content_hash AND r.round_stream = EXCLUDED.round_stream
                AND (r.leased_until IS NULL OR r.leased_until < clock_timestamp())
            RETURNING r.content_hash, r.round_stream, (r.xmax = 0) INTO o_content_hash, o_round_stream, o_inserted;
            IF FOUND THEN
              o_leased := true;
            ELSE
              o_inserted := false; -- INTO found no row, and set it NULL
              SELECT r.content_hash, r.round_stream INTO o_content_hash, o_round_stream
              FROM tx_registry r WHERE r.provider_id = p_keys[i] AND r.transaction_id = p_tx_ids[i];
            END IF;
            IF o_inserted AND p_counts[i] > 0 THEN
              v_from := v_starts[i];
              v_to := v_from + p_counts[i] - 1;
              SELECT b.o_conflict, b.o_revision, b.o_position INTO o_conflict, o_revision, o_position
              FROM es_append_batch(ARRAY[p_rounds[i]], ARRAY[p_expected[i]], ARRAY[p_counts[i]],
                p_ids[v_from:v_to], p_types[v_from:v_to], p_data[v_from:v_to], p_meta[v_from:v_to]) b;
            END IF;
          END IF;
          RETURN NEXT;
        END LOOP;
      END
      $$;
    `,
  },
  {
    // The same function, appending through es_append_one (see eventstore-006) instead of a SELECT FROM
    // es_append_batch: about half the cost per append inside this statement.
    id: 'ledger-004-record-batch-append-one',
    sql: `
      CREATE OR REPLACE FUNCTION ledger_record_batch(
        p_keys text[], p_tx_ids text[], p_hashes text[], p_rounds text[], p_tokens text[], p_ttls int[],
        p_guard_streams text[], p_guard_from bigint[], p_guard_types text[],
        p_expected bigint[], p_counts int[], p_ids uuid[], p_types text[], p_data jsonb[], p_meta jsonb[])
      RETURNS TABLE (o_index int, o_refused boolean, o_inserted boolean, o_leased boolean, o_content_hash text, o_round_stream text,
        o_conflict boolean, o_revision bigint, o_position text) LANGUAGE plpgsql AS $$
      DECLARE
        v_starts int[] := '{}';
        v_next int := 1;
        v_from int;
        v_to int;
        v_append record;
        i int;
      BEGIN
        PERFORM es_lock_streams(p_rounds);
        FOR i IN 1 .. cardinality(p_keys) LOOP
          v_starts := v_starts || v_next;
          v_next := v_next + p_counts[i];
        END LOOP;
        FOR i IN SELECT x.o FROM unnest(p_keys, p_tx_ids) WITH ORDINALITY AS x(k, t, o) ORDER BY x.k, x.t, x.o LOOP
          o_index := i;
          o_inserted := false;
          o_leased := false;
          o_content_hash := NULL;
          o_round_stream := NULL;
          o_conflict := NULL;
          o_revision := NULL;
          o_position := NULL;
          o_refused := p_guard_streams[i] IS NOT NULL AND es_stream_has(p_guard_streams[i], p_guard_from[i], p_guard_types[i]);
          IF NOT o_refused THEN
            INSERT INTO tx_registry AS r (provider_id, transaction_id, content_hash, round_stream, lease_token, leased_until)
            VALUES (p_keys[i], p_tx_ids[i], p_hashes[i], p_rounds[i], p_tokens[i], clock_timestamp() + p_ttls[i] * interval '1 millisecond')
            ON CONFLICT (provider_id, transaction_id) DO UPDATE SET lease_token = EXCLUDED.lease_token, leased_until = EXCLUDED.leased_until
              WHERE r.content_hash = EXCLUDED.content_hash AND r.round_stream = EXCLUDED.round_stream
                AND (r.leased_until IS NULL OR r.leased_until < clock_timestamp())
            RETURNING r.content_hash, r.round_stream, (r.xmax = 0) INTO o_content_hash, o_round_stream, o_inserted;
            IF FOUND THEN
              o_leased := true;
            ELSE
              o_inserted := false; -- INTO found no row, and set it NULL
              SELECT r.content_hash, r.round_stream INTO o_content_hash, o_round_stream
              FROM tx_registry r WHERE r.provider_id = p_keys[i] AND r.transaction_id = p_tx_ids[i];
            END IF;
            IF o_inserted AND p_counts[i] > 0 THEN
              v_from := v_starts[i];
              v_to := v_from + p_counts[i] - 1;
              v_append := es_append_one(p_rounds[i], p_expected[i], p_ids[v_from:v_to], p_types[v_from:v_to], p_data[v_from:v_to], p_meta[v_from:v_to]);
              o_conflict := v_append.o_conflict;
              o_revision := v_append.o_revision;
              o_position := v_append.o_position;
            END IF;
          END IF;
          RETURN NEXT;
        END LOOP;
      END
      $$;
    `,
  },
  {
    // Contract section 8, rule 1: the operator's wallet deduplicates on (playerRef, transactionId), so an
    // id is also unique per (operator, player), whoever sends it (another provider, an adjustment, the
    // reconciler). The wallet key is kept beside the provider key. Rows recorded before this rule get it
    // from their write-ahead record (Postgres store; with EventStoreDB es_events is empty and they keep
    // none); where earlier data already holds two transactions under one wallet key, only the first
    // registered keeps it, and every row stays answerable through its provider key as before.
    id: 'ledger-005-wallet-key',
    sql: `
      ALTER TABLE tx_registry ADD COLUMN operator_id text, ADD COLUMN player_ref text;
      DO $backfill$ BEGIN
        IF to_regclass('es_events') IS NOT NULL THEN
          UPDATE tx_registry r SET operator_id = e.data->>'operatorId', player_ref = e.data->'request'->>'playerRef'
          FROM es_events e
          WHERE e.type = 'TransactionRecorded' AND e.stream_id = r.round_stream AND e.data->'request'->>'transactionId' = r.transaction_id;
        END IF;
      END $backfill$;
      UPDATE tx_registry r SET operator_id = NULL, player_ref = NULL
      FROM (
        SELECT provider_id, transaction_id,
          row_number() OVER (PARTITION BY operator_id, player_ref, transaction_id ORDER BY registered_at, provider_id) AS n
        FROM tx_registry WHERE operator_id IS NOT NULL
      ) d
      WHERE d.n > 1 AND r.provider_id = d.provider_id AND r.transaction_id = d.transaction_id;
      CREATE UNIQUE INDEX tx_registry_wallet_key ON tx_registry (operator_id, player_ref, transaction_id);
      DROP FUNCTION ledger_record_batch(text[], text[], text[], text[], text[], int[], text[], bigint[], text[], bigint[], int[], uuid[], text[], jsonb[], jsonb[]);
    `,
  },
  {
    // ledger_record_batch with the wallet key (section 8, rule 1) and idempotency before session validity
    // (rule 4). Per item, in registry key order, after every round stream's lock:
    // - o_revoked: the guard stream holds the guard event (a kick). A kicked session records nothing new:
    //   refused (o_refused) unless this provider registered the id before, which is then answered as a
    //   resubmission (the caller's decider refuses anything new);
    // - o_taken: an id new to this registrant whose wallet key is held by another registrant (another
    //   provider, an adjustment, the reconciler): nothing is claimed, the holder's entry is returned. An id
    //   this registrant holds already is its own, also where the migration left it without a wallet key;
    // - otherwise claimed as claimBatch claims, and a claim that registered the id appends its record at
    //   the expected revision (conflict: nothing appended, the claim stands).
    id: 'ledger-006-claim-and-record',
    sql: `
      CREATE FUNCTION ledger_claim_and_record(
        p_keys text[], p_tx_ids text[], p_hashes text[], p_rounds text[], p_operators text[], p_players text[], p_tokens text[], p_ttls int[],
        p_guard_streams text[], p_guard_from bigint[], p_guard_types text[],
        p_expected bigint[], p_counts int[], p_ids uuid[], p_types text[], p_data jsonb[], p_meta jsonb[])
      RETURNS TABLE (o_index int, o_refused boolean, o_revoked boolean, o_taken boolean, o_inserted boolean, o_leased boolean,
        o_content_hash text, o_round_stream text, o_conflict boolean, o_revision bigint, o_position text) LANGUAGE plpgsql AS $$
      DECLARE
        v_starts int[] := '{}';
        v_next int := 1;
        v_from int;
        v_to int;
        v_append record;
        v_own boolean;
        i int;
      BEGIN
        PERFORM es_lock_streams(p_rounds);
        FOR i IN 1 .. cardinality(p_keys) LOOP
          v_starts := v_starts || v_next;
          v_next := v_next + p_counts[i];
        END LOOP;
        FOR i IN SELECT x.o FROM unnest(p_keys, p_tx_ids) WITH ORDINALITY AS x(k, t, o) ORDER BY x.k, x.t, x.o LOOP
          o_index := i;
          o_refused := false;
          o_taken := false;
          o_inserted := false;
          o_leased := false;
          o_content_hash := NULL;
          o_round_stream := NULL;
          o_conflict := NULL;
          o_revision := NULL;
          o_position := NULL;
          o_revoked := p_guard_streams[i] IS NOT NULL AND es_stream_has(p_guard_streams[i], p_guard_from[i], p_guard_types[i]);
          v_own := EXISTS (SELECT 1 FROM tx_registry r WHERE r.provider_id = p_keys[i] AND r.transaction_id = p_tx_ids[i]);
          IF o_revoked AND NOT v_own THEN
            o_refused := true;
            RETURN NEXT;
            CONTINUE;
          END IF;
          IF NOT v_own THEN
            SELECT r.content_hash, r.round_stream INTO o_content_hash, o_round_stream FROM tx_registry r
            WHERE r.operator_id = p_operators[i] AND r.player_ref = p_players[i] AND r.transaction_id = p_tx_ids[i] AND r.provider_id <> p_keys[i];
            IF FOUND THEN
              o_taken := true;
              RETURN NEXT;
              CONTINUE;
            END IF;
          END IF;
          INSERT INTO tx_registry AS r (provider_id, transaction_id, content_hash, round_stream, operator_id, player_ref, lease_token, leased_until)
          VALUES (p_keys[i], p_tx_ids[i], p_hashes[i], p_rounds[i], p_operators[i], p_players[i], p_tokens[i], clock_timestamp() + p_ttls[i] * interval '1 millisecond')
          ON CONFLICT (provider_id, transaction_id) DO UPDATE SET lease_token = EXCLUDED.lease_token, leased_until = EXCLUDED.leased_until
            WHERE r.content_hash = EXCLUDED.content_hash AND r.round_stream = EXCLUDED.round_stream
              AND (r.leased_until IS NULL OR r.leased_until < clock_timestamp())
          RETURNING r.content_hash, r.round_stream, (r.xmax = 0) INTO o_content_hash, o_round_stream, o_inserted;
          IF FOUND THEN
            o_leased := true;
          ELSE
            o_inserted := false; -- INTO found no row, and set it NULL
            SELECT r.content_hash, r.round_stream INTO o_content_hash, o_round_stream
            FROM tx_registry r WHERE r.provider_id = p_keys[i] AND r.transaction_id = p_tx_ids[i];
          END IF;
          IF o_inserted AND p_counts[i] > 0 THEN
            v_from := v_starts[i];
            v_to := v_from + p_counts[i] - 1;
            v_append := es_append_one(p_rounds[i], p_expected[i], p_ids[v_from:v_to], p_types[v_from:v_to], p_data[v_from:v_to], p_meta[v_from:v_to]);
            o_conflict := v_append.o_conflict;
            o_revision := v_append.o_revision;
            o_position := v_append.o_position;
          END IF;
          RETURN NEXT;
        END LOOP;
      END
      $$;
    `,
  },
];

export interface RegistryEntry {
  contentHash: string;
  roundStream: string;
}

/** The wallet's own identity of a transaction: the operator's wallet deduplicates on (playerRef, transactionId). */
export interface WalletKey {
  operatorId: string;
  playerRef: string;
}

export interface Claim {
  /** True when this call registered the id; false when it was registered before. */
  inserted: boolean;
  /** True when this call holds the dispatch lease (until released or ttl). */
  leased: boolean;
  /** The registrant of the id: this submission's (or the same content's) entry, or whoever holds it. */
  entry: RegistryEntry;
  /** The id is held for this wallet key by another registrant (another provider, an adjustment, the reconciler). */
  taken: boolean;
}

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

interface ClaimRequest {
  registryKey: string;
  transactionId: string;
  entry: RegistryEntry;
  wallet: WalletKey;
  token: string;
  ttlMs: number;
}

const claimers = new WeakMap<Pool, Coalescer<ClaimRequest, Claim | undefined>>();

/**
 * Two registrants inserted one wallet key at once: the second statement fails on the unique index.
 * Asked again, its check finds the first (committed) one, so a retry answers it.
 */
const walletKeyRace = (err: unknown): boolean =>
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

export interface RecordRequest {
  registryKey: string;
  transactionId: string;
  entry: RegistryEntry;
  wallet: WalletKey;
  token: string;
  ttlMs: number;
  /** When broken (say, the session was kicked), nothing new is claimed or recorded. */
  guard: StreamGuard | undefined;
  /** The record, appended to entry.roundStream at this revision (-1: a new stream) if the claim registers the id. */
  expectedRevision: number;
  events: NewEvent[];
}

export type RecordOutcome =
  /** The guard is broken and the id is new to this registrant: nothing was claimed or recorded. */
  | { kind: 'refused' }
  /** The id's row went away between the claim and its read (a refused submission released it): ask again. */
  | { kind: 'vanished' }
  /**
   * Claimed as claimTransaction claims; when the claim registered the id, what its append did.
   * `revoked`: the guard is broken (the id was registered before: the caller answers it, records nothing).
   */
  | { kind: 'claimed'; claim: Claim; revoked: boolean; append: { kind: 'appended'; result: AppendResult } | { kind: 'conflict' } | undefined };

const recorders = new WeakMap<Pool, Coalescer<RecordRequest, RecordOutcome>>();

/**
 * claimTransaction, the guard check and the write-ahead append of a new transaction, in one statement
 * and one commit (ledger_claim_and_record): one round trip instead of two before the wallet is called.
 * Only for an event store kept in this database (the Postgres adapter). Concurrent calls share a statement.
 */
export function claimAndRecord(pool: Pool, request: RecordRequest): Promise<RecordOutcome> {
  let recorder = recorders.get(pool);
  if (!recorder) {
    recorder = new Coalescer((batch) => recordBatch(pool, batch), { maxInFlight: 2, maxBatch: 200 });
    recorders.set(pool, recorder);
  }
  return recorder.submit(request);
}

async function recordBatch(pool: Pool, batch: RecordRequest[], racesLeft = 3): Promise<Array<Settled<RecordOutcome>>> {
  try {
    return await tryRecordBatch(pool, batch);
  } catch (err) {
    if (walletKeyRace(err) && racesLeft > 0) return recordBatch(pool, batch, racesLeft - 1);
    // As the event store does: one bad item (say an event id stored before) must not fail its neighbours.
    if (batch.length === 1) return [{ ok: false, error: err }];
    return Promise.all(batch.map((r) => recordBatch(pool, [r], racesLeft).then((o) => o[0]!)));
  }
}

async function tryRecordBatch(pool: Pool, batch: RecordRequest[]): Promise<Array<Settled<RecordOutcome>>> {
  const { rows } = await pool.query<{
    o_index: number;
    o_refused: boolean;
    o_revoked: boolean;
    o_taken: boolean;
    o_inserted: boolean;
    o_leased: boolean;
    o_content_hash: string | null;
    o_round_stream: string | null;
    o_conflict: boolean | null;
    o_revision: string | null;
    o_position: string | null;
  }>({
    name: 'ledger_claim_and_record',
    text: `SELECT * FROM ledger_claim_and_record($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::int[],
      $9::text[], $10::bigint[], $11::text[], $12::bigint[], $13::int[], $14::uuid[], $15::text[], $16::jsonb[], $17::jsonb[])`,
    values: [
      batch.map((r) => r.registryKey),
      batch.map((r) => r.transactionId),
      batch.map((r) => r.entry.contentHash),
      batch.map((r) => r.entry.roundStream),
      batch.map((r) => r.wallet.operatorId),
      batch.map((r) => r.wallet.playerRef),
      batch.map((r) => r.token),
      batch.map((r) => r.ttlMs),
      batch.map((r) => r.guard?.stream ?? null),
      batch.map((r) => r.guard?.fromRevision ?? null),
      batch.map((r) => r.guard?.eventType ?? null),
      batch.map((r) => r.expectedRevision),
      batch.map((r) => r.events.length),
      ...eventArrays(batch.flatMap((r) => r.events)),
    ],
  });
  const byIndex = new Map(rows.map((r) => [r.o_index, r]));
  return batch.map((_, i): Settled<RecordOutcome> => {
    const r = byIndex.get(i + 1);
    if (!r) return { ok: false, error: new Error('ledger_claim_and_record returned no row for an item') };
    if (r.o_refused) return { ok: true, value: { kind: 'refused' } };
    if (r.o_content_hash === null || r.o_round_stream === null) return { ok: true, value: { kind: 'vanished' } };
    const claim: Claim = { inserted: r.o_inserted, leased: r.o_leased, taken: r.o_taken, entry: { contentHash: r.o_content_hash, roundStream: r.o_round_stream } };
    const append =
      r.o_conflict === null ? undefined : r.o_conflict ? ({ kind: 'conflict' } as const) : ({ kind: 'appended', result: { nextRevision: Number(r.o_revision), position: r.o_position! } } as const);
    return { ok: true, value: { kind: 'claimed', claim, revoked: r.o_revoked, append } };
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
