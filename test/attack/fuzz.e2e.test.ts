import { randomUUID } from 'node:crypto';
import net from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OP1, OP2, PROV_A } from '../helpers/catalog.ts';
import { ADMIN_TOKEN } from '../helpers/service.ts';
import { signedRequest, signRequest, toTestResponse, type TestResponse } from '../helpers/signing.ts';
import { startMoneyHarness, type MoneyHarness } from '../money/harness.ts';

const RUNS = Number(process.env.FUZZ_RUNS ?? 60);
const DOCUMENTED = new Set([200, 201, 400, 401, 403, 404, 409, 413]);

/** Every answer is documented: never a 500, never a hang; errors are JSON {"error": "..."}. */
function expectDocumented(res: TestResponse<unknown>, what: string): void {
  if (!DOCUMENTED.has(res.status)) throw new Error(`${what}: undocumented status ${res.status}: ${res.text.slice(0, 300)}`);
  // The plain-text 401 of a signature that does not match (e.g. a path the HTTP client normalised) is documented too.
  if (res.status === 401 && res.text === 'invalid signature') return;
  if (res.status >= 400) {
    const body = res.json as { error?: unknown } | undefined;
    if (typeof body?.error !== 'string') throw new Error(`${what}: error body is not {"error": string}: ${res.text.slice(0, 300)}`);
  }
}

const withTimeout = <T>(p: Promise<T>, ms = 8000): Promise<T> =>
  Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error('request hung')), ms))]);

/** A body built from a valid one: fields dropped, replaced by any JSON value, or extra ones added. */
const mutated = (valid: Record<string, unknown>) =>
  Object.keys(valid).length === 0
    ? fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 })
    : fc
    .record({
      drop: fc.subarray(Object.keys(valid)),
      replace: fc.dictionary(fc.constantFrom(...Object.keys(valid)), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }),
      extra: fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 2 }),
    })
    .map(({ drop, replace, extra }) => {
      const out: Record<string, unknown> = { ...valid, ...extra, ...replace };
      for (const k of drop) delete out[k];
      return out;
    });

const anyBody = (valid: Record<string, unknown>) => fc.oneof(mutated(valid), fc.jsonValue({ maxDepth: 3 }), fc.constant(valid));

