import pg from 'pg';
import type { Migration } from '../shared/db/migrations.ts';
import { withTransaction, type Pool, type PoolClient } from '../shared/db/pool.ts';
import { comparePositions, IdleWait, START, type EventStore, type Position, type RecordedEvent } from '../shared/eventstore/port.ts';
import type { Logger } from '../shared/logger.ts';
import type { SharedLogReads } from './shared-reads.ts';
import { BATCH_BYTES } from '../shared/eventstore/text-size.ts';

export const projectionMigrations: Migration[] = [
  {
    // failing_*: the event a projection cannot apply, kept where every process's /readyz reads it;
    // cleared by the next batch it applies.
    id: 'projections-baseline',
    replaces: ['projections-001', 'projections-002'],
    sql: `
      CREATE TABLE projection_checkpoints (
        name text PRIMARY KEY,
        position text NOT NULL,
        events_applied bigint NOT NULL DEFAULT 0,
        last_event_at timestamptz,
        updated_at timestamptz NOT NULL DEFAULT now(),
        failing_since timestamptz,
        failing_event jsonb,
        failing_error text
      );
    `,
  },
  {
    // #20: which event store the checkpoints' positions belong to (a position of one store means nothing
    // in another). A database with Postgres-store history is Postgres's; otherwise the first process to
    // start records its store.
    id: 'projections-003-checkpoint-store',
    sql: `
      CREATE TABLE checkpoint_store (
        only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
        store text NOT NULL,
        since timestamptz NOT NULL DEFAULT now()
      );
      DO $claim$ BEGIN
        IF to_regclass('es_events') IS NOT NULL THEN
          INSERT INTO checkpoint_store (store) SELECT 'postgres' WHERE EXISTS (SELECT 1 FROM es_events);
        END IF;
      END $claim$;
    `,
  },
];

/** A projection stuck on an event it cannot apply, as /readyz reports it. */
export interface ProjectionFailure {
  name: string;
  position: Position;
  eventType: string;
  streamId: string;
  error: string;
  since: string;
}

/**
 * Thrown by a projection's apply() that must not go on from where its tables stand (no fault of the
 * batch's events): its runner stops before the batch, naming its first event, and keeps ownership, so
 * that no other process's runner goes on in its place; it tries again after the same backoff.
 */
export class ProjectionHaltError extends Error {
  override name = 'ProjectionHaltError';
}

/** The error of an event a projection could not apply, on its own, in a transaction of its own (or, `holds`, a ProjectionHaltError before it). */
export class ProjectionApplyError extends Error {
  override name = 'ProjectionApplyError';
  constructor(
    readonly projection: string,
    readonly event: RecordedEvent,
    readonly reason: string,
    readonly holds = false,
  ) {
    super(`projection ${projection} cannot apply event ${event.type} at ${event.position} of stream ${event.streamId}: ${reason}`);
  }
}

const MAX_ERROR_LENGTH = 500;
const reasonOf = (err: unknown): string => (err instanceof Error ? err.message : String(err)).slice(0, MAX_ERROR_LENGTH);

/** Records that `projection` is stuck on this event (kept across restarts; the first time it failed is kept while it is the same event). */
export async function recordProjectionFailure(pool: Pool, err: ProjectionApplyError): Promise<void> {
  const e = err.event;
  await pool.query(
    `UPDATE projection_checkpoints
     SET failing_since = CASE WHEN failing_event->>'position' = $3 THEN coalesce(failing_since, now()) ELSE now() END,
         failing_event = $2, failing_error = $4
     WHERE name = $1`,
    [err.projection, JSON.stringify({ position: e.position, eventType: e.type, streamId: e.streamId, eventId: e.id }), e.position, err.reason],
  );
}

/**
 * Every projection of `names` stuck on an event, database-wide (whichever process runs it). A checkpoint of
 * another name is a projection this release no longer runs (a process of the release before may still
 * write one during an upgrade): nothing would ever clear its failure, so it is not reported.
 */
