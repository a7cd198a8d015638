import { randomUUID } from 'node:crypto';
import { roundStream } from '../../services/rounds/events.ts';
import { comparePositions } from '../../shared/eventstore/port.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { transactionRecordSchema, transactionsPage, roundDetails, settlementStatement } from '../../services/reconciliation/schemas.ts';
import { ADMIN_TOKEN, startInProcess } from '../helpers/service.ts';
import { OP1, OP2 } from '../helpers/catalog.ts';
import { signedRequest } from '../helpers/signing.ts';
import { startMoneyHarness, type MoneyHarness, SCRIPTED_HANG_TIMEOUT } from '../money/harness.ts';

type Tx = ReturnType<typeof transactionRecordSchema.parse>;
type Statement = ReturnType<typeof settlementStatement.parse>;

/**
 * Contract section 9: an operator reconciles its wallet against what the provider sent, what we
 * recorded and what its wallet acknowledged, from three signed routes scoped to it.
 */
describe('operator reconciliation routes', () => {
  let h: MoneyHarness;
  const startedAt = new Date(Date.now() - 60_000).toISOString();
  const p1 = `rc-${randomUUID().slice(0, 6)}`;
  const p2 = `rc-decl-${randomUUID().slice(0, 6)}`;
  const run = randomUUID().slice(0, 8);
  const id = (name: string) => `${name}-${run}`;
  /** What each transaction of the setup must show, by id. */
  const expected = new Map<string, Partial<Tx>>();

  const get = <T>(path: string, as = OP1, headers: Record<string, string> = {}) => signedRequest<T>(h.svc.url, { path, as, headers });
  const listAll = async (query: string, limit = 1000, as = OP1): Promise<Tx[]> => {
    const out: Tx[] = [];
    let cursor: string | null = null;
    do {
      const res: Awaited<ReturnType<typeof get<{ transactions: Tx[]; nextCursor: string | null }>>> = await get(
        `/v1/operator/transactions?${query}&limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        as,
      );
      expect(res.status, res.text).toBe(200);
      transactionsPage.parse(res.json);
      out.push(...res.json.transactions);
      cursor = res.json.nextCursor;
    } while (cursor);
    return out;
  };
  const caughtUp = () => h.caughtUp();
  const range = () => `from=${encodeURIComponent(startedAt)}&to=${encodeURIComponent(new Date(Date.now() + 3_600_000).toISOString())}`;

  beforeAll(async () => {
    h = await startMoneyHarness('reconciliation', { DISPATCH_RETRY_WINDOW_SECONDS: '3', STALE_ROUND_AFTER_SECONDS: '1', RECONCILE_INTERVAL_SECONDS: '3600' }, SCRIPTED_HANG_TIMEOUT);
    const token = await h.launch(p1);
    const base = (roundId: string) => ({ sessionToken: token, roundId, playerRef: p1, currency: 'EUR', gameId: 'fruit-1' });

    // Round A: a BET and a WIN the wallet applied; the WIN completes the round.
    expect((await h.tx({ ...base(id('A')), transactionId: id('a-bet'), type: 'BET', roundComplete: false, amount: 100 })).status).toBe(200);
    expect((await h.tx({ ...base(id('A')), transactionId: id('a-win'), type: 'WIN', roundComplete: true, amount: 30 })).status).toBe(200);
    expected.set(id('a-bet'), { status: 'applied', type: 'BET', amount: 100, attempts: 1, walletBalance: 9_900 });
    expected.set(id('a-win'), { status: 'applied', type: 'WIN', amount: 30, attempts: 1, walletBalance: 9_930 });

    // Round B: a BET the wallet declined.
    const token2 = await h.launch(p2);
    h.wallet.declineBets(p2);
    expect((await h.tx({ sessionToken: token2, roundId: id('B'), playerRef: p2, currency: 'EUR', gameId: 'fruit-1', transactionId: id('b-bet'), type: 'BET', roundComplete: false, amount: 50 })).status).toBe(200);
    expected.set(id('b-bet'), { status: 'declined', playerRef: p2, amount: 50 });

    // Round C: a BET the wallet failed (not retried), then its ROLLBACK, which the wallet applied.
    h.wallet.script(id('c-bet'), { status: 503, body: { error: 'down' } });
    expect((await h.tx({ ...base(id('C')), transactionId: id('c-bet'), type: 'BET', roundComplete: false, amount: 70 })).status).toBe(502);
    expect((await h.tx({ ...base(id('C')), transactionId: id('c-rb'), type: 'ROLLBACK', originalTransactionId: id('c-bet'), amount: 70 })).status).toBe(200);
    expected.set(id('c-bet'), { status: 'failed', attempts: 1 });
    expected.set(id('c-rb'), { status: 'applied', type: 'ROLLBACK', originalTransactionId: id('c-bet') });

    // Round D: a BET whose wallet call hangs, rolled back before the wallet answered: voided, its call
    // (which timed out) kept as its attempt.
    h.wallet.script(id('d-bet'), { hang: true });
    const hung = h.tx({ ...base(id('D')), transactionId: id('d-bet'), type: 'BET', roundComplete: false, amount: 40 });
    await h.until(() => h.walletCallsFor(id('d-bet')).length === 1);
    expect((await h.tx({ ...base(id('D')), transactionId: id('d-rb'), type: 'ROLLBACK', originalTransactionId: id('d-bet'), amount: 40 })).status).toBe(200);
    await hung;
    expected.set(id('d-bet'), { status: 'voided', attempts: 1 });
    expected.set(id('d-rb'), { status: 'applied', type: 'ROLLBACK', originalTransactionId: id('d-bet') });

    // Round E: a WIN the wallet never accepts: retried (pending), then dead once the retry window is over.
    expect((await h.tx({ ...base(id('E')), transactionId: id('e-bet'), type: 'BET', roundComplete: false, amount: 5 })).status).toBe(200);
    h.wallet.script(id('e-win'), ...Array.from({ length: 200 }, () => ({ status: 500, body: {} })));
    expect((await h.tx({ ...base(id('E')), transactionId: id('e-win'), type: 'WIN', roundComplete: true, amount: 9 })).status).toBe(502);
    expected.set(id('e-bet'), { status: 'applied' });
    expected.set(id('e-win'), { status: 'dead' });

    // An adjustment (no provider) credited by the admin.
    const adj = await fetch(`${h.svc.url}/v1/admin/adjustments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ operatorId: OP1.id, playerRef: p1, amount: 25, currency: 'EUR', direction: 'CREDIT', transactionId: id('adj'), reason: 'goodwill' }),
    });
    expect(adj.status).toBe(200);
    expected.set(id('adj'), { status: 'applied', type: 'ADJUSTMENT', direction: 'CREDIT', amount: 25 });

    // Round F: left open with its BET applied; the reconciler rolls it back and force-closes it.
    expect((await h.tx({ ...base(id('F')), transactionId: id('f-bet'), type: 'BET', roundComplete: false, amount: 11 })).status).toBe(200);
    expected.set(id('f-bet'), { status: 'applied' });
    expected.set(`stale-rollback:${id('f-bet')}`, { status: 'applied', type: 'ROLLBACK', amount: 11 });

    // Operator two's player: never in operator one's answers.
    const other = await h.launch(`rc-op2-${run}`, {}, OP2);
    expect((await h.tx({ sessionToken: other, roundId: id('O2'), playerRef: `rc-op2-${run}`, currency: 'EUR', gameId: 'fruit-1', transactionId: id('op2-bet'), type: 'BET', roundComplete: true, amount: 1 })).status).toBe(200);

    await h.until(async () => {
      const { rows } = await h.svc.ctx.pool.query(`SELECT 1 FROM rm_rounds WHERE round_id = $1 AND last_activity_at < now() - interval '1.1 seconds'`, [id('F')]);
      return rows.length === 1;
    });
    expect((await h.svc.reconciler!.sweep()).rollbacks).toBe(1);
    await h.until(async () => {
      const { rows } = await h.svc.ctx.pool.query(
        `SELECT operator_status AS status FROM rm_transactions WHERE transaction_id = ANY($1::text[])`,
        [[`stale-rollback:${id('f-bet')}`, id('e-win')]],
      );
      return rows.length === 2 && rows.every((r) => r.status === 'applied' || r.status === 'dead');
    }, 20_000);
    await caughtUp();
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  });

  it('lists every wallet-bound transaction of the operator with the status it reconciles, in recorded order', async () => {
    const all = await listAll(range());
    const mine = all.filter((t) => t.transactionId.endsWith(run) || t.transactionId === `stale-rollback:${id('f-bet')}`);
    for (const [txId, want] of expected) expect(mine.find((t) => t.transactionId === txId), txId).toMatchObject({ transactionId: txId, ...want });
    expect(mine).toHaveLength(expected.size);
    // Operator two's transaction is not operator one's.
    expect(all.map((t) => t.transactionId)).not.toContain(id('op2-bet'));
    // Recorded order: the BET before its WIN, the BET before its ROLLBACK.
    const at = (txId: string) => all.findIndex((t) => t.transactionId === txId);
    expect(at(id('a-bet'))).toBeLessThan(at(id('a-win')));
    expect(at(id('c-bet'))).toBeLessThan(at(id('c-rb')));
    // Field rules: providerId absent for ADJUSTMENT only; direction for ADJUSTMENT only; settledAt once final.
    const adj = all.find((t) => t.transactionId === id('adj'))!;
    expect(adj.providerId).toBeUndefined();
    expect(all.find((t) => t.transactionId === id('a-bet'))).toMatchObject({ providerId: 'studio-a', gameId: 'fruit-1', roundId: id('A'), currency: 'EUR', playerRef: p1 });
    expect(all.find((t) => t.transactionId === id('a-bet'))!.direction).toBeUndefined();
    for (const t of mine) expect(typeof t.settledAt, t.transactionId).toBe('string');
    expect(all.find((t) => t.transactionId === id('e-win'))!.attempts).toBeGreaterThan(1);
    expect(all.find((t) => t.transactionId === `stale-rollback:${id('f-bet')}`)).toMatchObject({ providerId: 'studio-a', originalTransactionId: id('f-bet') });
  });

  it("operator two sees its own transaction and none of operator one's", async () => {
    const theirs = await listAll(range(), 1000, OP2);
    expect(theirs.map((t) => t.transactionId)).toContain(id('op2-bet'));
    expect(theirs.filter((t) => t.transactionId.endsWith(run)).map((t) => t.transactionId)).toEqual([id('op2-bet')]);
  });

  it('selects a round by its own game, as the round route does: a transaction a provider sent for another game of the round is listed with the round', async () => {
    const player = `rc-2g-${randomUUID().slice(0, 6)}`;
    const [fruit, gems] = [await h.launch(player), await h.launch(player, { gameId: 'gems-2' })];
    const roundId = id('two-games');
    const base = { roundId, playerRef: player, currency: 'EUR', roundComplete: false, type: 'BET' };
    expect((await h.tx({ ...base, sessionToken: fruit, gameId: 'fruit-1', transactionId: id('2g-fruit'), amount: 10 })).status).toBe(200);
    expect((await h.tx({ ...base, sessionToken: gems, gameId: 'gems-2', transactionId: id('2g-gems'), amount: 20 })).status).toBe(200);
    for (const tx of ['2g-fruit', '2g-gems']) expected.set(id(tx), { status: 'applied' });
    // Both recorded and settled in the read model (an outcome is recorded just after its answer).
    await h.until(async () => {
      const txs = (await get<{ transactions?: Tx[] }>(`/v1/operator/rounds/${roundId}?gameId=fruit-1`)).json.transactions ?? [];
      return txs.length === 2 && txs.every((t) => t.status === 'applied');
    });
    const round = await get<{ transactions: Tx[]; betMinor: number }>(`/v1/operator/rounds/${roundId}?gameId=fruit-1`);
    const listed = await listAll(`roundId=${roundId}&gameId=fruit-1`);
    expect(listed.map((t) => [t.transactionId, t.gameId])).toEqual([[id('2g-fruit'), 'fruit-1'], [id('2g-gems'), 'gems-2']]);
    expect(listed).toEqual(round.json.transactions);
    expect(round.json.betMinor).toBe(30);
    // The round is fruit-1's: asked for by the other game, it is no round, in the list as in the round route.
    expect(await listAll(`roundId=${roundId}&gameId=gems-2`)).toEqual([]);
    expect((await get(`/v1/operator/rounds/${roundId}?gameId=gems-2`)).status).toBe(404);
  });

  it('filters by round, player and status', async () => {
    const round = await listAll(`roundId=${id('C')}&gameId=fruit-1`);
    expect(round.map((t) => t.transactionId)).toEqual([id('c-bet'), id('c-rb')]);
    expect(await listAll(`roundId=${id('C')}&gameId=gems-2`)).toEqual([]);
    const declined = await listAll(`${range()}&playerRef=${p2}`);
    expect(declined.map((t) => t.transactionId)).toEqual([id('b-bet')]);
    for (const status of ['applied', 'declined', 'failed', 'voided', 'dead'] as const) {
      const listed = (await listAll(`${range()}&status=${status}`)).filter((t) => t.transactionId.endsWith(run));
      const want = [...expected].filter(([, w]) => w.status === status).map(([k]) => k).filter((k) => k.endsWith(run));
      expect(listed.map((t) => t.transactionId).sort(), status).toEqual(want.sort());
      expect(listed.every((t) => t.status === status)).toBe(true);
    }
  });

  it('pages with a cursor: each transaction exactly once, in order, even while new ones are recorded', async () => {
    const token = await h.launch(`rc-page-${run}`);
    const q = range();
    const before = await listAll(q);
    const seen: string[] = [];
    let cursor: string | null = null;
    let added = 0;
    do {
      const res: Awaited<ReturnType<typeof get<{ transactions: Tx[]; nextCursor: string | null }>>> = await get(`/v1/operator/transactions?${q}&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      expect(res.status, res.text).toBe(200);
      expect(res.json.transactions.length).toBeLessThanOrEqual(2);
      seen.push(...res.json.transactions.map((t) => t.transactionId));
      cursor = res.json.nextCursor;
      // New money recorded while the operator pages.
      if (added < 6) {
        added += 1;
        expect((await h.tx({ sessionToken: token, roundId: id(`pg${added}`), playerRef: `rc-page-${run}`, currency: 'EUR', gameId: 'fruit-1', transactionId: id(`pg-bet${added}`), type: 'BET', roundComplete: true, amount: 1 })).status).toBe(200);
        // In the read model before the next page (the log holds an event back while an older transaction is
        // open anywhere on the server, another test's in a full run: a lag of zero does not say it is there).
        await h.until(async () => (await h.svc.ctx.pool.query('SELECT 1 FROM rm_transactions WHERE transaction_id = $1', [id(`pg-bet${added}`)])).rowCount === 1);
      }
    } while (cursor);
    expect(new Set(seen).size).toBe(seen.length);
    // Everything there before the first page is seen, in the same order.
    expect(seen.filter((s) => before.some((b) => b.transactionId === s))).toEqual(before.map((b) => b.transactionId));
    // What was seen is exactly the start of the final order: nothing skipped, nothing twice, nothing out of
    // order, though transactions were recorded between the pages (those the read model showed before the
    // last page are in it; the rest come after it, on a page not asked for yet).
    const latecomers = seen.filter((s) => s.startsWith('pg-bet'));
    expect(latecomers.length).toBeGreaterThan(0);
    expect(latecomers).toEqual(Array.from({ length: latecomers.length }, (_, i) => id(`pg-bet${i + 1}`)));
    let final: Tx[] = [];
    await h.until(async () => {
      final = await listAll(q);
      return final.filter((t) => t.transactionId.startsWith('pg-bet')).length === added;
    });
    expect(final.slice(0, seen.length).map((t) => t.transactionId)).toEqual(seen);
    // Left settled for the tests after this one: each BET's outcome is appended behind its answer, and a
    // statement taken while the last one is still pending would differ from a list read a moment later.
    const mine = new Set(Array.from({ length: added }, (_, i) => id(`pg-bet${i + 1}`)));
    await h.until(async () => (await listAll(q)).filter((t) => mine.has(t.transactionId) && t.status === 'applied').length === added);
  });

  it('answers a round with its status, sums and transactions; 404 exactly as replay; 400 without gameId', async () => {
    const a = await get<Record<string, unknown>>(`/v1/operator/rounds/${id('A')}?gameId=fruit-1`);
    expect(a.status, a.text).toBe(200);
    roundDetails.parse(a.json);
    expect(a.json).toMatchObject({ roundId: id('A'), gameId: 'fruit-1', providerId: 'studio-a', playerRef: p1, currency: 'EUR', status: 'complete', betMinor: 100, winMinor: 30, refundMinor: 0 });
    expect((a.json.transactions as Tx[]).map((t) => t.transactionId)).toEqual([id('a-bet'), id('a-win')]);
    expect(Date.parse(a.json.closedAt as string)).toBeGreaterThanOrEqual(Date.parse(a.json.openedAt as string));

    const c = await get<Record<string, unknown>>(`/v1/operator/rounds/${id('C')}?gameId=fruit-1`);
    expect(c.json).toMatchObject({ status: 'open', betMinor: 0, refundMinor: 70 });
    expect(c.json.closedAt).toBeUndefined();
    const f = await get<Record<string, unknown>>(`/v1/operator/rounds/${id('F')}?gameId=fruit-1`);
    expect(f.json).toMatchObject({ status: 'force-closed', betMinor: 11, refundMinor: 11 });
    expect(typeof f.json.closedAt).toBe('string');

    for (const [path, as] of [
      [`/v1/operator/rounds/${id('A')}?gameId=gems-2`, OP1], // another game's
      [`/v1/operator/rounds/${id('A')}?gameId=fruit-1`, OP2], // another operator's
      [`/v1/operator/rounds/no-such-${run}?gameId=fruit-1`, OP1],
      [`/v1/operator/rounds/${id('A')}?gameId=no-such-game`, OP1],
    ] as const) {
      const res = await get(path, as);
      expect(res.status, path).toBe(404);
      expect(res.json).toEqual({ error: 'round not found' });
    }
    const noGame = await get<{ error: string }>(`/v1/operator/rounds/${id('A')}`);
    expect(noGame.status).toBe(400);
    expect(noGame.json.error).toMatch(/^gameId: /);
  });

  /** The statement's figures, summed independently from the transactions list of the same interval. */
  const fromList = (txs: Tx[]) => {
    const lines = new Map<string, { bets: [number, number]; wins: [number, number]; refunds: [number, number] }>();
    const unsettled = new Map<string, Record<'pending' | 'failed' | 'dead', [number, number]>>();
    const adjustments = new Map<string, { credits: [number, number]; debits: [number, number] }>();
    for (const t of txs) {
      if (t.status === 'applied' && t.type === 'ADJUSTMENT') {
        const a = adjustments.get(t.currency) ?? { credits: [0, 0], debits: [0, 0] };
        const f = t.direction === 'DEBIT' ? a.debits : a.credits;
        f[0] += 1;
        f[1] += t.amount;
        adjustments.set(t.currency, a);
      } else if (t.status === 'applied') {
        const key = `${t.providerId}|${t.gameId}|${t.currency}`;
        const l = lines.get(key) ?? { bets: [0, 0], wins: [0, 0], refunds: [0, 0] };
        const f = t.type === 'BET' ? l.bets : t.type === 'WIN' ? l.wins : l.refunds;
        f[0] += 1;
        f[1] += t.amount;
        lines.set(key, l);
      } else if (t.status === 'pending' || t.status === 'failed' || t.status === 'dead') {
        const u = unsettled.get(t.currency) ?? { pending: [0, 0], failed: [0, 0], dead: [0, 0] };
        u[t.status][0] += 1;
        u[t.status][1] += t.amount;
        unsettled.set(t.currency, u);
      }
    }
    return { lines, unsettled, adjustments };
  };
  const pair = (f: { count: number; amountMinor: number }): [number, number] => [f.count, f.amountMinor];

  it('gives a settlement statement whose figures equal the sums over the transactions list of the same interval, the same every time', async () => {
    const now = Date.now();
    // Aligned on whole hours (read from the quarter-hour sums), on odd milliseconds (read row by row), and mixed.
    const hour = 3_600_000;
    const intervals: Array<[string, string]> = [
      [new Date(Math.floor(now / hour) * hour - hour).toISOString(), new Date(Math.floor(now / hour) * hour + hour).toISOString()],
      [new Date(now - 600_001).toISOString(), new Date(now + 7).toISOString()],
      [new Date(now - 2 * hour - 13).toISOString(), new Date(now + hour + 17).toISOString()],
      ['2026-01-01T05:30:00+05:30', new Date(now + hour).toISOString().replace('Z', '+00:00')],
    ];
    for (const [from, to] of intervals) {
      const q = `from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`;
      const res = await get<Statement>(`/v1/operator/reports/settlement?${q}`);
      if (Date.parse(to) - Date.parse(from) > 31 * 86_400_000) {
        expect(res.status).toBe(400);
        continue;
      }
      expect(res.status, res.text).toBe(200);
      const s = settlementStatement.parse(res.json);
      const want = fromList(await listAll(q));
      expect(s.lines.map((l) => [`${l.providerId}|${l.gameId}|${l.currency}`, pair(l.bets), pair(l.wins), pair(l.refunds), l.ggrMinor])).toEqual(
        [...want.lines].sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => [k, v.bets, v.wins, v.refunds, v.bets[1] - v.wins[1] - v.refunds[1]]),
      );
      expect(Object.entries(s.unsettled).map(([c, u]) => [c, pair(u.pending), pair(u.failed), pair(u.dead)])).toEqual(
        [...want.unsettled].map(([c, u]) => [c, u.pending, u.failed, u.dead]),
      );
      expect(Object.entries(s.adjustments).map(([c, a]) => [c, pair(a.credits), pair(a.debits)])).toEqual([...want.adjustments].map(([c, a]) => [c, a.credits, a.debits]));
      const eur = s.totals.EUR!;
      expect(eur.ggrMinor).toBe(s.lines.filter((l) => l.currency === 'EUR').reduce((sum, l) => sum + l.ggrMinor, 0));
      // Asked again, the same statement, byte for byte.
      expect((await get(`/v1/operator/reports/settlement?${q}`)).text).toBe(res.text);
    }
    // This run's own figures are in it: A's 100 and 30, F's 11 and its refund, C's refund, the dead WIN.
    const [from, to] = intervals[0]!;
    const s = (await get<Statement>(`/v1/operator/reports/settlement?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`)).json;
    expect(s.unsettled.EUR!.dead.count).toBeGreaterThanOrEqual(1);
    expect(s.adjustments.EUR!.credits.amountMinor).toBeGreaterThanOrEqual(25);
  });

  it('gives the statement as CSV with a header row when asked for text/csv', async () => {
    const now = Date.now();
    const q = `from=${encodeURIComponent(new Date(now - 3_600_000).toISOString())}&to=${encodeURIComponent(new Date(now + 60_000).toISOString())}`;
    const json = (await get<Statement>(`/v1/operator/reports/settlement?${q}`)).json;
    const csv = await get(`/v1/operator/reports/settlement?${q}`, OP1, { accept: 'text/csv' });
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toMatch(/^text\/csv/);
    const rows = csv.text.split('\r\n').filter((r) => r !== '');
    expect(rows[0]).toBe('providerId,gameId,currency,betCount,betAmountMinor,winCount,winAmountMinor,refundCount,refundAmountMinor,ggrMinor');
    expect(rows.slice(1)).toEqual(
      json.lines.map((l) => [l.providerId, l.gameId, l.currency, l.bets.count, l.bets.amountMinor, l.wins.count, l.wins.amountMinor, l.refunds.count, l.refunds.amountMinor, l.ggrMinor].join(',')),
    );
    // Asked for with a parameter of the type (a charset, RFC 4180's header), it is still CSV.
    for (const accept of ['text/csv; charset=utf-8', 'text/csv;header=present', 'application/json;q=0.5, text/csv;charset=UTF-8']) {
      const again = await get(`/v1/operator/reports/settlement?${q}`, OP1, { accept });
      expect([again.status, again.headers.get('content-type'), again.text], accept).toEqual([200, 'text/csv; charset=utf-8', csv.text]);
    }
  });

  it('refuses bad queries with 400 naming the parameter', async () => {
    const day = 86_400_000;
    const t0 = '2026-11-01T00:00:00Z';
    const cases: Array<[string, RegExp]> = [
      ['/v1/operator/transactions', /time range .* or a round/],
      [`/v1/operator/transactions?from=${t0}`, /^to: /],
      [`/v1/operator/transactions?from=yesterday&to=${t0}`, /^from: .*RFC 3339/],
      [`/v1/operator/transactions?from=2026-11-01T00:00:00&to=2026-11-02T00:00:00Z`, /^from: /], // no time zone
      [`/v1/operator/transactions?from=${t0}&to=${t0}`, /^to: must be later than from/],
      [`/v1/operator/transactions?from=${t0}&to=${new Date(Date.parse(t0) + 31 * day + 1).toISOString()}`, /^to: must be at most 31 days/],
      [`/v1/operator/transactions?roundId=r1`, /^gameId: /],
      ['/v1/operator/rounds/r1', /^gameId: is needed/],
      // A parameter given twice is refused as such, whatever it is.
      ['/v1/operator/rounds/r1?gameId=fruit-1&gameId=gems-2', /^gameId: given 2 times; give it once$/],
      [`/v1/operator/transactions?from=${t0}&from=${t0}&to=2026-11-02T00:00:00Z`, /^from: given 2 times; give it once$/],
      [`/v1/operator/transactions?from=${t0}&to=2026-11-02T00:00:00Z&status=applied&status=failed`, /^status: given 2 times; give it once$/],
      [`/v1/operator/reports/settlement?from=${t0}&to=2026-11-02T00:00:00Z&to=2026-11-03T00:00:00Z`, /^to: given 2 times; give it once$/],
      ['/v1/operator/rounds/r1?gameId=', /^gameId: expected 1 to 200 characters/],
      [`/v1/operator/rounds/r1?gameId=${'g'.repeat(201)}`, /^gameId: expected 1 to 200 characters/],
      [`/v1/operator/transactions?roundId=r1&gameId=fruit-1&from=${t0}&to=2026-11-02T00:00:00Z`, /not both/],
      [`/v1/operator/transactions?from=${t0}&to=2026-11-02T00:00:00Z&status=settled`, /^status: must be one of applied, declined, pending, failed, voided, dead/],
      [`/v1/operator/transactions?from=${t0}&to=2026-11-02T00:00:00Z&limit=0`, /^limit: /],
      [`/v1/operator/transactions?from=${t0}&to=2026-11-02T00:00:00Z&limit=1001`, /^limit: /],
      [`/v1/operator/transactions?from=${t0}&to=2026-11-02T00:00:00Z&limit=ten`, /^limit: /],
      // A number written otherwise than in decimal digits is no limit either.
      [`/v1/operator/transactions?from=${t0}&to=2026-11-02T00:00:00Z&limit=0x10`, /^limit: /],
      [`/v1/operator/transactions?from=${t0}&to=2026-11-02T00:00:00Z&limit=1e2`, /^limit: /],
      [`/v1/operator/transactions?from=${t0}&to=2026-11-02T00:00:00Z&cursor=nonsense`, /^cursor: /],
      [`/v1/operator/transactions?from=${t0}&to=2026-11-02T00:00:00Z&colour=red`, /colour/],
      ['/v1/operator/reports/settlement', /^from: /],
      [`/v1/operator/reports/settlement?from=${t0}&to=2026-10-01T00:00:00Z`, /^to: must be later than from/],
      [`/v1/operator/reports/settlement?from=${t0}&to=2026-12-03T00:00:00Z`, /^to: must be at most 31 days/],
      // A cursor of JSON that is no object (here `null`): 400, not a crash.
      [`/v1/operator/transactions?from=${t0}&to=2026-11-02T00:00:00Z&cursor=${Buffer.from('null').toString('base64url')}`, /^cursor: not a cursor this service gave/],
      // Instants of RFC 3339's form whose UTC year is outside 1–9999 (Postgres's timestamps): 400, not a database error.
      [`/v1/operator/transactions?from=0000-01-01T00:00:00Z&to=0000-01-02T00:00:00Z`, /^from: .*year/],
      [`/v1/operator/reports/settlement?from=0001-01-01T00:00:00%2B01:00&to=0001-01-02T00:00:00Z`, /^from: .*year/],
      [`/v1/operator/reports/settlement?from=9999-12-31T00:00:00Z&to=9999-12-31T23:00:00-23:59`, /^to: .*year/],
    ];
    for (const [path, message] of cases) {
      const res = await get<{ error: string }>(path);
      expect(res.status, path).toBe(400);
      expect(res.json.error, path).toMatch(message);
    }
    // The last instants of year 9999 are bounds like any other (the first whole millisecond at or after one is in year 10000).
    for (const path of [
      '/v1/operator/transactions?from=9999-12-31T00:00:00Z&to=9999-12-31T23:59:59.9999Z',
      '/v1/operator/reports/settlement?from=9999-12-31T23:59:59.9991Z&to=9999-12-31T23:59:59.9999Z',
    ]) {
      const res = await get<{ transactions?: unknown[]; lines?: unknown[] }>(path);
      expect([res.status, res.json.transactions ?? res.json.lines], path).toEqual([200, []]);
    }
    // A cursor is honoured only by the query that gave it.
    const q = range();
    const first = await get<{ nextCursor: string | null }>(`/v1/operator/transactions?${q}&limit=1`);
    expect(first.json.nextCursor).not.toBeNull();
    // A cursor edited by hand, kept signed with the MAC it came with: 400, not read from the place it names.
    const [body, mac] = first.json.nextCursor!.split('.') as [string, string];
    const real = JSON.parse(Buffer.from(body, 'base64url').toString()) as Record<string, unknown>;
    expect(Object.keys(real).sort()).toEqual(['a', 'q', 's', 'v']);
    for (const a of ['0.0', '9999999999999999999.1']) {
      const edited = `${Buffer.from(JSON.stringify({ ...real, a })).toString('base64url')}.${mac}`;
      const refused = await get<{ error: string }>(`/v1/operator/transactions?${q}&cursor=${edited}`);
      expect([refused.status, refused.json.error], a).toEqual([400, expect.stringMatching(/^cursor: not a cursor this service gave/)]);
    }
    // Its MAC altered: likewise.
    const flipped = `${body}.${mac.startsWith('A') ? 'B' : 'A'}${mac.slice(1)}`;
    expect((await get(`/v1/operator/transactions?${q}&cursor=${flipped}`)).status).toBe(400);
    const other = await get<{ error: string }>(`/v1/operator/transactions?${q}&status=applied&cursor=${first.json.nextCursor}`);
    expect(other.status).toBe(400);
    expect(other.json.error).toMatch(/^cursor: it belongs to another query/);
    // A cursor of an earlier version (unsigned) is refused, saying so.
    const v1 = Buffer.from(JSON.stringify({ ...real, v: 1 })).toString('base64url');
    const old = await get<{ error: string }>(`/v1/operator/transactions?${q}&limit=1&cursor=${v1}`);
    expect(old.status).toBe(400);
    expect(old.json.error).toMatch(/^cursor: given by an earlier version of the service/);
    // Nor by another operator asking the same query.
    const theirs = await get<{ error: string }>(`/v1/operator/transactions?${q}&limit=1&cursor=${first.json.nextCursor}`, OP2);
    expect(theirs.status).toBe(400);
    expect(theirs.json.error).toMatch(/^cursor: it belongs to another query/);
    // RFC 3339 allows a lowercase "t" and "z": the same instants.
    const upper = await get(`/v1/operator/reports/settlement?from=2026-11-01T00:00:00Z&to=2026-11-02T00:00:00Z`);
    const lower = await get(`/v1/operator/reports/settlement?from=2026-11-01t00:00:00z&to=2026-11-02t00:00:00z`);
    expect(lower.status, lower.text).toBe(200);
    expect(lower.text).toBe(upper.text);
    // 31 days exactly is allowed, and so is an interval shorter than a millisecond.
    expect((await get(`/v1/operator/reports/settlement?from=${t0}&to=2026-12-02T00:00:00Z`)).status).toBe(200);
    expect((await get(`/v1/operator/reports/settlement?from=2026-11-01T00:00:00.0001Z&to=2026-11-01T00:00:00.0002Z`)).status).toBe(200);
    // An offset's "+" left unencoded arrives as a space: read as the offset it was.
    const encoded = await get(`/v1/operator/reports/settlement?from=2026-11-01T01:00:00%2B01:00&to=2026-11-02T01:00:00%2B01:00`);
    const bare = await get(`/v1/operator/reports/settlement?from=2026-11-01T01:00:00+01:00&to=2026-11-02T01:00:00+01:00`);
    expect(bare.status, bare.text).toBe(200);
    expect(bare.text).toBe(encoded.text);
  });

  it('is signed like every operator route: a wrong signature is 401', async () => {
    const res = await get(`/v1/operator/transactions?${range()}`, { ...OP1, secret: 'not-the-secret' });
    expect(res.status).toBe(401);
    expect(res.text).toBe('invalid signature');
  });

  // Last: its amounts would take the interval's statement past what the tests above sum in numbers.
  it("sums a round's amounts past 2^53 exactly, as the statement does: three WINs of the largest amount (2^53 - 1 each)", async () => {
    const big = 9_007_199_254_740_991;
    const token = await h.launch(p1);
    const base = { sessionToken: token, roundId: id('G'), playerRef: p1, currency: 'EUR', gameId: 'fruit-1', roundComplete: false };
    expect((await h.tx({ ...base, transactionId: id('g-bet'), type: 'BET', amount: 1 })).status).toBe(200);
    for (const n of [1, 2, 3]) {
      h.wallet.script(id(`g-win${n}`), { status: 200, body: { status: 'OK', balance: 5 } });
      expect((await h.tx({ ...base, transactionId: id(`g-win${n}`), type: 'WIN', amount: big })).status).toBe(200);
    }
    // The read model shows the round once the log's newest events are readable and applied.
    const applied = async () => {
      const r = await get<{ transactions?: Tx[] }>(`/v1/operator/rounds/${id('G')}?gameId=fruit-1`);
      return r.status === 200 && r.json.transactions?.length === 4 && r.json.transactions.every((t) => t.status === 'applied');
    };
    await h.until(applied, 20_000);
    const g = await get(`/v1/operator/rounds/${id('G')}?gameId=fruit-1`);
    expect(g.status, g.text).toBe(200);
    expect(g.text).toContain('"winMinor":27021597764222973,');
    expect(g.text).toContain('"betMinor":1,');
  });
});

/**
 * Contract section 9: an interval wholly in the past gives the same statement asked now and later. The
 * read models apply the log a moment behind it; a list or statement waits for them to hold what the log
 * held when asked, rather than answering short of it.
 */
describe('operator reconciliation routes behind a read model that lags the log', () => {
  let h: MoneyHarness;
  beforeAll(async () => {
    // No projector yet: what is recorded is in the log, not in the read models.
    h = await startMoneyHarness('reclag', { ROLES: 'api,worker' });
  });
  afterAll(async () => h?.close());

  it('a statement and a list of an interval just ended wait for the read model to hold every transaction recorded in it', async () => {
    const playerRef = `lag-${randomUUID().slice(0, 6)}`;
    const token = await h.launch(playerRef);
    const from = new Date(Date.now() - 60_000).toISOString();
    const bet = h.bet(token, { playerRef });
    const answered = await h.tx(bet);
    expect(answered.status).toBe(200);
    const to = new Date(Date.now() - 1).toISOString();
    const query = `from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`;
    const asked = Promise.all([
      signedRequest<Statement>(h.svc.url, { path: `/v1/operator/reports/settlement?${query}`, as: OP1 }),
      signedRequest<{ transactions: Tx[] }>(h.svc.url, { path: `/v1/operator/transactions?${query}`, as: OP1 }),
    ]);
    // The read models' process starts after the questions were asked (they wait out the second's grace first).
    await new Promise((r) => setTimeout(r, 300));
    const projector = await startInProcess(h.env, { ROLES: 'projector' });
    try {
      const [statement, list] = await asked;
      expect(statement.status).toBe(200);
      expect(statement.json.lines.map((l) => [l.gameId, l.bets.count, l.bets.amountMinor])).toEqual([['fruit-1', 1, 100]]);
      expect(list.json.transactions.map((t) => [t.transactionId, t.status])).toEqual([[bet.transactionId, 'applied']]);
    } finally {
      await projector.stop();
    }
  });

  it('a round asked for right after its last transaction was answered waits for the read model to hold it', async () => {
    const playerRef = `lagr-${randomUUID().slice(0, 6)}`;
    const token = await h.launch(playerRef);
    const roundId = `lagr-${randomUUID()}`;
    const base = { sessionToken: token, roundId, playerRef, currency: 'EUR', gameId: 'fruit-1' };
    expect((await h.tx({ ...base, transactionId: `${roundId}-bet`, type: 'BET', roundComplete: false, amount: 100 })).status).toBe(200);
    expect((await h.tx({ ...base, transactionId: `${roundId}-win`, type: 'WIN', roundComplete: true, amount: 30 })).status).toBe(200);
    // The log's head as the service reads it holds the WIN (on Postgres it can lag a commit while an older
    // transaction of the cluster, another test's, is still open).
    const events = await h.svc.ctx.eventStore.readStream(roundStream('studio-a', 'op-1', roundId));
    const last = events.at(-1)!.position;
    await h.until(async () => comparePositions(await h.svc.ctx.eventStore.headPosition(), last) >= 0);
    const asked = signedRequest<Record<string, unknown>>(h.svc.url, { path: `/v1/operator/rounds/${roundId}?gameId=fruit-1`, as: OP1 });
    // The read models' process starts after the question was asked.
    await new Promise((r) => setTimeout(r, 300));
    const projector = await startInProcess(h.env, { ROLES: 'projector' });
    try {
      const round = await asked;
      expect(round.status, round.text).toBe(200);
      expect(round.json).toMatchObject({ status: 'complete', betMinor: 100, winMinor: 30 });
      expect((round.json.transactions as Tx[]).map((t) => t.transactionId)).toEqual([`${roundId}-bet`, `${roundId}-win`]);
    } finally {
      await projector.stop();
    }
  });

  it("an auditor's sessions of a player agree with the history beside them, before the read model has them", async () => {
    const playerRef = `lags-${randomUUID().slice(0, 6)}`;
    const token = await h.launch(playerRef);
    const kicked = await signedRequest<{ revokedCount: number }>(h.svc.url, { path: '/v1/operator/players/kick', body: { playerRef }, as: OP1 });
    expect(kicked.json.revokedCount).toBe(1);
    // No projector runs here: the sessions read model has neither the launch nor the kick.
    const res = await fetch(`${h.svc.url}/v1/audit/players/op-1/${playerRef}/sessions`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    const body = (await res.json()) as { history: Array<{ event: { type: string; data: { revokedAt?: string } } }>; sessions: Array<{ token: string; revoked_at: string | null }> };
    expect(body.history.map((e) => e.event.type)).toEqual(['SessionStarted', 'SessionsRevoked']);
    expect(body.sessions.map((s) => [s.token, s.revoked_at])).toEqual([[token, body.history[1]!.event.data.revokedAt]]);
  });

  // EventStoreDB only: the Postgres store's log is the read model's own database.
  it.runIf(process.env.TEST_EVENT_STORE === 'esdb' && !process.env.ESDB_CONNECTION_STRING)(
    'a statement is answered from the read model when the log cannot be read (EventStoreDB not answering), not failed',
    async () => {
      const release = h.env.esdb!.holdReads();
      try {
        const to = new Date(Date.now() - 5000).toISOString();
        const res = await signedRequest<Statement>(h.svc.url, { path: `/v1/operator/reports/settlement?from=${encodeURIComponent(new Date(Date.now() - 60_000).toISOString())}&to=${encodeURIComponent(to)}`, as: OP1 });
        expect(res.status, res.text).toBe(200);
      } finally {
        release();
      }
    },
  );
});
