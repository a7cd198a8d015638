import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STALE_ROLLBACK_PREFIX } from '../../services/rounds/events.ts';
import { OP1, OP2, testCatalog } from '../helpers/catalog.ts';
import type { FakeWallet, TransactionBody } from '../helpers/fakes.ts';
import { startMoneyHarness, type MoneyHarness, SCRIPTED_HANG_TIMEOUT } from './harness.ts';

/**
 * Contract section 8, rule 8: tenants do not share their failures. One operator's hung wallet, with
 * hundreds of its credits awaiting retry, must not delay another operator's retries nor its first
 * attempts. Fails on the code before per-operator queues (retries waited behind the hung operator's
 * in the worker's shared slots, 17 s instead of 0.3 s) and per-operator connection pools (first
 * attempts queued behind the hung operator's calls for a connection to the shared wallet host).
 */

const BACKOFF_BASE_MS = 300;
/** Operator one's wallet (A) answers nothing; each call ends at this timeout. */
const A_TIMEOUT_MS = 2000;
const A_BACKLOG = 300;

type Operator = typeof OP1;

/** Runs `fn` over `items`, `width` at a time. */
async function inBatches<T, R>(items: T[], width: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += width) out.push(...(await Promise.all(items.slice(i, i + width).map(fn))));
  return out;
}

function rounds(h: MoneyHarness) {
  return async (as: Operator, playerRef: string) => {
    const token = await h.launch(playerRef, {}, as);
    return (tag: string) => {
      const roundId = `ti-${tag}-${randomUUID()}`;
      const base = { sessionToken: token, roundId, playerRef, currency: 'EUR', gameId: 'fruit-1' };
      return {
        bet: { ...base, transactionId: `${roundId}-bet`, type: 'BET', roundComplete: false, amount: 10 },
        win: { ...base, transactionId: `${roundId}-win`, type: 'WIN', roundComplete: true, amount: 25 },
      };
    };
  };
}

const winsOf = (wallet: FakeWallet, playerPrefix: string) =>
  wallet.calls.filter((c) => {
    const b = c.body as Partial<TransactionBody> | undefined;
    return b?.type === 'WIN' && b.playerRef?.startsWith(playerPrefix) === true;
  }).length;

