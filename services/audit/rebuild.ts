import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { handles, type Projection } from '../../projections/runner.ts';
import { isSerializationFailure, withTransaction, type Pool, type PoolClient } from '../../shared/db/pool.ts';
import { comparePositions, START, type EventStore, type Position, type RecordedEvent } from '../../shared/eventstore/port.ts';
import { BATCH_BYTES, textBytes } from '../../shared/eventstore/text-size.ts';

/** Events a replay reads and applies at a time (one transaction per page of the scratch tables). */
const BATCH = 2000;

export interface Progress {
  (replayed: number): void;
}

/**
 * One count over the replays of one run (the replay, then its catch-ups): each replay counts its own
 * events from zero, so each is given a progress that adds them to what the ones before it reported.
 * Returns the options of the next replay.
 */
function runningProgress(progress: Progress | undefined): () => { progress?: Progress } {
  let before = 0;
  let reported = 0;
  return () => {
    before = reported;
    return progress ? { progress: (n) => progress((reported = before + n)) } : {};
  };
}

/**
 * A schema of empty tables shaped like a projection's live ones. Unlogged unless asked: a replay then
 * writes them without the write-ahead log (a crash loses them, and they are thrown away anyway). The
 * tables a rebuild swaps in by name are logged from the start: making them logged afterwards rewrites
 * them whole, after the replay, where the log's writes during the replay share the cores with it (a
 * million events: 17.8–18.5 s against 19.0–19.8 s in all, docs/benchmarks.md).
 */
export async function createScratch(pool: Pool, projections: Projection[], { logged = false }: { logged?: boolean } = {}): Promise<string> {
  const schema = `audit_${randomBytes(5).toString('hex')}`;
  // Held until dropScratch, on a connection of its own: a schema whose lock nobody holds was left by a
  // run that died (see dropLeftScratch). Taken before the schema exists, so there is no moment between.
  const owner = await pool.connect();
  let pid: number;
  try {
    // Its session must outlive the run (see scratchHeld): not ended for being idle, where a role or
    // database sets idle_session_timeout (Postgres 14 and later).
    const { rows } = await owner.query<{ pid: number }>(
      `SELECT pg_backend_pid() AS pid, pg_advisory_lock($1, hashtext($2)),
              (SELECT set_config('idle_session_timeout', '0', false) WHERE current_setting('server_version_num')::int >= 140000)`,
      [SCRATCH_LOCK, schema],
    );
    pid = rows[0]!.pid;
  } catch (err) {
    owner.release(err instanceof Error ? err : true);
    throw err;
  }
  // Its loss (the server ended the session: a crash and restart, or someone) loses the lock, found by
  // scratchHeld before anything is swapped in or compared; the replay's own locks on the scratch tables
  // keep it from writing anywhere else meanwhile (see replayInto), and dropScratch closes it.
  scratchOwners.set(schema, { client: owner, pid });
  try {
    await createTables(pool, schema, projections, logged);
  } catch (err) {
    await dropScratch(pool, schema);
    throw err;
  }
  return schema;
}

/** The advisory lock class of the scratch schemas (the second key: hashtext of the schema's name). */
const SCRATCH_LOCK = 7281020;

/** The connection that holds each scratch schema of this process's lock, and its backend's pid. */
const scratchOwners = new Map<string, { client: PoolClient; pid: number }>();

/** The comment that marks a schema as a scratch schema of this command: only such schemas are ever dropped as left behind. */
const SCRATCH_MARK = 'scratch tables of npm run audit (rebuild or verify), dropped when it ends';

async function createTables(pool: Pool, schema: string, projections: Projection[], logged: boolean): Promise<void> {
  await pool.query(`CREATE SCHEMA ${schema}; COMMENT ON SCHEMA ${schema} IS '${SCRATCH_MARK}'`);
  for (const p of projections) {
    for (const t of p.tables) {
      // Everything of the live table that is declared with its columns (defaults, generation, identity,
      // checks, comments, storage, extended statistics), but not its indexes: of those only the unique ones (the keys
      // apply() upserts and looks rows up by), under their live names. The others serve the live
      // tables' queries, and a replay only writes them.
      await pool.query(`CREATE ${logged ? '' : 'UNLOGGED '}TABLE ${schema}.${t.name} (LIKE public.${t.name} INCLUDING ALL EXCLUDING INDEXES)`);
      for (const i of await liveIndexes(pool, schema, t.name)) if (i.unique) await pool.query(i.definition);
    }
  }
}

interface LiveIndex {
  name: string;
  unique: boolean;
  /** A constraint's (a key's or an exclusion's). */
  constraint: boolean;
  /** Its CREATE INDEX statement, on the scratch table of the same name. */
  definition: string;
}

/** A live table's indexes (its keys' among them), as statements that build each on the scratch table of its name. */
async function liveIndexes(db: Pool | PoolClient, schema: string, table: string): Promise<LiveIndex[]> {
  const { rows } = await db.query<{ name: string; unique: boolean; constraint: boolean; definition: string; moved: boolean }>(
    `SELECT c.relname AS name, i.indisunique AS unique, EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid AND k.conrelid = i.indrelid) AS constraint,
            d.moved AS definition, d.moved <> d.live AS moved
     FROM pg_index i
     JOIN pg_class c ON c.oid = i.indexrelid
     CROSS JOIN LATERAL (SELECT pg_get_indexdef(i.indexrelid) AS live) l
     CROSS JOIN LATERAL (SELECT l.live, replace(l.live, ' ON public.' || quote_ident($1) || ' USING ', ' ON ' || quote_ident($2) || '.' || quote_ident($1) || ' USING ') AS moved) d
     WHERE i.indrelid = ('public.' || quote_ident($1))::regclass
     ORDER BY c.relname`,
    [table, schema],
  );
  for (const r of rows) if (!r.moved) throw new Error(`cannot restate index ${r.name} of ${table} on a scratch table: ${r.definition}`);
  return rows;
}

export async function dropScratch(pool: Pool, schema: string): Promise<void> {
  try {
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  } finally {
    const owner = scratchOwners.get(schema);
    scratchOwners.delete(schema);
    if (owner) {
      // Released with its session: the lock goes with the connection, which is closed rather than reused.
      owner.client.release(true);
    }
  }
}

/**
 * Drops the scratch schemas that no running rebuild or verify holds (marked as such, see SCRATCH_MARK):
 * left by one that was killed, whose tables (logged, for a rebuild) would otherwise stay, full size.
 * Returns what it dropped, the schemas still in use, and those it could not drop (with why).
 */
