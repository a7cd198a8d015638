import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STALE_ROLLBACK_PREFIX } from '../../services/rounds/events.ts';
import { OP1, OP2 } from '../helpers/catalog.ts';
import { startMoneyHarness, type MoneyHarness } from './harness.ts';

/**
 * Review finding (services/rounds/reconciler.ts, sweepStaleRounds): the sweep works operators side by
 * side, but it holds the sweep's advisory lock until the slowest operator's last round is done
 * (Promise.all), and every interval tick meanwhile finds the lock taken and returns at once. So a round of
 * operator B that goes stale after the sweep started waits for the whole of operator A's hung backlog (up
 * to 500 rounds x (balance check + rollback timeout) each: 500 x 10 s = 83 min with the default 5 s
 * timeout) before its bets are refunded: A's hung wallet delays B (contract 8 rule 8, and the comment's
 * own claim "delays only its own rounds").
 */
describe('tenant isolation: stale rounds that go stale while a sweep waits on a hung wallet', () => {
  let h: MoneyHarness;
  beforeAll(async () => {
    h = await startMoneyHarness('reconcileriso', { STALE_ROUND_AFTER_SECONDS: '1', RECONCILE_INTERVAL_SECONDS: '3600' });
  });
  afterAll(async () => h?.close());

  it("rolls back operator B's newly stale round on the next tick, not after operator A's whole backlog", async () => {
    const launchAs = async (as: typeof OP1, playerRef: string) => {
      const token = await h.launch(playerRef, {}, as);
      return (tag: string) => {
        const roundId = `ri-${tag}-${randomUUID()}`;
        return { sessionToken: token, roundId, playerRef, currency: 'EUR', gameId: 'fruit-1', transactionId: `${roundId}-bet`, type: 'BET', roundComplete: false, amount: 10 };
      };
    };
    const betOfA = await launchAs(OP1, `a-${randomUUID().slice(0, 6)}`);
    const staleA = Array.from({ length: 12 }, (_, i) => betOfA(`a${i}`));
    for (const b of staleA) expect((await h.tx(b)).status).toBe(200);
    const idsA = staleA.map((b) => b.roundId);
    await h.until(async () => (await h.svc.ctx.pool.query(`SELECT 1 FROM rm_rounds WHERE round_id = ANY($1) AND outstanding_bets > 0`, [idsA])).rowCount === idsA.length);
    await new Promise((r) => setTimeout(r, 1500));

    // A's wallet hangs: each of A's rounds costs a balance check and a rollback, 500 ms each (~12 s in all).
    h.wallet.setBalanceReply({ hang: true });
    h.wallet.setChaos((tx) => (tx.type === 'ROLLBACK' ? { hang: true } : undefined));
    let firstDone = false;
    const first = h.svc.reconciler!.sweep().finally(() => (firstDone = true));

    // B bets after that sweep started; its round goes stale a second later.
    const betOfB = (await launchAs(OP2, `b-${randomUUID().slice(0, 6)}`))('b');
    expect((await h.tx(betOfB)).status).toBe(200);
    await h.until(async () => (await h.svc.ctx.pool.query(`SELECT 1 FROM rm_rounds WHERE round_id = $1 AND outstanding_bets > 0`, [betOfB.roundId])).rowCount === 1);
    await new Promise((r) => setTimeout(r, 1500));

    // The next ticks of the reconciler (as its interval would run them), for up to 5 s.
    const deadline = Date.now() + 5000;
    while (!h.wallet2.processed.has(`${STALE_ROLLBACK_PREFIX}${betOfB.transactionId}`) && Date.now() < deadline) {
      await h.svc.reconciler!.sweep();
      await new Promise((r) => setTimeout(r, 200));
    }
    const bRolledBack = h.wallet2.processed.has(`${STALE_ROLLBACK_PREFIX}${betOfB.transactionId}`);
    const aStillRunning = !firstDone;
    await first;
    expect(aStillRunning, 'the test needs A\'s sweep to still be running').toBe(true);
    expect(bRolledBack, "B's stale round waited for A's hung backlog").toBe(true);
  }, 90_000);
});
