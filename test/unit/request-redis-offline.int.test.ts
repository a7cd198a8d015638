import net from 'node:net';
import type { NextFunction, Request, Response } from 'express';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRequestRedis } from '../../services/service.ts';
import type { CatalogSnapshot } from '../../shared/catalog/store.ts';
import { operatorRateLimit } from '../../shared/http/ratelimit.ts';
import { nonceKey, signatureVerifier } from '../../shared/http/verify.ts';
import { claimTestRedis, type TestRedis } from '../helpers/redis.ts';
import { signRequest } from '../helpers/signing.ts';
import { within } from '../helpers/eventually.ts';

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
    within(
      p.then(
        () => 'resolved',
        (err: { status?: number; message?: string }) => (err.status === undefined ? `failed: ${err.message}` : `failed ${err.status}`),
      ),
      3000,
    );

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

/**
 * Review finding: the connection to Redis dropped after Redis had recorded a request's nonce but before
 * its reply arrived (a failover, a proxy's or NAT's reset). ioredis resent the SET NX on the new
 * connection, found the nonce taken, and the provider's genuine first request was refused as a replay
 * (401 'replayed request'), which it is not. Redis could not confirm the nonce: 503, as ADR 7 says.
 */
describe("the request paths' Redis when the connection drops with a nonce's reply in flight", () => {
  let redisDb: TestRedis;
  let proxy: net.Server;
  let dropReplies = false;
  const sockets = new Set<net.Socket>();

  beforeAll(async () => {
    redisDb = await claimTestRedis();
    const upstream = new URL(redisDb.url);
    // A real Redis behind a proxy that can swallow its replies and then cut the connection.
    proxy = net.createServer((client) => {
      const server = net.connect(Number(upstream.port || 6379), upstream.hostname);
      for (const s of [client, server]) {
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.on('data', (d) => server.write(d));
      server.on('data', (d) => {
        if (!dropReplies) client.write(d);
      });
      client.on('close', () => server.destroy());
      server.on('close', () => client.destroy());
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => proxy?.close(r));
    await redisDb?.release();
  });

  it('answers a genuine first request 503, not 401 replayed request', async () => {
    const url = `redis://127.0.0.1:${(proxy.address() as net.AddressInfo).port}${new URL(redisDb.url).pathname}`;
    const redis = createRequestRedis(url, pino({ level: 'silent' }));
    await new Promise((r) => (redis.status === 'ready' ? r(undefined) : redis.once('ready', r)));
    const provider = { id: 'studio-a', secret: 'studio-a-secret' };
    const catalog = { providers: new Map([[provider.id, provider]]), operators: new Map() } as unknown as CatalogSnapshot;
    const verify = signatureVerifier({ kind: 'provider', catalog: () => catalog, redis, windowSeconds: 300 });
    const signed = signRequest({ path: '/v1/provider/transactions', body: { transactionId: 't-1' }, as: { kind: 'provider', ...provider } });
    const req = { method: 'POST', originalUrl: '/v1/provider/transactions', headers: signed.headers, rawBody: Buffer.from(signed.body!) } as unknown as Request;
    try {
      dropReplies = true;
      const answer = Promise.resolve()
        .then(() => verify(req, {} as Response, (() => undefined) as NextFunction))
        .then(
          () => 'let through',
          (err: { status?: number; message?: string }) => `${err.status} ${err.message}`,
        );
      // Redis has recorded the nonce by now; its reply is lost with the connection.
      await new Promise((r) => setTimeout(r, 200));
      dropReplies = false;
      for (const s of sockets) s.destroy();
      expect(await answer).toBe('503 service unavailable');
      // The case was reproduced: Redis had recorded the nonce whose reply was lost.
      const direct = new Redis(redisDb.url, { maxRetriesPerRequest: 1 });
      try {
        expect(await direct.exists(nonceKey('provider', provider.id, signed.headers['x-nonce']!))).toBe(1);
      } finally {
        direct.disconnect();
      }
    } finally {
      redis.disconnect();
    }
  }, 15_000);
});