export async function dropLeftScratch(
  pool: Pool,
): Promise<{ dropped: Array<{ schema: string; bytes: number }>; inUse: string[]; failed: string[] }> {
  const dropped: Array<{ schema: string; bytes: number }> = [];
  const inUse: string[] = [];
  const failed: string[] = [];
  const client = await pool.connect();
  try {
    const { rows } = await client.query<{ schema: string }>(
      `SELECT nspname AS schema FROM pg_namespace WHERE nspname ~ '^audit_[0-9a-f]{10}$' AND obj_description(oid, 'pg_namespace') = $1 ORDER BY 1`,
      [SCRATCH_MARK],
    );
    for (const { schema } of rows) {
      const { rows: got } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, hashtext($2)) AS ok', [SCRATCH_LOCK, schema]);
      if (!got[0]!.ok) {
        inUse.push(schema);
        continue;
      }
      try {
        // Its run may have ended (and dropped it) since it was listed.
        const { rows: left } = await client.query<{ bytes: string | null }>(
          `SELECT sum(pg_total_relation_size(c.oid)) FILTER (WHERE c.relkind = 'r') AS bytes
           FROM pg_namespace n LEFT JOIN pg_class c ON c.relnamespace = n.oid WHERE n.nspname = $1 GROUP BY n.oid`,
          [schema],
        );
        if (left.length === 0) continue;
        // Not for long behind someone else's lock on its tables: it is tried again at the next run.
        await client.query('BEGIN');
        await client.query(`SET LOCAL lock_timeout = 2000`);
        await client.query(`DROP SCHEMA ${schema} CASCADE`);
        await client.query('COMMIT');
        dropped.push({ schema, bytes: Number(left[0]!.bytes ?? 0) });
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        failed.push(`${schema}: ${(err as Error).message}`);
      } finally {
        await client.query('SELECT pg_advisory_unlock($1, hashtext($2))', [SCRATCH_LOCK, schema]);
      }
    }
  } finally {
    client.release();
  }
  return { dropped, inUse, failed };
}

export interface ReplayOptions {
  progress?: Progress;
  /** Events read from the log at a time, and the most a projection applies in one transaction (default BATCH). */
  pageSize?: number;
}

/**
 * The statistics target of the scratch tables' ANALYZEs: 10 samples 3,000 rows where Postgres' default
 * of 100 samples 30,000. The statements of a replay look rows up by their keys; the sample only has to
 * tell the planner how large the tables are. `npm run bench -- --rebuild` (one million events): the
 * ANALYZEs took 3.0 s of the replay's 21 s of Postgres statements with the default, 0.5 s with 10, and
 * every other statement the same time a call (docs/benchmarks.md).
 */
const SCRATCH_STATISTICS = 10;

/** Pages the reader may run ahead of the slowest read model: bounds the memory a replay holds. */
const LEAD = 4;

/**
 * Pages a read model few events concern may gather its events over before it applies them. Its gathered
 * events are not done, and the progress a replay reports counts only what every read model is done with:
 * without this bound, a read model that gathers a page's worth once in the whole log (the sessions one on
 * a busy history) held the progress at its first event until the end.
 */
export const GATHER_PAGES = 8;

/**
 * Connections a stream-local projection's replay is split over (Projection.streamLocal): the rounds read
 * model, the replay's largest by far, would otherwise be one connection's statements one after the other
 * while the second core waits. Three rather than two: the rebuild ahead in each of five alternated pairs on
 * two cores, by 2.9 % on average (docs/benchmarks.md, Measured design decisions).
 */
export const REPLAY_PARTS = 3;

/** A read model's lanes in a replay on connections of its own: REPLAY_PARTS for a stream-local one. */
const lanesOf = (projection: Projection): number => (projection.streamLocal ? REPLAY_PARTS : 1);

/**
 * Connections a pool must be able to give a rebuild or a verify of these read models (replayInto): a lane
 * each (REPLAY_PARTS for a stream-local one), which it holds for the whole replay, the scratch tables'
 * session, the log's reads on Postgres, and one to spare. With fewer, the log's reads wait for a lane to
 * give one back, which none does, and fail when the pool's wait ends.
 */
export const replayPoolSize = (projections: Projection[]): number => projections.reduce((n, p) => n + lanesOf(p), 0) + 3;


/** Which of `parts` parts a stream's events go to (FNV-1a of its id): the same part for every event of a stream. */
export function partOf(streamId: string, parts: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < streamId.length; i++) h = Math.imul(h ^ streamId.charCodeAt(i), 0x01000193);
  return (h >>> 0) % parts;
}

/** One read model's share of a replay (or of a part of its streams): the relevant events it has gathered and not applied yet. */
interface Lane {
  projection: Projection;
  /** This lane's part of the streams, of `parts` (1: every stream). */
  part: number;
  parts: number;
  client: PoolClient;
  chain: Chain;
  gathered: RecordedEvent[];
  /** The text they hold (textBytes): applied at BATCH_BYTES, as at `pageSize` events. */
  gatheredBytes: number;
  /** Transactions it committed (its scratch tables are analyzed as that count doubles). */
  applied: number;
  /** Events of the log it is done with (applied, or of no concern to it): what progress reports. */
  through: number;
  /** While it holds gathered events: the events of the log before the first of them (all done). */
  gatheredFrom: number;
}

/** Steps that run one after the other: a lane's own, or (in a caller's transaction) every lane's. */
interface Chain {
  tail: Promise<void>;
  queued: number;
  /** Called as each step ends: the reader waiting for room. */
  waiters: Array<() => void>;
}

/**
 * Replays the log into the scratch tables (same apply() as the live runner, search_path pointing at the
 * scratch schema), from `from` up to `until` (inclusive) or to the head. Returns the last position applied.
 *
 * From a pool, each read model has a connection and a queue of its own: it applies the pages in order,
 * at its own pace, while the log is read further (up to LEAD pages ahead of the slowest), so a slow read
 * model does not hold the others at every page and both cores stay busy. A stream-local read model
 * (Projection.streamLocal) has REPLAY_PARTS of them, each applying the events of its share of the
 * streams. A read model few events concern gathers them over pages (GATHER_PAGES at most) into
 * transactions of up to a page's size. In the caller's transaction (a client), everything runs one step
 * after the other on it.
 */
