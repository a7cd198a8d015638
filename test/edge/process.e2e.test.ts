import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testCatalog } from '../helpers/catalog.ts';
import { createTestEnv, spawnService, writeCatalogFile, type TestEnv } from '../helpers/service.ts';

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

  it('refuses a bad environment variable at start, naming it', async () => {
    const svc = await spawnService({ ...env.env(), SESSION_TTL_SECONDS: 'forever' }, { waitReady: false });
    expect(await svc.exited).not.toBe(0);
    expect(svc.output()).toContain('SESSION_TTL_SECONDS');
  });
});