describe('tenant isolation: retries (contract 8 rule 8)', () => {
  let h: MoneyHarness;
  beforeAll(async () => {
    h = await startMoneyHarness('tenantretry', { DISPATCH_BACKOFF_BASE_MS: String(BACKOFF_BASE_MS), DISPATCH_BACKOFF_MAX_MS: '5000' }, SCRIPTED_HANG_TIMEOUT);
    const catalog = testCatalog({ walletUrl: h.wallet.url, wallet2Url: h.wallet2.url, providerUrl: h.provider.url, walletTimeoutMs: 1000 });
    catalog.operators[0]!.walletTimeoutMs = A_TIMEOUT_MS;
    await h.svc.ctx.catalog.apply(catalog);
  });
  afterAll(async () => h?.close());

  it("retries another operator's failed WIN on its own schedule while one operator's wallet hangs with hundreds of WINs awaiting retry", async () => {
    // A: bets are taken, then the wallet hangs on every WIN.
    h.wallet.setChaos((tx) => (tx.type === 'WIN' ? { hang: true } : undefined));
    const roundOfA = await rounds(h)(OP1, `a-${randomUUID().slice(0, 6)}`);
    const backlog = Array.from({ length: A_BACKLOG }, (_, i) => roundOfA(`a${i}`));
    const bets = await inBatches(backlog, 50, (r) => h.tx(r.bet));
    expect(bets.every((r) => r.status === 200)).toBe(true);
    const wins = await Promise.all(backlog.map((r) => h.tx(r.win)));
    // Timed out: every one awaits retry. (Any other answer is listed, with its body, if this fails.)
    expect(wins.filter((r) => r.status !== 504).map((r) => `${r.status} ${r.text}`)).toEqual([]);
    // (Fewer reached the wallet: 128 connections per host; the others timed out waiting for one.)
    const firstAttemptsOfA = winsOf(h.wallet, 'a-');

    // B: its WIN fails once, then the wallet takes it.
    const roundOfB = await rounds(h)(OP2, `b-${randomUUID().slice(0, 6)}`);
    const b = roundOfB('b');
    expect((await h.tx(b.bet)).status).toBe(200);
    h.wallet2.script(b.win.transactionId, { status: 500, body: { error: 'once' } });
    expect((await h.tx(b.win)).status).toBe(502);
    const failedAt = Date.now();
    await h.until(() => h.wallet2.processed.has(b.win.transactionId), 45_000);
    const retryDelayMs = Date.now() - failedAt;
    const retriesOfA = winsOf(h.wallet, 'a-') - firstAttemptsOfA;

    expect(h.wallet2.processed.get(b.win.transactionId)?.status).toBe('OK');
    expect(h.wallet2.effects.get(b.win.transactionId)).toBe(1);
    // Not a speed check: A's backlog needs 300 / 32 slots x 2 s = 19 s for one pass, and B's retry is
    // due after 0.3 s. With a generous margin, B was retried long before A's backlog could drain,
    // i.e. it did not wait behind it.
    expect(retryDelayMs, `B's retry came ${retryDelayMs} ms after its failure; A had ${retriesOfA} retries sent`).toBeLessThan(BACKOFF_BASE_MS + 5000);
    expect(retriesOfA).toBeLessThan(A_BACKLOG);
    // And A's retries do go on meanwhile, in A's own slots.
    await h.until(() => winsOf(h.wallet, 'a-') > firstAttemptsOfA, 10_000);
  }, 120_000);

  it("works the retry queue of an operator added to the catalog after the worker started", async () => {
    const catalog = testCatalog({ walletUrl: h.wallet.url, wallet2Url: h.wallet2.url, providerUrl: h.provider.url, walletTimeoutMs: 1000 });
    catalog.operators[0]!.walletTimeoutMs = A_TIMEOUT_MS;
    // Operator three shares operator two's wallet (and its secret, which that fake checks).
    const op3 = { ...OP2, id: 'op-3' };
    await h.svc.ctx.catalog.apply({ ...catalog, operators: [...catalog.operators, { ...catalog.operators[1]!, id: op3.id }] });
    expect(h.svc.worker!.operators()).toContain(op3.id);
    const r = (await rounds(h)(op3, `c-${randomUUID().slice(0, 6)}`))('c');
    expect((await h.tx(r.bet)).status).toBe(200);
    h.wallet2.script(r.win.transactionId, { status: 500, body: { error: 'once' } });
    expect((await h.tx(r.win)).status).toBe(502);
    await h.until(() => h.wallet2.processed.has(r.win.transactionId), 15_000);
    expect(h.wallet2.effects.get(r.win.transactionId)).toBe(1);
  }, 60_000);
});