export async function replayInto(
  pool: Pool | PoolClient,
  store: EventStore,
  schema: string,
  projections: Projection[],
  from: Position,
  until: Position | undefined,
  options: ReplayOptions = {},
): Promise<Position> {
  const pageSize = options.pageSize ?? BATCH;
  if (until !== undefined && comparePositions(from, until) >= 0) return from;
  // Pages of `pageSize` events and at most BATCH_BYTES (an outcome keeps its wallet's reply, up to 1 MiB),
  // so LEAD pages ahead stay small.
  const read = (after: Position) => {
    const page = store.readPage({ from: after, maxCount: pageSize, maxBytes: BATCH_BYTES });
    page.catch(() => undefined); // awaited below; not unhandled while a page is applied
    return page;
  };
  const own = !('release' in pool);
  const newChain = (): Chain => ({ tail: Promise.resolve(), queued: 0, waiters: [] });
  const shared = newChain();
  /** The first error of any read model (or of the reader): every step queued after it is skipped. */
  let failure: { err: unknown } | undefined;
  const lanes: Lane[] = [];
  try {
    for (const projection of projections) {
      const parts = own ? lanesOf(projection) : 1;
      for (let part = 0; part < parts; part++) {
        const client = own ? await (pool as Pool).connect() : (pool as PoolClient);
        lanes.push({ projection, part, parts, client, chain: own ? newChain() : shared, gathered: [], gatheredBytes: 0, applied: 0, through: 0, gatheredFrom: 0 });
      }
    }
    const chains = [...new Set(lanes.map((l) => l.chain))];
    let reported = 0;
    const report = () => {
      const through = Math.min(...lanes.map((l) => l.through));
      if (through > reported) options.progress?.((reported = through));
    };
    const flush = async (lane: Lane) => {
      const events = lane.gathered;
      lane.gathered = [];
      lane.gatheredBytes = 0;
      if (events.length === 0) return;
      const { client, projection } = lane;
      // The scratch tables are new, so the planner knows nothing of their size: analyzed as the lane's
      // transactions double (in the transaction, which counts its own rows), their statistics keep every
      // statement on its index lookups (a plan made for an empty table scans). What those plans need is
      // the tables' size, which a small sample gives (see SCRATCH_STATISTICS).
      // One part analyzes (two ANALYZEs of a table wait for each other): the others' rows count in it as they commit.
      const analyze = own && lane.part === 0 && ((lane.applied + 1) & lane.applied) === 0;
      let applying = false;
      try {
        // apply() names its tables unqualified, found through the search path, where Postgres passes over
        // a schema that does not exist: were the scratch schema dropped (by hand, or as left by a dead run,
        // see dropLeftScratch), they would be the live tables. Its tables are locked first, by their full
        // names: that fails if they are gone, and holds off their drop until this transaction ends. (Sent
        // with the transaction's BEGIN: one round trip.) A lane's own transaction commits without waiting
        // for the log's flush: it writes only scratch tables; a crash of the server, which could lose its
        // last commits, ends the session that holds them, and the swap then swaps nothing in
        // (scratchHeld); the swap's commit, flushed, makes durable everything logged before it.
        await client.query(
          `${own ? 'BEGIN; SET LOCAL synchronous_commit = off; ' : ''}SET LOCAL search_path TO ${schema}, public; LOCK TABLE ${projection.tables.map((t) => `${schema}.${t.name}`).join(', ')} IN ROW EXCLUSIVE MODE`,
        );
        applying = true;
        await projection.apply(events, client);
        applying = false;
        if (analyze) {
          await client.query(`SET LOCAL default_statistics_target = ${SCRATCH_STATISTICS}`);
          await client.query(`ANALYZE ${projection.tables.map((t) => `${schema}.${t.name}`).join(', ')}`);
        }
        if (own) await client.query('COMMIT');
        else await client.query('SET LOCAL search_path TO public');
      } catch (err) {
        if (own) await client.query('ROLLBACK').catch(() => undefined);
        // A statement of the read model's own code refused an event: name it (a history's own event makes
        // every later replay fail the same way).
        if (applying && isDatabaseError(err)) throw await replayFailure(own ? client : undefined, schema, projection, events, err);
        throw err;
      }
      lane.applied += 1;
    };
    const enqueue = (chain: Chain, step: () => Promise<void>) => {
      chain.queued += 1;
      chain.tail = chain.tail.then(async () => {
        try {
          if (!failure) await step();
        } catch (err) {
          failure ??= { err };
        } finally {
          chain.queued -= 1;
          for (const w of chain.waiters.splice(0)) w();
        }
      });
    };
    /** Whether a read model is applied in parts (its lanes then need each event's part). */
    const split = lanes.some((l) => l.parts > 1);
    let position = from;
    /** Events of the pages read so far. */
    let replayed = 0;
    let next = read(position);
    for (;;) {
      const { events: page, more: goesOn } = await next;
      const cut = until === undefined ? page : page.slice(0, page.findIndex((e) => e.position === until) + 1 || page.length);
      if (cut.length === 0) break;
      const last = cut[cut.length - 1]!.position;
      const more = goesOn && !(until !== undefined && last === until);
      // The next page is read while this one is applied: the store and the scratch tables work at once.
      if (more) next = read(last);
      const through = (replayed += cut.length);
      // Each event's part, worked out once for every lane of a split read model (they all have REPLAY_PARTS).
      const parts = split ? cut.map((e) => partOf(e.streamId, REPLAY_PARTS)) : [];
      for (const lane of lanes) {
        enqueue(lane.chain, async () => {
          for (let i = 0; i < cut.length; i++) {
            const e = cut[i]!;
            if (!handles(lane.projection, e.type)) continue;
            if (lane.parts > 1 && parts[i] !== lane.part) continue;
            if (lane.gathered.length === 0) lane.gatheredFrom = through - cut.length + i;
            lane.gathered.push(e);
            lane.gatheredBytes += textBytes(e);
            if (lane.gathered.length >= pageSize || lane.gatheredBytes >= BATCH_BYTES) await flush(lane);
          }
          if (lane.gathered.length > 0 && through - lane.gatheredFrom >= pageSize * GATHER_PAGES) await flush(lane);
          lane.through = lane.gathered.length === 0 ? through : lane.gatheredFrom;
          report();
        });
      }
      position = last;
      if (!more) break;
      // Room for the next page: no queue more than LEAD pages behind (a shared queue has every lane's steps).
      const room = LEAD * (own ? 1 : lanes.length);
      for (const chain of chains) {
        while (chain.queued > room && !failure) await new Promise<void>((resolve) => chain.waiters.push(resolve));
      }
      if (failure) throw failure.err;
    }
    // What each read model gathered and has not applied: the last page may have been full (the read after
    // it found nothing), so this is not left to the page's own step.
    for (const lane of lanes) {
      enqueue(lane.chain, async () => {
        await flush(lane);
        lane.through = replayed;
        report();
      });
    }
    await Promise.all(chains.map((c) => c.tail));
    if (failure) throw failure.err;
    return position;
  } catch (err) {
    failure ??= { err };
    throw failure.err;
  } finally {
    // Nothing is released while one of its statements may still run; what is still queued is skipped.
    await Promise.all(lanes.map((l) => l.chain.tail));
    if (own) for (const l of lanes) l.client.release();
  }
}

