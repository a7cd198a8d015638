import net from 'node:net';
import type { NextFunction, Request, Response } from 'express';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createRequestRedis } from '../../services/service.ts';
import type { CatalogSnapshot } from '../../shared/catalog/store.ts';
import { operatorRateLimit } from '../../shared/http/ratelimit.ts';

/**
 * ADR 7 (docs/architecture.md): while Redis is unreachable, a request is refused (503), never let through
 * and never held. The request paths' client (createRequestRedis) must refuse a command at once rather
 * than queue it until Redis returns: a queued nonce write would hold every provider's transaction.
 */
describe("the request paths' Redis while Redis is unreachable", () => {
  const closedPort = () =>
    new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as net.AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
  // A bound well past the client's command timeout (2 s), so a command held for Redis shows as waiting.
  const settled = <T>(p: Promise<T>) =>
    Promise.race([
      p.then(
        () => 'resolved',
        (err: { status?: number; message?: string }) => (err.status === undefined ? `failed: ${err.message}` : `failed ${err.status}`),
      ),
      new Promise<string>((r) => setTimeout(() => r('still waiting after 3 s'), 3000)),
    ]);

  it('refuses a nonce write without queueing it, and answers an operator rate-limit check 503', async () => {
    const redis = createRequestRedis(`redis://127.0.0.1:${await closedPort()}`, pino({ level: 'silent' }));
    try {
      // Several at once, as concurrent requests send them.
      const nonces = await Promise.all([1, 2, 3].map((i) => settled(redis.set(`nonce:test:${i}`, '1', 'PX', 1000, 'NX'))));
      // Refused for the connection, not after waiting in an offline queue (whose refusal says otherwise).
      for (const n of nonces) expect(n).toMatch(/^failed: .*enableOfflineQueue options is false/);

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
