import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OP1, OP2 } from '../helpers/catalog.ts';
import { ADMIN_TOKEN } from '../helpers/service.ts';
import { signedRequest, toTestResponse } from '../helpers/signing.ts';
import { startMoneyHarness, type MoneyHarness } from './harness.ts';

/**
 * The back-office console's data (issue #23): the admin routes it reads, and the re-drive of a dead
 * transaction, an admin action recorded in the round's history with who and why.
 */
describe('console data and re-drive (admin routes)', () => {
  let h: MoneyHarness;
  const run = randomUUID().slice(0, 8);
  const player = `con-${run}`;
  const roundId = `con-r-${run}`;
  const winId = `con-w-${run}`;
  const betId = `con-b-${run}`;
  let failWin = true;
  let grantId = '';

  const admin = async <T = Record<string, unknown>>(path: string, init: { method?: string; body?: unknown; accept?: string } = {}) =>
    toTestResponse<T>(
      await fetch(`${h.svc.url}${path}`, {
        method: init.method ?? (init.body !== undefined ? 'POST' : 'GET'),
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(init.body !== undefined ? { 'content-type': 'application/json' } : {}), ...(init.accept ? { accept: init.accept } : {}) },
        ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
      }),
    );
  const redrive = (over: Record<string, unknown> = {}) =>
    admin<{ error?: string; status?: string }>('/v1/admin/transactions/redrive', {
      body: { operatorId: OP1.id, providerId: 'studio-a', roundId, transactionId: winId, by: 'ops@example.com', reason: 'wallet was down all night', ...over },
    });

  beforeAll(async () => {
    h = await startMoneyHarness('consoleapi', { DISPATCH_RETRY_WINDOW_SECONDS: '2' });
    h.wallet.setChaos((tx) => (tx.transactionId === winId && failWin ? { fail: 503 } : undefined));
    const token = await h.launch(player);
    const base = { sessionToken: token, roundId, playerRef: player, currency: 'EUR', gameId: 'fruit-1' };
    expect((await h.tx({ ...base, transactionId: betId, type: 'BET', roundComplete: false, amount: 40 })).status).toBe(200);
    expect((await h.tx({ ...base, transactionId: winId, type: 'WIN', roundComplete: true, amount: 90 })).status).toBe(502);
    const grant = await signedRequest<{ id: string }>(h.svc.url, { path: '/v1/operator/free-spins/grants', body: { playerRef: player, idempotencyKey: randomUUID(), gameId: 'fruit-1', spins: 5, currency: 'EUR' }, as: OP1 });
    grantId = grant.json.id;
    // Retries stop after the 2 s window: the WIN is dead, in every read model.
    await h.until(async () => {
      const { rows } = await h.svc.ctx.pool.query(`SELECT operator_status AS status FROM rm_transactions WHERE transaction_id = $1`, [winId]);
      return rows[0]?.status === 'dead';
    }, 20_000);
    await h.caughtUp();
  }, 60_000);
  afterAll(async () => h?.close());

  it('lists the dead WIN among stuck money with its age, attempts and last error', async () => {
    const res = await admin<{ transactions: Array<Record<string, unknown>>; total: number }>('/v1/admin/console/stuck');
    expect(res.status).toBe(200);
    // Not cut (fewer than 1,000): the total is the list's length.
    expect(res.json.total).toBe(res.json.transactions.length);
    const win = res.json.transactions.find((t) => t.transactionId === winId);
    expect(win).toMatchObject({ operatorId: OP1.id, providerId: 'studio-a', roundId, gameId: 'fruit-1', type: 'WIN', amount: 90, currency: 'EUR', status: 'dead', redrivable: true });
    expect(win!.attempts).toBeGreaterThan(1);
    expect(String(win!.lastError)).toContain('503');
    expect(win!.ageSeconds).toBeGreaterThanOrEqual(2);
    expect(res.json.transactions.map((t) => t.transactionId)).not.toContain(betId);
  });

  it('lists a BET the wallet failed as stuck until it is rolled back, and not after', async () => {
    const token = await h.launch(`${player}-f`);
    const base = { sessionToken: token, roundId: `${roundId}-f`, playerRef: `${player}-f`, currency: 'EUR', gameId: 'fruit-1' };
    const failedBet = `${betId}-f`;
    h.wallet.script(failedBet, { status: 503, body: {} });
    expect((await h.tx({ ...base, transactionId: failedBet, type: 'BET', roundComplete: false, amount: 5 })).status).toBe(502);
    const stuck = async () => (await admin<{ transactions: Array<{ transactionId: string; status: string }> }>('/v1/admin/console/stuck')).json.transactions;
    await h.until(async () => (await stuck()).some((t) => t.transactionId === failedBet && t.status === 'failed'));
    // A BET is never re-driven: its provider resubmits it or rolls it back.
    expect((await stuck()).find((t) => t.transactionId === failedBet)).toMatchObject({ redrivable: false });
    expect((await h.tx({ ...base, transactionId: `${failedBet}-rb`, type: 'ROLLBACK', originalTransactionId: failedBet, amount: 5 })).status).toBe(200);
    await h.until(async () => !(await stuck()).some((t) => t.transactionId === failedBet));
  });

  it('refuses a re-drive that is not of a dead credit, or says nothing of who and why', async () => {
    const bet = await redrive({ transactionId: betId });
    expect(bet.status).toBe(409);
    expect(bet.json.error).toBe('a BET is never re-driven: its provider resubmits it or rolls it back');
    expect((await redrive({ transactionId: 'nope' })).status).toBe(404);
    const noWho = await redrive({ by: '  ' });
    expect(noWho.status).toBe(400);
    expect(noWho.json.error).toMatch(/^by: /);
    expect((await admin('/v1/admin/transactions/redrive', { body: {} })).status).toBe(400);
    const unauthorized = await fetch(`${h.svc.url}/v1/admin/transactions/redrive`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
    expect(unauthorized.status).toBe(401);
  });

  it('re-drives the dead WIN: the wallet receives it once more with the same id and body, it is applied, and the round shows who and why', async () => {
    const before = h.walletCallsFor(winId);
    failWin = false;
    // Two admins press at once: one re-drive is recorded, the other is told it is no longer dead.
    const both = await Promise.all([redrive(), redrive({ by: 'other@example.com' })]);
    const res = both.find((r) => r.status === 202)!;
    expect(both.map((r) => r.status).sort()).toEqual([202, 409]);
    expect(res.json).toEqual({ transactionId: winId, status: 'redriven' });
    expect(both.find((r) => r.status === 409)!.json.error).toMatch(/^only a dead transaction is re-driven: this one is (pending|applied)$/);
    await h.until(async () => {
      const { rows } = await h.svc.ctx.pool.query(`SELECT operator_status AS status FROM rm_transactions WHERE transaction_id = $1`, [winId]);
      return rows[0]?.status === 'applied';
    }, 15_000);
    const after = h.walletCallsFor(winId).slice(before.length);
    expect(after).toHaveLength(1);
    expect(after[0]!.rawBody).toBe(before[0]!.rawBody);
    expect(h.wallet.effects.get(winId)).toBe(1);
    // Applied now: a second re-drive is refused.
    const again = await redrive();
    expect(again.status).toBe(409);
    expect(again.json.error).toBe('only a dead transaction is re-driven: this one is applied');
    // The round's history holds the re-drive, with who and why, between the dead letter and the settlement.
    const round = await admin<{ history: Array<{ event: { type: string; data: Record<string, unknown>; metadata: Record<string, unknown> } }> }>(`/v1/audit/rounds/studio-a/${OP1.id}/${roundId}`);
    const types = round.json.history.map((e) => e.event.type);
    expect(types.slice(types.indexOf('TransactionDeadLettered'))).toEqual(['TransactionDeadLettered', 'TransactionRedriven', 'TransactionSettled']);
    const redriven = round.json.history.find((e) => e.event.type === 'TransactionRedriven')!.event;
    expect(redriven.data).toMatchObject({ transactionId: winId, by: expect.stringMatching(/^(ops|other)@example\.com$/), reason: 'wallet was down all night' });
    // Who said they did it, and where the request came from.
    expect(redriven.metadata).toMatchObject({ requestId: expect.stringMatching(/.+/), remoteAddress: expect.stringMatching(/127\.0\.0\.1/) });
    // Every wallet call of the round carries how long it took.
    for (const e of round.json.history.filter((x) => x.event.type === 'TransactionSettled' || x.event.type === 'TransactionAttemptFailed')) {
      expect(typeof e.event.data.durationMs).toBe('number');
    }
    const stuck = await admin<{ transactions: Array<{ transactionId: string }> }>('/v1/admin/console/stuck');
    expect(stuck.json.transactions.map((t) => t.transactionId)).not.toContain(winId);
  });

  it('gives the overview: transactions per minute, wallet calls with failures and latency per operator, unsettled counts, projection lag, the chain', async () => {
    await h.caughtUp();
    for (const window of ['hour', 'day'] as const) {
      const res = await admin<{
        bucketSeconds: number;
        transactions: Array<{ at: string; count: number }>;
        wallet: Array<{ operatorId: string; buckets: Array<{ calls: number; failures: number; p50Ms: number | null; p99Ms: number | null }> }>;
        unsettled: { pending: number; failed: number; dead: number };
        projections: Array<{ name: string; eventsBehind: number }>;
        lagHistory: Array<{ name: string; buckets: Array<{ eventsBehind: number | null }> }>;
        chain: { linked: number; behind: number; failing: string | null; signingLate: boolean };
      }>(`/v1/admin/console/overview?window=${window}`);
      expect(res.status).toBe(200);
      expect(res.json.bucketSeconds).toBe(window === 'hour' ? 60 : 900);
      expect(res.json.transactions).toHaveLength(window === 'hour' ? 60 : 96);
      expect(res.json.transactions.reduce((n, b) => n + b.count, 0)).toBeGreaterThanOrEqual(2);
      const op1 = res.json.wallet.find((w) => w.operatorId === OP1.id)!;
      const calls = op1.buckets.reduce((n, b) => n + b.calls, 0);
      const failures = op1.buckets.reduce((n, b) => n + b.failures, 0);
      const posted = h.wallet.calls.filter((c) => c.method === 'POST');
      expect(calls).toBe(posted.length);
      // The WIN's failed attempts (all but the one after its re-drive) and the BET the wallet failed.
      expect(failures).toBe(h.walletCallsFor(winId).length - 1 + h.walletCallsFor(`${betId}-f`).length);
      const busy = op1.buckets.filter((b) => b.calls > 0);
      expect(busy.every((b) => typeof b.p50Ms === 'number' && typeof b.p99Ms === 'number' && b.p99Ms! >= b.p50Ms!)).toBe(true);
      // Counted as the stuck-money page lists them: the failed BET left once its ROLLBACK was recorded.
      expect(res.json.unsettled).toEqual({ pending: 0, failed: 0, dead: 0 });
      expect(res.json.lagHistory.map((l) => l.name).sort()).toEqual(['chain', 'console', 'grants', 'rounds', 'sessions']);
      expect(res.json.lagHistory.every((l) => l.buckets.length === res.json.transactions.length)).toBe(true);
      expect(res.json.projections.map((p) => p.name).sort()).toEqual(['chain', 'console', 'grants', 'rounds', 'sessions']);
      expect(res.json.chain.linked).toBeGreaterThan(0);
      expect(res.json.chain).toMatchObject({ failing: null, signingLate: false });
    }
    expect((await admin('/v1/admin/console/overview?window=week')).status).toBe(400);
  });

  it('finds a transaction, a round, a player and a grant by their ids', async () => {
    const search = async (q: string) => (await admin<{ results: Array<Record<string, unknown>> }>(`/v1/admin/console/search?q=${encodeURIComponent(q)}`)).json.results;
    expect(await search(winId)).toEqual([expect.objectContaining({ kind: 'transaction', transactionId: winId, roundId, providerId: 'studio-a', operatorId: OP1.id, gameId: 'fruit-1' })]);
    expect(await search(roundId)).toEqual([expect.objectContaining({ kind: 'round', roundId, providerId: 'studio-a', operatorId: OP1.id })]);
    expect(await search(player)).toEqual([expect.objectContaining({ kind: 'player', playerRef: player, operatorId: OP1.id })]);
    expect(await search(grantId)).toEqual([expect.objectContaining({ kind: 'grant', grantId, operatorId: OP1.id })]);
    expect(await search('nothing-like-it')).toEqual([]);
    expect((await admin('/v1/admin/console/search?q=')).status).toBe(400);
  });

  it('finds every player page a ref has: one per operator, by a grant or a session alone, a ref with spaces as typed, and a player with only an adjustment', async () => {
    const search = async (q: string) => (await admin<{ results: Array<{ kind: string; operatorId: string; playerRef?: string }> }>(`/v1/admin/console/search?q=${encodeURIComponent(q)}`)).json.results;
    const players = async (q: string) => (await search(q)).filter((r) => r.kind === 'player').map((r) => [r.operatorId, r.playerRef]);
    // Rounds with op-1 and only a session with op-2: both pages.
    await signedRequest(h.svc.url, { path: '/v1/operator/games/launch', body: { playerRef: player, gameId: 'fruit-1', currency: 'EUR', mode: 'REAL' }, as: OP2 });
    // (The read models follow the log a moment behind.)
    await h.until(async () => (await players(player)).length === 2);
    expect(await players(player)).toEqual([[OP1.id, player], [OP2.id, player]]);
    // Only a grant.
    const grantOnly = `con-g-${run}`;
    const g = await signedRequest<{ id: string }>(h.svc.url, { path: '/v1/operator/free-spins/grants', body: { playerRef: grantOnly, idempotencyKey: randomUUID(), gameId: 'fruit-1', spins: 1, currency: 'EUR' }, as: OP1 });
    expect(g.status).toBe(201);
    await h.until(async () => (await players(grantOnly)).length === 1);
    // A ref that ends with a space, as launch took it: found as typed (the search no longer trims it away).
    const spaced = `con-s-${run} `;
    const launched = await signedRequest(h.svc.url, { path: '/v1/operator/games/launch', body: { playerRef: spaced, gameId: 'fruit-1', currency: 'EUR', mode: 'REAL' }, as: OP1 });
    expect(launched.status, launched.text).toBe(200);
    await h.until(async () => (await players(spaced)).length === 1);
    expect(await players(spaced)).toEqual([[OP1.id, spaced]]);
    // Only an adjustment: found, and its page lists it.
    const adjusted = `con-a-${run}`;
    const adj = await admin<{ transactionId: string }>('/v1/admin/adjustments', { body: { operatorId: OP1.id, playerRef: adjusted, amount: 7, currency: 'EUR', direction: 'CREDIT', reason: 'console test' } });
    expect(adj.status).toBe(200);
    await h.until(async () => (await players(adjusted)).length === 1);
    const playerPage = () => admin<{ adjustments: Array<Record<string, unknown>>; rounds: unknown[]; roundsTotal: number }>(`/v1/admin/console/players/${OP1.id}/${adjusted}`);
    // Answered 200, it was applied; the page follows the log a moment behind (found by its recording, it
    // may show it pending for that moment).
    await h.until(async () => (await playerPage()).json.adjustments?.[0]?.status === 'applied');
    const page = await playerPage();
    expect(page.status).toBe(200);
    expect(page.json.adjustments).toEqual([expect.objectContaining({ transactionId: adj.json.transactionId, direction: 'CREDIT', amount: 7, currency: 'EUR', status: 'applied' })]);
    expect([page.json.rounds, page.json.roundsTotal]).toEqual([[], 0]);
    expect((await admin(`/v1/admin/console/search?q=${encodeURIComponent('   ')}`)).status).toBe(400);
  });

  it("shows a player's sessions (active, kicked), rounds with their sums, and grants", async () => {
    await signedRequest(h.svc.url, { path: '/v1/operator/players/kick', body: { playerRef: player }, as: OP1 });
    await h.launch(player);
    // The read models follow the log a moment behind (and the log itself waits for transactions open elsewhere).
    type Player = { sessions: Array<{ status: string }>; rounds: Array<Record<string, unknown>>; grants: Array<{ id: string }> };
    let res = await admin<Player>(`/v1/admin/console/players/${OP1.id}/${player}`);
    await h.until(async () => {
      res = await admin<Player>(`/v1/admin/console/players/${OP1.id}/${player}`);
      return res.json.sessions.length === 2 && res.json.sessions[0]!.status === 'kicked';
    });
    expect(res.status).toBe(200);
    expect(res.json.sessions.map((s) => s.status)).toEqual(['kicked', 'active']);
    expect(res.json.rounds).toEqual([expect.objectContaining({ roundId, gameId: 'fruit-1', status: 'complete', betMinor: 40, winMinor: 90, refundMinor: 0 })]);
    expect(res.json.grants.map((g) => g.id)).toEqual([grantId]);
    expect((await admin(`/v1/admin/console/players/${OP1.id}/nobody-${run}`)).status).toBe(404);
  });

  it('shows the newest 200 rounds of a player with more, and how many there are', async () => {
    const many = `con-m-${run}`;
    const token = await h.launch(many);
    for (let i = 0; i < 203; i++) {
      const res = await h.tx({ sessionToken: token, roundId: `con-m-${run}-${String(i).padStart(3, '0')}`, playerRef: many, currency: 'EUR', gameId: 'fruit-1', transactionId: `con-m-${run}-b${i}`, type: 'BET', roundComplete: true, amount: 1 });
      expect(res.status).toBe(200);
    }
    type Rounds = { rounds: Array<{ roundId: string }>; roundsTotal: number };
    let res = await admin<Rounds>(`/v1/admin/console/players/${OP1.id}/${many}`);
    await h.until(async () => {
      res = await admin<Rounds>(`/v1/admin/console/players/${OP1.id}/${many}`);
      return res.json.roundsTotal === 203;
    });
    expect(res.json.rounds).toHaveLength(200);
    expect(res.json.rounds.at(-1)!.roundId).toBe(`con-m-${run}-003`);
  });

  it("shows each operator's catalog entry without its secret, its statement as JSON and CSV, and mints replay links", async () => {
    const ops = await admin<{ operators: Array<Record<string, unknown>> }>('/v1/admin/console/operators');
    expect(ops.json.operators.find((o) => o.id === OP1.id)).toMatchObject({ name: 'Operator One', walletUrl: h.wallet.url, walletTimeoutMs: 5000, visibleGames: expect.arrayContaining([{ id: 'fruit-1', name: 'Fruit', providerId: 'studio-a' }]) });
    expect(ops.text).not.toContain(OP1.secret);
    const from = new Date(Date.now() - 3_600_000).toISOString();
    const to = new Date(Date.now() + 60_000).toISOString();
    const statement = await admin<{ lines: Array<Record<string, unknown>> }>(`/v1/admin/operators/${OP1.id}/settlement?from=${from}&to=${to}`);
    expect(statement.status).toBe(200);
    // The operator's own route gives the same statement.
    const own = await signedRequest(h.svc.url, { path: `/v1/operator/reports/settlement?from=${from}&to=${to}`, as: OP1 });
    expect(statement.text).toBe(own.text);
    const csv = await admin(`/v1/admin/operators/${OP1.id}/settlement?from=${from}&to=${to}`, { accept: 'text/csv' });
    expect(csv.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(csv.text.split('\r\n')[0]).toBe('providerId,gameId,currency,betCount,betAmountMinor,winCount,winAmountMinor,refundCount,refundAmountMinor,ggrMinor');
    expect((await admin(`/v1/admin/operators/nope/settlement?from=${from}&to=${to}`)).status).toBe(404);
    const link = await admin<{ replayUrl: string }>('/v1/admin/rounds/replay-link', { body: { operatorId: OP1.id, roundId, gameId: 'fruit-1' } });
    expect(link.status).toBe(200);
    expect(link.json.replayUrl).toMatch(/^https:\/\/replay\.studio-a\.test\/fruit\?token=/);
    expect((await admin('/v1/admin/rounds/replay-link', { body: { operatorId: 'op-2', roundId, gameId: 'fruit-1' } })).status).toBe(404);
  });
});