export interface Difference {
  table: string;
  key: Record<string, unknown>;
  live: Record<string, unknown> | undefined;
  rebuilt: Record<string, unknown> | undefined;
}

/** Row-by-row differences between the live tables and the scratch ones, by key. */
export async function compareTables(db: PoolClient, schema: string, projection: Projection): Promise<Difference[]> {
  const out: Difference[] = [];
  for (const t of projection.tables) {
    const { rows } = await db.query<{ side: 'live' | 'rebuilt'; row: Record<string, unknown> }>(
      `SELECT 'live' AS side, to_jsonb(x) AS row FROM (SELECT * FROM public.${t.name} EXCEPT ALL SELECT * FROM ${schema}.${t.name}) x
       UNION ALL
       SELECT 'rebuilt', to_jsonb(y) FROM (SELECT * FROM ${schema}.${t.name} EXCEPT ALL SELECT * FROM public.${t.name}) y`,
    );
    const byKey = new Map<string, Difference>();
    for (const r of rows) {
      const key = Object.fromEntries(t.key.map((k) => [k, r.row[k]]));
      const id = JSON.stringify(key);
      const d = byKey.get(id) ?? { table: t.name, key, live: undefined, rebuilt: undefined };
      d[r.side] = r.row;
      byKey.set(id, d);
    }
    out.push(...byKey.values());
  }
  return out;
}

export interface VerifyResult {
  projection: string;
  position: Position;
  differences: Difference[];
}

/**
 * Rebuilds the projection in scratch tables up to the live checkpoint and compares, row by row, while
 * holding the checkpoint row (FOR SHARE): the live runner cannot commit a batch meanwhile, so both sides
 * stand at the same position. If the checkpoint moved while the scratch was replayed, it catches up first.
 */
export async function verifyProjection(pool: Pool, store: EventStore, projection: Projection, progress?: Progress): Promise<VerifyResult> {
  const schema = await createScratch(pool, [projection]);
  const next = runningProgress(progress);
  try {
    let built: Position = START;
    for (let round = 0; round < 50; round++) {
      const target = await checkpointOf(pool, projection.name);
      built = await replayInto(pool, store, schema, [projection], built, target, next());
      try {
        const verified = await withTransaction(
          pool,
          async (client): Promise<VerifyResult | undefined> => {
            const { rows } = await client.query<{ position: string }>('SELECT position FROM projection_checkpoints WHERE name = $1 FOR SHARE', [projection.name]);
            const live = rows[0]?.position ?? START;
            if (live !== built) return undefined;
            // Unlogged, the scratch tables of a server that restarted meanwhile are empty: they would differ in every row.
            if (!(await scratchHeld(client, schema))) throw new VerifyInterrupted();
            return { projection: projection.name, position: live, differences: await compareTables(client, schema, projection) };
          },
          { isolation: 'REPEATABLE READ' },
        );
        if (verified) return verified;
      } catch (err) {
        // The projector committed its checkpoint after this transaction's snapshot, while the share lock
        // waited for it: Postgres refuses the lock, and the checkpoint has moved, which is one more round.
        if (!isSerializationFailure(err)) throw err;
      }
    }
    throw new Error(`projection ${projection.name} kept moving; verify could not catch up`);
  } finally {
    await dropScratch(pool, schema);
  }
}

/** How long the swap asks for the live tables' lock at a time, how many times, and the pause between. */
export interface SwapLock {
  waitMs: number;
  attempts: number;
  pauseMs: number;
}

/** The swap asks for the lock a second at a time (each of its statements that waits for one), and tries for about a minute. */
export const SWAP_LOCK: SwapLock = { waitMs: 1000, attempts: 30, pauseMs: 1000 };

/** The swap's live tables or checkpoints were not had within the time it asks for them at a try (see SwapLock). */
class LockWait extends Error {}

/** The sessions holding a lock on the live tables: "pid 1234 (idle in transaction): SELECT ...". */
async function holders(pool: Pool, tables: string[]): Promise<string[]> {
  const { rows } = await pool.query<{ line: string }>(
    `SELECT DISTINCT 'pid ' || a.pid || ' (' || coalesce(a.state, '?') || '): ' || left(regexp_replace(a.query, '\\s+', ' ', 'g'), 120) AS line
     FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
     WHERE l.granted AND l.relation = ANY (SELECT ('public.' || quote_ident(n))::regclass FROM unnest($1::text[]) n) AND a.pid <> pg_backend_pid()
     ORDER BY 1`,
    [tables],
  );
  return rows.map((r) => r.line);
}

/** A rebuild that ended without swapping anything in, for a reason its message gives (the live read models are as they were). */
export class NothingSwapped extends Error {}

/** An event of the history a read model could not apply: the replay stops there (its message names the event). */
export class ReplayFailed extends NothingSwapped {}

/** An error the database answered with (a SQLSTATE code), not one of the connection or of this process. */
const isDatabaseError = (err: unknown): err is Error => {
  const code = err instanceof Error ? (err as { code?: unknown }).code : undefined;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && !code.startsWith('08') && !code.startsWith('57');
};

/**
 * The batch `events` failed to apply with `err`: applied again one event at a time on `client` (a
 * connection of the replay's own; not in the swap, whose transaction the failure ended), each under a
 * savepoint, in a transaction rolled back after, the first that fails is the one named (its position,
 * stream and type), with the database's words. Otherwise the batch is named.
 */
async function replayFailure(client: PoolClient | undefined, schema: string, projection: Projection, events: RecordedEvent[], err: Error): Promise<ReplayFailed> {
  const batch = `the ${projection.name} read model could not apply the events from position ${events[0]!.position} to ${events.at(-1)!.position}: ${err.message}`;
  if (client === undefined) return new ReplayFailed(`${batch}. Nothing was swapped in; see whether the history was changed (npm run audit -- verify-chain)`);
  try {
    await client.query(`BEGIN; SET LOCAL search_path TO ${schema}, public`);
    for (const e of events) {
      await client.query('SAVEPOINT one_event');
      try {
        await projection.apply([e], client);
      } catch (one) {
        return new ReplayFailed(
          `the ${projection.name} read model could not apply the event at position ${e.position} (stream ${e.streamId}, revision ${e.revision}, ${e.type}): ${(one as Error).message}. ` +
            'Nothing was swapped in; see whether the history was changed (npm run audit -- verify-chain)',
        );
      }
      await client.query('RELEASE SAVEPOINT one_event');
    }
  } catch {
    // The search for the one event failed in its own way: the batch is named.
  } finally {
    await client.query('ROLLBACK').catch(() => undefined);
  }
  return new ReplayFailed(`${batch}. Nothing was swapped in; see whether the history was changed (npm run audit -- verify-chain)`);
}

