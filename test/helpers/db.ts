import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { migrate, type Migration } from '../../shared/db/migrations.ts';
import { createPool, type Pool } from '../../shared/db/pool.ts';

/** Admin connection used to create and drop per-test databases. */
export const TEST_PG_ADMIN_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface TestDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

/** A fresh, empty database for one test file; drop() removes it even if connections are left open. */
export async function createTestDatabase(label = 'test'): Promise<TestDatabase> {
  const name = `t_${label.replace(/[^a-z0-9]/gi, '').toLowerCase().slice(0, 20)}_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: TEST_PG_ADMIN_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(TEST_PG_ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: TEST_PG_ADMIN_URL });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

export interface MigratedDatabase {
  db: TestDatabase;
  pool: Pool;
  /** Ends the pool and drops the database. */
  close(): Promise<void>;
}

/** A fresh database with these migrations applied, and a pool on it. */
export async function migratedDatabase(label: string, migrations: Migration[]): Promise<MigratedDatabase> {
  const db = await createTestDatabase(label);
  const pool = createPool(db.url);
  await migrate(pool, migrations);
  return {
    db,
    pool,
    async close() {
      await pool.end();
      await db.drop();
    },
  };
}

/**
 * What can hold back the global log and the read models built from it: the server's oldest running
 * transaction (xmin), every transaction holding an id (in any database), and each projection's checkpoint
 * against the newest readable event. Printed when a test waits in vain for a read model.
 */
export async function describeHoldBack(url: string): Promise<string> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const { rows } = await c.query<{ xmin: string; writers: unknown }>(
      `SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin,
              (SELECT json_agg(json_build_object('db', datname, 'xid', backend_xid::text, 'state', state, 'since', xact_start, 'query', left(query, 100)))
               FROM pg_stat_activity WHERE backend_xid IS NOT NULL) AS writers`,
    );
    const checkpoints = await c
      .query<{ name: string; position: string }>('SELECT name, position FROM projection_checkpoints ORDER BY name')
      .then((r) => r.rows.map((x) => `${x.name}@${x.position}`).join(' '), () => 'none');
    const head = await c
      .query<{ head: string | null }>(
        `SELECT (SELECT transaction_id::text || '.' || global_position FROM es_events WHERE transaction_id < pg_snapshot_xmin(pg_current_snapshot())
                 ORDER BY transaction_id DESC, global_position DESC LIMIT 1) AS head`,
      )
      .then((r) => r.rows[0]?.head ?? 'empty', () => 'no event store');
    return `server xmin ${rows[0]!.xmin}; transactions holding xids: ${JSON.stringify(rows[0]!.writers)}; readable head ${head}; checkpoints ${checkpoints}`;
  } finally {
    await c.end();
  }
}
