import { spawnSync } from 'node:child_process';
import net, { type AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testCatalog } from '../helpers/catalog.ts';
import { TEST_PG_ADMIN_URL } from '../helpers/db.ts';
import { loadConfig } from '../../shared/config.ts';
import { createLogger } from '../../shared/logger.ts';
import { startService } from '../../services/service.ts';
import { createTestEnv, spawnService, startInProcess, writeCatalogFile, type TestEnv } from '../helpers/service.ts';
import { childEnv, entryArgs } from '../helpers/bundle.ts';

describe('the service process', () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await createTestEnv('proc');
  });
  afterAll(async () => env?.cleanup());

  it('comes up with only DATABASE_URL and REDIS_URL, answers /readyz 200, and exits 0 on SIGTERM', async () => {
    const svc = await spawnService({ DATABASE_URL: env.db.url, REDIS_URL: env.redis.url, PORT: '0' });
    const ready = await fetch(`${svc.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready' });
    expect((await fetch(`${svc.url}/healthz`)).status).toBe(200);
    // The heap's growth over its live data is bounded by default in a process with the api role, as this
    // one (every role) is (docs/operations.md, Memory).
    expect(svc.output()).toMatch(/"heapGrowingPercent":20,.*"msg":"heap growth over live data bounded"/);
    expect(await svc.stop('SIGTERM')).toBe(0);
    expect(svc.output()).toContain('"msg":"stopped"');
  });

  it('leaves the heap of a process without the api to V8, unless HEAP_GROWING_PERCENT is given', async () => {
    const background = await spawnService({ ...env.env(), ROLES: 'worker,projector' });
    expect(background.output()).toMatch(/"heapGrowingPercent":0,.*"msg":"heap growth left to V8"/);
    expect(background.output()).not.toContain('heap growth over live data bounded');
    expect(await background.stop()).toBe(0);
    const bounded = await spawnService({ ...env.env(), ROLES: 'worker,projector', HEAP_GROWING_PERCENT: '35' });
    expect(bounded.output()).toMatch(/"heapGrowingPercent":35,.*"msg":"heap growth over live data bounded"/);
    expect(await bounded.stop()).toBe(0);
  });

  it('applies CATALOG_FILE at start', async () => {
    const file = await writeCatalogFile(testCatalog());
    const svc = await spawnService({ ...env.env(), CATALOG_FILE: file, ROLES: 'api' });
    expect(svc.output()).toContain('catalog applied');
    expect(await svc.stop()).toBe(0);
  });

  it('stops cleanly, exit 0, on a SIGTERM that arrives while it is still starting', async () => {
    // A supervisor may stop a process the moment it starts (a rollout cancelled, a test that is done):
    // the signal must not kill it with half its resources open, whatever step of the start it hits.
    const file = await writeCatalogFile(testCatalog());
    const svc = await spawnService({ ...env.env(), CATALOG_FILE: file, ROLES: 'api' }, { waitReady: false });
    await expect.poll(() => svc.output(), { timeout: 30_000, interval: 5 }).toContain('catalog applied');
    expect(await svc.stop('SIGTERM')).toBe(0);
    expect(svc.output()).toContain('"msg":"stopped"');
  });

  it('refuses a CATALOG_FILE that does not match, naming the field, and exits non-zero', async () => {
    const bad = testCatalog();
    bad.providers[0]!.games[0]!.replayBaseUrl = 'ftp://x';
    const file = await writeCatalogFile(bad);
    const svc = await spawnService({ ...env.env(), CATALOG_FILE: file, ROLES: 'api' }, { waitReady: false });
    const code = await svc.exited;
    expect(code).not.toBe(0);
    expect(svc.output()).toContain('providers[0].games[0].replayBaseUrl');
  });

  it('whose start fails while its closing hangs (a Redis that answers nothing) gives up on the closing after 10 s and exits non-zero, naming the cause', async () => {
    // A Redis that accepts connections and never answers: the dispatch worker's close waits on it for ever.
    const silent = net.createServer((socket) => socket.on('data', () => undefined));
    const taken = net.createServer();
    await Promise.all([silent, taken].map((s) => new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))));
    const portOf = (s: net.Server) => String((s.address() as AddressInfo).port);
    let svc: Awaited<ReturnType<typeof spawnService>> | undefined;
    try {
      const file = await writeCatalogFile(testCatalog());
      svc = await spawnService(
        { ...env.env(), REDIS_URL: `redis://127.0.0.1:${portOf(silent)}/0`, ROLES: 'worker', CATALOG_FILE: file, HOST: '127.0.0.1', PORT: portOf(taken) },
        { waitReady: false },
      );
      // Without the bound it waits for a signal (the shutdown's own 30 s guard starts only with one).
      let timer: NodeJS.Timeout | undefined;
      const code = await Promise.race([svc.exited, new Promise<'still running'>((resolve) => (timer = setTimeout(() => resolve('still running'), 25_000)))]);
      clearTimeout(timer);
      expect(code, svc.output()).toBe(1);
      expect(svc.output()).toContain("closing what a failed start had opened took longer than 10 s: left to the process's exit");
      expect(svc.output()).toContain(`HOST 127.0.0.1 PORT ${portOf(taken)}`);
    } finally {
      await svc?.stop('SIGKILL');
      for (const s of [silent, taken]) s.close();
    }
  }, 40_000);

  // A Node.js older than 22 on this machine (Debian's, beside the one npm ci installs), if there is one.
  const oldNode = ['/usr/bin/node', '/usr/local/bin/node'].find((p) => {
    const r = spawnSync(p, ['-p', 'process.versions.node'], { encoding: 'utf8' });
    return r.status === 0 && Number(r.stdout.split('.')[0]) < 22;
  });
  it.skipIf(oldNode === undefined)('refuses to start on a Node.js whose JSON.parse does not give a number its source text (exit 1), where metadata numbers would reach the wallet changed', async () => {
    const child = spawnSync(oldNode!, entryArgs('main'), { env: childEnv(env.env()), encoding: 'utf8', timeout: 20_000 });
    expect(child.status).toBe(1);
    expect(child.stderr).toContain('does not give JSON.parse\'s reviver a number\'s source text');
  });

  it('refuses a bad environment variable at start, naming it', async () => {
    const svc = await spawnService({ ...env.env(), SESSION_TTL_SECONDS: 'forever' }, { waitReady: false });
    expect(await svc.exited).not.toBe(0);
    expect(svc.output()).toContain('SESSION_TTL_SECONDS');
  });
});

