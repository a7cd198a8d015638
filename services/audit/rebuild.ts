import { randomBytes } from 'node:crypto';
import { handles, type Projection } from '../../projections/runner.ts';
import { withTransaction, type Pool, type PoolClient } from '../../shared/db/pool.ts';
import { comparePositions, START, type EventStore, type Position } from '../../shared/eventstore/port.ts';

const BATCH = 500;

export interface Progress {
  (replayed: number): void;
}

/** A schema of empty tables shaped like a projection's live ones. */
export async function createScratch(pool: Pool, projections: Projection[]): Promise<string> {
  const schema = `audit_${randomBytes(5).toString('hex')}`;
  await pool.query(`CREATE SCHEMA ${schema}`);
  for (const p of projections) {
    for (const t of p.tables) await pool.query(`CREATE TABLE ${schema}.${t.name} (LIKE public.${t.name} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)`);
  }
  return schema;
}

export async function dropScratch(pool: Pool, schema: string): Promise<void> {
  await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
}

/**
 * Replays the log into the scratch tables (same apply() as the live runner, search_path pointing at the
 * scratch schema), from `from` up to `until` (inclusive) or to the head. Returns the last position applied.
 */
export async function replayInto(
  pool: Pool | PoolClient,
  store: EventStore,
  schema: string,
  projections: Projection[],
  from: Position,
  until: Position | undefined,
  progress?: Progress,
): Promise<Position> {
  let position = from;
  let replayed = 0;
  if (until !== undefined && comparePositions(from, until) >= 0) return from;
  for (;;) {
    const page = await store.readAll({ from: position, maxCount: BATCH });
    const cut = until === undefined ? page : page.slice(0, page.findIndex((e) => e.position === until) + 1 || page.length);
    if (cut.length === 0) return position;
    const client = 'release' in pool ? pool : await (pool as Pool).connect();
    const own = client !== pool;
    try {
      if (own) await client.query('BEGIN');
      await client.query(`SET LOCAL search_path TO ${schema}, public`);
      for (const p of projections) {
        const relevant = cut.filter((e) => handles(p, e.type));
        if (relevant.length > 0) await p.apply(relevant, client);
      }
      if (own) await client.query('COMMIT');
      else await client.query('SET LOCAL search_path TO public');
    } catch (err) {
      if (own) await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      if (own) (client as PoolClient).release();
    }
    position = cut[cut.length - 1]!.position;
    replayed += cut.length;
    progress?.(replayed);
    if (until !== undefined && position === until) return position;
    if (page.length < BATCH) return position;
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
  try {
    let built: Position = START;
    for (let round = 0; round < 50; round++) {
      const target = await checkpointOf(pool, projection.name);
      built = await replayInto(pool, store, schema, [projection], built, target, progress);
      const client = await pool.connect();
      try {
        await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
        const { rows } = await client.query<{ position: string }>('SELECT position FROM projection_checkpoints WHERE name = $1 FOR SHARE', [projection.name]);
        const live = rows[0]?.position ?? START;
        if (live === built) {
          const differences = await compareTables(client, schema, projection);
          await client.query('COMMIT');
          return { projection: projection.name, position: live, differences };
        }
        await client.query('ROLLBACK');
      } finally {
        client.release();
      }
    }
    throw new Error(`projection ${projection.name} kept moving; verify could not catch up`);
  } finally {
    await dropScratch(pool, schema);
  }
}

/**
 * Replaces a projection's live rows with a fresh rebuild, while the service runs: rebuild in scratch
 * tables, then in one transaction lock the live tables (the runner's batch in flight finishes first),
 * hold the checkpoint, catch the scratch up to the head, swap the rows in and move the checkpoint to
 * where the scratch stands. The live runner's next batch then starts from there (its compare-and-set
 * fails against the moved checkpoint, so nothing is applied twice).
 */
export async function rebuildProjection(pool: Pool, store: EventStore, projection: Projection, progress?: Progress): Promise<Position> {
  const schema = await createScratch(pool, [projection]);
  try {
    const first = await replayInto(pool, store, schema, [projection], START, undefined, progress);
    const position = await withTransaction(pool, async (client) => {
      // Tables first, then the checkpoint: the order the runner takes them in, so the two cannot deadlock.
      await client.query(`LOCK TABLE ${projection.tables.map((t) => `public.${t.name}`).join(', ')} IN ACCESS EXCLUSIVE MODE`);
      await client.query(
        `INSERT INTO projection_checkpoints (name, position) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`,
        [projection.name, START],
      );
      await client.query('SELECT position FROM projection_checkpoints WHERE name = $1 FOR UPDATE', [projection.name]);
      const built = await replayInto(client, store, schema, [projection], first, undefined, progress);
      for (const t of projection.tables) {
        await client.query(`DELETE FROM public.${t.name}`);
        await client.query(`INSERT INTO public.${t.name} SELECT * FROM ${schema}.${t.name}`);
      }
      await client.query(`UPDATE projection_checkpoints SET position = $2, updated_at = now() WHERE name = $1`, [projection.name, built]);
      return built;
    });
    // Every row was just replaced: the planner's statistics describe the tables before. Until autovacuum
    // gets to them, a query planned on those (a page of a million-row table estimated at nine rows) can
    // take a plan a hundred times slower.
    for (const t of projection.tables) await pool.query(`ANALYZE public.${t.name}`);
    return position;
  } finally {
    await dropScratch(pool, schema);
  }
}

async function checkpointOf(pool: Pool, name: string): Promise<Position> {
  const { rows } = await pool.query<{ position: string }>('SELECT position FROM projection_checkpoints WHERE name = $1', [name]);
  return rows[0]?.position ?? START;
}
