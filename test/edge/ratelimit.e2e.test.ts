import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OP1, OP2, testCatalog } from '../helpers/catalog.ts';
import { createTestEnv, spawnService, writeCatalogFile, type SpawnedService, type TestEnv } from '../helpers/service.ts';
import { signedRequest } from '../helpers/signing.ts';

describe('per-operator rate limit shared by two API processes (contract section 4)', () => {
  let env: TestEnv;
  let one: SpawnedService;
  let two: SpawnedService;

  beforeAll(async () => {
    env = await createTestEnv('ratelimit');
    const file = await writeCatalogFile(testCatalog({ rateLimit: { limit: 6, windowSeconds: 30 } }));
    one = await spawnService({ ...env.env(), CATALOG_FILE: file, ROLES: 'api' });
    two = await spawnService({ ...env.env(), ROLES: 'api' });
  });
  afterAll(async () => {
    await Promise.all([one?.stop(), two?.stop()]);
    await env?.cleanup();
  });

  it('counts requests to both processes against one limit, answers 429 with Retry-After, and keeps operators apart', async () => {
    // Forged requests are refused before the limiter and do not count.
    for (let i = 0; i < 5; i++) {
      const forged = await signedRequest(one.url, { path: '/v1/operator/probe', as: { ...OP1, secret: 'wrong' } });
      expect(forged.status).toBe(401);
    }
    const statuses: number[] = [];
    let limited;
    for (let i = 0; i < 10; i++) {
      const res = await signedRequest<{ error: string }>(i % 2 === 0 ? one.url : two.url, { path: '/v1/operator/probe', as: OP1 });
      statuses.push(res.status);
      if (res.status === 429) limited = res;
    }
    expect(statuses).toEqual([404, 404, 404, 404, 404, 404, 429, 429, 429, 429]);
    expect(limited!.json).toEqual({ error: 'rate limit exceeded' });
    const retryAfter = Number(limited!.headers.get('retry-after'));
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(30);

    // Another operator has its own budget.
    expect((await signedRequest(two.url, { path: '/v1/operator/probe', as: OP2 })).status).toBe(404);
  });

  it('holds under twice the limit sent at once, split across both processes', async () => {
    // OP2 has spent 1 of its 6 in this window; 12 more at once: exactly 5 pass, 7 are refused.
    const statuses = await Promise.all(
      Array.from({ length: 12 }, (_, i) => signedRequest(i % 2 === 0 ? one.url : two.url, { path: '/v1/operator/probe', as: OP2 }).then((r) => r.status)),
    );
    expect(statuses.filter((s) => s === 404)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(7);
  });
});
