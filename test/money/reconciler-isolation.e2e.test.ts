import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STALE_ROLLBACK_PREFIX } from '../../services/rounds/events.ts';
import { SWEEP_LOCKS_APPLICATION, SweepLocks } from '../../services/rounds/reconciler.ts';
import { OP1, OP2, testCatalog } from '../helpers/catalog.ts';
import { within } from '../helpers/eventually.ts';
import { startMoneyHarness, type MoneyHarness, SCRIPTED_HANG_TIMEOUT } from './harness.ts';

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
    h = await startMoneyHarness('reconcileriso', { STALE_ROUND_AFTER_SECONDS: '1', RECONCILE_INTERVAL_SECONDS: '3600' }, SCRIPTED_HANG_TIMEOUT);
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

/**
 * Each operator's sweep held its lock on a connection of the process's query pool for its whole length,
 * and queried on others: as many operators going stale at once as the pool holds took every connection
 * and waited for one more (pg's 5 s wait for a connection), failing their rounds' refunds and every
 * request of the api beside them. Here six operators' rounds go stale at once in a process whose pool
 * holds three connections (DATABASE_POOL_SIZE), which runs the api and the reconciler, as by default.
 */
describe('many operators stale at once, more than the process has connections', () => {
  const OPERATORS = 6;
  let h: MoneyHarness;
  const operators = Array.from({ length: OPERATORS }, (_, i) => ({ kind: 'operator' as const, id: `op-many-${i}`, secret: OP1.secret }));
  beforeAll(async () => {
    h = await startMoneyHarness('reconcilerpool', { DATABASE_POOL_SIZE: '3', STALE_ROUND_AFTER_SECONDS: '1', RECONCILE_INTERVAL_SECONDS: '3600' }, SCRIPTED_HANG_TIMEOUT);
    const base = testCatalog({ walletUrl: h.wallet.url, wallet2Url: h.wallet2.url, providerUrl: h.provider.url, walletTimeoutMs: 500 });
    const [template] = base.operators;
    // Every one of them pays through the first wallet (it checks the first operator's secret).
    await h.svc.ctx.catalog.apply({ ...base, operators: [...base.operators, ...operators.map((o) => ({ ...template!, id: o.id, name: o.id, blockedPlayers: [] }))] });
  });
  afterAll(async () => h?.close());

  /** Rounds of these operators, each with one BET answered and nothing after it, once they are stale. */
  const staleRounds = async (of: readonly (typeof operators)[number][]) => {
    const bets = await Promise.all(
      of.map(async (as) => {
        const playerRef = `m-${randomUUID().slice(0, 6)}`;
        const token = await h.launch(playerRef, {}, as);
        const roundId = `rm-${as.id}-${randomUUID()}`;
        const bet = { sessionToken: token, roundId, playerRef, currency: 'EUR', gameId: 'fruit-1', transactionId: `${roundId}-bet`, type: 'BET', roundComplete: false, amount: 10 };
        expect((await h.tx(bet)).status).toBe(200);
        return bet;
      }),
    );
    const ids = bets.map((b) => b.roundId);
    await h.until(async () => (await h.svc.ctx.pool.query(`SELECT 1 FROM rm_rounds WHERE round_id = ANY($1) AND outstanding_bets > 0`, [ids])).rowCount === ids.length);
    await new Promise((r) => setTimeout(r, 1500)); // STALE_ROUND_AFTER_SECONDS is 1
    return bets;
  };

  it("refunds every operator's stale round in one sweep, and the api answers meanwhile", async () => {
    const bets = await staleRounds(operators);

    const sweep = h.svc.reconciler!.sweep();
    const during = await fetch(`${h.svc.url}/readyz`);
    const result = await sweep;
    expect(during.status).toBe(200);
    expect(result.roundsClosed).toBe(OPERATORS);
    for (const b of bets) expect(h.wallet.processed.get(`${STALE_ROLLBACK_PREFIX}${b.transactionId}`)?.status, b.roundId).toBe('OK');
  }, 60_000);

  // The sweep's locks shared their class with the event store's stream locks: an operator's sweep (minutes,
  // behind a hung wallet) held back every append to a stream whose id hashes as the operator's id does.
  it("holds back no append while it sweeps, whatever the stream's id", async () => {
    const locks = new SweepLocks(h.env.db.url);
    const operatorId = operators[1]!.id;
    expect(await locks.tryLock(operatorId)).toBe(true);
    try {
      const appended = h.svc.ctx.eventStore.append(operatorId, [{ id: randomUUID(), type: 'Probe', data: {} }], 'any').then(() => 'appended');
      expect(await within(appended, 5000)).toBe('appended');
    } finally {
      await locks.unlock(operatorId);
      await locks.close();
    }
  });

  it('goes on sweeping after the connection that holds its locks is lost', async () => {
    const [first] = await staleRounds([operators[0]!]);
    expect((await h.svc.reconciler!.sweep()).roundsClosed).toBe(1);
    expect(h.wallet.processed.get(`${STALE_ROLLBACK_PREFIX}${first!.transactionId}`)?.status).toBe('OK');

    const { rowCount } = await h.svc.ctx.pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, [
      SWEEP_LOCKS_APPLICATION,
    ]);
    expect(rowCount).toBe(1);

    const [second] = await staleRounds([operators[0]!]);
    expect((await h.svc.reconciler!.sweep()).roundsClosed).toBe(1);
    expect(h.wallet.processed.get(`${STALE_ROLLBACK_PREFIX}${second!.transactionId}`)?.status).toBe('OK');
  }, 60_000);
});
