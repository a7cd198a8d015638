import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONNECT_TIMEOUT_MS, ensureDatabase } from '../../shared/db/pool.ts';

/** A server that takes the connection and never answers (a Postgres paused, or a port something else holds). */
describe('ensureDatabase against a server that never answers', () => {
  let server: net.Server;
  const sockets = new Set<net.Socket>();
  beforeAll(async () => {
    server = net.createServer((s) => sockets.add(s));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });

  it('fails within the connect timeout (the start retries it) instead of waiting for ever', async () => {
    const started = Date.now();
    const url = `postgres://postgres@127.0.0.1:${(server.address() as AddressInfo).port}/ledger`;
    const outcome = await Promise.race([ensureDatabase(url).then(() => 'connected', (err: Error) => `failed: ${err.message}`), new Promise((r) => setTimeout(() => r('still waiting'), CONNECT_TIMEOUT_MS + 5_000))]);
    expect(outcome).toMatch(/^failed: /);
    expect(Date.now() - started).toBeLessThan(CONNECT_TIMEOUT_MS + 5_000);
  }, 20_000);
});
