import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readRound } from '../../services/rounds/dispatch.ts';
import type { RunningService } from '../../services/service.ts';
import { roundStream } from '../../services/rounds/events.ts';
import { contentHash } from '../../shared/canonical.ts';
import { claimTransaction } from '../../shared/eventstore/registry.ts';
import { testCatalog } from '../helpers/catalog.ts';
import { startInProcess } from '../helpers/service.ts';
import { startMoneyHarness, type MoneyHarness, SCRIPTED_HANG_TIMEOUT } from './harness.ts';

describe('stale-round reconciler (API document 4.2 rules 4 and 5b, contract section 6)', () => {
  let h: MoneyHarness;
  let second: RunningService;
  const STALE = { STALE_ROUND_AFTER_SECONDS: '1', RECONCILE_INTERVAL_SECONDS: '3600' };
  beforeAll(async () => {
    h = await startMoneyHarness('reconcile', STALE, SCRIPTED_HANG_TIMEOUT);
    second = await startInProcess(h.env, { ...STALE, ROLES: 'reconciler' });
  });
  afterAll(async () => {
    await second?.stop();
    await h?.close();
  });

  const openRound = async () => {
    const playerRef = `st-${randomUUID().slice(0, 6)}`;
    const token = await h.launch(playerRef);
    const roundId = `stale-${randomUUID()}`;
    const base = { sessionToken: token, roundId, playerRef, currency: 'EUR', gameId: 'fruit-1' };
    const bet = (id: string, amount: number) => ({ ...base, transactionId: id, type: 'BET', roundComplete: false, amount });
    return { playerRef, token, roundId, base, bet };
  };
  // Stale in the read model the sweep starts from: projected up to the round's last event (a read model
  // that lags shows an older last activity than the stream, and the sweep's check against the stream then
  // rightly finds the round not stale yet), and that event over a second old.
  const projected = (roundId: string) =>
    h.until(async () => {
      const round = (await readRound(h.svc.ctx.eventStore, roundStream('studio-a', 'op-1', roundId))).state;
      const last = round.status === 'new' ? undefined : round.lastActivityAt;
      const { rows } = await h.svc.ctx.pool.query(`SELECT outstanding_bets, last_activity_at FROM rm_rounds WHERE round_id = $1`, [roundId]);
      return rows.length === 1 && last !== undefined && (rows[0].last_activity_at as Date).getTime() === Date.parse(last) && Date.now() - Date.parse(last) > 1100;
    });
  const rollbacksTo = (playerRef: string) =>
    h.wallet.calls.filter((c) => (c.body as { type?: string; playerRef?: string })?.type === 'ROLLBACK' && (c.body as { playerRef: string }).playerRef === playerRef);

  it('does not close a round while a wallet call of its BET is under way, however long past the stale period; it closes it once the call is answered', async () => {
    await h.svc.ctx.catalog.apply(testCatalog({ walletUrl: h.wallet.url, wallet2Url: h.wallet2.url, providerUrl: h.provider.url, walletTimeoutMs: 6000 }));
    h.wallet.setLatency('BET', 3000);
    try {
      const r = await openRound();
      const bet = r.bet(`${r.roundId}-slow`, 40);
      const answer = h.tx(bet);
      await h.until(() => h.walletCallsFor(bet.transactionId).length === 1);
      // Past the stale period (1 s) with the call still under way: the sweep leaves the round open.
      await new Promise((res) => setTimeout(res, 1500));
      await h.svc.reconciler!.sweep();
      expect((await readRound(h.svc.ctx.eventStore, roundStream('studio-a', 'op-1', r.roundId))).state.status).toBe('open');
      // The provider is told its bet stands, and the round is still one it can go on with.
      expect((await answer).status).toBe(200);
      expect(rollbacksTo(r.playerRef)).toHaveLength(0);
      h.wallet.setLatency('BET', 0);
      // The call is over once its outcome is recorded (written just after the answer; its lease is held until then).
      await h.until(async () => (await readRound(h.svc.ctx.eventStore, roundStream('studio-a', 'op-1', r.roundId))).state.txs.get(bet.transactionId)?.status === 'applied');
      await projected(r.roundId);
      await h.svc.reconciler!.sweep();
      expect((await readRound(h.svc.ctx.eventStore, roundStream('studio-a', 'op-1', r.roundId))).state.status).toBe('force-closed');
      expect(rollbacksTo(r.playerRef)).toHaveLength(1);
    } finally {
      h.wallet.setLatency('BET', 0);
      await h.svc.ctx.catalog.apply(testCatalog({ walletUrl: h.wallet.url, wallet2Url: h.wallet2.url, providerUrl: h.provider.url, ...SCRIPTED_HANG_TIMEOUT }));
    }
  }, 30_000);

  it('rolls back exactly the outstanding bets with the deterministic id and sentinel session, then closes the round', async () => {
    const r = await openRound();
    const ok = `${r.roundId}-ok`;
    const failed = `${r.roundId}-failed`;
    const declined = `${r.roundId}-declined`;
    const undone = `${r.roundId}-undone`;
    expect((await h.tx(r.bet(ok, 100))).status).toBe(200);
    h.wallet.script(failed, { status: 500, body: {} });
    expect((await h.tx(r.bet(failed, 50))).status).toBe(502);
    h.wallet.script(declined, { status: 200, body: { status: 'DECLINED', balance: 9900 } });
    expect((await h.tx(r.bet(declined, 70))).json).toMatchObject({ status: 'DECLINED' });
    await h.tx(r.bet(undone, 30));
    await h.tx({ ...r.base, transactionId: `${undone}-rb`, type: 'ROLLBACK', originalTransactionId: undone, amount: 30 });
    await projected(r.roundId);

    const swept = await h.svc.reconciler!.sweep();
    expect(swept.rollbacks).toBe(2);
    const rollbacks = rollbacksTo(r.playerRef).filter((c) => (c.body as { sessionToken: string }).sessionToken === 'system:stale-round-reconciler');
    expect(rollbacks.map((c) => c.body).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)))).toEqual(
      [
        { transactionId: `stale-rollback:${failed}`, sessionToken: 'system:stale-round-reconciler', type: 'ROLLBACK', roundId: r.roundId, roundComplete: false, originalTransactionId: failed, playerRef: r.playerRef, amount: 50, currency: 'EUR', gameId: 'fruit-1' },
        { transactionId: `stale-rollback:${ok}`, sessionToken: 'system:stale-round-reconciler', type: 'ROLLBACK', roundId: r.roundId, roundComplete: false, originalTransactionId: ok, playerRef: r.playerRef, amount: 100, currency: 'EUR', gameId: 'fruit-1' },
      ].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))),
    );
    expect(rollbacks.every((c) => c.signatureValid)).toBe(true);
    // A best-effort balance call went first, for the bet's player.
    const firstRollback = h.wallet.calls.indexOf(rollbacks[0]!);
    const balance = h.wallet.calls.slice(0, firstRollback).reverse().find((c) => c.method === 'GET');
    expect(balance?.target).toBe(`/v1/wallet/balance?playerRef=${r.playerRef}`);
    // The player is made whole for the bet that was applied.
    expect(h.wallet.balances.get(r.playerRef)).toBe(10_000);
    // The round is closed: a WIN on it is 409.
    const win = await h.tx({ ...r.base, transactionId: `${r.roundId}-win`, type: 'WIN', roundComplete: true, amount: 10 });
    expect(win.status).toBe(409);
    expect(win.json).toEqual({ error: 'round already completed' });
  });

  it('refunds once however often and from however many reconcilers it is swept', async () => {
    const r = await openRound();
    const bet = `${r.roundId}-b`;
    await h.tx(r.bet(bet, 40));
    await projected(r.roundId);
    await Promise.all([h.svc.reconciler!.sweep(), second.reconciler!.sweep(), h.svc.reconciler!.sweep()]);
    await h.svc.reconciler!.sweep();
    await second.reconciler!.sweep();
    expect(h.wallet.effects.get(`stale-rollback:${bet}`)).toBe(1);
    expect(h.wallet.balances.get(r.playerRef)).toBe(10_000);
  });

  it('does not let a failing or hanging balance call block the rollback', async () => {
    for (const reply of [{ status: 500, body: {} }, { hang: true as const }]) {
      const r = await openRound();
      const bet = `${r.roundId}-b`;
      await h.tx(r.bet(bet, 25));
      await projected(r.roundId);
      h.wallet.setBalanceReply(reply);
      try {
        await h.svc.reconciler!.sweep();
      } finally {
        h.wallet.setBalanceReply(undefined);
      }
      expect(h.wallet.effects.get(`stale-rollback:${bet}`)).toBe(1);
    }
  });

  it('leaves completed rounds and fresh rounds alone', async () => {
    const done = await openRound();
    await h.tx(done.bet(`${done.roundId}-b`, 10));
    await h.tx({ ...done.base, transactionId: `${done.roundId}-w`, type: 'WIN', roundComplete: true, amount: 0 });
    await projected(done.roundId);
    const fresh = await openRound();
    await h.tx(fresh.bet(`${fresh.roundId}-b`, 10));
    const before = h.wallet.calls.length;
    await h.svc.reconciler!.sweep();
    expect(rollbacksTo(done.playerRef)).toHaveLength(0);
    expect(h.wallet.calls.slice(before).filter((c) => (c.body as { playerRef?: string })?.playerRef === fresh.playerRef)).toHaveLength(0);
  });

  it('retries a stale rollback the wallet refuses, like any credit', async () => {
    const r = await openRound();
    const bet = `${r.roundId}-b`;
    await h.tx(r.bet(bet, 60));
    await projected(r.roundId);
    h.wallet.script(`stale-rollback:${bet}`, { status: 500, body: {} }, { status: 500, body: {} });
    await h.svc.reconciler!.sweep();
    await h.until(() => h.wallet.effects.get(`stale-rollback:${bet}`) === 1);
    expect(h.wallet.balances.get(r.playerRef)).toBe(10_000);
  });

  it("never sends a BET nobody was answered for while it rolls back the round's other bets (the worker does not take its rollbacks for the provider going on)", async () => {
    // Rollbacks that take a while, within a wallet timeout long enough for them: the window between the
    // first bet's rollback and the second's is wide enough for several of the workers' sweeps (1 s).
    await h.svc.ctx.catalog.apply(testCatalog({ walletUrl: h.wallet.url, wallet2Url: h.wallet2.url, providerUrl: h.provider.url, walletTimeoutMs: 5000 }));
    try {
      const r = await openRound();
      expect((await h.tx(r.bet(`${r.roundId}-b1`, 100))).status).toBe(200);
      // The second BET's api process died after its write-ahead record, before the wallet call: its
      // provider got no answer and sent nothing more. Its claim's lease has lapsed.
      const request = { ...r.bet(`${r.roundId}-b2`, 300) };
      const hash = contentHash(request);
      const stream = roundStream('studio-a', 'op-1', r.roundId);
      await claimTransaction(h.svc.ctx.pool, 'studio-a', request.transactionId, { contentHash: hash, roundStream: stream }, { operatorId: 'op-1', playerRef: r.playerRef }, 'dead-process', 1);
      // BET1's outcome is appended behind its answer: the dead process's record came after it.
      await h.until(async () => (await readRound(h.svc.ctx.eventStore, stream)).state.txs.get(`${r.roundId}-b1`)?.status === 'applied');
      const known = await readRound(h.svc.ctx.eventStore, stream);
      await h.svc.ctx.eventStore.append(
        stream,
        [{ id: randomUUID(), type: 'TransactionRecorded', data: { providerId: 'studio-a', operatorId: 'op-1', origin: 'provider', request, walletBody: JSON.stringify(request), contentHash: hash, recordedAt: new Date().toISOString() } }],
        known.revision,
      );
      await projected(r.roundId);
      await new Promise((res) => setTimeout(res, 2_500)); // past the workers' quiet time for an unanswered BET (2 s)
      h.wallet.setLatency('ROLLBACK', 2_500);
      try {
        await h.svc.reconciler!.sweep();
      } finally {
        h.wallet.setLatency('ROLLBACK', 0);
      }
      await new Promise((res) => setTimeout(res, 1_500)); // a sweep after the rollbacks too
      // The BET never reached the wallet: its rollback voided it; the player's balance only saw BET1 and its refund.
      expect(h.walletCallsFor(request.transactionId)).toHaveLength(0);
      expect(h.walletCallsFor(`stale-rollback:${request.transactionId}`)).toHaveLength(1);
      expect((await readRound(h.svc.ctx.eventStore, stream)).state.txs.get(request.transactionId)?.status).toBe('voided');
      expect(h.wallet.balances.get(r.playerRef)).toBe(10_000);
    } finally {
      await h.svc.ctx.catalog.apply(testCatalog({ walletUrl: h.wallet.url, wallet2Url: h.wallet2.url, providerUrl: h.provider.url, ...SCRIPTED_HANG_TIMEOUT }));
    }
  }, 30_000);
});
