import { Coalescer, type Settled } from '../coalesce.ts';
import type { Migration } from '../db/migrations.ts';
import type { Pool } from '../db/pool.ts';
import { eventArrays } from './pg-arrays.ts';
import type { Claim, RecordOutcome, RecordRequest, StreamStore, TransactionRecorder } from './port.ts';
import type { PostgresEventStore } from './postgres.ts';
import { walletKeyRace } from './registry.ts';
import { KICK_FENCE } from './kick-fence.ts';

/**
 * ledger_claim_and_record (the wallet key, contract section 8 rule 1; idempotency before session validity,
 * rule 4), as each migration wrote it: `fence` is what it runs after taking its round streams' locks.
 * Then per item, in registry key order:
 * - o_revoked: the guard stream holds the guard event (a kick). A kicked session records nothing new:
 *   refused (o_refused) unless this provider registered the id before, which is then answered as a
 *   resubmission (the caller's decider refuses anything new);
 * - o_taken: an id new to this registrant whose wallet key is held by another registrant (another
 *   provider, an adjustment, the reconciler): nothing is claimed, the holder's entry is returned. An id
 *   this registrant holds already is its own, also where the migration left it without a wallet key;
 * - otherwise claimed as claimBatch claims, and a claim that registered the id appends its record at
 *   the expected revision (conflict: nothing appended, the claim stands).
 */
const claimAndRecordSql = (create: 'CREATE FUNCTION' | 'CREATE OR REPLACE FUNCTION', fence: string) => `
      ${create} ledger_claim_and_record(
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
${fence}        FOR i IN 1 .. cardinality(p_keys) LOOP
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
`;

/**
 * The kick fence's shared side (contract section 8, rule 4): the guard streams of the batch, each locked
 * shared for the statement's transaction before any guard is read, in the order of their keys (so two
 * batches cannot deadlock). A kick takes the same key exclusive around its append (kickFence): it waits
 * for the records that read its guard before it, and a record that comes while it is under way waits
 * for it and then reads the kick. (A kick takes it in its append's statement: es_append_fenced.) Without it a kick could commit between a record's guard check and its
 * commit, be acknowledged, and the transaction be recorded and sent after it.
 */
const SHARED_FENCE = `        DECLARE
          v_key int;
        BEGIN
          FOR v_key IN SELECT DISTINCT hashtext(g) FROM unnest(p_guard_streams) AS g WHERE g IS NOT NULL ORDER BY 1 LOOP
            PERFORM pg_advisory_xact_lock_shared(${KICK_FENCE}, v_key);
          END LOOP;
        END;
`;

export const postgresRecorderMigrations: Migration[] = [
  {
    id: 'ledger-006-claim-and-record',
    sql: claimAndRecordSql('CREATE FUNCTION', ''),
  },
  { id: 'ledger-007-kick-fence', sql: claimAndRecordSql('CREATE OR REPLACE FUNCTION', SHARED_FENCE) },
  {
    // es_append_fenced: one append under the kick fence, for a kick (exclusive) and for a transaction
    // recorded after its claim (shared, checking the guard as ledger_claim_and_record does). The stream's
    // lock first, then the fence: the order ledger_claim_and_record takes them in (its rounds', then the
    // fence), and every wait among them is Postgres's own, which it can see. (A kick that held the fence
    // on a connection of its own while its append waited, batched, for a round's lock, could wait in a
    // circle with a record holding that round's lock and waiting for the fence, which no database sees.)
    id: 'ledger-008-fenced-append',
    sql: `
      CREATE FUNCTION es_append_fenced(p_fence text, p_exclusive boolean, p_guard_from bigint, p_guard_type text,
        p_stream text, p_expected bigint, p_ids uuid[], p_types text[], p_data jsonb[], p_meta jsonb[],
        OUT o_revoked boolean, OUT o_conflict boolean, OUT o_revision bigint, OUT o_position text) LANGUAGE plpgsql AS $$
      DECLARE
        r record;
      BEGIN
        PERFORM pg_advisory_xact_lock(7281004, hashtext(p_stream));
        IF p_exclusive THEN
          PERFORM pg_advisory_xact_lock(${KICK_FENCE}, hashtext(p_fence));
        ELSE
          PERFORM pg_advisory_xact_lock_shared(${KICK_FENCE}, hashtext(p_fence));
        END IF;
        o_revoked := p_guard_type IS NOT NULL AND es_stream_has(p_fence, p_guard_from, p_guard_type);
        IF o_revoked THEN
          RETURN;
        END IF;
        r := es_append_one(p_stream, p_expected, p_ids, p_types, p_data, p_meta);
        o_conflict := r.o_conflict;
        o_revision := r.o_revision;
        o_position := r.o_position;
      END
      $$;
    `,
  },
];

/**
 * The Postgres adapter's transaction recorder: the registry claim, the guard check and the write-ahead
 * append of a new transaction in one statement and one commit (ledger_claim_and_record), one round trip
 * instead of two before the wallet is called. Concurrent calls share a statement.
 */
export function postgresRecorder(pool: Pool, store: PostgresEventStore): TransactionRecorder {
  const readStream: StreamStore['readStream'] = (streamId, options) => store.readStream(streamId, options);
  return {
    record: (request) => claimAndRecord(pool, request),
    // The fence is taken inside each statement that appends under it (ledger_claim_and_record,
    // es_append_fenced), never held on a connection of its own across other statements.
    exclusive: (guardStream, fn) => fn({ readStream, append: (streamId, events, expected) => store.appendFenced({ stream: guardStream, mode: 'exclusive' }, streamId, events, expected) }),
    guarded: (guard) => ({ readStream, append: (streamId, events, expected) => store.appendFenced({ stream: guard.stream, mode: 'shared', guard }, streamId, events, expected) }),
    close: async () => undefined,
  };
}

const recorders = new WeakMap<Pool, Coalescer<RecordRequest, RecordOutcome>>();

/**
 * claimTransaction, the guard check and the write-ahead append of a new transaction, in one statement
 * and one commit (ledger_claim_and_record): one round trip instead of two before the wallet is called.
 * Only for an event store kept in this database (the Postgres adapter). Concurrent calls share a statement.
 */
function claimAndRecord(pool: Pool, request: RecordRequest): Promise<RecordOutcome> {
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

