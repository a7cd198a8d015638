import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPLY_LIMIT_BYTES, signedCall } from '../../shared/http/outbound.ts';
import { signatureMatches } from '../../shared/http/signature.ts';
import { drainedOrClosed } from '../../shared/http/drain.ts';

const MiB = 1024 * 1024;

/** What the server saw of one reply it tried to write. */
interface Written {
  bytes: number;
  finished: boolean;
  closedEarly: boolean;
}

/**
 * A partner that answers GET /size/<n> with n bytes, in 64 KiB chunks, honouring backpressure, and
 * records how far it got. `?declare` adds a content-length.
 */
let server: http.Server;
let url: string;
const written: Written[] = [];
/** The signed headers of every call the server took. */
const seen: http.IncomingHttpHeaders[] = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    seen.push(req.headers);
    const size = Number(u.pathname.split('/')[2]);
    const w: Written = { bytes: 0, finished: false, closedEarly: false };
    written.push(w);
    res.on('close', () => (w.closedEarly = !w.finished));
    res.statusCode = 200;
    res.setHeader('content-type', 'application/json');
    if (u.searchParams.has('declare')) res.setHeader('content-length', String(size));
    const chunk = Buffer.alloc(64 * 1024, 'x');
    void (async () => {
      while (w.bytes < size && !res.destroyed) {
        const piece = chunk.subarray(0, Math.min(chunk.length, size - w.bytes));
        w.bytes += piece.length;
        if (!res.write(piece)) {
          await drainedOrClosed(res);
        }
      }
      if (!res.destroyed) {
        w.finished = true;
        res.end();
      }
    })();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const get = (pathAndQuery: string) => signedCall({ baseUrl: url, pathAndQuery, method: 'GET', secret: 's', timeoutMs: 10_000 });

describe('outbound replies are bounded at 1 MiB (contract section 8 rule 7)', () => {
  it('stops reading a 50 MiB chunked reply early and closes the connection: the partner never finishes writing it', async () => {
    const before = process.memoryUsage().rss;
    const result = await get(`/size/${50 * MiB}`);
    expect(result).toEqual({ kind: 'oversized', status: 200, limitBytes: MiB });
    const w = written.at(-1)!;
    await expect.poll(() => w.closedEarly).toBe(true);
    expect(w.finished).toBe(false);
    // What got written is what the socket buffers took before the abort, far from the 50 MiB.
    expect(w.bytes).toBeLessThan(25 * MiB);
    expect(process.memoryUsage().rss - before).toBeLessThan(40 * MiB);
  });

  it('refuses a declared content-length over the limit without reading the body', async () => {
    const result = await get(`/size/${50 * MiB}?declare`);
    expect(result).toMatchObject({ kind: 'oversized' });
    const w = written.at(-1)!;
    await expect.poll(() => w.closedEarly).toBe(true);
  });

  it('accepts exactly 1 MiB, chunked or declared, and refuses 1 MiB and one byte', async () => {
    expect(REPLY_LIMIT_BYTES).toBe(MiB);
    for (const q of ['', '?declare']) {
      const ok = await get(`/size/${MiB}${q}`);
      expect(ok.kind).toBe('response');
      expect(ok.kind === 'response' && Buffer.byteLength(ok.body)).toBe(MiB);
      expect(await get(`/size/${MiB + 1}${q}`)).toMatchObject({ kind: 'oversized' });
    }
  });

  it('keeps working after an oversized reply: the next call on the same pool gets its answer', async () => {
    await get(`/size/${5 * MiB}`);
    const next = await get('/size/10');
    expect(next).toMatchObject({ kind: 'response', status: 200, body: 'x'.repeat(10) });
  });
});

describe('the service signs each call with a fresh nonce (docs/signing.md)', () => {
  it('sends 32 hex characters, a different one every call, under a signature the partner can check', async () => {
    const nonces: string[] = [];
    for (let i = 0; i < 50; i++) {
      await get('/size/2');
      const h = seen.at(-1)!;
      const nonce = String(h['x-nonce']);
      expect(nonce).toMatch(/^[0-9a-f]{32}$/);
      expect(signatureMatches('s', { timestamp: String(h['x-timestamp']), nonce, method: 'GET', target: '/size/2', body: '' }, String(h['x-signature']))).toBe(true);
      nonces.push(nonce);
    }
    expect(new Set(nonces).size).toBe(nonces.length);
  });
});
