import pg from 'pg';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

/**
 * Session settings of every pooled connection. JIT off: this service runs only short statements, and
 * Postgres compiles a statement whose estimated cost passes jit_above_cost (a set-wise statement over a
 * growing table soon does) at hundreds of milliseconds of CPU, to save a few. Measured in npm run bench:
 * the rounds projection's recompute took 450 ms per batch, of which 444 ms compiling and 2 ms running.
 */
const SESSION_OPTIONS = '-c jit=off';

/**
 * The connection string with SESSION_OPTIONS added to its startup `options` (after any it names: pg
 * takes a URL's options over its config's, so they are merged into the URL).
 */
export function withSessionOptions(connectionString: string): string {
  let url: URL;
  try {
    url = new URL(connectionString);
  } catch {
    return connectionString; // key=value form: the pool config's options apply
  }
  const own = url.searchParams.get('options');
  url.searchParams.set('options', own ? `${own} ${SESSION_OPTIONS}` : SESSION_OPTIONS);
  return url.toString();
}

/** How long opening a connection may take, the server's answer to it included (a server that takes the connection and never answers fails it). */
export const CONNECT_TIMEOUT_MS = 5000;

/**
 * `applicationName`: what pg_stat_activity shows for the pool's connections (a connection string's own
 * wins). `keepAlive`: TCP keepalive on the connections, for a pool whose connections sit idle while held.
 */
export function createPool(connectionString: string, max = 10, options: { applicationName?: string; keepAlive?: boolean } = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString: withSessionOptions(connectionString),
    options: SESSION_OPTIONS,
    max,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    idleTimeoutMillis: 30000,
    ...(options.applicationName !== undefined ? { application_name: options.applicationName } : {}),
    ...(options.keepAlive ? { keepAlive: true } : {}),
  });
  // A client losing its connection must not crash the process. Idle ones report it on the pool; a
  // checked-out one between two queries (mid-transaction, holding a session lock) emits 'error' on
  // itself, and an unheard 'error' event would be an uncaught exception. Its next query fails instead.
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

/**
 * Runs fn in a transaction on one client; rolls back on any throw, so the client goes back to the pool
 * with no transaction open. `isolation`: the transaction's level, when not Postgres's default.
 */
export async function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>, options: { isolation?: 'REPEATABLE READ' | 'SERIALIZABLE' } = {}): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query(options.isolation ? `BEGIN ISOLATION LEVEL ${options.isolation}` : 'BEGIN');
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

/** Postgres's serialization failure (40001), told by its code (the server words its messages in its own language): the transaction is worth running again. */
export function isSerializationFailure(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === '40001';
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
  // Bounded like the pool's connections: a server that takes the connection and never answers fails
  // this try (the start retries it) instead of holding the start for ever.
  const probe = new pg.Client({ connectionString, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
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
  const admin = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  } catch (err) {
    if ((err as { code?: string }).code !== '42P04') throw err; // created meanwhile by another process
  } finally {
    await admin.end();
  }
}