/**
 * The session that created the scratch schema (and holds its lock) ended during the run. A server that
 * crashed and restarted ends every session, and may have lost what the replay's last commits wrote (they
 * do not wait for the log's flush, see replayInto) or, for a copy, every row of the unlogged scratch
 * tables; the pool's other connections are opened again without a word. So nothing is swapped in.
 */
export class ScratchLost extends NothingSwapped {
  constructor() {
    super(
      'the session that held the rebuilt tables ended during the run (the database server restarted, or the connection broke), ' +
        'so they may miss rows and nothing was swapped in; run the rebuild again',
    );
  }
}

/** verify's ScratchLost: nothing was compared. */
export class VerifyInterrupted extends Error {
  constructor() {
    super(
      'the session that held the replayed tables ended during the run (the database server restarted, or the connection broke), ' +
        'so they may miss rows and nothing was compared; run verify again',
    );
  }
}

/** The backend whose session holds scratch schema `schema`'s lock (the one that created it), if any. */
export async function scratchHolder(db: Pool | PoolClient, schema: string): Promise<number | undefined> {
  const { rows } = await db.query<{ pid: number }>(
    `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND classid = $1::bigint::oid AND objid = (hashtext($2)::bigint & 4294967295)::oid AND objsubid = 2`,
    [SCRATCH_LOCK, schema],
  );
  return rows[0]?.pid;
}

/**
 * Whether the session that created `schema` still holds its lock, asked on `db`'s own connection (in
 * pg_locks: no round trip to that session, which could hang on a connection the network dropped): if so,
 * it lived through the run, and so did the server, whose restart ends every session.
 */
async function scratchHeld(db: PoolClient, schema: string): Promise<boolean> {
  const owner = scratchOwners.get(schema);
  return owner !== undefined && (await scratchHolder(db, schema)) === owner.pid;
}

/** The live tables stayed locked by others through every try: nothing was swapped in. */
export class LockNotTaken extends NothingSwapped {
  constructor(
    lock: SwapLock,
    readonly holders: string[],
  ) {
    super(
      `the live read models could not be locked for the swap (${lock.attempts} tries of ${lock.waitMs} ms), so nothing was swapped in; ` +
        `run the rebuild again once they are free. Holding them:\n  ${holders.join('\n  ') || '(nobody now)'}`,
    );
  }
}

/** A live table's columns, constraints or indexes changed while it was rebuilt: nothing was swapped in. */
export class ShapeChanged extends NothingSwapped {
  constructor(readonly drift: string[]) {
    super(`the live read models changed while they were rebuilt, so nothing was swapped in; run the rebuild again:\n  ${drift.join('\n  ')}`);
  }
}

/** What a rebuild did: where the read models now stand, and how long their live tables were locked. */
export interface Rebuilt {
  position: Position;
  /** From asking for the live tables' lock to the swap's commit: reads of those read models wait meanwhile. */
  lockedMs: number;
  /**
   * How the rebuilt rows took the live tables' place: by name (the rebuilt tables, logged, keyed, indexed
   * and analyzed before the lock, replace the live ones in a few catalog updates), or copied into the live tables
   * under the lock, because something is attached to a live table itself (see attachments).
   */
  swap: 'renamed' | 'copied';
  /** What kept the swap from renaming: "rm_rounds: view round_statuses", one line each. */
  attached: string[];
  /** How many times it asked for the live tables' lock (more than one: others held them, see SwapLock). */
  tries: number;
}

/**
 * Replaces the projections' live rows with a fresh rebuild, while the service runs: one replay of the
 * history into scratch tables for all of them, then in one transaction lock the live tables (the
 * runners' batches in flight finish first), hold the checkpoints, catch the scratch up to the head, swap
 * the rebuilt tables in and move every checkpoint to where the scratch stands. Each live runner's next
 * batch then starts from there (its compare-and-set fails against the moved checkpoint, so nothing is
 * applied twice).
 *
 * The swap is by name: the scratch tables are logged, and before the lock they are given the live
 * tables' keys, indexes and statistics, several at a time (finishScratch); under the lock the live tables are
 * dropped and the scratch ones moved into their schema. A statement waiting for the lock then finds the
 * new table by its name. Something attached to a live table rather than to its name (a view, a trigger,
 * a grant; see attachments) would be lost or left pointing at nothing: then the rows are copied into the
 * live tables under the lock instead, which holds their reads far longer.
 */
