import { Coalescer, type Settled } from '../coalesce.ts';
import { PgListener } from '../db/listener.ts';
import type { Migration } from '../db/migrations.ts';
import { isUniqueViolation, type Pool } from '../db/pool.ts';
import { eventArrays } from './pg-arrays.ts';
import { postgresRecorder, postgresRecorderMigrations } from './postgres-recorder.ts';
import {
  GuardBrokenError,
  pollingSubscription,
  START,
  WrongExpectedRevisionError,
  type AppendResult,
  type CountAllOptions,
  type EventStore,
  type ExpectedRevision,
  type JsonObject,
  type LogBacklog,
  type LogPage,
  type NewEvent,
  type Position,
  type ReadAllOptions,
  type ReadPageOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  type StreamGuard,
  type SubscribeOptions,
  type TransactionRecorder,
} from './port.ts';

/** es_append_one notifies this channel when it commits events (now and then: see eventstore-008). */
const NOTIFY_CHANNEL = 'es_appended';

/** A connection notifies at most one append in this many milliseconds (see eventstore-008). */
export const NOTIFY_EVERY_MS = 50;

/** es_notify_appended: notifies NOTIFY_CHANNEL unless this connection did within NOTIFY_EVERY_MS (see eventstore-008). */
const ES_NOTIFY_APPENDED = `
CREATE OR REPLACE FUNCTION es_notify_appended() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_now double precision := extract(epoch FROM clock_timestamp());
  v_set text := current_setting('es.notified_at', true);
  -- Read only as this function writes it (a number): anything else set under that name counts as never.
  v_last double precision := CASE WHEN v_set ~ '^[0-9]+(\.[0-9]+)?$' THEN v_set::double precision END;
BEGIN
  IF v_last IS NULL OR v_now - v_last >= ${NOTIFY_EVERY_MS / 1000} OR v_now < v_last THEN
    -- Delivered at commit; repeats within one transaction are delivered once.
    PERFORM pg_notify('${NOTIFY_CHANNEL}', '');
    PERFORM set_config('es.notified_at', v_now::text, false);
  END IF;
END
$$;`;

/**
 * es_append_one (see the baseline's comment), as the baseline creates it for a new database and
 * eventstore-007 and -008 replace it in an existing one (each with the es_notify_appended it calls): one
 * append under its stream's advisory lock, at the revision of the stream's last event, and a notification
 * now and then. Until eventstore-007 it kept each stream's revision in a row of es_streams, written by
 * every append; until eventstore-008 it notified at every append.
 */
const ES_APPEND_ONE = `${ES_NOTIFY_APPENDED}
CREATE OR REPLACE FUNCTION es_append_one(p_stream text, p_expected bigint, p_ids uuid[], p_types text[], p_data jsonb[], p_meta jsonb[],
  OUT o_conflict boolean, OUT o_revision bigint, OUT o_position text) LANGUAGE plpgsql AS $$
DECLARE
  v_current bigint;
  v_last bigint;
  v_count int := cardinality(p_ids);
  -- One time for the whole append (a column default would give each row the clock as it is written): the
  -- events of one append are one step of their stream, and a fold up to an instant takes all or none.
  v_at timestamptz;
BEGIN
  PERFORM pg_advisory_xact_lock(7281004, hashtext(p_stream));
  -- A statement of its own after the lock: its snapshot sees every append that held the lock before.
  SELECT coalesce(max(e.revision), -1) INTO v_current FROM es_events e WHERE e.stream_id = p_stream;
  IF p_expected IS NOT NULL AND v_current <> p_expected THEN
    o_conflict := true;
    o_revision := v_current;
    RETURN;
  END IF;
  IF v_count = 1 THEN
    INSERT INTO es_events (stream_id, revision, event_id, type, data, metadata)
    VALUES (p_stream, v_current + 1, p_ids[1], p_types[1], p_data[1], p_meta[1])
    RETURNING global_position INTO v_last;
  ELSE
    v_at := clock_timestamp();
    WITH ins AS (
      INSERT INTO es_events (stream_id, revision, event_id, type, data, metadata, created_at)
      SELECT p_stream, v_current + x.o, x.id, x.t, x.d, x.m, v_at
      FROM unnest(p_ids, p_types, p_data, p_meta) WITH ORDINALITY AS x(id, t, d, m, o)
      ORDER BY x.o
      RETURNING global_position
    )
    SELECT max(global_position) INTO v_last FROM ins;
  END IF;
  PERFORM es_notify_appended();
  o_conflict := false;
  o_revision := v_current + v_count;
  o_position := pg_current_xact_id()::text || '.' || v_last::text;
END
$$;`;

