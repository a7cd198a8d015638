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

/**
 * TEST_PG_TEMPLATE: a database the test run's global setup made with every migration of the service
 * applied (migratedTemplate), which `createTestDatabase(label, { migrated: true })` copies. Copied, a
 * database is ready in the time an empty one is made; migrated, each took a quarter of a second more,
 * most of it Postgres writing the new tables' indexes to disk, some 200 times a run.
 */
const TEMPLATE_ENV = 'TEST_PG_TEMPLATE';

/**
 * A fresh database for one test file; drop() removes it even if connections are left open. Empty, or with
 * `migrated`, with every migration of the service applied, as a service's first start leaves it: a copy of
 * the run's template when there is one (vitest's global setup), else migrated here (a bench, the fault
 * simulator's own runs).
 */
export async function createTestDatabase(label = 'test', o: { migrated?: boolean } = {}): Promise<TestDatabase> {
  const name = `t_${label.replace(/[^a-z0-9]/gi, '').toLowerCase().slice(0, 20)}_${randomBytes(5).toString('hex')}`;
  const template = o.migrated ? process.env[TEMPLATE_ENV] : undefined;
  if (template !== undefined && !TEMPLATE_NAME.test(template)) throw new Error(`${TEMPLATE_ENV} is not a template this suite made: ${template}`);
  return await makeDatabase(name, o.migrated ? (template !== undefined ? { template } : { migrate: true }) : {});
}

const TEMPLATE_NAME = /^t_tmpl_\d+_[0-9a-f]+$/;

/** Database `name`: a copy of `template`, else empty, and then with `migrate` every migration applied here. */
async function makeDatabase(name: string, from: { template?: string; migrate?: boolean }): Promise<TestDatabase> {
  const admin = new pg.Client({ connectionString: TEST_PG_ADMIN_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}${from.template !== undefined ? ` TEMPLATE ${from.template}` : ''}`);
  } finally {
    await admin.end();
  }
  const db: TestDatabase = {
    name,
    url: databaseUrl(name),
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
  if (from.migrate) {
    const { allMigrations } = await import('../../services/migrations.ts');
    const pool = createPool(db.url);
    try {
      await migrate(pool, allMigrations);
    } catch (err) {
      await pool.end();
      await db.drop();
      throw err;
    }
    await pool.end();
  }
  return db;
}

/** The URL of database `name` on the test server. */
const databaseUrl = (name: string): string => {
  const url = new URL(TEST_PG_ADMIN_URL);
  url.pathname = `/${name}`;
  return url.toString();
};

/**
 * For the test run's global setup: a template database with every migration of the service applied,
 * named into TEST_PG_TEMPLATE for the run's test files (its workers start after the setup, with its
 * environment), and what drops it at the end. Templates of runs that were killed before their end (named
 * with their time) are dropped once they are a day old.
 */
export async function migratedTemplate(): Promise<() => Promise<void>> {
  const admin = new pg.Client({ connectionString: TEST_PG_ADMIN_URL });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE datname LIKE 't\\_tmpl\\_%'`);
    for (const { datname } of rows.filter((r) => TEMPLATE_NAME.test(r.datname))) {
      if (Number(datname.split('_')[2]) < Date.now() / 1000 - 86_400) await admin.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`).catch(() => undefined);
    }
  } finally {
    await admin.end();
  }
  const db = await makeDatabase(`t_tmpl_${Math.floor(Date.now() / 1000)}_${randomBytes(5).toString('hex')}`, { migrate: true });
  process.env[TEMPLATE_ENV] = db.name;
  return async () => {
    if (process.env[TEMPLATE_ENV] === db.name) delete process.env[TEMPLATE_ENV];
    await db.drop();
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
  // Every migration: a copy of the run's template (the migrate below then finds nothing to do).
  const every = migrations === (await import('../../services/migrations.ts')).allMigrations;
  const db = await createTestDatabase(label, { migrated: every });
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
