import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { Express } from 'express';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { z } from 'zod';
import { buildOpenApiDocument, documentedResponse, type OpenApiDocument } from '../../services/api/openapi/document.ts';
import { routes } from '../../services/api/openapi/routes.ts';
import { registeredRoutes } from '../../services/api/openapi/walk.ts';
import { providerCancelRequest, providerGrantRequest } from '../../services/grants/schemas.ts';
import { providerRevokeRequest } from '../../services/sessions/schemas.ts';
import { walletTransactionRequest } from '../../services/rounds/schemas.ts';
import { OP1, OP2, PROV_A, testCatalog } from '../helpers/catalog.ts';
import { satisfies } from '../helpers/json-rules.ts';
import { ADMIN_TOKEN } from '../helpers/service.ts';
import { signedRequest, toTestResponse, type SignedRequestOptions, type TestResponse } from '../helpers/signing.ts';
import { startMoneyHarness, type MoneyHarness } from '../money/harness.ts';

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const key = (method: string, path: string) => `${method.toUpperCase()} ${path}`;
const isExpressApp = (x: unknown): x is Express => typeof x === 'function' && 'router' in x && typeof (x as { use?: unknown }).use === 'function';

describe('the OpenAPI document matches the running service', () => {
  let h: MoneyHarness;
  let app: Express;
  let served: OpenApiDocument;
  /** Routes seen answering 2xx and checked against the document. */
  const succeeded = new Set<string>();

  beforeAll(async () => {
    // The express app the service really serves, as startService builds it (nothing rebuilt here).
    const createServer = vi.spyOn(http, 'createServer');
    try {
      // Chain checkpoints every second, so the checkpoint routes have some to show.
      h = await startMoneyHarness('openapi', { CHAIN_CHECKPOINT_SECONDS: '1' });
      app = createServer.mock.calls.map((c) => c[0] as unknown).filter(isExpressApp).at(-1)!;
    } finally {
      createServer.mockRestore();
    }
    served = (await (await fetch(`${h.svc.url}/openapi.json`)).json()) as OpenApiDocument;
  });
  afterAll(async () => h?.close());

  /**
   * Asserts the status, then that the document lists that status for the route, with this content
   * type, and that the body (and required headers) parse with the schema the document was made from.
   */
  function conforms(method: string, path: string, res: TestResponse, status: number): void {
    const where = `${key(method, path)} answered ${res.status}`;
    expect(res.status, `${where}: ${res.text.slice(0, 300)}`).toBe(status);
    const route = routes.find((r) => r.method === method && r.path === path);
    if (!route) throw new Error(`${key(method, path)} is not in the route table`);
    const documented = ((served.paths as Record<string, Record<string, { responses: Record<string, unknown> }>>)[path]?.[method])?.responses;
    expect(documented?.[String(status)] ?? documented?.default, `${where}, which /openapi.json does not list`).toBeDefined();
    const spec = documentedResponse(route, status)!;
    if (spec.content) {
      const media = (res.headers.get('content-type') ?? '').split(';')[0]!.trim();
      const schema: z.ZodType | undefined = spec.content[media as keyof typeof spec.content];
      if (!schema) throw new Error(`${where} with ${media}; documented: ${Object.keys(spec.content).join(', ')}`);
      const parsed = schema.safeParse(media === 'application/json' ? JSON.parse(res.text) : res.text);
      expect(parsed.success, `${where}: ${parsed.error?.message ?? ''}\n${res.text.slice(0, 500)}`).toBe(true);
    }
    for (const [name, header] of Object.entries(spec.headers ?? {})) {
      if (header.required) expect(header.schema.safeParse(res.headers.get(name)).success, `${where}: header ${name}`).toBe(true);
    }
    // Every response carries X-Request-Id (components.headers.RequestId).
    expect(res.headers.get('x-request-id'), `${where}: X-Request-Id`).toMatch(/^[\w.-]{1,64}$/);
    if (status < 300) succeeded.add(key(method, path));
  }

  const op = (opts: Omit<SignedRequestOptions, 'as'> & { as?: SignedRequestOptions['as'] }) => signedRequest(h.svc.url, { ...opts, as: opts.as ?? OP1 });
  const admin = async (method: string, path: string, body?: unknown, token: string | null = ADMIN_TOKEN, headers: Record<string, string> = {}) =>
    toTestResponse(
      await fetch(h.svc.url + path, {
        method,
        headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      }),
    );
  const plain = async (path: string) => toTestResponse(await fetch(h.svc.url + path));
  const until = (check: () => Promise<boolean> | boolean) => h.until(check, 10_000);

  it('documents exactly the routes express serves: none undocumented, none phantom', () => {
    const registered = registeredRoutes(app).map((r) => key(r.method, r.path)).sort();
    const documented = Object.entries(served.paths as Record<string, Record<string, unknown>>)
      .flatMap(([path, item]) => Object.keys(item).filter((m) => HTTP_METHODS.includes(m)).map((m) => key(m, path)))
      .sort();
    expect(registered.length).toBeGreaterThan(20);
    expect(registered).toEqual(documented);
  });

  it('serves the document at /openapi.json without authentication', async () => {
    const res = await plain('/openapi.json');
    conforms('get', '/openapi.json', res, 200);
    expect(served).toEqual(JSON.parse(JSON.stringify(buildOpenApiDocument())));
  });

  it('health, readiness, metrics and the docs page answer as documented', async () => {
    conforms('get', '/healthz', await plain('/healthz'), 200);
    conforms('get', '/readyz', await plain('/readyz'), 200);
    conforms('get', '/metrics', await admin('GET', '/metrics'), 200);
    conforms('get', '/metrics', await admin('GET', '/metrics', undefined, null), 401);
    conforms('get', '/docs', await plain('/docs'), 200);
  });

  it('the console page and the Chart.js it loads answer as documented', async () => {
    conforms('get', '/console', await plain('/console'), 200);
    const vendor = '/console/vendor/{file}';
    const chart = await plain('/console/vendor/chart.umd.js');
    conforms('get', vendor, chart, 200);
    expect(chart.headers.get('content-type')).toMatch(/^text\/javascript/);
    conforms('get', vendor, await plain('/console/vendor/chart.umd.js.map'), 200);
    conforms('get', vendor, await plain('/console/vendor/chart.js'), 404);
  });

  it('operator routes: games, launch, kick, replay, and the signature refusals', async () => {
    conforms('get', '/v1/operator/games', await op({ path: '/v1/operator/games' }), 200);
    const launch = (over: Record<string, unknown> = {}, extra: Partial<SignedRequestOptions> = {}) =>
      op({ path: '/v1/operator/games/launch', body: { playerRef: 'doc-p1', gameId: 'fruit-1', currency: 'EUR', mode: 'REAL', ...over }, ...extra });
    conforms('post', '/v1/operator/games/launch', await launch({ language: 'de', lobbyUrl: 'https://casino.example/lobby' }), 200);
    conforms('post', '/v1/operator/games/launch', await launch({ currency: 'eur' }), 400);
    conforms('post', '/v1/operator/games/launch', await launch({ playerRef: 'player-banned' }), 403);
    conforms('post', '/v1/operator/games/launch', await launch({ gameId: 'no-such-game' }), 404);
    // Contract section 3, in its order.
    conforms('post', '/v1/operator/games/launch', await launch({}, { headers: { 'x-nonce': undefined } }), 400);
    const badSignature = await launch({}, { headers: { 'x-signature': '0'.repeat(64) } });
    conforms('post', '/v1/operator/games/launch', badSignature, 401);
    expect(badSignature.headers.get('content-type')).toMatch(/^text\/plain/);
    const nonce = `doc-${randomUUID()}`;
    conforms('post', '/v1/operator/games/launch', await launch({}, { nonce }), 200);
    const replayed = await launch({}, { nonce });
    conforms('post', '/v1/operator/games/launch', replayed, 401);
    expect(replayed.json).toEqual({ error: 'replayed request' });
    conforms('post', '/v1/operator/players/kick', await op({ path: '/v1/operator/players/kick', rawBody: JSON.stringify({ playerRef: 'x'.repeat(70_000) }) }), 413);

    // A round the provider played, then its replay link.
    const token = await h.launch('doc-replay');
    const roundId = `doc-r-${randomUUID()}`;
    conforms('post', '/v1/wallet/transaction', await h.tx(h.bet(token, { playerRef: 'doc-replay', roundId })), 200);
    conforms('post', '/v1/operator/rounds/replay', await op({ path: '/v1/operator/rounds/replay', body: { roundId, gameId: 'fruit-1' } }), 200);
    conforms('post', '/v1/operator/rounds/replay', await op({ path: '/v1/operator/rounds/replay', body: { roundId, gameId: 'gems-2' } }), 400);
    conforms('post', '/v1/operator/rounds/replay', await op({ path: '/v1/operator/rounds/replay', body: { roundId: 'nope', gameId: 'fruit-1' } }), 404);

    conforms('post', '/v1/operator/players/kick', await op({ path: '/v1/operator/players/kick', body: { playerRef: 'doc-p1' } }), 200);
    conforms('post', '/v1/operator/players/kick', await op({ path: '/v1/operator/players/kick', body: {} }), 400);
    // The kick tells the provider, after the answer.
    await until(() => h.provider.calls.some((c) => c.target === '/v1/sessions/revoke'));
  });

  it('free-spin routes: issue, repeat, list, read, cancel, and their errors', async () => {
    const grants = '/v1/operator/free-spins/grants';
    const body = { playerRef: 'doc-fs', idempotencyKey: randomUUID(), gameId: 'fruit-1', spins: 5, currency: 'EUR', expiresAt: '2030-01-01T00:00:00Z' };
    const created = await op({ path: grants, body });
    conforms('post', grants, created, 201);
    conforms('post', grants, await op({ path: grants, body }), 200);
    conforms('post', grants, await op({ path: grants, body: { playerRef: 'doc-fs', idempotencyKey: randomUUID(), campaignId: 'welcome-10' } }), 201);
    conforms('post', grants, await op({ path: grants, body: { playerRef: 'doc-fs', idempotencyKey: randomUUID(), campaignId: 'paused' } }), 400);
    conforms('post', grants, await op({ path: grants, body: { playerRef: 'doc-fs', idempotencyKey: randomUUID(), campaignId: 'nope' } }), 404);
    conforms('post', grants, await op({ path: grants, body: { ...body, idempotencyKey: randomUUID(), gameId: 'hidden-3' } }), 403);
    h.provider.script('/v1/free-spins/grants', { status: 500, body: { error: 'down' } });
    conforms('post', grants, await op({ path: grants, body: { ...body, idempotencyKey: randomUUID() } }), 502);

    conforms('get', grants, await op({ path: `${grants}?playerRef=doc-fs` }), 200);
    conforms('get', grants, await op({ path: grants }), 200);
    const id = (created.json as { id: string }).id;
    conforms('get', `${grants}/{id}`, await op({ path: `${grants}/${id}` }), 200);
    conforms('get', `${grants}/{id}`, await op({ path: `${grants}/not-a-uuid` }), 400);
    conforms('get', `${grants}/{id}`, await op({ path: `${grants}/${randomUUID()}` }), 404);
    conforms('get', `${grants}/{id}`, await op({ path: `${grants}/${id}`, as: OP2 }), 404);
    conforms('post', `${grants}/{id}/cancel`, await op({ path: `${grants}/${id}/cancel`, method: 'POST' }), 200);
    conforms('post', `${grants}/{id}/cancel`, await op({ path: `${grants}/${id}/cancel`, method: 'POST' }), 400);

    const auditGrant = await admin('GET', `/v1/audit/grants/${id}`);
    conforms('get', '/v1/audit/grants/{id}', auditGrant, 200);
    conforms('get', '/v1/audit/grants/{id}', await admin('GET', `/v1/audit/grants/${randomUUID()}`), 404);
  });

  it('provider routes: transactions and balance, with their errors', async () => {
    const token = await h.launch('doc-tx');
    const roundId = `doc-r-${randomUUID()}`;
    const bet = h.bet(token, { playerRef: 'doc-tx', roundId, metadata: { jackpot: { won: false } } });
    conforms('post', '/v1/wallet/transaction', await h.tx(bet), 200);
    conforms('post', '/v1/wallet/transaction', await h.tx(bet), 200); // idempotent repeat
    conforms('post', '/v1/wallet/transaction', await h.tx({ ...bet, amount: 999 }), 409);
    conforms('post', '/v1/wallet/transaction', await h.tx({ ...bet, transactionId: randomUUID(), sessionToken: 'unknown-token' }), 401);
    conforms('post', '/v1/wallet/transaction', await h.tx({ ...bet, transactionId: randomUUID(), currency: 'USD' }), 400);
    const declined = randomUUID();
    h.wallet.script(declined, { status: 500, body: {} });
    conforms('post', '/v1/wallet/transaction', await h.tx({ ...bet, transactionId: declined, roundId: `doc-r-${randomUUID()}` }), 502);
    const win = { ...bet, transactionId: `doc-win-${randomUUID()}`, type: 'WIN', roundComplete: true, amount: 250 };
    conforms('post', '/v1/wallet/transaction', await h.tx(win), 200);

    const balance = (sessionToken: string) => signedRequest(h.svc.url, { path: '/v1/wallet/balance', body: { sessionToken }, as: PROV_A });
    const walletsOk = await balance(token);
    conforms('post', '/v1/wallet/balance', walletsOk, 200);
    expect(walletsOk.headers.get('x-wallet-passthrough')).toBe('true');
    const ours = await balance('unknown-token');
    conforms('post', '/v1/wallet/balance', ours, 401);
    expect(ours.headers.get('x-wallet-passthrough')).toBeNull();
    h.wallet.setBalanceReply({ status: 503, body: { error: 'wallet maintenance' } });
    try {
      const passthrough = await balance(token);
      conforms('post', '/v1/wallet/balance', passthrough, 503);
      expect(passthrough.json).toEqual({ error: 'wallet maintenance' });
      expect(passthrough.headers.get('x-wallet-passthrough')).toBe('true');
      // A wallet 401 with the very body the service uses is told apart by the header alone.
      h.wallet.setBalanceReply({ status: 401, body: { error: 'invalid session' } });
      const wallets401 = await balance(token);
      conforms('post', '/v1/wallet/balance', wallets401, 401);
      expect(wallets401.headers.get('x-wallet-passthrough')).toBe('true');
    } finally {
      h.wallet.setBalanceReply(undefined);
    }
  });

  it('admin and audit routes', async () => {
    // A WIN the wallet keeps refusing: unsettled, so /v1/audit/transactions has a row to show.
    const token = await h.launch('doc-audit');
    const roundId = `doc-r-${randomUUID()}`;
    await h.tx(h.bet(token, { playerRef: 'doc-audit', roundId }));
    const stuck = `doc-stuck-${randomUUID()}`;
    h.wallet.script(stuck, ...Array.from({ length: 500 }, () => ({ status: 500, body: {} })));
    conforms('post', '/v1/wallet/transaction', await h.tx(h.bet(token, { playerRef: 'doc-audit', roundId, transactionId: stuck, type: 'WIN', roundComplete: true })), 502);

    const adjustment = { operatorId: 'op-1', playerRef: 'doc-audit', amount: 500, currency: 'EUR', direction: 'CREDIT', reason: 'openapi test' };
    conforms('post', '/v1/admin/adjustments', await admin('POST', '/v1/admin/adjustments', adjustment), 200);
    conforms('post', '/v1/admin/adjustments', await admin('POST', '/v1/admin/adjustments', { ...adjustment, operatorId: 'nope' }), 404);
    conforms('post', '/v1/admin/adjustments', await admin('POST', '/v1/admin/adjustments', { ...adjustment, amount: 0 }), 400);
    conforms('post', '/v1/admin/adjustments', await admin('POST', '/v1/admin/adjustments', adjustment, 'wrong'), 401);
    conforms('get', '/v1/admin/projections', await admin('GET', '/v1/admin/projections'), 200);
    conforms('put', '/v1/admin/catalog', await admin('PUT', '/v1/admin/catalog', { operators: [{ id: 'x' }] }), 400);

    conforms('get', '/v1/audit/events', await admin('GET', '/v1/audit/events?limit=1000'), 200);
    conforms('get', '/v1/audit/events', await admin('GET', '/v1/audit/events?limit=0'), 400);
    conforms('get', '/v1/audit/events', await admin('GET', '/v1/audit/events', undefined, null), 401);
    const stream = encodeURIComponent(`round|studio-a|op-1|${roundId}`);
    conforms('get', '/v1/audit/streams/{streamId}', await admin('GET', `/v1/audit/streams/${stream}`), 200);
    conforms('get', '/v1/audit/streams/{streamId}', await admin('GET', '/v1/audit/streams/nope'), 404);
    conforms('get', '/v1/audit/rounds/{providerId}/{operatorId}/{roundId}', await admin('GET', `/v1/audit/rounds/studio-a/op-1/${roundId}`), 200);
    conforms('get', '/v1/audit/rounds/{providerId}/{operatorId}/{roundId}', await admin('GET', '/v1/audit/rounds/studio-a/op-1/nope'), 404);
    await op({ path: '/v1/operator/players/kick', body: { playerRef: 'doc-audit' } });
    conforms('get', '/v1/audit/players/{operatorId}/{playerRef}/sessions', await admin('GET', '/v1/audit/players/op-1/doc-audit/sessions'), 200);
    conforms('get', '/v1/audit/players/{operatorId}/{playerRef}/sessions', await admin('GET', '/v1/audit/players/op-1/nobody/sessions'), 404);
    let unsettled: TestResponse | undefined;
    await until(async () => {
      unsettled = await admin('GET', '/v1/audit/transactions?status=unsettled');
      return (unsettled.json as { transactions?: Array<{ transaction_id: string }> }).transactions?.some((t) => t.transaction_id === stuck) === true;
    });
    conforms('get', '/v1/audit/transactions', unsettled!, 200);
    conforms('get', '/v1/audit/transactions', await admin('GET', '/v1/audit/transactions'), 200);
    conforms('get', '/v1/audit/transactions', await admin('GET', '/v1/audit/transactions?status=maybe'), 400);
  });

  it('reconciliation routes: transactions, a round, the settlement statement as JSON and CSV, and their errors', async () => {
    const token = await h.launch('doc-recon');
    const roundId = `doc-r-${randomUUID()}`;
    await h.tx(h.bet(token, { playerRef: 'doc-recon', roundId }));
    await h.tx(h.bet(token, { playerRef: 'doc-recon', roundId, transactionId: `doc-win-${randomUUID()}`, type: 'WIN', roundComplete: true, amount: 250 }));
    const round = `/v1/operator/rounds/${roundId}?gameId=fruit-1`;
    // Served from a read model: wait until it shows the round with both transactions.
    await until(async () => {
      const r = await op({ path: round });
      return r.status === 200 && (r.json as { transactions?: unknown[] }).transactions?.length === 2;
    });
    conforms('get', '/v1/operator/rounds/{roundId}', await op({ path: round }), 200);
    conforms('get', '/v1/operator/rounds/{roundId}', await op({ path: `/v1/operator/rounds/${roundId}` }), 400);
    conforms('get', '/v1/operator/rounds/{roundId}', await op({ path: `/v1/operator/rounds/${roundId}?gameId=gems-2` }), 404);

    const range = `from=${encodeURIComponent(new Date(Date.now() - 3_600_000).toISOString())}&to=${encodeURIComponent(new Date(Date.now() + 3_600_000).toISOString())}`;
    const transactions = '/v1/operator/transactions';
    const first = await op({ path: `${transactions}?${range}&playerRef=doc-recon&limit=1` });
    conforms('get', transactions, first, 200);
    const cursor = (first.json as { nextCursor: string | null }).nextCursor;
    expect(cursor).not.toBeNull();
    conforms('get', transactions, await op({ path: `${transactions}?${range}&playerRef=doc-recon&limit=1&cursor=${cursor!}` }), 200);
    conforms('get', transactions, await op({ path: `${transactions}?roundId=${roundId}&gameId=fruit-1` }), 200);
    conforms('get', transactions, await op({ path: `${transactions}?${range}&cursor=${cursor!}` }), 400);
    conforms('get', transactions, await op({ path: `${transactions}?from=2026-11-01T00:00:00Z&to=2026-12-03T00:00:00Z` }), 400);

    const settlement = '/v1/operator/reports/settlement';
    conforms('get', settlement, await op({ path: `${settlement}?${range}` }), 200);
    const csv = await op({ path: `${settlement}?${range}`, headers: { accept: 'text/csv' } });
    conforms('get', settlement, csv, 200);
    expect(csv.headers.get('content-type')).toMatch(/^text\/csv/);
    conforms('get', settlement, await op({ path: `${settlement}?from=2026-11-01T00:00:00Z` }), 400);
  });

  it('time travel (asOf) on the round, session-stream and grant audit routes', async () => {
    const token = await h.launch('doc-asof');
    const roundId = `doc-r-${randomUUID()}`;
    await h.tx(h.bet(token, { playerRef: 'doc-asof', roundId }));
    const grant = await op({ path: '/v1/operator/free-spins/grants', body: { playerRef: 'doc-asof', idempotencyKey: randomUUID(), gameId: 'fruit-1', spins: 5, currency: 'EUR' } });
    const grantId = (grant.json as { id: string }).id;
    const round = '/v1/audit/rounds/{providerId}/{operatorId}/{roundId}';
    const sessions = '/v1/audit/players/{operatorId}/{playerRef}/sessions';
    const grants = '/v1/audit/grants/{id}';
    const now = encodeURIComponent(new Date(Date.now() + 1000).toISOString());
    const before = encodeURIComponent('2020-01-01T00:00:00+01:00');
    for (const [path, url] of [
      [round, `/v1/audit/rounds/studio-a/op-1/${roundId}`],
      [sessions, '/v1/audit/players/op-1/doc-asof/sessions'],
      [grants, `/v1/audit/grants/${grantId}`],
    ] as const) {
      const later = await admin('GET', `${url}?asOf=${now}`);
      conforms('get', path, later, 200);
      expect(later.json, url).toMatchObject({ position: expect.any(String), state: expect.anything() });
      const earlier = await admin('GET', `${url}?asOf=${before}`);
      conforms('get', path, earlier, 200);
      expect(earlier.json, url).toMatchObject({ asOf: '2020-01-01T00:00:00+01:00', position: null, history: [] });
      const bad = await admin('GET', `${url}?asOf=yesterday`);
      conforms('get', path, bad, 400);
      expect(bad.json).toEqual({ error: 'asOf: not an RFC 3339 date-time with a time zone, such as 2026-11-24T10:00:00.000Z' });
    }
    expect((await admin('GET', `/v1/audit/grants/${grantId}?asOf=${before}`)).json).toMatchObject({ state: { status: 'none' } });
  });

  it('hash chain and history routes: public key, checkpoints, your events and your checkpoints', async () => {
    const key = await admin('GET', '/v1/audit/chain/public-key');
    conforms('get', '/v1/audit/chain/public-key', key, 200);
    const keyId = key.headers.get('x-key-id')!;
    conforms('get', '/v1/audit/chain/public-key', await admin('GET', `/v1/audit/chain/public-key?keyId=${keyId}`), 200);
    const unknownKey = await admin('GET', '/v1/audit/chain/public-key?keyId=0123456789abcdef');
    conforms('get', '/v1/audit/chain/public-key', unknownKey, 404);
    expect(unknownKey.json).toEqual({ error: 'no key with this id' });
    const badKeyId = await admin('GET', '/v1/audit/chain/public-key?keyId=nope');
    conforms('get', '/v1/audit/chain/public-key', badKeyId, 400);
    expect(badKeyId.json).toEqual({ error: 'keyId: must be a key id as checkpoints name it (16 hex digits)' });
    conforms('get', '/v1/audit/chain/public-key', await admin('GET', '/v1/audit/chain/public-key', undefined, null), 401);

    // Checkpoints are signed every second here: wait for one of op-1's chain.
    const mine = '/v1/operator/history/checkpoints';
    await until(async () => ((await op({ path: mine })).json as { checkpoints?: unknown[] }).checkpoints?.length !== 0);
    const globalCheckpoints = await admin('GET', '/v1/audit/chain/checkpoints?after=0&limit=10');
    conforms('get', '/v1/audit/chain/checkpoints', globalCheckpoints, 200);
    expect((globalCheckpoints.json as { checkpoints: Array<{ keyId: string }> }).checkpoints[0]?.keyId).toBe(keyId);
    const badLimit = await admin('GET', '/v1/audit/chain/checkpoints?limit=0');
    conforms('get', '/v1/audit/chain/checkpoints', badLimit, 400);
    expect(badLimit.json).toEqual({ error: 'limit: must be a whole number from 1 to 1000' });
    conforms('get', '/v1/audit/chain/checkpoints', await admin('GET', '/v1/audit/chain/checkpoints', undefined, null), 401);

    const events = await op({ path: '/v1/operator/history/events?after=0&limit=5' });
    conforms('get', '/v1/operator/history/events', events, 200);
    expect((events.json as { events: unknown[]; next: number }).next).toBe(5);
    conforms('get', '/v1/operator/history/events', await op({ path: '/v1/operator/history/events' }), 200);
    const badAfter = await op({ path: '/v1/operator/history/events?after=-1' });
    conforms('get', '/v1/operator/history/events', badAfter, 400);
    expect(badAfter.json).toEqual({ error: 'after: must be a whole number (a count of events)' });
    conforms('get', '/v1/operator/history/events', await op({ path: '/v1/operator/history/events', headers: { 'x-signature': '0'.repeat(64) } }), 401);
    conforms('get', mine, await op({ path: mine }), 200);
    conforms('get', mine, await op({ path: `${mine}?limit=1001` }), 400);
  });

  it('console routes and the re-drive of a dead transaction', async () => {
    // A WIN the wallet answers DECLINED, which a credit may not be: dead at once, so re-drivable without
    // waiting for a retry window to close (test/money/console-api.e2e.test.ts re-drives a dead-lettered one).
    const player = `doc-console-${randomUUID().slice(0, 8)}`;
    const token = await h.launch(player);
    const roundId = `doc-r-${randomUUID()}`;
    const betId = `doc-bet-${randomUUID()}`;
    const winId = `doc-win-${randomUUID()}`;
    expect((await h.tx(h.bet(token, { playerRef: player, roundId, transactionId: betId }))).status).toBe(200);
    h.wallet.script(winId, { status: 200, body: { status: 'DECLINED', balance: 0 } });
    conforms('post', '/v1/wallet/transaction', await h.tx(h.bet(token, { playerRef: player, roundId, transactionId: winId, type: 'WIN', roundComplete: true, amount: 250 })), 502);
    const grant = await op({ path: '/v1/operator/free-spins/grants', body: { playerRef: player, idempotencyKey: randomUUID(), gameId: 'fruit-1', spins: 5, currency: 'EUR' } });
    expect(grant.status).toBe(201);
    const grantId = (grant.json as { id: string }).id;

    // The stuck list shows the WIN dead, with the names a re-drive needs.
    const stuck = '/v1/admin/console/stuck';
    let stuckList: TestResponse | undefined;
    await until(async () => {
      stuckList = await admin('GET', stuck);
      return (stuckList.json as { transactions?: Array<{ transactionId: string; status: string }> }).transactions?.some((t) => t.transactionId === winId && t.status === 'dead') === true;
    });
    conforms('get', stuck, stuckList!, 200);
    conforms('get', stuck, await admin('GET', stuck, undefined, null), 401);

    const redrive = '/v1/admin/transactions/redrive';
    const body = { operatorId: 'op-1', providerId: 'studio-a', roundId, transactionId: winId, by: 'docs@example.com', reason: 'openapi conformance' };
    const redriven = await admin('POST', redrive, body);
    conforms('post', redrive, redriven, 202);
    expect(redriven.json).toEqual({ transactionId: winId, status: 'redriven' });
    // Pending again until the worker's attempt (test/money/console-api.e2e.test.ts follows it to the wallet).
    const again = await admin('POST', redrive, body);
    conforms('post', redrive, again, 409);
    expect((again.json as { error: string }).error).toMatch(/^only a dead transaction is re-driven: this one is (pending|applied)$/);
    const bet = await admin('POST', redrive, { ...body, transactionId: betId });
    conforms('post', redrive, bet, 409);
    expect(bet.json).toEqual({ error: 'a BET is never re-driven: its provider resubmits it or rolls it back' });
    const missing = await admin('POST', redrive, { ...body, transactionId: 'nope' });
    conforms('post', redrive, missing, 404);
    expect(missing.json).toEqual({ error: 'transaction not found' });
    const noWho = await admin('POST', redrive, { ...body, by: '  ' });
    conforms('post', redrive, noWho, 400);
    expect(noWho.json).toEqual({ error: 'by: say who re-drives it' });
    // Missing altogether, the same words (errors.md), not the schema's "expected string".
    const { by: _by, ...withoutBy } = body;
    expect((await admin('POST', redrive, withoutBy)).json).toEqual({ error: 'by: say who re-drives it' });
    const { reason: _reason, ...withoutReason } = body;
    expect((await admin('POST', redrive, withoutReason)).json).toEqual({ error: 'reason: say why' });
    // Too long is said as such, not as missing.
    expect((await admin('POST', redrive, { ...body, by: 'x'.repeat(201) })).json).toEqual({ error: 'by: at most 200 characters' });
    expect((await admin('POST', redrive, { ...body, reason: 'x'.repeat(1001) })).json).toEqual({ error: 'reason: at most 1000 characters' });
    conforms('post', redrive, await admin('POST', redrive, body, 'wrong'), 401);
    const overview = '/v1/admin/console/overview';
    conforms('get', overview, await admin('GET', overview), 200);
    conforms('get', overview, await admin('GET', `${overview}?window=day`), 200);
    const badWindow = await admin('GET', `${overview}?window=week`);
    conforms('get', overview, badWindow, 400);
    expect(badWindow.json).toEqual({ error: 'window: must be hour or day' });
    const unknownKey = await admin('GET', `${overview}?since=1`);
    conforms('get', overview, unknownKey, 400);
    expect(unknownKey.json).toEqual({ error: 'query: Unrecognized key: "since"' });

    // Search and the player page read the read models: wait until they show the round.
    const search = '/v1/admin/console/search';
    const find = (q: string) => admin('GET', `${search}?q=${encodeURIComponent(q)}`);
    await until(async () => ((await find(roundId)).json as { results?: unknown[] }).results?.length === 1);
    for (const q of [winId, roundId, player, grantId, 'nothing-like-it']) conforms('get', search, await find(q), 200);
    expect(((await find(winId)).json as { results: unknown[] }).results).toEqual([expect.objectContaining({ kind: 'transaction', transactionId: winId, roundId })]);
    const empty = await find('  ');
    conforms('get', search, empty, 400);
    expect(empty.json).toEqual({ error: 'q: type a transaction id, round id, player ref or grant id' });
    const noQ = await admin('GET', search);
    conforms('get', search, noQ, 400);
    expect(noQ.json).toEqual({ error: 'q: Invalid input: expected string, received undefined' });

    const playerPath = '/v1/admin/console/players/{operatorId}/{playerRef}';
    let page: TestResponse | undefined;
    await until(async () => {
      page = await admin('GET', `/v1/admin/console/players/op-1/${player}`);
      const json = page.json as { rounds?: unknown[]; grants?: unknown[] };
      return page.status === 200 && json.rounds?.length === 1 && json.grants?.length === 1;
    });
    conforms('get', playerPath, page!, 200);
    const nobody = await admin('GET', `/v1/admin/console/players/op-1/nobody-${randomUUID()}`);
    conforms('get', playerPath, nobody, 404);
    expect(nobody.json).toEqual({ error: 'player not found' });

    const operators = await admin('GET', '/v1/admin/console/operators');
    conforms('get', '/v1/admin/console/operators', operators, 200);
    expect(operators.text).not.toContain(OP1.secret);

    const settlement = '/v1/admin/operators/{operatorId}/settlement';
    const range = `from=${encodeURIComponent(new Date(Date.now() - 3_600_000).toISOString())}&to=${encodeURIComponent(new Date(Date.now() + 3_600_000).toISOString())}`;
    conforms('get', settlement, await admin('GET', `/v1/admin/operators/op-1/settlement?${range}`), 200);
    const csv = await admin('GET', `/v1/admin/operators/op-1/settlement?${range}`, undefined, ADMIN_TOKEN, { accept: 'text/csv' });
    conforms('get', settlement, csv, 200);
    expect(csv.headers.get('content-type')).toMatch(/^text\/csv/);
    conforms('get', settlement, await admin('GET', '/v1/admin/operators/op-1/settlement?from=2026-11-01T00:00:00Z'), 400);
    const noOperator = await admin('GET', `/v1/admin/operators/nope/settlement?${range}`);
    conforms('get', settlement, noOperator, 404);
    expect(noOperator.json).toEqual({ error: 'operator not found' });

    const replay = '/v1/admin/rounds/replay-link';
    conforms('post', replay, await admin('POST', replay, { operatorId: 'op-1', roundId, gameId: 'fruit-1' }), 200);
    const noReplay = await admin('POST', replay, { operatorId: 'op-1', roundId, gameId: 'gems-2' });
    conforms('post', replay, noReplay, 400);
    expect(noReplay.json).toEqual({ error: 'gameId: this game does not support round replay' });
    const otherOperator = await admin('POST', replay, { operatorId: 'op-2', roundId, gameId: 'fruit-1' });
    conforms('post', replay, otherOperator, 404);
    expect(otherOperator.json).toEqual({ error: 'round not found' });
  });

  it('rate limiting answers 429 with Retry-After, as documented', async () => {
    const op2 = testCatalog({ walletUrl: h.wallet.url, wallet2Url: h.wallet2.url, providerUrl: h.provider.url }).operators[1]!;
    conforms('put', '/v1/admin/catalog', await admin('PUT', '/v1/admin/catalog', { operators: [{ ...op2, rateLimit: { limit: 1, windowSeconds: 1 } }] }), 200);
    // The window slides over requests accepted before the change too: let the earlier ones leave it.
    await new Promise((r) => setTimeout(r, 1100));
    conforms('get', '/v1/operator/games', await op({ path: '/v1/operator/games', as: OP2 }), 200);
    conforms('get', '/v1/operator/games', await op({ path: '/v1/operator/games', as: OP2 }), 429);
  });

  it('sends partners the bodies the webhooks document', async () => {
    const walletCalls = [...h.wallet.calls];
    const transactions = walletCalls.filter((c) => c.method === 'POST' && c.target === '/v1/wallet/transaction');
    expect(new Set(transactions.map((c) => (c.body as { type: string }).type))).toEqual(new Set(['BET', 'WIN', 'ADJUSTMENT']));
    for (const c of transactions) {
      const parsed = walletTransactionRequest.safeParse(c.body);
      expect(parsed.success, `${c.rawBody}: ${parsed.error?.message ?? ''}`).toBe(true);
      // The per-type rules the document states with if/then (originalTransactionId, direction).
      const rules = (served.components as { schemas: Record<string, { allOf?: unknown[] }> }).schemas.WalletTransactionRequest!.allOf;
      expect(rules, 'WalletTransactionRequest has per-type rules').toBeDefined();
      expect(satisfies({ allOf: rules }, c.body), c.rawBody).toBe(true);
    }
    const balances = walletCalls.filter((c) => c.method === 'GET');
    expect(balances.length).toBeGreaterThan(0);
    for (const c of balances) expect(c.target).toMatch(/^\/v1\/wallet\/balance\?playerRef=[^&]+$/);

    const byPath = (re: RegExp) => h.provider.calls.filter((c) => re.test(c.target));
    const expectations: Array<[RegExp, z.ZodType]> = [
      [/^\/v1\/free-spins\/grants$/, providerGrantRequest],
      [/^\/v1\/free-spins\/grants\/[^/]+\/cancel$/, providerCancelRequest],
      [/^\/v1\/sessions\/revoke$/, providerRevokeRequest],
    ];
    for (const [re, schema] of expectations) {
      const calls = byPath(re);
      expect(calls.length, String(re)).toBeGreaterThan(0);
      for (const c of calls) {
        expect(c.method).toBe('POST');
        const parsed = schema.safeParse(c.body);
        expect(parsed.success, `${c.target} ${c.rawBody}: ${parsed.error?.message ?? ''}`).toBe(true);
      }
    }
    expect(h.provider.calls.length).toBe(expectations.reduce((n, [re]) => n + byPath(re).length, 0));
  });

  it('has seen every documented route answer successfully and match its documented response', () => {
    expect(routes.map((r) => key(r.method, r.path)).filter((k) => !succeeded.has(k))).toEqual([]);
  });
});
