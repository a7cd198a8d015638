import pg from 'pg';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

export function createPool(connectionString: string, max = 10): pg.Pool {
  const pool = new pg.Pool({ connectionString, max, connectionTimeoutMillis: 5000, idleTimeoutMillis: 30000 });
  // A client losing its connection must not crash the process. Idle ones report it on the pool; a
  // checked-out one between two queries (mid-transaction, holding a session lock) emits 'error' on
  // itself, and an unheard 'error' event would be an uncaught exception. Its next query fails instead.
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

/** Runs fn in a transaction on one client; rolls back on any throw. */
export async function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  if (!(err instanceof Error) || (err as { code?: string }).code !== '23505') return false;
  return constraint === undefined || (err as { constraint?: string }).constraint === constraint;
}

/**
 * Creates the database named in the URL when it does not exist yet (first start on a fresh server),
 * connecting to the server's `postgres` database to do so.
 */
export async function ensureDatabase(connectionString: string): Promise<void> {
  const probe = new pg.Client({ connectionString });
  try {
    await probe.connect();
    return;
  } catch (err) {
    if ((err as { code?: string }).code !== '3D000') throw err;
  } finally {
    await probe.end().catch(() => undefined);
  }
  const url = new URL(connectionString);
  const name = decodeURIComponent(url.pathname.slice(1));
  url.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: url.toString() });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  } catch (err) {
    if ((err as { code?: string }).code !== '42P04') throw err; // created meanwhile by another process
  } finally {
    await admin.end();
  }
}