export async function projectionFailures(db: Pool | PoolClient, names: readonly string[]): Promise<ProjectionFailure[]> {
  const { rows } = await db.query<{ name: string; failing_since: Date; failing_event: { position: string; eventType: string; streamId: string }; failing_error: string | null }>(
    `SELECT name, failing_since, failing_event, failing_error FROM projection_checkpoints WHERE failing_since IS NOT NULL AND name = ANY($1::text[]) ORDER BY name`,
    [names],
  );
  return rows.map((r) => ({
    name: r.name,
    position: r.failing_event.position,
    eventType: r.failing_event.eventType,
    streamId: r.failing_event.streamId,
    error: r.failing_error ?? '',
    since: r.failing_since.toISOString(),
  }));
}

/** A read model table and its key columns (rows are compared and reported by key). */
export interface ReadModelTable {
  name: string;
  key: string[];
}

/** A read model: a name and a handler that writes its Postgres rows for a batch of events. */
export interface Projection {
  name: string;
  /**
   * Its tables, written only by apply() and always by unqualified name: an audit rebuild runs apply()
   * with search_path pointing at a scratch schema holding tables of the same shape.
   */
  tables: ReadModelTable[];
  /** The event types it reads ('all': every event); a batch with none of them only moves the checkpoint. */
  eventTypes: ReadonlySet<string> | 'all';
  /**
   * Applies the batch's events of its types, in log order, inside the runner's transaction. Must
   * depend only on the events and the rows, so a rebuild gives the same rows.
   */
  apply(events: RecordedEvent[], tx: PoolClient): Promise<void>;
  /** Deletes every row of the read model (a rebuild starts from here and replays the whole log). */
  reset(tx: PoolClient): Promise<void>;
  /** Called once a batch apply() wrote has committed (a projection that keeps state in memory moves it on here). */
  committed?(): void;
  /**
   * After a wake-up, how long its runner lets events gather before reading them (default
   * GATHER_MS): one read and one transaction for many events instead of one per append, at the price
   * of that much lag. A read model someone waits on asks for less.
   */
  gatherMs?: number;
  /**
   * Whether a replay may apply the events of different streams on different connections at once: each
   * stream's rows depend only on that stream's events, and a row several streams add to only takes
   * additive deltas, locked in a fixed key order (so two such transactions wait for each other, never
   * deadlock). A rebuild then splits the projection's streams over REPLAY_PARTS connections.
   */
  streamLocal?: boolean;
}

/** Whether the projection reads events of this type. */
export const handles = (projection: Pick<Projection, 'eventTypes'>, type: string): boolean => projection.eventTypes === 'all' || projection.eventTypes.has(type);

/** See Projection.gatherMs: at 100 tx/s, 100 ms instead of 25 cut Postgres' CPU by a quarter in `npm run bench`. */
const GATHER_MS = 100;

/**
 * Events read and applied at most at once. Below saturation a 100 ms gather brings far fewer; at
 * saturation, 200 kept each runner applying back to back: in `npm run bench` 1000 cut Postgres' CPU
 * from 0.59-0.66 to 0.49-0.57 cores at the same throughput. A restarted runner catches up in fewer,
 * larger transactions too. Memory: a batch of 1000 ordinary events is a few MB per runner; at worst
 * (every event a record with the largest metadata the API takes) some tens of MB, for each runner.
 */
const BATCH_SIZE = 1000;

/** A projection whose events are handled one by one. */
export function perEvent(
  name: string,
  tables: ReadModelTable[],
  eventTypes: Iterable<string>,
  handle: (event: RecordedEvent, tx: PoolClient) => Promise<void>,
  reset: (tx: PoolClient) => Promise<void>,
): Projection {
  return {
    name,
    tables,
    eventTypes: new Set(eventTypes),
    async apply(events, tx) {
      for (const e of events) await handle(e, tx);
    },
    reset,
  };
}

