import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signedCall } from '../../shared/http/outbound.ts';

/**
 * A partner's calls use connection pools of their own, one per call timeout (a connect gives up when
 * its call does). When the catalog changes a partner's timeout, the pools of the old one are closed once
 * their calls under way have ended: a process whose partners' timeouts change over weeks keeps neither
 * their idle connections open at the partner nor their pools in memory.
 */
let server: http.Server;
let url: string;
/** The connections the partner has open. */
const open = new Set<Socket>();
beforeAll(async () => {
  // A partner that answers each call after the body's holdMs.
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const { holdMs } = JSON.parse(body) as { holdMs: number };
      setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"OK"}'), holdMs);
    });
  });
  // Keep-alive connections are the client's to close: the server never closes an idle one first.
  server.keepAliveTimeout = 600_000;
  server.on('connection', (s: Socket) => {
    open.add(s);
    s.on('close', () => open.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const call = (tenant: string, timeoutMs: number, holdMs = 0) =>
  signedCall({ baseUrl: url, secret: 's', pathAndQuery: '/v1/wallet/balance', method: 'POST', body: { holdMs }, timeoutMs, tenant });

describe("a partner's connection pools when its timeout changes", () => {
  it('closes the pools of the old timeout once their calls end: the call under way is answered, and no idle connection stays open', async () => {
    const tenant = `operator:${randomUUID()}`;
    expect(await call(tenant, 3000)).toMatchObject({ kind: 'response', status: 200 });
    expect(open.size).toBe(1); // kept alive for the next call
    // A call under the old timeout still under way when the timeout changes.
    const slow = call(tenant, 3000, 500);
    await expect.poll(() => open.size).toBe(2);
    expect(await call(tenant, 4000)).toMatchObject({ kind: 'response', status: 200 });
    // The call under way ends as it would have, and then the old pools' connections are closed.
    expect(await slow).toMatchObject({ kind: 'response', status: 200 });
    await expect.poll(() => open.size, { timeout: 5000 }).toBe(1);
    // The new pools go on serving the partner.
    expect(await call(tenant, 4000)).toMatchObject({ kind: 'response', status: 200 });
    expect(open.size).toBe(1);
  });

  it("leaves another partner's pools alone", async () => {
    const [a, b] = [`operator:${randomUUID()}`, `operator:${randomUUID()}`];
    const before = open.size;
    expect(await call(a, 3000)).toMatchObject({ kind: 'response', status: 200 });
    expect(await call(b, 3000)).toMatchObject({ kind: 'response', status: 200 });
    expect(open.size).toBe(before + 2);
    expect(await call(a, 5000)).toMatchObject({ kind: 'response', status: 200 });
    // a's old connection closes; b's stays open, and serves b's next call without a new one.
    await expect.poll(() => open.size, { timeout: 5000 }).toBe(before + 2);
    const sockets = new Set(open);
    expect(await call(b, 3000)).toMatchObject({ kind: 'response', status: 200 });
    expect(new Set(open)).toEqual(sockets);
  });
});