export async function rebuildProjections(
  pool: Pool,
  store: EventStore,
  projections: Projection[],
  progress?: Progress,
  lock: SwapLock = SWAP_LOCK,
): Promise<Rebuilt> {
  const tables = projections.flatMap((p) => p.tables.map((t) => t.name));
  const names = projections.map((p) => p.name).sort();
  const before = await attachments(pool, tables);
  const schema = await createScratch(pool, projections, { logged: before.length === 0 });
  const next = runningProgress(progress);
  try {
    let replayed = await replayInto(pool, store, schema, projections, START, undefined, next());
    // Looked for again: something attached during the replay turns the swap into a copy.
    const planned = before.length === 0 ? await attachments(pool, tables) : before;
    if (planned.length === 0) await finishScratch(pool, schema, tables);
    // Reads of a table queue behind a lock asked for, not only one held: so the live tables' lock is
    // timed from the asking, and asked for a bounded time only. A long reader (a report, a dump) would
    // otherwise hold every read of the read models behind the swap for as long as it runs; between tries
    // they go through, and what was appended meanwhile is applied outside the lock.
    for (let tries = 1; ; tries++) {
      try {
        const from = replayed;
        const { position, attached, asked } = await withTransaction(pool, (client) => swapIn(client, from));
        const lockedMs = performance.now() - asked;
        if (attached.length > 0) {
          // Every row was just replaced: the planner's statistics describe the tables before. Until autovacuum
          // gets to them, a query planned on those (a page of a million-row table estimated at nine rows) can
          // take a plan a hundred times slower.
          // Side by side: each on a connection of its own (the pool has one per read model and more).
          await Promise.all(tables.map((t) => pool.query(`ANALYZE public.${t}`)));
        }
        return { position, lockedMs, swap: attached.length === 0 ? 'renamed' : 'copied', attached, tries };
      } catch (err) {
        if (!(err instanceof LockWait)) throw err;
        if (tries >= lock.attempts) throw new LockNotTaken(lock, await holders(pool, tables));
        await new Promise((resolve) => setTimeout(resolve, lock.pauseMs));
        replayed = await replayInto(pool, store, schema, projections, replayed, undefined, next());
      }
    }
    /** One try: the rebuilt tables swapped in by name, or copied when `attached` names why not; `asked` is when the live tables' lock was asked for. */
    async function swapIn(client: PoolClient, from: Position): Promise<{ position: Position; attached: string[]; asked: number }> {
      // The scratch tables first, for as long as it takes: nobody reads them, and an autovacuum of them
      // gives way to a lock asked for (after deadlock_timeout).
      await client.query(`LOCK TABLE ${tables.map((t) => `${schema}.${t}`).join(', ')} IN ACCESS EXCLUSIVE MODE`);
      const asked = performance.now();
      // Then the live tables and the checkpoints, each statement for lock.waitMs at most. Tables first,
      // then the checkpoints: the order the runners take them in, so none can deadlock.
      await client.query(`SET LOCAL statement_timeout = ${Math.max(1, Math.round(lock.waitMs))}`);
      try {
        await client.query(`LOCK TABLE ${tables.map((t) => `public.${t}`).join(', ')} IN ACCESS EXCLUSIVE MODE`);
        await client.query(`INSERT INTO projection_checkpoints (name, position) SELECT unnest($1::text[]), $2 ON CONFLICT (name) DO NOTHING`, [names, START]);
        await client.query('SELECT position FROM projection_checkpoints WHERE name = ANY($1::text[]) ORDER BY name FOR UPDATE', [names]);
      } catch (err) {
        // statement_timeout's cancel (57014: told by where it came from, not by its message, which the
        // server words in its own language), or lock_timeout's (55P03) should one be set.
        const code = (err as { code?: unknown } | null)?.code;
        throw code === '57014' || code === '55P03' ? new LockWait() : err;
      }
      await client.query('SET LOCAL statement_timeout = 0');
      if (!(await scratchHeld(client, schema))) throw new ScratchLost();
      const built = await replayInto(client, store, schema, projections, from, undefined, next());
      // Under the lock nothing can change them any more: what was attached, or changed, since they were
      // looked at is found now. An attachment turns the swap into a copy (as one found before the replay
      // did: its scratch tables were made for a copy); a change of their shape (a migration that ran
      // meanwhile) stops the rebuild, as the rebuilt tables would undo it.
      const attached = planned.length > 0 ? planned : await attachments(client, tables);
      if (attached.length === 0) {
        const drift = await shapeDrift(client, schema, tables);
        if (drift.length > 0) throw new ShapeChanged(drift);
        // Not CASCADE: should anything depend on them after all, this fails and leaves them as they were.
        await client.query(`DROP TABLE ${tables.map((t) => `public.${t}`).join(', ')}`);
        for (const t of tables) await client.query(`ALTER TABLE ${schema}.${t} SET SCHEMA public`);
      } else {
        await copyInto(client, schema, tables);
      }
      await client.query(`UPDATE projection_checkpoints SET position = $2, updated_at = now() WHERE name = ANY($1::text[])`, [names, built]);
      return { position: built, attached, asked };
    }
  } finally {
    await dropScratch(pool, schema);
  }
}

/**
 * What is attached to the live tables themselves (or to their row types) rather than to their names, and
 * would not follow a swap by name: views and rules, functions or columns of their row type, triggers, row
 * security, foreign keys either way, sequences they own, publications (their own, of every table, or of
 * the schema), privileges granted on them or another owner, default privileges that would grant on the new
 * tables, storage parameters, tablespaces, column or index settings, extended statistics, a replica
 * identity, inheritance, a clustering index, a check not validated, another access method, comments other
 * than the columns', security labels. One line each. What the swap does give the rebuilt tables: the
 * columns with their defaults, checks and comments, the keys and indexes (see tableShape).
 */
export async function attachments(db: Pool | PoolClient, tables: string[]): Promise<string[]> {
  const { rows } = await db.query<{ line: string }>(
    `WITH t AS (SELECT c.* FROM pg_class c WHERE c.oid = ANY (SELECT ('public.' || quote_ident(n))::regclass FROM unnest($1::text[]) n))
     SELECT t.relname || ': ' || pg_describe_object(d.classid, d.objid, d.objsubid) AS line
     FROM t JOIN pg_depend d ON d.refclassid = 'pg_class'::regclass AND d.refobjid = t.oid
     WHERE d.deptype <> 'i'
       AND d.classid NOT IN ('pg_type'::regclass, 'pg_attrdef'::regclass, 'pg_statistic_ext'::regclass) -- statistics: named below
       AND NOT (d.classid = 'pg_class'::regclass AND (SELECT relkind FROM pg_class x WHERE x.oid = d.objid) IN ('i', 't'))
       AND NOT (d.classid = 'pg_constraint'::regclass AND EXISTS (
         SELECT 1 FROM pg_constraint k WHERE k.oid = d.objid AND k.conrelid = t.oid AND k.contype IN ('p', 'u', 'c', 'x')))
     UNION ALL
     -- Users of its row type or of the array of it (a function returning SETOF the table, a column of its type).
     SELECT t.relname || ': ' || pg_describe_object(d.classid, d.objid, d.objsubid)
     FROM t JOIN pg_type ty ON ty.oid = t.reltype
     JOIN pg_depend d ON d.refclassid = 'pg_type'::regclass AND d.refobjid IN (ty.oid, ty.typarray) AND d.deptype <> 'i'
     UNION ALL
     SELECT t.relname || ': ' || what FROM t CROSS JOIN LATERAL (VALUES
       (t.relkind <> 'r' OR t.relpersistence <> 'p', 'not a plain logged table'),
       (t.relam <> (SELECT oid FROM pg_am WHERE amname = 'heap'), 'another access method'),
       (t.relowner <> current_user::regrole, 'owned by ' || t.relowner::regrole::text || ', not by ' || current_user),
       (t.relacl IS DISTINCT FROM NULL AND t.relacl IS DISTINCT FROM acldefault('r', t.relowner), 'privileges granted on it'),
       (EXISTS (SELECT 1 FROM pg_default_acl a WHERE a.defaclobjtype = 'r' AND a.defaclnamespace = 0 AND a.defaclrole = current_user::regrole),
        'default privileges of ' || current_user || ', which would grant on the rebuilt tables'),
       (EXISTS (SELECT 1 FROM pg_publication p WHERE p.puballtables), 'a publication of every table'),
       (EXISTS (SELECT 1 FROM pg_publication_namespace n WHERE n.pnnspid = t.relnamespace), 'a publication of its schema'),
       (t.reloptions IS NOT NULL, 'storage parameters ' || array_to_string(t.reloptions, ', ')),
       (EXISTS (SELECT 1 FROM pg_class x WHERE x.oid = t.reltoastrelid AND x.reloptions IS NOT NULL), 'storage parameters on its TOAST table'),
       (t.reltablespace <> 0 OR EXISTS (SELECT 1 FROM pg_index i JOIN pg_class x ON x.oid = i.indexrelid WHERE i.indrelid = t.oid AND x.reltablespace <> 0),
        'a tablespace of its own, or of an index'),
       (t.relrowsecurity OR t.relforcerowsecurity, 'row-level security'),
       (t.relreplident <> 'd', 'a replica identity'),
       (t.relhassubclass OR EXISTS (SELECT 1 FROM pg_inherits h WHERE h.inhrelid = t.oid), 'inheritance'),
       (EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped
                AND (a.attstattarget >= 0 OR cardinality(a.attacl) > 0 OR a.attidentity <> ''
                     OR EXISTS (SELECT 1 FROM unnest(a.attoptions) o WHERE o LIKE 'n\\_distinct%'))), 'column settings, privileges or identity'),
       (EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indexrelid WHERE i.indrelid = t.oid AND a.attstattarget >= 0),
        'index column settings'),
       (EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = t.oid AND i.indisclustered), 'a clustering index'),
       (EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conrelid = t.oid AND NOT k.convalidated), 'a constraint not validated'),
       (EXISTS (SELECT 1 FROM pg_statistic_ext x WHERE x.stxrelid = t.oid), 'extended statistics'),
       (obj_description(t.oid, 'pg_class') IS NOT NULL, 'a comment'),
       (EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = t.oid AND obj_description(i.indexrelid, 'pg_class') IS NOT NULL)
        OR EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conrelid = t.oid AND obj_description(k.oid, 'pg_constraint') IS NOT NULL),
        'a comment on an index or a constraint'),
       (EXISTS (SELECT 1 FROM pg_seclabel l WHERE l.classoid = 'pg_class'::regclass AND l.objoid = t.oid), 'a security label')
     ) v(attached, what) WHERE v.attached
     ORDER BY 1`,
    [tables],
  );
  return rows.map((r) => r.line);
}