export interface ProjectionLag {
  name: string;
  position: Position;
  /** Events in the log after the checkpoint (counted up to LAG_COUNT_CAP). */
  eventsBehind: number;
  /** Age of the oldest event not yet applied; 0 when caught up. */
  msBehind: number;
  /** Whether this process's runner owns the projection (only from a runner). */
  owned?: boolean;
}

/** How far a projection's checkpoint is behind the log, from any process (no runner needed). */
export async function projectionLag(pool: Pool, store: EventStore, name: string): Promise<ProjectionLag> {
  const position = await readCheckpoint(pool, name);
  const pending = await store.countAll({ from: position, limit: LAG_COUNT_CAP });
  const oldest = pending.firstCreatedAt;
  return { name, position, eventsBehind: pending.count, msBehind: oldest ? Math.max(0, Date.now() - oldest.getTime()) : 0 };
}

const LOCK_CLASS = 7281003;
/** A runner reading only events of no use to its projection writes its checkpoint at least this often. */
const CHECKPOINT_EVERY_MS = 1000;
const LAG_COUNT_CAP = 10_000;

/**
 * Waits (bounded) until a projection has applied the event at `position`, so a caller can answer with
 * what the read model will show. Returns false on timeout (no projector running, or it is far behind).
 */
export async function waitForProjection(pool: Pool, name: string, position: Position, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  // Read again after 10 ms, then less and less often (up to every 100 ms): a read model a moment behind is
  // seen at once, and one far behind (or with no projector) does not cost the pool 100 queries a second.
  for (let pause = 10; ; pause = Math.min(pause * 2, 100)) {
    const { rows } = await pool.query<{ position: string }>('SELECT position FROM projection_checkpoints WHERE name = $1', [name]);
    if (rows[0] && comparePositions(rows[0].position, position) >= 0) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, pause));
  }
}

/** The checkpoints are positions of another event store than the one this process was given. */
export class CheckpointStoreMismatch extends Error {
  override name = 'CheckpointStoreMismatch';
  constructor(
    readonly recorded: string,
    readonly configured: string,
  ) {
    super(
      `the read models' checkpoints are positions in the ${recorded} event store, but EVENT_STORE selects ${configured}: ` +
        `a position of one store means nothing in the other. To move the history to ${configured}, stop the service and run ` +
        `npm run audit -- migrate-events --to <the new EVENT_STORE> with EVENT_STORE still set to the ${recorded} store ` +
        `(docs/operations.md#moving-between-event-stores); to go on with ${recorded}, set EVENT_STORE back.`,
    );
  }
}

/**
 * Which event store this database's checkpoints belong to: recorded by the first process that starts
 * on it, checked by every later one (and by the audit tools). Throws CheckpointStoreMismatch.
 */
export async function checkCheckpointStore(db: Pool | PoolClient, store: EventStore['kind']): Promise<void> {
  await db.query('INSERT INTO checkpoint_store (store) VALUES ($1) ON CONFLICT (only_row) DO NOTHING', [store]);
  const { rows } = await db.query<{ store: string }>('SELECT store FROM checkpoint_store');
  const recorded = rows[0]!.store;
  if (recorded !== store) throw new CheckpointStoreMismatch(recorded, store);
}

/** After the history was moved to another store and the read models rebuilt from it (audit migrate-events). */
export async function setCheckpointStore(db: Pool | PoolClient, store: EventStore['kind']): Promise<void> {
  await db.query(
    `INSERT INTO checkpoint_store (store) VALUES ($1) ON CONFLICT (only_row) DO UPDATE SET store = EXCLUDED.store, since = now()`,
    [store],
  );
}

export class CheckpointMovedError extends Error {
  override name = 'CheckpointMovedError';
}

