import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signedCall, type OutboundResult } from '../../shared/http/outbound.ts';
import { startSilentHost, type SilentHost } from '../helpers/silent-host.ts';

/**
 * Whether a failed or timed-out call reached its peer (`notSent`): a BET none of whose calls reached the
 * wallet is voided by its ROLLBACK (contract 8.5), one that may have reached it stays failed. Only a
 * connection never made is "not sent"; a peer that read the request and then dropped the connection, or
 * never answered, got it.
 */
let dropping: http.Server;
let dropUrl: string;
/** Bodies the dropping server read before it dropped the connection. */
const read: string[] = [];
/** A server that reads requests and never answers. */
let mute: http.Server;
let muteUrl: string;
const heardByMute: string[] = [];
let silent: SilentHost;

beforeAll(async () => {
  dropping = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      read.push(body);
      res.socket?.destroy();
    });
  });
  await new Promise<void>((r) => dropping.listen(0, '127.0.0.1', r));
  dropUrl = `http://127.0.0.1:${(dropping.address() as AddressInfo).port}`;
  mute = http.createServer((req) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => heardByMute.push(body));
  });
  await new Promise<void>((r) => mute.listen(0, '127.0.0.1', r));
  muteUrl = `http://127.0.0.1:${(mute.address() as AddressInfo).port}`;
  silent = await startSilentHost();
});

afterAll(async () => {
  dropping.closeAllConnections();
  mute.closeAllConnections();
  await Promise.all([new Promise((r) => dropping.close(r)), new Promise((r) => mute.close(r)), silent?.close()]);
});

const call = (baseUrl: string, timeoutMs = 3000): Promise<OutboundResult> =>
  signedCall({ baseUrl, secret: 's', pathAndQuery: '/v1/wallet/transaction', method: 'POST', rawBody: '{"transactionId":"t1"}', timeoutMs });

/** A port nothing listens on: taken, then freed. */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

describe('signedCall: a call that never reached its peer', () => {
  it('a refused connection is not sent', async () => {
    expect(await call(`http://127.0.0.1:${await closedPort()}`)).toMatchObject({ kind: 'unreachable', notSent: true });
  });

  it('a host that does not resolve is not sent', async () => {
    expect(await call('http://no-such-wallet.invalid')).toMatchObject({ kind: 'unreachable', notSent: true });
  });

  it('a host that drops connection attempts silently times out at the call\'s timeout, not sent: the connect never completed', async () => {
    const started = performance.now();
    expect(await call(silent.url, 500)).toEqual({ kind: 'timeout', notSent: true });
    // The call's timeout bounds the connect too (undici alone would wait for its own 10 s connect timeout),
    // so a BET's provider is answered within the wallet timeout plus 5 s (contract 8.5).
    expect(performance.now() - started).toBeLessThan(5000);
  });

  it('calls that timed out waiting for a connect leave no connect behind: a host back after they ended is not sent their connections', async () => {
    const tenant = `operator:comes-back-${process.pid}`;
    const host = await startSilentHost(2500);
    try {
      const results = await Promise.all(
        Array.from({ length: 10 }, () => signedCall({ baseUrl: host.url, secret: 's', pathAndQuery: '/v1/wallet/transaction', method: 'POST', rawBody: '{}', timeoutMs: 300, tenant })),
      );
      expect(results.every((r) => r.kind === 'timeout' && r.notSent === true)).toBe(true);
      // The host comes back (2.5 s after it started) and accepts what still waits for it: only the connections
      // that filled its queue. Before, undici kept each call's connect going for its own 10 s and opened it
      // (to close it at once) when the host came back.
      await new Promise((r) => setTimeout(r, 4000));
      expect(host.accepted()).toBe(host.fillers);
    } finally {
      await host.close();
    }
  });

  it('a peer that read the request and never answered times out having got it: not "not sent"', async () => {
    expect(await call(muteUrl, 500)).toEqual({ kind: 'timeout' });
    expect(heardByMute).toEqual(['{"transactionId":"t1"}']);
  });

  it('a peer that read the request and then dropped the connection got it: not "not sent"', async () => {
    const result = await call(dropUrl);
    expect(read).toEqual(['{"transactionId":"t1"}']);
    expect(result.kind).toBe('unreachable');
    expect(result).not.toHaveProperty('notSent');
  });
});