/**
 * Events carry the id of the transaction that wrote them (xid8). A reader orders by
 * (transaction_id, global_position) and only reads rows whose transaction is older than the oldest
 * one still running (pg_snapshot_xmin): a transaction that took a lower global_position but commits
 * late can then never be passed over. This is emmett's approach (see STYLE.md).
 */
export const eventStoreMigrations: Migration[] = [
  {
    // The global log orders by transaction id, so a stream's later revision must never be written by a
    // transaction with a lower id. A transaction gets its id at its first write; one that waited for a
    // stream's row lock after writing to another stream would break that. So every stream lock is taken
    // first, as an advisory lock (which needs no transaction id), in one order (no deadlock between
    // batches), before anything is written.
    //
    // es_append_one: one append as a plain function, which PL/pgSQL calls as an expression (about half
    // the cost of a SELECT FROM a set-returning one); a one-event append inserts with VALUES. It takes its
    // own stream's lock, so it is safe alone; a caller appending to several streams in one transaction
    // must take all their locks first (es_lock_streams). p_expected: -1 = no stream; NULL = any.
    //
    // es_append_batch: many appends (to any streams) in one round trip and one commit; the store batches
    // concurrent appends into it (group commit). Each append is decided on its own: a wrong expected
    // revision makes that one 'conflict' and writes nothing, the others go on. (An event id already
    // stored raises a unique violation for the whole batch; the store then tries each append alone.)
    //
    // es_lock_streams and es_stream_has: the SQL interface for a caller that makes an append part of its
    // own statement (the transaction recorder). es_stream_has is PL/pgSQL so that it keeps its plan for
    // the connection when called from PL/pgSQL (a SQL function is planned again in every transaction).
    //
    // es_append: not called by the store; kept for a process of the previous version, as one append
    // through es_append_batch (same stream lock, same NOTIFY).
    id: 'eventstore-baseline',
    replaces: ['eventstore-001', 'eventstore-002-append-function', 'eventstore-003-append-batch', 'eventstore-004-sql-interface', 'eventstore-005-stream-has-plan', 'eventstore-006-append-one'],
    sql: `
      CREATE TABLE es_streams (
        stream_id text PRIMARY KEY,
        revision bigint NOT NULL
      );
      CREATE TABLE es_events (
        global_position bigserial PRIMARY KEY,
        transaction_id xid8 NOT NULL DEFAULT pg_current_xact_id(),
        stream_id text NOT NULL,
        revision bigint NOT NULL,
        event_id uuid NOT NULL,
        type text NOT NULL,
        data jsonb NOT NULL,
        metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
        created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        CONSTRAINT es_events_stream_revision_key UNIQUE (stream_id, revision),
        CONSTRAINT es_events_event_id_key UNIQUE (event_id)
      );
      CREATE UNIQUE INDEX es_events_order_idx ON es_events (transaction_id, global_position);

      CREATE FUNCTION es_lock_streams(p_streams text[]) RETURNS void LANGUAGE plpgsql AS $$
      DECLARE
        v_key int;
      BEGIN
        FOR v_key IN SELECT DISTINCT hashtext(x) FROM unnest(p_streams) AS x ORDER BY 1 LOOP
          PERFORM pg_advisory_xact_lock(7281004, v_key);
        END LOOP;
      END
      $$;

      -- Whether the stream holds an event of this type at or after this revision.
      CREATE FUNCTION es_stream_has(p_stream text, p_from bigint, p_type text) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
      BEGIN
        RETURN EXISTS (SELECT 1 FROM es_events WHERE stream_id = p_stream AND revision >= p_from AND type = p_type);
      END
      $$;

      ${ES_APPEND_ONE}

      CREATE FUNCTION es_append_batch(p_streams text[], p_expected bigint[], p_counts int[], p_ids uuid[], p_types text[], p_data jsonb[], p_meta jsonb[])
      RETURNS TABLE (o_index int, o_conflict boolean, o_revision bigint, o_position text) LANGUAGE plpgsql AS $$
      DECLARE
        v_from int := 1;
        v_to int;
        r record;
        i int;
      BEGIN
        PERFORM es_lock_streams(p_streams);
        FOR i IN 1 .. cardinality(p_streams) LOOP
          v_to := v_from + p_counts[i] - 1;
          r := es_append_one(p_streams[i], p_expected[i], p_ids[v_from:v_to], p_types[v_from:v_to], p_data[v_from:v_to], p_meta[v_from:v_to]);
          o_index := i;
          o_conflict := r.o_conflict;
          o_revision := r.o_revision;
          o_position := r.o_position;
          RETURN NEXT;
          v_from := v_to + 1;
        END LOOP;
      END
      $$;

      CREATE FUNCTION es_append(p_stream text, p_expected bigint, p_ids uuid[], p_types text[], p_data jsonb[], p_meta jsonb[])
      RETURNS TABLE (next_revision bigint, last_position text) LANGUAGE plpgsql AS $$
      DECLARE
        r record;
      BEGIN
        SELECT * INTO r FROM es_append_batch(ARRAY[p_stream], ARRAY[p_expected], ARRAY[cardinality(p_ids)], p_ids, p_types, p_data, p_meta);
        IF r.o_conflict THEN
          RAISE EXCEPTION 'wrong expected revision' USING ERRCODE = 'P0001', DETAIL = r.o_revision::text, HINT = 'es_wrong_expected_revision';
        END IF;
        RETURN QUERY SELECT r.o_revision, r.o_position;
      END
      $$;
    `,
  },
  ...postgresRecorderMigrations,
  {
    // A stream's revision is read from its events (the last of them, through es_events_stream_revision_key)
    // under the stream's lock, not kept in a row of es_streams that every append wrote again: two log
    // records an append fewer. The unique (stream_id, revision) stays what no two appends can pass. A
    // process of the release before appends through this function too; it read es_streams only to name
    // the stream's revision when an append reused the event id of a different one, and fails there until
    // it is replaced.
    id: 'eventstore-007-revision-from-events',
    sql: `
      ${ES_APPEND_ONE}
      DROP TABLE es_streams;
    `,
  },
  {
    // A notification is a wake-up hint, and each one wakes every backend that listens in the database,
    // whatever its channel: the catalog's listener in every process too (Postgres signals them all). One
    // at every append cost each of them a wake-up, and the projector's process one, for every record and
    // every outcome, while under load the projector reads the log every ~100 ms whatever it is told. So a
    // connection notifies the first append after a quiet moment at once (an idle service's read models
    // follow without waiting for the projector's poll) and at most one every NOTIFY_EVERY_MS after that;
    // an append it does not notify is read by the projector's next poll (port.ts, IdleWait; the
    // runner's wait and gather), within about 200 ms. The time of the connection's last notification is a setting of its session
    // (es.notified_at), which a rolled-back transaction takes back with its notification. A process of the
    // release before needs nothing of this: its projector polls as this one's does.
    id: 'eventstore-008-notify-now-and-then',
    sql: ES_APPEND_ONE,
  },
  {
    // The events' JSON stored as it came, out of line when large but never compressed (storage EXTERNAL,
    // where Postgres's default compresses values over about 2 kB first): readPage bounds a page by each
    // event's stored size (pg_column_size, read without fetching or decompressing the value), which is
    // then about the size of its text, as the process that reads it holds it. Compressed, a wallet reply
    // of 1 MiB of repetitive JSON measured a few kB, and a page of 1,000 such events held a gigabyte. The
    // bench's events (about 350 bytes) were never compressed; EventStoreDB does not compress either.
    // Applies to the values written from now on (eventstore-010 rewrites those compressed before). A
    // catalog change, in a transaction of its own so that its lock on the log is held only for it.
    id: 'eventstore-009-uncompressed-data',
    sql: `ALTER TABLE es_events ALTER COLUMN data SET STORAGE EXTERNAL, ALTER COLUMN metadata SET STORAGE EXTERNAL;`,
  },
  {
    // The events Postgres compressed before eventstore-009 (values over about 2 kB: large wallet replies)
    // stored again uncompressed, the same JSON (a round trip through its text makes a new value; the
    // same value would keep its compressed form), so that readPage measures them as it measures the
    // rest. Their content, position, transaction id and time are unchanged, so every read of the log and
    // the hash chain's links stay the same. One pass over the log that writes only those rows: it takes
    // no lock that appends wait for (their rows are new, never these).
    id: 'eventstore-010-uncompressed-before',
    sql: `UPDATE es_events SET data = data::text::jsonb, metadata = metadata::text::jsonb
          WHERE pg_column_compression(data) IS NOT NULL OR pg_column_compression(metadata) IS NOT NULL;`,
  },
  {
    // The events of one append get one time (the column's default gave each row the clock as Postgres wrote
    // it, so one append could span milliseconds, and time travel (asOf) could fold half of it: a ROLLBACK
    // recorded with its BET not yet voided, a state the stream never passed through). Events written before
    // keep their times (the hash chain links them).
    id: 'eventstore-011-one-time-an-append',
    sql: ES_APPEND_ONE,
  },
];