export async function readCheckpoint(db: Pool | PoolClient, name: string): Promise<Position> {
  const { rows } = await db.query<{ position: string }>('SELECT position FROM projection_checkpoints WHERE name = $1', [name]);
  if (rows[0]) return rows[0].position;
  await db.query(`INSERT INTO projection_checkpoints (name, position) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, [name, START]);
  return readCheckpoint(db, name);
}

/**
 * Applies one batch and moves the checkpoint in the same transaction, by compare-and-set: if the
 * checkpoint is no longer where this batch started, someone else applied it and nothing is written.
 * `passedBefore` counts events between `from` and the batch that the runner read and had no use for.
 */
export async function applyBatch(pool: Pool, projection: Projection, from: Position, events: RecordedEvent[], passedBefore = 0): Promise<Position> {
  const last = events[events.length - 1];
  if (!last) return from;
  const relevant = events.filter((e) => handles(projection, e.type));
  const client = await pool.connect();
  try {
    // Nothing to write: moving the checkpoint is a single statement, no transaction needed.
    if (relevant.length > 0) {
      await client.query('BEGIN');
      await projection.apply(relevant, client);
    }
    const moved = await client.query(
      `UPDATE projection_checkpoints
       SET position = $3, events_applied = events_applied + $4, last_event_at = $5, updated_at = now(),
           failing_since = NULL, failing_event = NULL, failing_error = NULL
       WHERE name = $1 AND position = $2`,
      [projection.name, from, last.position, events.length + passedBefore, last.createdAt],
    );
    if (moved.rowCount !== 1) throw new CheckpointMovedError(`projection ${projection.name}: checkpoint moved away from ${from}`);
    if (relevant.length > 0) {
      await client.query('COMMIT');
      projection.committed?.();
    }
    return last.position;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

export interface RunnerOptions {
  batchSize?: number;
  /** How often a standby runner retries taking ownership. */
  lockRetryMs?: number;
  /** Overrides the projection's gatherMs (tests: 0). */
  gatherMs?: number;
  /** Longest wait between attempts at an event the projection cannot apply (default FAILURE_BACKOFF_MAX_MS). */
  failureBackoffMaxMs?: number;
  /** Called each time an event fails to apply (metrics). */
  onApplyFailure?: (err: ProjectionApplyError) => void;
  /** The log pages this process's runners share (see SharedLogReads); by default each reads its own. */
  reads?: SharedLogReads;
  logger?: Logger;
}

const FAILURE_BACKOFF_MAX_MS = 10_000;

/**
 * Applies a batch; if it fails, applies its events one at a time (each with the checkpoint, in a
 * transaction of its own) to find the one that cannot be applied: the events before it are kept, and
 * the error names it (ProjectionApplyError). A batch that then goes through was a passing failure.
 */
export async function applyBatchOrName(pool: Pool, projection: Projection, from: Position, events: RecordedEvent[], passedBefore = 0): Promise<Position> {
  try {
    return await applyBatch(pool, projection, from, events, passedBefore);
  } catch (err) {
    if (err instanceof CheckpointMovedError) throw err;
    if (err instanceof ProjectionHaltError) throw new ProjectionApplyError(projection.name, events[0]!, reasonOf(err), true);
    let at = from;
    let passed = passedBefore;
    let last: RecordedEvent | undefined;
    for (const e of events) {
      if (!handles(projection, e.type)) {
        passed++;
        last = e;
        continue;
      }
      try {
        at = await applyBatch(pool, projection, at, [e], passed);
      } catch (eventErr) {
        if (eventErr instanceof CheckpointMovedError) throw eventErr;
        throw new ProjectionApplyError(projection.name, e, reasonOf(eventErr), eventErr instanceof ProjectionHaltError);
      }
      passed = 0;
      last = undefined;
    }
    return last ? applyBatch(pool, projection, at, [last], passed - 1) : at;
  }
}

/**
 * Runs one projection. Exactly one runner across all processes owns a projection at a time (a
 * session advisory lock on a dedicated connection); the others stand by and take over when the
 * owner's connection goes away. The compare-and-set checkpoint is the second line of defence: even a
 * runner that lost its lock without noticing cannot apply a batch twice.
 */
export class ProjectionRunner {
  private readonly controller = new AbortController();
  private lockClient: pg.Client | undefined;
  private loop: Promise<void> | undefined;
  private owned = false;
  /** Consecutive failures to apply an event (backoff). */
  private failures = 0;
  private readonly batchSize: number;
  private readonly lockRetryMs: number;
  private readonly gatherMs: number;

  constructor(
    private readonly pool: Pool,
    private readonly connectionString: string,
    private readonly store: EventStore,
    readonly projection: Projection,
    private readonly options: RunnerOptions = {},
  ) {
    this.batchSize = options.batchSize ?? BATCH_SIZE;
    this.lockRetryMs = options.lockRetryMs ?? 1000;
    this.gatherMs = options.gatherMs ?? projection.gatherMs ?? GATHER_MS;
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Stops taking new batches, lets the batch in flight commit, releases ownership. */
  async stop(): Promise<void> {
    this.controller.abort();
    await this.loop;
    await this.releaseLock();
  }

  isOwner(): boolean {
    return this.owned;
  }

  async lag(): Promise<ProjectionLag> {
    return { ...(await projectionLag(this.pool, this.store, this.projection.name)), owned: this.owned };
  }

  /** When a batch last found the checkpoint moved under it (run). */
  private checkpointMovedAt = 0;

  private get signal(): AbortSignal {
    return this.controller.signal;
  }

  private async run(): Promise<void> {
    while (!this.signal.aborted) {
      try {
        // Still owned after a halt (ProjectionHaltError): no other runner took it meanwhile.
        if (!this.owned && !(await this.acquireLock())) {
          await sleep(this.lockRetryMs, this.signal);
          continue;
        }
        await this.follow();
      } catch (err) {
        if (err instanceof CheckpointMovedError && Date.now() - this.checkpointMovedAt > 1000) {
          // A rebuild or a reset moved the checkpoint after this runner last read it (an idle one reads it
          // again only at its next quiet read): nothing was written; follow it from where it is now. Again
          // within a second, something else writes it (another owner?): give the lock up, as below.
          this.checkpointMovedAt = Date.now();
          this.options.logger?.info({ projection: this.projection.name }, 'projection checkpoint moved (a rebuild or a reset): following it from there');
          continue;
        }
        if (err instanceof ProjectionApplyError) {
          // Never silent: the event is named in the log, on /readyz (any process) and in the metrics.
          this.failures++;
          const retryInMs = Math.min(this.lockRetryMs * 2 ** (this.failures - 1), this.options.failureBackoffMaxMs ?? FAILURE_BACKOFF_MAX_MS);
          const e = err.event;
          this.options.logger?.error(
            { projection: err.projection, position: e.position, eventType: e.type, streamId: e.streamId, eventId: e.id, error: err.reason, attempt: this.failures, retryInMs },
            err.holds
              ? 'projection halted before this event: it must not go on from where its tables stand; it keeps ownership and checks again'
              : 'projection cannot apply an event; the other projections go on, this one retries it',
          );
          this.options.onApplyFailure?.(err);
          await recordProjectionFailure(this.pool, err).catch((recordErr: unknown) => this.options.logger?.error({ err: recordErr }, 'could not record the projection failure'));
          if (!err.holds) await this.releaseLock();
          await sleep(retryInMs, this.signal);
          continue;
        }
        this.options.logger?.error({ err, projection: this.projection.name }, 'projection runner failed; retrying');
        await this.releaseLock();
        await sleep(this.lockRetryMs, this.signal);
      }
    }
  }

  /**
   * Reads the log from the checkpoint and applies it batch by batch. A batch with none of the
   * projection's event types is only remembered: the checkpoint is written with the next batch that
   * has some, after CHECKPOINT_EVERY_MS, or when a read finds nothing new (a restart re-reads those
   * events and still has no use for them). Every wake-up of a busy service would otherwise cost each
   * projection a write.
   */
  private async follow(): Promise<void> {
    const name = this.projection.name;
    let stored = await readCheckpoint(this.pool, name); // what the checkpoint row holds
    let position = stored; // how far this runner has read: ahead of `stored` only by events of no use to it
    let passed: { count: number; last: RecordedEvent | undefined; since: number } = { count: 0, last: undefined, since: Date.now() };
    const idle = new IdleWait(this.store);
    while (!this.signal.aborted && this.owned) {
      const seq = this.store.appendSeq();
      // At most BATCH_BYTES of events however large they are (an outcome keeps its wallet's reply, up to 1 MiB).
      const { events, more } = await (this.options.reads ?? this.store).readPage({ from: position, maxCount: this.batchSize, maxBytes: BATCH_BYTES });
      if (events.length > 0) {
        const useful = events.some((e) => handles(this.projection, e.type));
        if (useful || Date.now() - passed.since >= CHECKPOINT_EVERY_MS) {
          stored = position = await applyBatchOrName(this.pool, this.projection, stored, events, passed.count);
          passed = { count: 0, last: undefined, since: Date.now() };
          this.failures = 0;
        } else {
          position = events[events.length - 1]!.position;
          passed = { count: passed.count + events.length, last: events[events.length - 1], since: passed.since };
        }
      }
      if (events.length === 0) {
        if (passed.last) {
          // Nothing more to read: record how far it got, so the lag reads 0.
          stored = position = await applyBatch(this.pool, this.projection, stored, [passed.last], passed.count - 1);
          passed = { count: 0, last: undefined, since: Date.now() };
        } else {
          // Idle: a rebuild or a reset may have moved the checkpoint; follow it.
          stored = position = await readCheckpoint(this.pool, name);
        }
      }
      if (!more) {
        await idle.wait(seq, events.length === 0, this.signal);
        if (this.gatherMs > 0) await sleep(this.gatherMs, this.signal);
      }
    }
  }

  private async acquireLock(): Promise<boolean> {
    const client = new pg.Client({ connectionString: this.connectionString });
    client.on('error', () => undefined);
    let ok = false;
    try {
      await client.connect();
      const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, hashtext($2)) AS ok', [LOCK_CLASS, this.projection.name]);
      ok = rows[0]?.ok === true;
    } finally {
      // A connection whose attempt failed or found the lock taken is closed: left open, one a retry, and
      // one whose lock was granted before its reply was lost would hold the projection from every runner.
      if (!ok) await client.end().catch(() => undefined);
    }
    if (!ok) return false;
    // Losing this connection loses the lock: stop applying and compete for it again.
    client.on('end', () => {
      if (this.lockClient === client) {
        this.owned = false;
        this.lockClient = undefined;
      }
    });
    this.lockClient = client;
    this.owned = true;
    this.options.logger?.info({ projection: this.projection.name }, 'projection owned by this runner');
    return true;
  }

  private async releaseLock(): Promise<void> {
    const client = this.lockClient;
    this.lockClient = undefined;
    this.owned = false;
    await client?.end().catch(() => undefined);
  }
}

/** Replays the whole log into a projection from zero: rows deleted and checkpoint reset in one transaction. */
export async function resetProjection(pool: Pool, projection: Projection): Promise<void> {
  await withTransaction(pool, async (client) => {
    await projection.reset(client);
    await client.query(
      `INSERT INTO projection_checkpoints (name, position) VALUES ($1, $2)
       ON CONFLICT (name) DO UPDATE SET position = EXCLUDED.position, events_applied = 0, last_event_at = NULL, updated_at = now(),
         failing_since = NULL, failing_event = NULL, failing_error = NULL`,
      [projection.name, START],
    );
  });
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
