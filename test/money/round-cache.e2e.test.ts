import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../../services/service.ts';
import { roundStream } from '../../services/rounds/events.ts';
import { PROV_A, testCatalog } from '../helpers/catalog.ts';
import { startInProcess } from '../helpers/service.ts';
import { signedRequest } from '../helpers/signing.ts';
import { startMoneyHarness, type MoneyHarness } from './harness.ts';

/**
 * Each api process decides a round's next transaction on the round as it last wrote it, without reading
 * it again. Here two api processes share one ledger, and each test makes one of them act on a round the
 * other has changed since: every answer and every wallet call must be what a single process would give.
 */
describe('rounds known to one process and changed by another', () => {
  let h: MoneyHarness;
  let other: RunningService & { url: string };
  const viaOther = (body: Record<string, unknown>) => signedRequest<Record<string, unknown>>(other.url, { path: '/v1/wallet/transaction', body, as: PROV_A });

  beforeAll(async () => {
    h = await startMoneyHarness('roundcache');
    other = await startInProcess(h.env, { ROLES: 'api' });
    // The harness's 5 s wallet timeout (nothing here hangs; 500 ms turned a slow call under CI's load into a 504).
    await other.ctx.catalog.apply(testCatalog({ walletUrl: h.wallet.url, wallet2Url: h.wallet2.url, providerUrl: h.provider.url, walletTimeoutMs: 5000 }));
  });
  afterAll(async () => {
    await other?.stop();
    await h?.close();
  });

  const round = async () => {
    const playerRef = `rc-${randomUUID().slice(0, 6)}`;
    const token = await h.launch(playerRef);
    const roundId = `rc-${randomUUID()}`;
    const base = { sessionToken: token, roundId, playerRef, currency: 'EUR', gameId: 'fruit-1' };
    return {
      playerRef,
      roundId,
      base,
      bet: (id: string, amount = 100) => ({ ...base, transactionId: id, type: 'BET', roundComplete: false, amount }),
      win: (id: string, amount: number, roundComplete = false) => ({ ...base, transactionId: id, type: 'WIN', roundComplete, amount }),
      rollback: (id: string, of: string, amount = 100) => ({ ...base, transactionId: id, type: 'ROLLBACK', originalTransactionId: of, amount }),
    };
  };

  it('rolls back a BET it has not seen: a refusal for something absent is decided again on the whole round', async () => {
    const r = await round();
    expect((await h.tx(r.bet(`${r.roundId}-b1`, 100))).status).toBe(200);
    expect((await viaOther(r.bet(`${r.roundId}-b2`, 30))).status).toBe(200);
    const res = await h.tx(r.rollback(`${r.roundId}-rb`, `${r.roundId}-b2`, 30));
    expect(res.status, res.text).toBe(200);
    expect(h.wallet.effects.get(`${r.roundId}-rb`)).toBe(1);
    expect(h.wallet.balances.get(r.playerRef)).toBe(10_000 - 100);
  });

  it('never sends a BET again that the other process rolled back', async () => {
    const r = await round();
    const bet = r.bet(`${r.roundId}-bet`);
    h.wallet.script(bet.transactionId, { status: 500, body: {} });
    expect((await h.tx(bet)).status).toBe(502);
    expect((await viaOther(r.rollback(`${r.roundId}-rb`, bet.transactionId))).status).toBe(200);
    // This process last saw the BET failed and not rolled back; the provider resubmits it here.
    expect((await h.tx(bet)).status).toBe(502);
    expect(h.walletCallsFor(bet.transactionId)).toHaveLength(1);
    expect(h.wallet.balances.get(r.playerRef)).toBe(10_000);
  });

  it('answers a credit the retry worker settled from its stored reply, without another wallet call', async () => {
    const r = await round();
    expect((await h.tx(r.bet(`${r.roundId}-bet`, 100))).status).toBe(200);
    const win = r.win(`${r.roundId}-win`, 250, true);
    h.wallet.script(win.transactionId, { status: 500, body: {} });
    expect((await h.tx(win)).status).toBe(502);
    // The worker's retry settles it; the api still holds the round as it wrote it, the WIN failed.
    await h.until(() => h.wallet.effects.get(win.transactionId) === 1 && h.walletCallsFor(win.transactionId).length === 2);
    await h.until(async () => (await h.svc.ctx.pool.query(`SELECT 1 FROM tx_registry WHERE transaction_id = $1 AND lease_token IS NULL`, [win.transactionId])).rowCount === 1);
    const again = await h.tx(win);
    expect(again.status).toBe(200);
    expect(JSON.parse(again.text)).toEqual({ status: 'OK', balance: 10_000 - 100 + 250 });
    expect(h.walletCallsFor(win.transactionId)).toHaveLength(2);
    expect(h.wallet.effects.get(win.transactionId)).toBe(1);
  });

  it('refuses a BET on a round the other process completed', async () => {
    const r = await round();
    expect((await h.tx(r.bet(`${r.roundId}-b1`, 100))).status).toBe(200);
    expect((await viaOther(r.win(`${r.roundId}-win`, 0, true))).status).toBe(200);
    const late = await h.tx(r.bet(`${r.roundId}-b2`, 40));
    expect(late.status).toBe(409);
    expect(h.walletCallsFor(`${r.roundId}-b2`)).toHaveLength(0);
    expect(h.wallet.balances.get(r.playerRef)).toBe(10_000 - 100);
  });

  it('records a BET whose round the other process opened, after the one it opened', async () => {
    const r = await round();
    expect((await viaOther(r.bet(`${r.roundId}-b1`, 10))).status).toBe(200);
    // Unseen here: a BET assumes a new round, and the append finds the round there.
    expect((await h.tx(r.bet(`${r.roundId}-b2`, 20))).status).toBe(200);
    expect((await h.tx(r.win(`${r.roundId}-win`, 5, true))).status).toBe(200);
    const history = await h.svc.ctx.eventStore.readStream(roundStream('studio-a', 'op-1', r.roundId));
    const ids = history.filter((e) => e.type === 'TransactionRecorded').map((e) => (e.data as { request: { transactionId: string } }).request.transactionId);
    expect(ids).toEqual([`${r.roundId}-b1`, `${r.roundId}-b2`, `${r.roundId}-win`]);
    expect(h.wallet.balances.get(r.playerRef)).toBe(10_000 - 10 - 20 + 5);
  });
});