/**
 * An event's row as every read of the log returns it: an array (rowMode 'array') in COLUMNS' order. The
 * driver makes each row an object otherwise, by copying a template object and setting each column by its
 * name: in a rebuild's profile that was most of the row parsing outside the events' JSON.
 */
type EventRow = [globalPosition: string, transactionId: string, streamId: string, revision: string, eventId: string, type: string, data: JsonObject, metadata: JsonObject, createdMs: number];

// created_at as epoch milliseconds (what a Date holds; the microseconds are cut, as the driver's own
// parse of the timestamp text cut them): a number is read from a row several times faster than the text
// of a timestamp is parsed, and every read of the log (a read model's, a rebuild's) reads it for each event.
// Cut to the millisecond first, in UTC, then rounded, so that the floating point of date_part() is exact.
// date_part(), not extract(): since Postgres 14 extract() answers in numeric, whose arithmetic took three
// times as long (0.45 s against 0.15 for a million rows, the same values). float8, not int8: an infinite
// time (a row edited by hand) is read, as an invalid Date, instead of failing the whole read.
const CREATED_MS = "round(date_part('epoch', date_trunc('milliseconds', created_at AT TIME ZONE 'UTC')) * 1000)";
const COLUMNS = `global_position, transaction_id::text AS transaction_id, stream_id, revision, event_id, type, data, metadata, ${CREATED_MS} AS created_ms`;
/** COLUMNS of readPage, whose data and metadata are sent only for the rows inside the page (`inside`, after them). */
const PAGE_COLUMNS = `global_position, transaction_id::text AS transaction_id, stream_id, revision, event_id, type,
  CASE WHEN inside THEN data END AS data, CASE WHEN inside THEN metadata END AS metadata, ${CREATED_MS} AS created_ms`;