/**
 * The service started in a process that goes on (the sandbox, a test, an embedding host): a start that
 * fails partway must close what it had opened, and a stop whose one part fails must still close the
 * rest, or their connections live on, and a catalog listener retries for ever once the database is gone.
 */
describe('a start or a stop that fails, in a process that goes on', () => {
  let env: TestEnv;
  let admin: pg.Client;
  let redis: Redis;
  beforeAll(async () => {
    env = await createTestEnv('startfail');
    admin = new pg.Client({ connectionString: TEST_PG_ADMIN_URL });
    await admin.connect();
    redis = new Redis(env.redis.url);
  });
  afterAll(async () => {
    redis?.disconnect();
    await admin?.end();
    await env?.cleanup();
  });

  /** Connections to the file's database and Redis database, its own Redis one left out. */
  const open = async () => {
    const { rows } = await admin.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1', [env.db.name]);
    const self = `id=${String(await redis.call('CLIENT', 'ID'))} `;
    const clients = String(await redis.call('CLIENT', 'LIST')).split('\n').filter((l) => l.includes(` db=${env.redis.db} `) && !l.startsWith(self));
    return { postgres: rows[0]!.n, redis: clients.length };
  };

  it('with every role, on a port another process holds: closes every connection it opened', async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = String((taken.address() as AddressInfo).port);
      await expect(startInProcess(env, { HOST: '127.0.0.1', PORT: port })).rejects.toThrow(`HOST 127.0.0.1 PORT ${port}`);
      await expect.poll(open).toEqual({ postgres: 0, redis: 0 });
    } finally {
      taken.close();
    }
  });

  it('a stop where one part fails to close still closes the others, then fails with that part\'s error', async () => {
    const svc = await startInProcess(env, { ROLES: 'api,worker,projector,reconciler' });
    expect((await open()).postgres).toBeGreaterThan(0);
    // A read model's runner whose stop fails, as one whose last batch's connection broke would.
    svc.runners[0]!.stop = () => Promise.reject(new Error('the runner could not stop'));
    await expect(svc.stop()).rejects.toThrow('the runner could not stop');
    await expect.poll(open).toEqual({ postgres: 0, redis: 0 });
  });

  it('whose dispatch worker cannot be made (a setting its queue library refuses): the same, the worker role\'s Redis connection too', async () => {
    // The environment refuses such a setting; a host that builds the configuration itself may not.
    const config = { ...loadConfig(env.env({ ROLES: 'worker', CATALOG_FILE: await writeCatalogFile(testCatalog()) })), dispatchConcurrencyPerOperator: 0 };
    await expect(startService(config, createLogger('silent'))).rejects.toThrow('concurrency');
    await expect.poll(open).toEqual({ postgres: 0, redis: 0 });
  });

  it('with a catalog file that does not match: the same', async () => {
    const bad = testCatalog();
    bad.providers[0]!.games[0]!.replayBaseUrl = 'ftp://x';
    await expect(startInProcess(env, { CATALOG_FILE: await writeCatalogFile(bad) })).rejects.toThrow('providers[0].games[0].replayBaseUrl');
    await expect.poll(open).toEqual({ postgres: 0, redis: 0 });
  });
});
