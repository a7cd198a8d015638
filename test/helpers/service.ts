import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../../shared/config.ts';
import { createLogger } from '../../shared/logger.ts';
import { startService, type RunningService } from '../../services/service.ts';
import { createTestDatabase, type TestDatabase } from './db.ts';
import { claimTestRedis, type TestRedis } from './redis.ts';
import { childEnv, entryArgs } from './bundle.ts';
import type { EsdbTestServer } from '../eventstore/esdb-server.ts';

export const ADMIN_TOKEN = 'test-admin-token';
const ROOT = path.resolve(import.meta.dirname, '../..');

/** A database and a Redis database of one test file's own; every service of the file shares them. */
export interface TestEnv {
  db: TestDatabase;
  redis: TestRedis;
  /** The file's EventStoreDB test server (TEST_EVENT_STORE=esdb without ESDB_CONNECTION_STRING), for tests that steer it. */
  esdb?: EsdbTestServer;
  env(extra?: Record<string, string>): Record<string, string>;
  cleanup(): Promise<void>;
}

/**
 * TEST_EVENT_STORE=esdb (the esdb test project, see vitest.config.ts): the services of the file keep
 * their events in an EventStoreDB of its own, the protocol-level test server (or, when
 * ESDB_CONNECTION_STRING is set, that real server: its log is shared, which the suites that run there
 * tolerate because every stream they write is new).
 */
/** Whether this run's services keep their events in EventStoreDB (the esdb test project, vitest.config.ts). */
export const onEsdb = process.env.TEST_EVENT_STORE === 'esdb';

/** EVENTSTORE_MAX_APPEND_SIZE of compose.yaml (test/docs/compose.unit.test.ts checks they agree). */
export const ESDB_MAX_APPEND_SIZE = 4 * 1024 * 1024;

async function testEventStore(): Promise<{ setting: string; server?: EsdbTestServer; close(): Promise<void> } | undefined> {
  if (!onEsdb) return undefined;
  if (process.env.ESDB_CONNECTION_STRING) return { setting: process.env.ESDB_CONNECTION_STRING, close: async () => undefined };
  const { startEsdbTestServer } = await import('../eventstore/esdb-server.ts');
  // As compose.yaml configures EventStoreDB: writes up to 4 MiB (a TransactionSettled carries a wallet reply of up to 1 MiB).
  const server = await startEsdbTestServer({ maxAppendSize: ESDB_MAX_APPEND_SIZE });
  return { setting: server.connectionString, server, close: () => server.close() };
}

/**
 * The query pool of every service a test starts. Two test files run at once, and one fault simulator
 * run alone keeps four processes up (up to 79 connections at the default 20): within Postgres's default 100
 * connections only if each process takes few. A test that needs more says so in its extra settings.
 */
export const TEST_POOL_SIZE = '6';

/**
 * A database, a Redis database and (TEST_EVENT_STORE=esdb) an event store of the file's own. The database
 * comes with the service's migrations applied, as its first start leaves it (test/helpers/db.ts: a copy of
 * the run's template); `empty` for a test that migrates it itself (an upgrade from an older release).
 */
export async function createTestEnv(label: string, o: { empty?: boolean } = {}): Promise<TestEnv> {
  const [db, redis, store] = await Promise.all([createTestDatabase(label, { migrated: !o.empty }), claimTestRedis(), testEventStore()]);
  return {
    db,
    redis,
    ...(store?.server ? { esdb: store.server } : {}),
    env: (extra = {}) => ({
      DATABASE_URL: db.url,
      REDIS_URL: redis.url,
      ADMIN_TOKEN,
      PORT: '0',
      DATABASE_POOL_SIZE: TEST_POOL_SIZE,
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
      ...(store ? { EVENT_STORE: store.setting } : {}),
      ...extra,
    }),
    async cleanup() {
      await db.drop().catch(() => undefined);
      await redis.release().catch(() => undefined);
      await store?.close().catch(() => undefined);
    },
  };
}

/** Runs the service in this process (fast), with the same start-up path as `npm start`. */
export async function startInProcess(testEnv: TestEnv, extra: Record<string, string> = {}): Promise<RunningService & { url: string }> {
  const config = loadConfig(testEnv.env(extra));
  const service = await startService(config, createLogger(config.logLevel));
  if (!service.url && config.roles.includes('api')) throw new Error('api did not start');
  return service as RunningService & { url: string };
}

export async function writeCatalogFile(catalog: unknown): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'catalog-'));
  const file = path.join(dir, 'catalog.json');
  await writeFile(file, typeof catalog === 'string' ? catalog : JSON.stringify(catalog));
  return file;
}

export interface SpawnedService {
  url: string;
  child: ChildProcess;
  output(): string;
  /** Sends the signal and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  exited: Promise<number | null>;
}

/** Runs the service as its own OS process, as `npm start` does (its bundle, test/helpers/bundle.ts), and waits until it listens. */
export async function spawnService(env: Record<string, string>, opts: { waitReady?: boolean } = {}): Promise<SpawnedService> {
  const child = spawn(process.execPath, entryArgs('main'), {
    cwd: ROOT,
    // info level: the start-up line carries the URL the test connects to.
    env: childEnv({ HOME: process.env.HOME ?? '/tmp', ...env, LOG_LEVEL: 'info' }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const spawned: SpawnedService = {
    url: '',
    child,
    output: () => out,
    exited,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
  if (opts.waitReady === false) return spawned;
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const started = /^.*"msg":"service started".*$/m.exec(out);
    if (started) return { ...spawned, url: /"url":"(http:\/\/[^"]+)"/.exec(started[0])?.[1] ?? '' };
    if (child.exitCode !== null) throw new Error(`service exited with ${child.exitCode}:\n${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill('SIGKILL');
  throw new Error(`service did not start within 30 s:\n${out}`);
}