/**
 * The log after the position ($1 its transaction id, $2 its global position), in commit order: only the
 * events of transactions older than every one still open, so none can later appear before one returned.
 * e.transaction_id, not transaction_id: a bare ORDER BY name means COLUMNS' text alias, and ids ordered as
 * text put 100000 before 99999 (a page would then pass over every shorter id).
 */
const LOG_AFTER = `FROM es_events e
  WHERE (e.transaction_id, e.global_position) > ($1::xid8, $2::bigint)
    AND e.transaction_id < pg_snapshot_xmin(pg_current_snapshot())
  ORDER BY e.transaction_id, e.global_position`;

/** LOG_AFTER's order, as a window's (one window: Postgres computes both of readPage's in one pass). */
const IN_ORDER = 'ORDER BY e.transaction_id, e.global_position ROWS UNBOUNDED PRECEDING';

/** The event of a row whose COLUMNS begin at index `at`. */
function toRecorded(row: unknown[], at = 0): RecordedEvent {
  const [globalPosition, transactionId, streamId, revision, eventId, type, data, metadata, createdMs] = (at === 0 ? row : row.slice(at)) as EventRow;
  return {
    id: eventId,
    streamId,
    revision: Number(revision),
    type,
    data,
    metadata,
    position: `${transactionId}.${globalPosition}`,
    createdAt: new Date(createdMs),
  };
}

