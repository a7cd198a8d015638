import net from 'node:net';
import type { NextFunction, Request, Response } from 'express';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createRequestRedis } from '../../services/service.ts';
import { operatorRateLimit } from '../../shared/http/ratelimit.ts';
import type { CatalogSnapshot } from '../../shared/catalog/store.ts';

/**
 * The request paths' Redis client (createRequestRedis) pipelines the commands of one tick into one write
 * (ioredis auto-pipelining). While Redis is unreachable, a command must still fail at once, so the
 * request gets its 503 instead of waiting: a custom command sent through an auto-pipeline before the
 * connection was ever ready never settled in some ioredis versions (the rate limit's sliding log is one).
 */
describe('the request paths\' Redis while Redis is unreachable', () => {
  const closedPort = () =>
    new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as net.AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
  // Bounded beyond the client's command timeout (2 s): a command that waits for Redis to come back fails it.
  const settled = <T>(p: Promise<T>) =>
    Promise.race([
      p.then(
        () => 'resolved',
        (err: { status?: number }) => (err.status === undefined ? 'failed' : `failed ${err.status}`),
      ),
      new Promise<string>((r) => setTimeout(() => r('still waiting after 3 s'), 3000)),
    ]);

  it('fails a nonce write, and an operator rate-limit check with 503, instead of waiting for Redis', async () => {
    const redis = createRequestRedis(`redis://127.0.0.1:${await closedPort()}`, pino({ level: 'silent' }));
    try {
      // Several in one tick, as concurrent requests send them.
      const nonces = await Promise.all([1, 2, 3].map((i) => settled(redis.set(`nonce:test:${i}`, '1', 'PX', 1000, 'NX'))));
      expect(nonces).toEqual(['failed', 'failed', 'failed']);

      const operatorId = 'op-1';
      const catalog = { operators: new Map([[operatorId, { id: operatorId, rateLimit: { limit: 10, windowSeconds: 1 } }]]) } as unknown as CatalogSnapshot;
      const limit = operatorRateLimit(redis, () => catalog);
      const checks = [1, 2].map(() => {
        const req = { caller: { kind: 'operator', id: operatorId } } as unknown as Request;
        return settled(Promise.resolve().then(() => limit(req, {} as Response, (() => undefined) as NextFunction)));
      });
      expect(await Promise.all(checks)).toEqual(['failed 503', 'failed 503']);
    } finally {
      redis.disconnect();
    }
  }, 15_000);
});
