import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool, type Pool } from '../../shared/db/pool.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';

describe('database pool', () => {
  let db: TestDatabase;
  let pool: Pool;
  beforeAll(async () => {
    db = await createTestDatabase('pool');
    pool = createPool(db.url);
  });
  afterAll(async () => {
    await pool.end();
    await db.drop();
  });

  it('survives the connection of a checked-out client being killed between two queries', async () => {
    // Found by the fault run: an unheard 'error' event from such a client crashed the projector.
    const client = await pool.connect();
    await client.query('BEGIN');
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    await admin.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
    await admin.end();
    await new Promise((r) => setTimeout(r, 300)); // the 'error' event arrives while the client is idle
    await expect(client.query('SELECT 1')).rejects.toThrow();
    client.release(true);
    expect((await pool.query<{ one: number }>('SELECT 1 AS one')).rows[0]!.one).toBe(1);
  });

  it('runs its connections with JIT off, keeping any options the URL names', async () => {
    // With JIT on, Postgres spent 444 ms compiling a 2 ms projection statement once its table had grown.
    const setting = async (p: Pool) => (await p.query<{ jit: string; timeout: string }>("SELECT current_setting('jit') AS jit, current_setting('statement_timeout') AS timeout")).rows[0]!;
    expect(await setting(pool)).toEqual({ jit: 'off', timeout: '0' });
    const url = new URL(db.url);
    url.searchParams.set('options', '-c statement_timeout=4321');
    const withOwn = createPool(url.toString(), 1);
    try {
      expect(await setting(withOwn)).toEqual({ jit: 'off', timeout: '4321ms' });
    } finally {
      await withOwn.end();
    }
  });
});