/**
 * A position's two numbers as decimal text with no leading zero, as Postgres writes them: it would read a
 * leading zero as octal ('042'::xid8 is 34), where the read's guard reads decimal.
 */
export function parsePgPosition(position: Position): { xid: string; pos: string } {
  if (position === START) return { xid: '0', pos: '0' };
  const m = /^(\d+)\.(\d+)$/.exec(position);
  if (!m) throw new Error(`invalid position "${position}"`);
  return { xid: BigInt(m[1]!).toString(), pos: BigInt(m[2]!).toString() };
}

/** a > b for decimal texts of non-negative integers without leading zeros: the longer is larger, else the later in text order. */
const greater = (a: string, b: string) => a.length > b.length || (a.length === b.length && a > b);
const after = (a: [string, string], b: [string, string]) => greater(a[0], b[0]) || (a[0] === b[0] && greater(a[1], b[1]));

interface PendingAppend {
  streamId: string;
  events: NewEvent[];
  expected: ExpectedRevision;
}

/** An append's own answer in a batch: written, or refused for a wrong expected revision. */
type AppendOutcome = { kind: 'ok'; result: AppendResult } | { kind: 'refused'; actual: number };

/** An expected revision as the SQL functions take it: NULL for any, -1 for no stream. */
const expectedParam = (e: ExpectedRevision): number | null => (e === 'any' ? null : e === 'no_stream' ? -1 : e);

interface PendingRead {
  streamId: string;
  fromRevision: number;
}

export class PostgresEventStore implements EventStore {
  readonly kind = 'postgres' as const;
  private seq = 0;
  private waiters = new Set<() => void>();
  private readonly listener: PgListener;
  /** Rows readAll and readPage dropped because they did not sort after the cursor (see inOrder); should stay 0. */
  outOfOrderRowsDropped = 0;

  /** Concurrent appends and stream reads share round trips (see Coalescer): two batches of each in flight. */
  private readonly appends = new Coalescer<PendingAppend, AppendOutcome>((batch) => this.appendBatch(batch), { maxInFlight: 2, maxBatch: 200 });
  private readonly reads = new Coalescer<PendingRead, RecordedEvent[]>((batch) => this.readBatch(batch), { maxInFlight: 2, maxBatch: 200 });

  constructor(
    private readonly pool: Pool,
    connectionString: string,
  ) {
    // Every wake-up (a notification, or a reconnect after notifications may have been lost) makes
    // waiters re-read.
    this.listener = new PgListener(connectionString, NOTIFY_CHANNEL, () => this.bump());
  }

  /** The registry is in this same database: claim, guard and record in one statement. */
  transactionRecorder(): TransactionRecorder {
    return postgresRecorder(this.pool, this);
  }

  /**
   * An append under the kick fence of `fence.stream` (TransactionRecorder.exclusive and .guarded on this
   * store), as `append` answers it: one statement of its own (es_append_fenced), never batched with other
   * appends, that takes the stream's lock, then the fence (exclusive for a kick, shared for a guarded
   * record), then checks the guard. A guard that forbids it throws GuardBrokenError, appending nothing.
   */
  async appendFenced(
    fence: { stream: string; mode: 'exclusive' } | { stream: string; mode: 'shared'; guard: StreamGuard },
    streamId: string,
    events: NewEvent[],
    expectedRevision: ExpectedRevision,
  ): Promise<AppendResult> {
    const guard = fence.mode === 'shared' ? fence.guard : undefined;
    return this.appendAs(streamId, events, expectedRevision, async () => {
      const { rows } = await this.pool.query<{ o_revoked: boolean; o_conflict: boolean | null; o_revision: string | null; o_position: string | null }>({
        name: 'es_append_fenced',
        text: 'SELECT o_revoked, o_conflict, o_revision, o_position FROM es_append_fenced($1::text, $2::boolean, $3::bigint, $4::text, $5::text, $6::bigint, $7::uuid[], $8::text[], $9::jsonb[], $10::jsonb[])',
        values: [fence.stream, fence.mode === 'exclusive', guard?.fromRevision ?? null, guard?.eventType ?? null, streamId, expectedParam(expectedRevision), ...eventArrays(events)],
      });
      const r = rows[0]!;
      if (r.o_revoked) throw new GuardBrokenError(guard!);
      return r.o_conflict ? { kind: 'refused', actual: Number(r.o_revision) } : { kind: 'ok', result: { nextRevision: Number(r.o_revision), position: r.o_position! } };
    });
  }

