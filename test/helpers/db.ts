import { randomBytes } from 'node:crypto';
import pg from 'pg';

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
