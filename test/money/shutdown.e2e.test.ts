import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readRound } from '../../services/rounds/dispatch.ts';
import { roundStream } from '../../services/rounds/events.ts';
import { PROV_A } from '../helpers/catalog.ts';
import { startInProcess } from '../helpers/service.ts';
import { signedRequest } from '../helpers/signing.ts';
import { startMoneyHarness, type MoneyHarness } from './harness.ts';

/**
 * A stop while a transaction's wallet call is under way and its caller's connection is already gone (the
 * stop closes connections that outlast 20 s; here the provider drops it): the stop waits for the
 * transaction, whose outcome is recorded before the database is closed (operations.md, Shutdown).
 */
describe('stopping while a transaction is in flight', () => {
  let h: MoneyHarness;
  beforeAll(async () => {
    h = await startMoneyHarness('shutdown');
  });
  afterAll(async () => h?.close());

  it('records the outcome of a BET whose wallet answers after its connection was gone, before it closes', async () => {
    const token = await h.launch('sd-player');
    const bet = h.bet(token, { playerRef: 'sd-player' });
    h.wallet.setLatency('BET', 1_500);
    const gone = new AbortController();
    const sent = signedRequest(h.svc.url, { path: '/v1/wallet/transaction', body: bet, as: PROV_A, signal: gone.signal }).catch(() => 'dropped');
    await h.until(() => h.walletCallsFor(String(bet.transactionId)).length === 1);
    gone.abort();
    expect(await sent).toBe('dropped');
    await h.svc.stop();
    expect(h.wallet.effects.get(String(bet.transactionId))).toBe(1);
    // Started again on the same history: the BET's outcome is there, as the wallet gave it.
    const again = await startInProcess(h.env);
    try {
      const round = await readRound(again.ctx.eventStore, roundStream(PROV_A.id, 'op-1', String(bet.roundId)));
      expect(round.state.txs.get(String(bet.transactionId))).toMatchObject({ status: 'applied', attempts: 1 });
    } finally {
      await again.stop();
    }
  }, 30_000);
});