  async eventCount(): Promise<number> {
    const { rows } = await this.pool.query<{ n: string }>('SELECT count(*) AS n FROM es_events');
    return Number(rows[0]!.n);
  }

  async append(streamId: string, events: NewEvent[], expectedRevision: ExpectedRevision): Promise<AppendResult> {
    return this.appendAs(streamId, events, expectedRevision, () => this.appends.submit({ streamId, events, expected: expectedRevision }));
  }

  /**
   * An append made by `attempt` (batched, or fenced), answered as the port says: a repeat of an append that
   * already happened (its event ids stored there, in that order) is a success, not a conflict.
   */
  private async appendAs(streamId: string, events: NewEvent[], expectedRevision: ExpectedRevision, attempt: () => Promise<AppendOutcome>): Promise<AppendResult> {
    if (events.length === 0) throw new Error('append needs at least one event');
    let actual: number | undefined;
    try {
      const outcome = await attempt();
      if (outcome.kind === 'ok') {
        this.bump(); // this process's subscribers at once; the others through its notification (at most one in NOTIFY_EVERY_MS a connection) or their poll
        return outcome.result;
      }
      actual = outcome.actual;
    } catch (err) {
      if (!isUniqueViolation(err, 'es_events_event_id_key')) throw err;
    }
    const previous = await this.findPreviousAppend(streamId, events);
    if (previous) return previous;
    throw new WrongExpectedRevisionError(streamId, expectedRevision, actual ?? (await this.currentRevision(streamId)));
  }

  /**
   * One round trip for all the appends gathered while the previous batch ran: es_append_batch decides
   * each on its own. If the batch as a whole fails (say two batches raced to store the same event id),
   * each append is tried again alone, so one bad append cannot fail its neighbours.
   */
  private async appendBatch(batch: PendingAppend[]): Promise<Array<Settled<AppendOutcome>>> {
    try {
      return await this.tryAppendBatch(batch);
    } catch (err) {
      if (batch.length === 1) return [{ ok: false, error: err }];
      return Promise.all(batch.map((a) => this.tryAppendBatch([a]).then((r) => r[0]!, (error: unknown) => ({ ok: false, error }) as const)));
    }
  }

  private async tryAppendBatch(batch: PendingAppend[]): Promise<Array<Settled<AppendOutcome>>> {
    const { rows } = await this.pool.query<{ o_index: number; o_conflict: boolean; o_revision: string; o_position: string | null }>({
      // Named: prepared once per connection, so Postgres does not parse and plan it on every batch.
      name: 'es_append_batch',
      text: 'SELECT o_index, o_conflict, o_revision, o_position FROM es_append_batch($1::text[], $2::bigint[], $3::int[], $4::uuid[], $5::text[], $6::jsonb[], $7::jsonb[])',
      values: [
        batch.map((a) => a.streamId),
        batch.map((a) => expectedParam(a.expected)),
        batch.map((a) => a.events.length),
        ...eventArrays(batch.flatMap((a) => a.events)),
      ],
    });
    const byIndex = new Map(rows.map((r) => [r.o_index, r]));
    return batch.map((_, i) => {
      const r = byIndex.get(i + 1);
      if (!r) return { ok: false, error: new Error('es_append_batch returned no row for an append') };
      const revision = Number(r.o_revision);
      if (!r.o_conflict) return { ok: true, value: { kind: 'ok', result: { nextRevision: revision, position: r.o_position! } } };
      return { ok: true, value: { kind: 'refused', actual: revision } };
    });
  }

