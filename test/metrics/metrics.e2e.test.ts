import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OP1, OP2, PROV_A, testCatalog } from '../helpers/catalog.ts';
import { ADMIN_TOKEN, spawnService, type SpawnedService } from '../helpers/service.ts';
import { signedRequest } from '../helpers/signing.ts';
import { startMoneyHarness, type MoneyHarness } from '../money/harness.ts';
import { parseExposition, samplesOf, total, type Exposition } from './exposition.ts';

/**
 * The API and projector run in this process; the worker runs as its own OS process (ROLES=worker), so
 * wallet retries and dead letters show on the worker's /metrics, served on its own port.
 */
describe('Prometheus metrics at GET /metrics', () => {
  let h: MoneyHarness;
  let worker: SpawnedService;
  const dispatch = { DISPATCH_BACKOFF_BASE_MS: '100', DISPATCH_BACKOFF_MAX_MS: '400', RECOVERY_SWEEP_SECONDS: '1', DISPATCH_RETRY_WINDOW_SECONDS: '3' };

  beforeAll(async () => {
    h = await startMoneyHarness('metrics', { ...dispatch, ROLES: 'api,projector' });
    worker = await spawnService(h.env.env({ ...dispatch, ROLES: 'worker' }));
  });
  afterAll(async () => {
    await worker?.stop();
    await h?.close();
  });

  const scrape = async (url: string): Promise<Exposition> => {
    const res = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    return parseExposition(await res.text());
  };
  const api = () => scrape(h.svc.url);
  const wrk = () => scrape(worker.url);
  /** wallet_call_duration_seconds_count: how many calls of this operator, kind and outcome. */
  const calls = (e: Exposition, operator: string, kind: string, outcome: string) => total(e, 'wallet_call_duration_seconds_count', { operator, kind, outcome });
  const requests = (e: Exposition, labels: Record<string, string>) => total(e, 'http_request_duration_seconds_count', labels);

  const player = async () => {
    const name = `p-${randomUUID().slice(0, 8)}`;
    const token = await h.launch(name);
    const base = { sessionToken: token, playerRef: name, currency: 'EUR', gameId: 'fruit-1', roundId: `r-${randomUUID()}` };
    return {
      name,
      token,
      roundId: base.roundId,
      bet: () => ({ ...base, transactionId: `b-${randomUUID()}`, type: 'BET', roundComplete: false, amount: 100 }),
      win: () => ({ ...base, transactionId: `w-${randomUUID()}`, type: 'WIN', roundComplete: true, amount: 250 }),
    };
  };

  it('answers 401 without the admin bearer token, on the API port and on the worker port', async () => {
    for (const url of [h.svc.url, worker.url]) {
      const none = await fetch(`${url}/metrics`);
      expect(none.status).toBe(401);
      expect(await none.json()).toEqual({ error: 'unauthorized' });
      expect((await fetch(`${url}/metrics`, { headers: { authorization: 'Bearer not-the-token' } })).status).toBe(401);
      // A provider's or operator's signature is no way in either.
      expect((await signedRequest(url, { path: '/metrics', as: OP1 })).status).toBe(401);
    }
  });

  it('counts wallet calls by operator, kind and outcome: applied, declined and invalid transactions, balance', async () => {
    const before = await api();
    const p = await player();
    expect((await h.tx(p.bet())).json).toMatchObject({ status: 'OK' });
    const declined = await player();
    h.wallet.declineBets(declined.name);
    expect((await h.tx(declined.bet())).json).toMatchObject({ status: 'DECLINED' });
    const win = p.win();
    h.wallet.script(win.transactionId, { status: 200, body: { status: 'DECLINED', balance: 1 } });
    expect((await h.tx(win)).status).toBe(502);
    expect((await signedRequest(h.svc.url, { path: '/v1/wallet/balance', body: { sessionToken: p.token }, as: PROV_A })).status).toBe(200);

    const after = await api();
    const delta = (operator: string, kind: string, outcome: string) => calls(after, operator, kind, outcome) - calls(before, operator, kind, outcome);
    expect(delta(OP1.id, 'transaction', 'applied')).toBe(1);
    expect(delta(OP1.id, 'transaction', 'declined')).toBe(1);
    expect(delta(OP1.id, 'transaction', 'invalid')).toBe(1);
    expect(delta(OP1.id, 'balance', 'ok')).toBe(1);
    expect(delta(OP1.id, 'transaction', 'failed')).toBe(0);
    expect(samplesOf(after, 'wallet_call_duration_seconds_count', { operator: OP2.id })).toEqual([]);
    expect(after.types.get('wallet_call_duration_seconds')).toBe('histogram');
    // Every observation fell in some bucket: +Inf holds the count.
    expect(total(after, 'wallet_call_duration_seconds_bucket', { operator: OP1.id, kind: 'transaction', outcome: 'applied', le: '+Inf' })).toBe(
      calls(after, OP1.id, 'transaction', 'applied'),
    );
  });

  it('counts a failing WIN as failed on the API, then applied and counted as a retry on the worker that retried it', async () => {
    const [apiBefore, workerBefore] = await Promise.all([api(), wrk()]);
    const p = await player();
    await h.tx(p.bet());
    const win = p.win();
    h.wallet.script(win.transactionId, { status: 500, body: { error: 'down' } });
    expect((await h.tx(win)).status).toBe(502);
    await h.until(() => h.wallet.effects.get(win.transactionId) === 1);

    const [apiAfter, workerAfter] = await Promise.all([api(), wrk()]);
    expect(calls(apiAfter, OP1.id, 'transaction', 'failed') - calls(apiBefore, OP1.id, 'transaction', 'failed')).toBe(1);
    expect(calls(workerAfter, OP1.id, 'transaction', 'applied') - calls(workerBefore, OP1.id, 'transaction', 'applied')).toBe(1);
    // Every call the worker made was a retry (normally exactly one; a slow retry that timed out adds another).
    const workerCalls = total(workerAfter, 'wallet_call_duration_seconds_count', { operator: OP1.id, kind: 'transaction' }) - total(workerBefore, 'wallet_call_duration_seconds_count', { operator: OP1.id, kind: 'transaction' });
    const retries = total(workerAfter, 'wallet_retries_total', { operator: OP1.id }) - total(workerBefore, 'wallet_retries_total', { operator: OP1.id });
    expect(retries).toBeGreaterThanOrEqual(1);
    expect(retries).toBe(workerCalls);
    // The API made first attempts only.
    expect(total(apiAfter, 'wallet_retries_total')).toBe(0);
  });

  it('counts a dead letter on the worker, and the API process (projector) reports it dead-lettered from Postgres', async () => {
    const workerBefore = await wrk();
    const p = await player();
    await h.tx(p.bet());
    const win = p.win();
    h.wallet.script(win.transactionId, ...Array.from({ length: 200 }, () => ({ status: 500, body: { error: 'down' } })));
    expect((await h.tx(win)).status).toBe(502);

    let workerAfter = workerBefore;
    await h.until(async () => {
      workerAfter = await wrk();
      return total(workerAfter, 'wallet_dead_letters_total', { operator: OP1.id }) > total(workerBefore, 'wallet_dead_letters_total', { operator: OP1.id });
    });
    expect(total(workerAfter, 'wallet_dead_letters_total', { operator: OP1.id }) - total(workerBefore, 'wallet_dead_letters_total', { operator: OP1.id })).toBe(1);
    expect(calls(workerAfter, OP1.id, 'transaction', 'failed') - calls(workerBefore, OP1.id, 'transaction', 'failed')).toBeGreaterThanOrEqual(1);

    // The gauge counts what operators see as dead in their lists: the dead-lettered WIN now among them.
    const deadRows = async () =>
      (await h.svc.ctx.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM rm_transactions WHERE operator_id = $1 AND operator_status = 'dead'`, [OP1.id])).rows[0]!.n;
    const winIsDead = async () =>
      (await h.svc.ctx.pool.query(`SELECT 1 FROM rm_transactions WHERE transaction_id = $1 AND operator_status = 'dead'`, [win.transactionId])).rowCount === 1;
    let apiAfter: Exposition | undefined;
    await h.until(async () => {
      apiAfter = await api();
      return (await winIsDead()) && total(apiAfter, 'wallet_dead_lettered_transactions', { operator: OP1.id }) === (await deadRows());
    });
    const deadWithWin = await deadRows();
    expect(apiAfter!.types.get('wallet_dead_lettered_transactions')).toBe('gauge');
    // Every operator of the catalog has a series; one with none shows 0.
    expect(samplesOf(apiAfter!, 'wallet_dead_lettered_transactions', { operator: OP2.id }).map((s) => s.value)).toEqual([0]);
    // Read from Postgres, so not served by a process without the projector role.
    expect(samplesOf(workerAfter, 'wallet_dead_lettered_transactions')).toEqual([]);

    // A credit the wallet answered DECLINED is never sent again either: counted with them (operators see it dead).
    const other = await player();
    expect((await h.tx(other.bet())).status).toBe(200);
    const declined = other.win();
    // Every call of it, should a slow first one time out on a loaded machine and the worker retry it.
    h.wallet.script(declined.transactionId, ...Array.from({ length: 50 }, () => ({ status: 200, body: { status: 'DECLINED', balance: 0 } })));
    expect((await h.tx(declined)).status).toBe(502);
    await h.until(async () => total(await api(), 'wallet_dead_lettered_transactions', { operator: OP1.id }) === deadWithWin + 1);
  });

  it('counts a 429 as a rate-limit refusal of that operator', async () => {
    const catalog = testCatalog({ walletUrl: h.wallet.url, wallet2Url: h.wallet2.url, providerUrl: h.provider.url, walletTimeoutMs: 500 });
    catalog.operators[1]!.rateLimit = { limit: 2, windowSeconds: 60 };
    await h.svc.ctx.catalog.apply(catalog);
    try {
      const before = await api();
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) statuses.push((await signedRequest(h.svc.url, { path: '/v1/operator/games', as: OP2 })).status);
      expect(statuses).toEqual([200, 200, 429]);
      const after = await api();
      expect(total(after, 'rate_limit_refusals_total', { operator: OP2.id }) - total(before, 'rate_limit_refusals_total', { operator: OP2.id })).toBe(1);
      expect(total(after, 'rate_limit_refusals_total', { operator: OP1.id })).toBe(0);
      // Refused before any route matched it.
      const games = { method: 'GET', route: '/v1/operator/games' };
      expect(requests(after, { ...games, status: '200' }) - requests(before, { ...games, status: '200' })).toBe(2);
      expect(requests(after, { method: 'GET', route: 'unmatched', status: '429' }) - requests(before, { method: 'GET', route: 'unmatched', status: '429' })).toBe(1);
    } finally {
      await h.svc.ctx.catalog.apply(testCatalog({ walletUrl: h.wallet.url, wallet2Url: h.wallet2.url, providerUrl: h.provider.url, walletTimeoutMs: 500 }));
    }
  });

  it('labels HTTP requests with the route template and status, never the raw path', async () => {
    const p = await player();
    const bet = p.bet();
    expect((await h.tx(bet)).status).toBe(200);
    const audit = (roundId: string, prefix = '/v1/audit') => fetch(`${h.svc.url}${prefix}/rounds/${PROV_A.id}/${OP1.id}/${roundId}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    const before = await api();
    expect((await audit(p.roundId)).status).toBe(200);
    // Express matches a path whatever its case: the caller's case makes no series of its own.
    expect((await audit(p.roundId, '/V1/Audit')).status).toBe(200);
    expect((await audit('no-such-round')).status).toBe(404); // thrown by the handler, after the route matched
    expect((await fetch(`${h.svc.url}/no/such/path/${randomUUID()}`)).status).toBe(404);
    const after = await api();

    const template = { method: 'GET', route: '/v1/audit/rounds/:providerId/:operatorId/:roundId' };
    const delta = (labels: Record<string, string>) => requests(after, labels) - requests(before, labels);
    expect(delta({ ...template, status: '200' })).toBe(2);
    expect(delta({ ...template, status: '404' })).toBe(1);
    expect(delta({ method: 'GET', route: 'unmatched', status: '404' })).toBe(1);
    expect(requests(after, { method: 'POST', route: '/v1/wallet/transaction', status: '200' })).toBeGreaterThanOrEqual(1);
    expect(requests(after, { method: 'POST', route: '/v1/operator/games/launch', status: '200' })).toBeGreaterThanOrEqual(1);
    const routes = new Set(samplesOf(after, 'http_request_duration_seconds_count').map((s) => s.labels.route));
    expect([...routes].filter((r) => r?.includes(p.roundId) || r?.includes('no-such') || r?.startsWith('/no/') || r?.includes('/V1/') || r?.includes('/Audit/'))).toEqual([]);
    expect(after.types.get('http_request_duration_seconds')).toBe('histogram');
  });

  it('reports projection lag per projection where the projector runs, and it drops to 0 once caught up', async () => {
    let e: Exposition | undefined;
    await h.until(async () => {
      e = await api();
      const lag = samplesOf(e, 'projection_lag_events');
      return lag.length === 5 && lag.every((s) => s.value === 0);
    });
    expect(samplesOf(e!, 'projection_lag_events').map((s) => s.labels.projection).sort()).toEqual(['chain', 'console', 'grants', 'rounds', 'sessions']);
    expect(samplesOf(e!, 'projection_lag_seconds').map((s) => [s.labels.projection, s.value]).sort()).toEqual([
      ['chain', 0],
      ['console', 0],
      ['grants', 0],
      ['rounds', 0],
      ['sessions', 0],
    ]);
    expect(e!.types.get('projection_lag_seconds')).toBe('gauge');
    expect(samplesOf(await wrk(), 'projection_lag_events')).toEqual([]);
  });

  it('a worker-only process serves /healthz, /readyz and /metrics on its port, and nothing else', async () => {
    expect(worker.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(worker.url).not.toBe(h.svc.url);
    expect((await fetch(`${worker.url}/healthz`)).status).toBe(200);
    expect(await (await fetch(`${worker.url}/readyz`)).json()).toEqual({ status: 'ready' });
    const e = await wrk();
    expect(e.types.get('wallet_retries_total')).toBe('counter');
    expect(e.types.get('process_cpu_user_seconds_total')).toBe('counter');
    expect(total(e, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    for (const path of ['/v1/operator/games', '/v1/wallet/transaction', '/v1/admin/projections', '/v1/audit/events']) {
      const res = await fetch(`${worker.url}${path}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      expect(res.status).toBe(404);
    }
  });
});
