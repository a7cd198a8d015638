import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OP1, PROV_A } from '../helpers/catalog.ts';
import { STREAM_PAD } from '../helpers/fakes.ts';
import { signedRequest } from '../helpers/signing.ts';
import { startMoneyHarness, type MoneyHarness } from './harness.ts';
import { roundStream } from '../../services/rounds/events.ts';

const MiB = 1024 * 1024;
const padRun = STREAM_PAD.repeat(64);

/** Partners' replies are bounded: over 1 MiB is a failed attempt, never passed on (contract section 8 rule 7). */
describe('wallet and provider replies over 1 MiB', () => {
  let h: MoneyHarness;
  beforeAll(async () => {
    // The harness's wallet timeout (5 s, not SCRIPTED_HANG_TIMEOUT): the 1 MiB the service reads of a streamed
    // reply before it gives up on it must arrive within it (else a 504 for the 502 these tests check).
    h = await startMoneyHarness('replysize');
  });
  afterAll(async () => h?.close());

  const player = async (name = `p-${randomUUID().slice(0, 8)}`) => {
    const token = await h.launch(name);
    const base = { sessionToken: token, playerRef: name, currency: 'EUR', gameId: 'fruit-1', roundId: `r-${randomUUID()}` };
    return {
      name,
      token,
      bet: (over: Record<string, unknown> = {}) => ({ ...base, transactionId: `b-${randomUUID()}`, type: 'BET', roundComplete: false, amount: 100, ...over }),
      win: (over: Record<string, unknown> = {}) => ({ ...base, transactionId: `w-${randomUUID()}`, type: 'WIN', roundComplete: true, amount: 250, ...over }),
    };
  };

  /** The failed attempts the history holds for a transaction, read through the event store (either adapter). */
  /**
   * The failed attempts the round's own stream holds (the global log may hold back what was just written
   * while a transaction is open elsewhere on the server; a stream shows it at once).
   */
  const failedDetails = async (tx: { transactionId: string; roundId: unknown }): Promise<string[]> => {
    const events = await h.svc.ctx.eventStore.readStream(roundStream(PROV_A.id, OP1.id, String(tx.roundId)));
    return events.filter((e) => e.type === 'TransactionAttemptFailed' && e.data.transactionId === tx.transactionId).map((e) => String(e.data.detail));
  };

  it('a BET whose wallet streams a valid 5 MiB reply: 502, nothing of that body passed on, not retried', async () => {
    const p = await player();
    const bet = p.bet();
    h.wallet.script(bet.transactionId, { status: 200, stream: { bytes: 5 * MiB, fields: { status: 'OK', balance: 9900 } } });
    const res = await h.tx(bet);
    expect(res.status).toBe(502);
    expect(res.json).toEqual({ error: 'wallet call failed' });
    expect(res.text).not.toContain(padRun);
    expect(await failedDetails(bet)).toEqual(['wallet reply over 1 MiB']);
    await new Promise((r) => setTimeout(r, 1000));
    expect(h.walletCallsFor(bet.transactionId)).toHaveLength(1);
    const again = await h.tx(bet);
    expect(again.text).not.toContain(padRun);
  });

  it('a WIN whose wallet streams 5 MiB: 502, then retried by the worker and applied once the wallet answers normally', async () => {
    const p = await player();
    await h.tx(p.bet());
    const win = p.win();
    h.wallet.script(win.transactionId, { status: 200, stream: { bytes: 5 * MiB, fields: { status: 'OK', balance: 1 } } });
    const res = await h.tx(win);
    expect(res.status).toBe(502);
    expect(res.text).not.toContain(padRun);
    await h.until(() => h.wallet.effects.get(win.transactionId) === 1);
    expect(h.walletCallsFor(win.transactionId)).toHaveLength(2);
    expect(await failedDetails(win)).toEqual(['wallet reply over 1 MiB']);
    const again = await h.tx(win);
    expect(again.status).toBe(200);
    expect(again.json).toEqual({ status: 'OK', balance: 10_150 });
  });

  it('a reply of exactly 1 MiB that is a valid TransactionResponse is accepted and passed on verbatim', async () => {
    const p = await player();
    const bet = p.bet();
    h.wallet.script(bet.transactionId, { status: 200, stream: { bytes: MiB, fields: { status: 'OK', balance: 9900 } } });
    const res = await h.tx(bet);
    expect(res.status).toBe(200);
    expect(Buffer.byteLength(res.text)).toBe(MiB);
    expect(res.json).toMatchObject({ status: 'OK', balance: 9900 });
    // One byte more is over the limit.
    const next = p.bet();
    h.wallet.script(next.transactionId, { status: 200, stream: { bytes: MiB + 1, fields: { status: 'OK', balance: 9800 } } });
    expect((await h.tx(next)).status).toBe(502);
  });

  it('a reply naming status or balance twice is no valid reply: a BET is 502 and failed, a WIN retried until a plain reply', async () => {
    const p = await player();
    const bet = p.bet();
    // JSON.parse keeps the last "status" (OK); a provider's reader that keeps the first would see DECLINED.
    h.wallet.script(bet.transactionId, { status: 200, raw: '{"status":"DECLINED","balance":10000,"status":"OK"}' });
    const res = await h.tx(bet);
    expect([res.status, res.json]).toEqual([502, { error: 'wallet call failed' }]);
    expect(await failedDetails(bet)).toEqual(['wallet answered 200 without a valid TransactionResponse']);
    // The provider resubmits: the wallet's own reply this time.
    const again = await h.tx(bet);
    expect([again.status, again.json]).toEqual([200, { status: 'OK', balance: 9900 }]);
    const win = p.win();
    h.wallet.script(win.transactionId, { status: 200, raw: '{"status":"OK","balance":1,"b\\u0061lance":2}' });
    expect((await h.tx(win)).status).toBe(502);
    await h.until(() => h.wallet.effects.get(win.transactionId) === 1);
    expect((await h.tx(win)).json).toEqual({ status: 'OK', balance: 10_150 });
  });

  it('the provider-facing balance call: a wallet balance reply over 1 MiB is 502, its body not passed on', async () => {
    const p = await player();
    h.wallet.setBalanceReply({ status: 200, stream: { bytes: 5 * MiB, fields: { balance: 10_000 } } });
    try {
      const res = await signedRequest(h.svc.url, { path: '/v1/wallet/balance', body: { sessionToken: p.token }, as: PROV_A });
      expect(res.status).toBe(502);
      expect(res.json).toEqual({ error: 'wallet reply over 1 MiB' });
      expect(res.text).not.toContain(padRun);
    } finally {
      h.wallet.setBalanceReply(undefined);
    }
    const normal = await signedRequest(h.svc.url, { path: '/v1/wallet/balance', body: { sessionToken: p.token }, as: PROV_A });
    expect(normal.status).toBe(200);
  });

  it('a provider free-spin reply over 1 MiB fails the grant (502), its body not kept', async () => {
    h.provider.script('/v1/free-spins/grants', { status: 200, stream: { bytes: 5 * MiB, fields: { externalRef: 'ext-huge' } } });
    const body = { playerRef: 'fs-p', idempotencyKey: randomUUID(), gameId: 'fruit-1', spins: 5, currency: 'EUR', betAmountMinor: 10 };
    const res = await signedRequest<{ error: string }>(h.svc.url, { path: '/v1/operator/free-spins/grants', body, as: OP1 });
    expect(res.status).toBe(502);
    expect(res.json.error).toBe('provider call failed: provider reply over 1 MiB');
    const again = await signedRequest(h.svc.url, { path: '/v1/operator/free-spins/grants', body, as: OP1 });
    expect(again.json).toMatchObject({ status: 'failed', lastError: 'provider reply over 1 MiB' });
    expect(again.text).not.toContain(padRun);
  });
});