describe('attack run: every route takes any input and answers a documented status', () => {
  let h: MoneyHarness;
  let token: string;
  let grantId: string;
  beforeAll(async () => {
    h = await startMoneyHarness('fuzz', { ROLES: 'api,projector' });
    token = await h.launch('fuzz-p');
    const g = await signedRequest<{ id: string }>(h.svc.url, {
      path: '/v1/operator/free-spins/grants',
      body: { playerRef: 'fuzz-p', idempotencyKey: 'fuzz-grant', gameId: 'fruit-1', spins: 3, currency: 'EUR' },
      as: OP1,
    });
    grantId = g.json.id;
  });
  afterAll(async () => h?.close());

  const signedRoutes: Array<{ name: string; path: () => string; method: 'GET' | 'POST'; as: 'op' | 'prov'; valid: () => Record<string, unknown> }> = [
    { name: 'launch', path: () => '/v1/operator/games/launch', method: 'POST', as: 'op', valid: () => ({ playerRef: 'fuzz-p', gameId: 'fruit-1', currency: 'EUR', mode: 'REAL', language: 'en', lobbyUrl: 'https://x.test/' }) },
    { name: 'kick', path: () => '/v1/operator/players/kick', method: 'POST', as: 'op', valid: () => ({ playerRef: `fuzz-k-${randomUUID()}` }) },
    { name: 'replay', path: () => '/v1/operator/rounds/replay', method: 'POST', as: 'op', valid: () => ({ roundId: 'r-1', gameId: 'fruit-1' }) },
    { name: 'grant issue', path: () => '/v1/operator/free-spins/grants', method: 'POST', as: 'op', valid: () => ({ playerRef: 'fuzz-p', idempotencyKey: randomUUID(), gameId: 'fruit-1', spins: 2, currency: 'EUR', betAmountMinor: 5 }) },
    { name: 'grant cancel', path: () => `/v1/operator/free-spins/grants/${grantId}/cancel`, method: 'POST', as: 'op', valid: () => ({}) },
    { name: 'transaction', path: () => '/v1/wallet/transaction', method: 'POST', as: 'prov', valid: () => ({ transactionId: randomUUID(), sessionToken: token, type: 'BET', roundId: randomUUID(), roundComplete: false, playerRef: 'fuzz-p', amount: 1, currency: 'EUR', gameId: 'fruit-1', metadata: { a: 1 } }) },
    { name: 'balance', path: () => '/v1/wallet/balance', method: 'POST', as: 'prov', valid: () => ({ sessionToken: token }) },
  ];

  for (const route of signedRoutes) {
    it(`${route.name}: any body`, async () => {
      await fc.assert(
        fc.asyncProperty(anyBody(route.valid()), async (body) => {
          const res = await withTimeout(signedRequest(h.svc.url, { path: route.path(), method: route.method, body, as: route.as === 'op' ? OP1 : PROV_A }));
          expectDocumented(res, `${route.name} ${JSON.stringify(body).slice(0, 200)}`);
        }),
        { numRuns: RUNS },
      );
    }, 120_000);
  }

  it('raw bodies that are not JSON, or not UTF-8, get 400', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ maxLength: 200 }), async (raw) => {
        let json = true;
        try {
          JSON.parse(raw);
        } catch {
          json = false;
        }
        const res = await withTimeout(signedRequest(h.svc.url, { path: '/v1/wallet/transaction', rawBody: raw, as: PROV_A }));
        expectDocumented(res, `raw ${JSON.stringify(raw)}`);
        if (!json && raw.trim() !== '') expect(res.status).toBe(400);
      }),
      { numRuns: RUNS },
    );
  }, 120_000);

  it('requests the HTTP parser cannot read get the error form of every other error: JSON, an X-Request-Id, the connection closed', async () => {
    const { hostname, port } = new URL(h.svc.url);
    /** Sends `raw` on a connection of its own and reads everything the service answers until it closes. */
    const sendRaw = (raw: string) =>
      new Promise<string>((resolve, reject) => {
        const chunks: Buffer[] = [];
        const socket = net.connect({ host: hostname, port: Number(port) }, () => socket.write(raw));
        socket.on('data', (c: Buffer) => chunks.push(c));
        socket.on('end', () => resolve(Buffer.concat(chunks).toString('latin1')));
        socket.on('error', reject);
        socket.setTimeout(5000, () => socket.destroy(new Error('no answer')));
      });
    const malformed = [
      'GARBAGE\r\n\r\n',
      'POST /v1/wallet/transaction HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}',
      'POST /v1/wallet/transaction HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n',
      'GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n',
    ];
    for (const raw of malformed) {
      const answer = await sendRaw(raw);
      const [head, body] = answer.split('\r\n\r\n');
      expect(head!.split('\r\n')[0], JSON.stringify(raw)).toBe('HTTP/1.1 400 Bad Request');
      expect(head).toMatch(/\r\nX-Request-Id: [0-9a-f-]{36}\r\n/);
      expect(head).toMatch(/\r\nContent-Type: application\/json/);
      expect(JSON.parse(body!)).toEqual({ error: 'bad request' });
    }
    const huge = await sendRaw(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(huge.split('\r\n')[0]).toBe('HTTP/1.1 431 Request Header Fields Too Large');
    expect(JSON.parse(huge.split('\r\n\r\n')[1]!)).toEqual({ error: 'request headers too large' });
  });

  it('queries and path ids of the read routes', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ maxLength: 60 }), fc.string({ maxLength: 60 }), async (q, id) => {
        const enc = encodeURIComponent;
        for (const path of [`/v1/operator/free-spins/grants?playerRef=${enc(q)}`, `/v1/operator/free-spins/grants/${enc(id) || 'x'}`, `/v1/operator/games?${enc(q)}=${enc(id)}`]) {
          const res = await withTimeout(signedRequest(h.svc.url, { path, as: OP1 }));
          expectDocumented(res, path);
        }
        for (const path of [`/v1/audit/events?from=${enc(q)}&limit=${enc(id)}`, `/v1/audit/streams/${enc(id) || 'x'}`, `/v1/audit/transactions?status=${enc(q)}`]) {
          const res = await withTimeout(fetch(`${h.svc.url}${path}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }).then(toTestResponse));
          expectDocumented(res, path);
        }
      }),
      { numRuns: RUNS },
    );
  }, 120_000);

  it('admin routes: any catalog and any adjustment body', async () => {
    const admin = (path: string, method: string, body: unknown) =>
      fetch(`${h.svc.url}${path}`, { method, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) }).then(toTestResponse);
    await fc.assert(
      fc.asyncProperty(
        anyBody({ operators: [{ id: 'op-fuzz', name: 'F', secret: 's', walletUrl: 'http://127.0.0.1:9' }] }),
        anyBody({ operatorId: 'op-1', playerRef: 'fuzz-p', amount: 1, currency: 'EUR', direction: 'CREDIT', reason: 'r' }),
        async (catalog, adjustment) => {
          expectDocumented(await withTimeout(admin('/v1/admin/catalog', 'PUT', catalog)), `catalog ${JSON.stringify(catalog).slice(0, 200)}`);
          const adj = await withTimeout(admin('/v1/admin/adjustments', 'POST', adjustment));
          if (adj.status !== 202) expectDocumented(adj, `adjustment ${JSON.stringify(adjustment).slice(0, 200)}`);
        },
      ),
      { numRuns: RUNS },
    );
  }, 120_000);

  it('any header values on signed routes', async () => {
    const headerValue = fc.oneof(fc.string({ maxLength: 80 }).filter((s) => /^[\x20-\x7e]*$/.test(s)), fc.constant(undefined));
    await fc.assert(
      fc.asyncProperty(headerValue, headerValue, headerValue, headerValue, async (id, ts, nonce, sig) => {
        const signed = signRequest({ path: '/v1/operator/players/kick', body: { playerRef: 'x' }, as: OP1, headers: { 'x-operator-id': id, 'x-timestamp': ts, 'x-nonce': nonce, 'x-signature': sig } });
        const res = await withTimeout(fetch(`${h.svc.url}/v1/operator/players/kick`, { method: 'POST', headers: signed.headers, body: signed.body! }).then(toTestResponse));
        expect([400, 401]).toContain(res.status);
      }),
      { numRuns: RUNS },
    );
  }, 120_000);
});

describe('attack run: tampering, replays and other tenants', () => {
  let h: MoneyHarness;
  beforeAll(async () => {
    h = await startMoneyHarness('fuzz2', { ROLES: 'api,projector' });
  });
  afterAll(async () => h?.close());

  it('refuses a request with any one signed component changed after signing', async () => {
    type Part = 'timestamp' | 'nonce' | 'method' | 'path' | 'body';
    await fc.assert(
      fc.asyncProperty(fc.constantFrom<Part>('timestamp', 'nonce', 'method', 'path', 'body'), fc.string({ minLength: 1, maxLength: 20 }), async (part, noise) => {
        const path = '/v1/operator/players/kick';
        const signed = signRequest({ path, body: { playerRef: 'tamper' }, as: OP1 });
        const headers = { ...signed.headers };
        let method = 'POST';
        let target = path;
        let body = signed.body!;
        if (part === 'timestamp') headers['x-timestamp'] = String(Number(headers['x-timestamp']) - 1);
        if (part === 'nonce') headers['x-nonce'] = `${headers['x-nonce']!.slice(0, 20)}${noise.replace(/[^\w]/g, 'z')}`.slice(0, 64);
        if (part === 'method') method = 'PUT';
        if (part === 'path') target = '/v1/operator/players/kick2';
        if (part === 'body') body = JSON.stringify({ playerRef: `tamper${noise}` });
        if (part === 'nonce' && headers['x-nonce'] === signed.headers['x-nonce']) headers['x-nonce'] = `${headers['x-nonce']!.slice(0, 63)}!`;
        const res = await withTimeout(fetch(`${h.svc.url}${target}`, { method, headers, body }).then(toTestResponse));
        expect(res.status).toBe(401);
        expect(res.text).toBe('invalid signature');
      }),
      { numRuns: RUNS },
    );
  }, 120_000);

  it('refuses every replay of an accepted request', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 3 }), async (times) => {
        const signed = signRequest({ path: '/v1/operator/players/kick', body: { playerRef: `replay-${randomUUID()}` }, as: OP1 });
        const send = () => fetch(`${h.svc.url}/v1/operator/players/kick`, { method: 'POST', headers: signed.headers, body: signed.body! }).then(toTestResponse);
        expect((await send()).status).toBe(200);
        for (let i = 0; i < times; i++) expect((await send()).json).toEqual({ error: 'replayed request' });
      }),
      { numRuns: 20 },
    );
  }, 120_000);

  it("probing with another operator's ids reveals nothing", async () => {
    // Operator one's world: a session, a round, a grant.
    const token = await h.launch('secret-player');
    const roundId = `secret-round-${randomUUID()}`;
    await h.tx({ transactionId: randomUUID(), sessionToken: token, type: 'BET', roundId, roundComplete: false, playerRef: 'secret-player', amount: 5, currency: 'EUR', gameId: 'fruit-1' });
    const grant = (await signedRequest<{ id: string }>(h.svc.url, { path: '/v1/operator/free-spins/grants', body: { playerRef: 'secret-player', idempotencyKey: 'k', gameId: 'fruit-1', spins: 1, currency: 'EUR' }, as: OP1 })).json;

    const asTwo = <T>(path: string, body?: unknown) => signedRequest<T>(h.svc.url, { path, ...(body !== undefined ? { body } : {}), as: OP2 });
    const nothing = await asTwo('/v1/operator/rounds/replay', { roundId: 'never-existed', gameId: 'fruit-1' });
    const theirs = await asTwo('/v1/operator/rounds/replay', { roundId, gameId: 'fruit-1' });
    expect(theirs.status).toBe(nothing.status);
    expect(theirs.text).toBe(nothing.text);
    const unknownGrant = await asTwo(`/v1/operator/free-spins/grants/${randomUUID()}`);
    const theirGrant = await asTwo(`/v1/operator/free-spins/grants/${grant.id}`);
    expect([theirGrant.status, theirGrant.text]).toEqual([unknownGrant.status, unknownGrant.text]);
    expect((await signedRequest(h.svc.url, { path: `/v1/operator/free-spins/grants/${grant.id}/cancel`, method: 'POST', as: OP2 })).status).toBe(404);
    expect((await asTwo<unknown[]>('/v1/operator/free-spins/grants?playerRef=secret-player')).json).toEqual([]);
    // The same idempotency key under operator two is its own grant, not a window onto operator one's.
    const sameKey = await asTwo<{ id: string; operatorId: string }>('/v1/operator/free-spins/grants', { playerRef: 'secret-player', idempotencyKey: 'k', gameId: 'fruit-1', spins: 1, currency: 'EUR' });
    expect(sameKey.json.id).not.toBe(grant.id);
    expect(sameKey.json.operatorId).toBe('op-2');
    // Kicking the same player name under operator two touches nothing of operator one.
    expect((await asTwo<{ revokedCount: number }>('/v1/operator/players/kick', { playerRef: 'secret-player' })).json).toEqual({ revokedCount: 0 });
    expect((await signedRequest(h.svc.url, { path: '/v1/wallet/balance', body: { sessionToken: token }, as: PROV_A })).status).toBe(200);
  });
});