/**
 * What a swap by name gives a table, one line each: its columns (type, collation, nullability, default,
 * generation, comment), its constraints and its indexes (their definitions, the schema left out). Equal for
 * a live table and its rebuilt one, unless the live table changed after the rebuild began (a migration
 * that added a column or an index, say), which the swap must not undo.
 */
async function tableShape(db: PoolClient, schema: string, table: string): Promise<string[]> {
  const { rows } = await db.query<{ line: string }>(
    `WITH t AS (SELECT ($1::text || '.' || quote_ident($2))::regclass AS oid)
     SELECT 'column ' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' collate ' || a.attcollation::regcollation::text
            || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END || ' generated ' || a.attgenerated::text
            || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '') || coalesce(' comment ' || col_description(a.attrelid, a.attnum), '') AS line
     FROM t JOIN pg_attribute a ON a.attrelid = t.oid LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE a.attnum > 0 AND NOT a.attisdropped
     UNION ALL
     SELECT 'constraint ' || k.conname || ' ' || pg_get_constraintdef(k.oid) FROM t JOIN pg_constraint k ON k.conrelid = t.oid
     UNION ALL
     SELECT 'index ' || replace(pg_get_indexdef(i.indexrelid), ' ON ' || $1 || '.', ' ON public.') FROM t JOIN pg_index i ON i.indrelid = t.oid
     ORDER BY 1`,
    [schema, table],
  );
  return rows.map((r) => r.line);
}

/** How each live table differs from its rebuilt one (see tableShape): "rm_rounds: live has index ..., rebuilt has not". */
async function shapeDrift(db: PoolClient, schema: string, tables: string[]): Promise<string[]> {
  const drift: string[] = [];
  for (const t of tables) {
    const live = await tableShape(db, 'public', t);
    const rebuilt = await tableShape(db, schema, t);
    for (const l of live) if (!rebuilt.includes(l)) drift.push(`${t}: the live table has ${l}, the rebuilt one not`);
    for (const r of rebuilt) if (!live.includes(r)) drift.push(`${t}: the rebuilt table has ${r}, the live one not`);
  }
  return drift;
}

/** Connections that make the scratch tables ready for a swap by name, side by side. */
const FINISHING = 2;

/**
 * Makes the (logged) scratch tables what the live ones are, before the lock: the live keys (their unique
 * indexes are already there, under the live names), indexes and fresh statistics. Each table's steps run
 * in order; the tables' steps several at a time, largest table first. The tables are then swapped in as
 * they are.
 */