  /** The earlier append of exactly these events to this stream, if there was one. */
  private async findPreviousAppend(streamId: string, events: NewEvent[]): Promise<AppendResult | undefined> {
    const { rows } = await this.pool.query<EventRow>({
      text: `SELECT ${COLUMNS} FROM es_events WHERE event_id = ANY($1::uuid[]) ORDER BY revision`,
      values: [events.map((e) => e.id)],
      rowMode: 'array',
    });
    if (rows.length !== events.length) return undefined;
    const found = rows.map((r) => toRecorded(r));
    const sameOrder = found.every((e, i) => e.streamId === streamId && e.id === events[i]!.id && (i === 0 || e.revision === found[i - 1]!.revision + 1));
    if (!sameOrder) return undefined;
    const last = found[found.length - 1]!;
    return { nextRevision: last.revision, position: last.position };
  }

  private async currentRevision(streamId: string): Promise<number> {
    const { rows } = await this.pool.query<{ revision: string }>('SELECT coalesce(max(revision), -1) AS revision FROM es_events WHERE stream_id = $1', [streamId]);
    return Number(rows[0]!.revision);
  }

  async readStream(streamId: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    if (options.maxCount === undefined) return this.reads.submit({ streamId, fromRevision: options.fromRevision ?? 0 });
    const { rows } = await this.pool.query<EventRow>({
      name: 'es_read_stream',
      text: `SELECT ${COLUMNS} FROM es_events WHERE stream_id = $1 AND revision >= $2 ORDER BY revision LIMIT $3`,
      values: [streamId, options.fromRevision ?? 0, options.maxCount],
      rowMode: 'array',
    });
    return rows.map((r) => toRecorded(r));
  }