describe('tenant isolation: first attempts (contract 8 rule 8)', () => {
  let h: MoneyHarness;
  beforeAll(async () => {
    h = await startMoneyHarness('tenantfirst', {}, SCRIPTED_HANG_TIMEOUT);
    // Both operators' wallets on one host (a white-label wallet platform): one fake wallet serves both,
    // operator two signing with operator one's secret so that the fake checks both signatures.
    const catalog = testCatalog({ walletUrl: h.wallet.url, wallet2Url: h.wallet.url, providerUrl: h.provider.url, walletTimeoutMs: 1000 });
    catalog.operators[0]!.walletTimeoutMs = 4000;
    catalog.operators[1]!.secret = OP1.secret;
    await h.svc.ctx.catalog.apply(catalog);
  });
  afterAll(async () => h?.close());

  it("answers another operator's BET and WIN while one operator's hung wallet holds hundreds of calls on the same host", async () => {
    h.wallet.setChaos((tx) => (tx.playerRef.startsWith('a-') ? { hang: true } : undefined));
    const roundOfA = await rounds(h)(OP1, `a-${randomUUID().slice(0, 6)}`);
    const hung = Array.from({ length: 200 }, (_, i) => roundOfA(`a${i}`));
    const flood = Promise.all(hung.map((r) => h.tx(r.bet)));
    // More of A's calls hang at the wallet than one connection pool holds (128).
    await h.until(() => h.wallet.calls.length >= 128, 10_000);

    const roundOfB = await rounds(h)({ ...OP2, secret: OP1.secret }, `b-${randomUUID().slice(0, 6)}`);
    const b = roundOfB('b');
    const bet = await h.tx(b.bet);
    const win = await h.tx(b.win);
    // Answered by the wallet while every one of A's calls was still hanging (A's time out at 4 s).
    const aAnswered = await Promise.race([flood.then(() => true), new Promise<false>((r) => setTimeout(() => r(false), 0))]);
    expect(bet.status, bet.text).toBe(200);
    expect(win.status, win.text).toBe(200);
    expect(h.wallet.effects.get(b.bet.transactionId)).toBe(1);
    expect(h.wallet.effects.get(b.win.transactionId)).toBe(1);
    expect(aAnswered).toBe(false);
    expect((await flood).every((r) => r.status === 504)).toBe(true);
  }, 60_000);
});

describe('tenant isolation: stale-round rollbacks (contract 8 rule 8)', () => {
  let h: MoneyHarness;
  beforeAll(async () => {
    h = await startMoneyHarness('tenantstale', { STALE_ROUND_AFTER_SECONDS: '1', RECONCILE_INTERVAL_SECONDS: '3600' }, SCRIPTED_HANG_TIMEOUT);
  });
  afterAll(async () => h?.close());

  it("rolls back another operator's stale round while the sweep is still waiting on one operator's hung wallet", async () => {
    // Older stale rounds of A first (the sweep takes the oldest first), then one of B's.
    const roundOfA = await rounds(h)(OP1, `a-${randomUUID().slice(0, 6)}`);
    const stale = Array.from({ length: 4 }, (_, i) => roundOfA(`sa${i}`));
    for (const r of stale) expect((await h.tx(r.bet)).status).toBe(200);
    const b = (await rounds(h)(OP2, `b-${randomUUID().slice(0, 6)}`))('sb');
    expect((await h.tx(b.bet)).status).toBe(200);
    const ids = [...stale, b].map((r) => r.bet.roundId);
    await h.until(async () => (await h.svc.ctx.pool.query(`SELECT 1 FROM rm_rounds WHERE round_id = ANY($1) AND outstanding_bets > 0`, [ids])).rowCount === ids.length);
    await new Promise((r) => setTimeout(r, 1500));

    // A's wallet now hangs: each of A's rounds costs a balance check and a rollback, 500 ms each.
    h.wallet.setBalanceReply({ hang: true });
    h.wallet.setChaos((tx) => (tx.type === 'ROLLBACK' ? { hang: true } : undefined));
    // A's rounds rolled back so far (each one's first call; the worker retries them too).
    const rollbacksOfA = () =>
      new Set(h.wallet.calls.map((c) => c.body as Partial<TransactionBody> | undefined).filter((t) => t?.type === 'ROLLBACK').map((t) => t!.transactionId)).size;
    const sweep = h.svc.reconciler!.sweep();
    await h.until(() => h.wallet2.processed.has(`${STALE_ROLLBACK_PREFIX}${b.bet.transactionId}`), 20_000);
    // B's round did not wait for A's: A's rounds were not all through when B's rollback was applied.
    expect(rollbacksOfA()).toBeLessThan(stale.length);
    expect(h.wallet2.effects.get(`${STALE_ROLLBACK_PREFIX}${b.bet.transactionId}`)).toBe(1);
    expect(await sweep).toEqual({ roundsClosed: stale.length + 1, rollbacks: stale.length + 1 });
  }, 60_000);
});