async function finishScratch(pool: Pool, schema: string, tables: string[]): Promise<void> {
  const plans = await Promise.all(
    tables.map(async (t) => {
      const { rows: sized } = await pool.query<{ bytes: string }>(`SELECT pg_total_relation_size($1::regclass) AS bytes`, [`${schema}.${t}`]);
      const { rows: keys } = await pool.query<{ statement: string }>(
        // A key's unique index is already built: the constraint takes it over.
        `SELECT format('ALTER TABLE %I.%I ADD CONSTRAINT %I %s USING INDEX %I%s', $2::text, $1::text, k.conname,
                       CASE k.contype WHEN 'p' THEN 'PRIMARY KEY' ELSE 'UNIQUE' END, c.relname,
                       CASE WHEN k.condeferrable THEN ' DEFERRABLE' || CASE WHEN k.condeferred THEN ' INITIALLY DEFERRED' ELSE '' END ELSE '' END) AS statement
         FROM pg_constraint k JOIN pg_class c ON c.oid = k.conindid
         WHERE k.conrelid = ('public.' || quote_ident($1))::regclass AND k.contype IN ('p', 'u')
         UNION ALL
         SELECT format('ALTER TABLE %I.%I ADD CONSTRAINT %I %s', $2::text, $1::text, k.conname, pg_get_constraintdef(k.oid))
         FROM pg_constraint k WHERE k.conrelid = ('public.' || quote_ident($1))::regclass AND k.contype = 'x'`,
        [t, schema],
      );
      // The unique ones are built already; a constraint's is built by the constraint.
      const indexes = (await liveIndexes(pool, schema, t)).filter((i) => !i.unique && !i.constraint);
      return { table: t, bytes: Number(sized[0]!.bytes), keys: keys.map((k) => k.statement), indexes: indexes.map((i) => i.definition) };
    }),
  );
  plans.sort((a, b) => b.bytes - a.bytes);
  const step = (statements: string[]) => async (client: PoolClient) => {
    await client.query('BEGIN');
    try {
      await client.query(`SET LOCAL maintenance_work_mem = '256MB'`);
      for (const s of statements) await client.query(s);
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  };
  // A queue of steps: a table's first step gives it its keys; its indexes then go to the front of the
  // queue, and its ANALYZE after the last of them.
  interface Step {
    run: (client: PoolClient) => Promise<void>;
    then?: () => void;
  }
  const queue: Step[] = [];
  for (const plan of plans) {
    const analyze: Step = { run: step([`ANALYZE ${schema}.${plan.table}`]) };
    let left = plan.indexes.length;
    const built = () => {
      if (--left === 0) queue.unshift(analyze);
    };
    queue.push({
      run: step(plan.keys),
      then: () => queue.unshift(...(left === 0 ? [analyze] : plan.indexes.map((definition) => ({ run: step([definition]), then: built })))),
    });
  }
  let failure: { err: unknown } | undefined;
  /** Steps running: a connection that finds the queue empty waits while any runs, as it may add more. */
  let running = 0;
  const wake: Array<() => void> = [];
  // Every connection first: none starts while another could still fail to connect (and the scratch be dropped under it).
  const clients: Array<{ client: PoolClient; broken?: Error }> = [];
  try {
    for (let i = 0; i < FINISHING; i++) clients.push({ client: await pool.connect() });
    await Promise.all(
      clients.map(async (c) => {
        while (!failure) {
          const next = queue.shift();
          if (!next) {
            if (running === 0) break;
            await new Promise<void>((resolve) => wake.push(resolve));
            continue;
          }
          running += 1;
          try {
            await next.run(c.client);
            next.then?.();
          } catch (err) {
            failure ??= { err };
            c.broken = err instanceof Error ? err : new Error(String(err));
          } finally {
            running -= 1;
            for (const w of wake.splice(0)) w();
          }
        }
      }),
    );
  } finally {
    // A connection whose step failed is closed, not handed back.
    for (const c of clients) c.client.release(c.broken);
  }
  if (failure) throw failure.err;
}

/**
 * The swap by copy: under the lock nobody else reads or writes the live tables, so they are emptied at
 * once, then filled in one statement each with no index at all, the keys and indexes built afterwards in
 * one pass each. An index kept during the copy is written row by row in key order, which is random (a
 * primary key on text ids kept the copy of half a million rows at 13.7 s; without it the copy took 0.6 s
 * and the key 0.5 s).
 */
async function copyInto(client: PoolClient, schema: string, tables: string[]): Promise<void> {
  await client.query(`TRUNCATE ${tables.map((t) => `public.${t}`).join(', ')}`);
  await client.query(`SET LOCAL maintenance_work_mem = '256MB'`);
  for (const t of tables) {
    // Keys (primary, unique, exclusion) by their own definitions, then the plain indexes.
    const { rows: keys } = await client.query<{ name: string; definition: string }>(
      `SELECT quote_ident(conname) AS name, pg_get_constraintdef(oid) AS definition FROM pg_constraint
       WHERE conrelid = ('public.' || quote_ident($1))::regclass AND contype IN ('p', 'u', 'x') ORDER BY conname`,
      [t],
    );
    const { rows: indexes } = await client.query<{ name: string; definition: string }>(
      `SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS definition FROM pg_index i
       WHERE i.indrelid = ('public.' || quote_ident($1))::regclass AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)`,
      [t],
    );
    // What is set on the indexes and keys, which dropping them loses: set again once they are built.
    const { rows: settings } = await client.query<{ statement: string }>(
      `WITH t AS (SELECT ('public.' || quote_ident($1))::regclass AS oid),
            ix AS (SELECT i.*, c.relname, c.reltablespace FROM t JOIN pg_index i ON i.indrelid = t.oid JOIN pg_class c ON c.oid = i.indexrelid)
       SELECT format('COMMENT ON INDEX public.%I IS %L', relname, obj_description(indexrelid, 'pg_class')) AS statement FROM ix
       WHERE obj_description(indexrelid, 'pg_class') IS NOT NULL
       UNION ALL
       SELECT format('COMMENT ON CONSTRAINT %I ON public.%I IS %L', k.conname, $1::text, obj_description(k.oid, 'pg_constraint'))
       FROM t JOIN pg_constraint k ON k.conrelid = t.oid WHERE obj_description(k.oid, 'pg_constraint') IS NOT NULL
       UNION ALL
       SELECT format('ALTER INDEX public.%I SET TABLESPACE %I', relname, s.spcname) FROM ix JOIN pg_tablespace s ON s.oid = ix.reltablespace
       UNION ALL
       SELECT format('ALTER TABLE public.%I CLUSTER ON %I', $1::text, relname) FROM ix WHERE indisclustered
       UNION ALL
       SELECT format('ALTER INDEX public.%I ALTER COLUMN %s SET STATISTICS %s', ix.relname, a.attnum, a.attstattarget)
       FROM ix JOIN pg_attribute a ON a.attrelid = ix.indexrelid WHERE a.attstattarget >= 0`,
      [t],
    );
    for (const i of indexes) await client.query(`DROP INDEX ${i.name}`);
    for (const k of keys) await client.query(`ALTER TABLE public.${t} DROP CONSTRAINT ${k.name}`);
    // Every column but the generated ones (computed again), identity values as they were rebuilt.
    const { rows: cols } = await client.query<{ list: string; identities: string[] }>(
      `SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FILTER (WHERE attgenerated = '') AS list,
              coalesce(array_agg(attname::text) FILTER (WHERE attidentity <> ''), '{}') AS identities
       FROM pg_attribute WHERE attrelid = ('public.' || quote_ident($1))::regclass AND attnum > 0 AND NOT attisdropped`,
      [t],
    );
    const { list, identities } = cols[0]!;
    await client.query(`INSERT INTO public.${t} (${list}) OVERRIDING SYSTEM VALUE SELECT ${list} FROM ${schema}.${t}`);
    // An identity goes on after the highest value copied in.
    for (const c of identities) {
      await client.query(`SELECT setval(pg_get_serial_sequence($1, $2), greatest(max(${pg.escapeIdentifier(c)}), 1)) FROM public.${t}`, [`public.${t}`, c]);
    }
    for (const k of keys) await client.query(`ALTER TABLE public.${t} ADD CONSTRAINT ${k.name} ${k.definition}`);
    for (const i of indexes) await client.query(i.definition);
    for (const { statement } of settings) await client.query(statement);
  }
}

/** rebuildProjections for one projection. */
export const rebuildProjection = (pool: Pool, store: EventStore, projection: Projection, progress?: Progress): Promise<Rebuilt> =>
  rebuildProjections(pool, store, [projection], progress);

async function checkpointOf(pool: Pool, name: string): Promise<Position> {
  const { rows } = await pool.query<{ position: string }>('SELECT position FROM projection_checkpoints WHERE name = $1', [name]);
  return rows[0]?.position ?? START;
}