  /** Whole-stream reads gathered while the previous batch ran, in one query. */
  private async readBatch(batch: PendingRead[]): Promise<Array<Settled<RecordedEvent[]>>> {
    const { rows } = await this.pool.query<[i: string, ...EventRow]>({
      name: 'es_read_streams',
      // LATERAL with OFFSET 0: one index scan per stream. Flattened into a join, the prepared
      // statement's generic plan hashes the whole table instead.
      text: `SELECT r.i, e.* FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS r(stream_id, from_revision, i)
       CROSS JOIN LATERAL (
         SELECT ${COLUMNS} FROM es_events x WHERE x.stream_id = r.stream_id AND x.revision >= r.from_revision ORDER BY x.revision OFFSET 0
       ) e
       ORDER BY r.i, e.revision`,
      values: [batch.map((r) => r.streamId), batch.map((r) => r.fromRevision)],
      rowMode: 'array',
    });
    const out: RecordedEvent[][] = batch.map(() => []);
    for (const row of rows) out[Number(row[0]) - 1]!.push(toRecorded(row, 1));
    return out.map((value) => ({ ok: true, value }));
  }

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    const { xid, pos } = parsePgPosition(options.from ?? START);
    const { rows } = await this.pool.query<EventRow>({
      name: 'es_read_all',
      text: `SELECT ${COLUMNS} ${LOG_AFTER} LIMIT $3`,
      values: [xid, pos, options.maxCount ?? 1000],
      rowMode: 'array',
    });
    return this.inOrder(rows, xid, pos);
  }

  /**
   * readAll's rows, bounded by a running sum of each event's stored size (pg_column_size: no value is
   * read out of line or decompressed to be measured). The row right after the last one kept comes back as
   * well, without its data, to say the page stopped at the bound; the rows past it are never sent.
   */
  async readPage(options: ReadPageOptions): Promise<LogPage> {
    const { xid, pos } = parsePgPosition(options.from ?? START);
    const maxCount = options.maxCount ?? 1000;
    const { rows } = await this.pool.query<[...EventRow, inside: boolean]>({
      name: 'es_read_page',
      text: `SELECT ${PAGE_COLUMNS}, inside FROM (
          SELECT e.*, n = 1 OR upto <= $4 AS inside FROM (
            SELECT e.*, row_number() OVER (${IN_ORDER}) AS n, sum(pg_column_size(e.data) + pg_column_size(e.metadata)) OVER (${IN_ORDER}) AS upto,
              pg_column_size(e.data) + pg_column_size(e.metadata) AS size
            ${LOG_AFTER} LIMIT $3
          ) e
        ) e
        WHERE n <= 2 OR upto - size <= $4
        ORDER BY e.transaction_id, e.global_position`,
      values: [xid, pos, maxCount, Number.isFinite(options.maxBytes) ? Math.max(0, Math.floor(options.maxBytes)) : Number.MAX_SAFE_INTEGER],
      rowMode: 'array',
    });
    // `inside` last, after COLUMNS, so that toRecorded reads each row as it is.
    const kept = rows.filter((r) => r[r.length - 1] === true);
    const events = this.inOrder(kept, xid, pos);
    // An empty page never says more (were rows ever dropped as out of order, its reader would otherwise read again at once, for ever).
    return { events, more: events.length > 0 && (kept.length < rows.length || rows.length === maxCount) };
  }

  /**
   * The query already returns only rows after the cursor, in order. This guard makes "never twice"
   * independent of the query plan: a row that does not sort strictly after the previous one can only be a
   * repeat, so it is dropped and counted rather than delivered again.
   */
  private inOrder(rows: unknown[][], xid: string, pos: string): RecordedEvent[] {
    const events: RecordedEvent[] = [];
    let last: [string, string] = [xid, pos]; // the cursor, as sent: decimal, no leading zero
    for (const row of rows) {
      // Postgres writes both as canonical decimal text (no sign, no leading zero), so they compare as texts.
      const key: [string, string] = [row[1] as string, row[0] as string];
      if (!after(key, last)) {
        this.outOfOrderRowsDropped += 1;
        continue;
      }
      last = key;
      events.push(toRecorded(row));
    }
    return events;
  }

  async countAll(options: CountAllOptions): Promise<LogBacklog> {
    const { xid, pos } = parsePgPosition(options.from ?? START);
    // readAll's rows, in its order; only the index (transaction_id, global_position) is walked for the
    // count, and the first row alone is read for its time.
    const { rows } = await this.pool.query<[count: number, firstMs: number | null]>({
      name: 'es_count_all',
      text: `SELECT (SELECT count(*)::int FROM (SELECT 1 ${LOG_AFTER} LIMIT $3) n), (SELECT ${CREATED_MS} ${LOG_AFTER} LIMIT 1)`,
      values: [xid, pos, Math.max(0, Math.min(Math.floor(options.limit), 2 ** 31 - 1))],
      rowMode: 'array',
    });
    const [count, firstMs] = rows[0]!;
    return count > 0 && firstMs !== null ? { count, firstCreatedAt: new Date(firstMs) } : { count: 0 };
  }

  subscribeAll(options: SubscribeOptions = {}): AsyncIterable<RecordedEvent> {
    void this.listener.start();
    return pollingSubscription(this, options);
  }

  appendSeq(): number {
    void this.listener.start();
    return this.seq;
  }

  waitForAppend(afterSeq: number, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    void this.listener.start();
    if (this.seq > afterSeq || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        this.waiters.delete(wake);
        resolve();
      };
      const wake = () => {
        if (this.seq > afterSeq) done();
      };
      const timer = setTimeout(done, timeoutMs);
      signal?.addEventListener('abort', done, { once: true });
      this.waiters.add(wake);
    });
  }

  async headPosition(): Promise<Position> {
    const { rows } = await this.pool.query<{ transaction_id: string; global_position: string }>(
      `SELECT e.transaction_id::text AS transaction_id, e.global_position FROM es_events e
       WHERE e.transaction_id < pg_snapshot_xmin(pg_current_snapshot())
       ORDER BY e.transaction_id DESC, e.global_position DESC LIMIT 1`,
    );
    return rows[0] ? `${rows[0].transaction_id}.${rows[0].global_position}` : START;
  }

  async ping(): Promise<void> {
    await this.pool.query('SELECT 1 FROM es_events LIMIT 1');
  }

  async close(): Promise<void> {
    await this.listener.close();
    this.bump();
  }

  private bump(): void {
    this.seq += 1;
    for (const w of [...this.waiters]) w();
  }
}
