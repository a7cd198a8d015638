import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OP1, OP2, PROV_A, PROV_B } from '../helpers/catalog.ts';
import { signedRequest } from '../helpers/signing.ts';
import { startMoneyHarness, type MoneyHarness, SCRIPTED_HANG_TIMEOUT } from './harness.ts';

describe('provider transaction API (contract section 5)', () => {
  let h: MoneyHarness;
  beforeAll(async () => {
    h = await startMoneyHarness('money', {}, SCRIPTED_HANG_TIMEOUT);
  });
  afterAll(async () => h?.close());

  /** A fresh player with a session, and a builder for its transactions. */
  const player = async (name = `p-${randomUUID().slice(0, 8)}`) => {
    const token = await h.launch(name);
    const roundId = `r-${randomUUID()}`;
    const base = { sessionToken: token, playerRef: name, currency: 'EUR', gameId: 'fruit-1', roundId };
    return {
      name,
      token,
      roundId,
      bet: (over: Record<string, unknown> = {}) => ({ ...base, transactionId: `b-${randomUUID()}`, type: 'BET', roundComplete: false, amount: 100, ...over }),
      win: (over: Record<string, unknown> = {}) => ({ ...base, transactionId: `w-${randomUUID()}`, type: 'WIN', roundComplete: true, amount: 250, ...over }),
      rollback: (betId: string, over: Record<string, unknown> = {}) => ({ ...base, transactionId: `rb-${randomUUID()}`, type: 'ROLLBACK', originalTransactionId: betId, amount: 100, ...over }),
    };
  };

  describe('200: forwarded and settled', () => {
    it('forwards a BET and a WIN, signed, with the identical body, and answers the wallet reply verbatim', async () => {
      const p = await player();
      const bet = p.bet({ metadata: { jackpot: { won: false }, z: 1, a: [1, 2] } });
      const res = await h.tx(bet);
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ status: 'OK', balance: 9900 });
      const [call] = h.walletCallsFor(bet.transactionId as string);
      expect(call!.signatureValid).toBe(true);
      expect(call!.body).toEqual({ ...bet });
      expect(call!.rawBody).toContain('"metadata":{"jackpot":{"won":false},"z":1,"a":[1,2]}'); // verbatim, key order kept
      const win = await h.tx(p.win());
      expect(win.json).toEqual({ status: 'OK', balance: 10150 });
    });

    it('accepts a zero-amount WIN', async () => {
      const p = await player();
      await h.tx(p.bet());
      expect((await h.tx(p.win({ amount: 0 }))).json).toEqual({ status: 'OK', balance: 9900 });
    });

    it('passes a DECLINED bet through as 200 and does not retry it', async () => {
      const p = await player();
      h.wallet.declineBets(p.name);
      const bet = p.bet();
      const res = await h.tx(bet);
      expect(res.status).toBe(200);
      expect(res.json).toMatchObject({ status: 'DECLINED' });
      await new Promise((r) => setTimeout(r, 400));
      expect(h.walletCallsFor(bet.transactionId as string)).toHaveLength(1);
    });

    it('answers an identical resubmission from the stored reply without calling the wallet, even after the round completed', async () => {
      const p = await player();
      const bet = p.bet();
      const first = await h.tx(bet);
      await h.tx(p.win());
      const again = await h.tx(bet);
      expect(again.status).toBe(200);
      expect(again.text).toBe(first.text);
      expect(h.walletCallsFor(bet.transactionId as string)).toHaveLength(1);
    });

    it('returns the wallet body verbatim, extra fields included', async () => {
      const p = await player();
      const bet = p.bet();
      h.wallet.script(bet.transactionId as string, { status: 200, raw: '{"status":"OK","balance":42,"walletRef":"w-1"}' });
      const res = await h.tx(bet);
      expect(res.text).toBe('{"status":"OK","balance":42,"walletRef":"w-1"}');
    });
  });

  describe('400: validation', () => {
    it.each([
      ['a negative amount', { amount: -1 }, 'amount'],
      ['a fractional amount', { amount: 1.5 }, 'amount'],
      ['an amount beyond a safe integer', { amount: 2 ** 53 }, 'amount'],
      ['an amount as a string', { amount: '100' }, 'amount'],
      ['a lower-case currency', { currency: 'eur' }, 'currency'],
      ['metadata that is an array', { metadata: [1] }, 'metadata'],
      ['metadata that is a string', { metadata: 'x' }, 'metadata'],
      ['metadata that is null', { metadata: null }, 'metadata'],
      ['metadata over 8 KiB', { metadata: { blob: 'x'.repeat(8200) } }, 'metadata'],
      ['a direction on a BET', { direction: 'DEBIT' }, 'direction'],
      ['a BET without roundComplete', { roundComplete: undefined }, 'roundComplete'],
      ['an unknown type', { type: 'REFUND' }, 'type'],
      ['an ADJUSTMENT from a provider', { type: 'ADJUSTMENT', direction: 'CREDIT' }, 'ADJUSTMENT'],
    ])('refuses %s', async (_label, over, field) => {
      const p = await player();
      const res = await h.tx(p.bet(over));
      expect(res.status).toBe(400);
      expect(String(res.json.error)).toContain(field);
    });

    it('refuses a ROLLBACK without originalTransactionId', async () => {
      const p = await player();
      const res = await h.tx(p.rollback('x', { originalTransactionId: undefined }));
      expect(res.status).toBe(400);
      expect(String(res.json.error)).toContain('originalTransactionId');
    });

    it.each(['playerRef', 'gameId', 'currency'] as const)('refuses a %s that differs from the session', async (field) => {
      const p = await player();
      const other = { playerRef: 'someone-else', gameId: 'gems-2', currency: 'USD' }[field];
      const res = await h.tx(p.bet({ [field]: other }));
      expect(res.status).toBe(400);
      expect(String(res.json.error)).toContain(field);
    });

    it('refuses a ROLLBACK that names no BET of its round', async () => {
      const p = await player();
      const bet = p.bet();
      await h.tx(bet);
      const win = p.win({ roundComplete: false });
      await h.tx(win);
      const q = await player(p.name);
      await h.tx(q.bet({ transactionId: 'other-round-bet' }));
      for (const original of ['never-sent', win.transactionId, 'other-round-bet']) {
        const res = await h.tx(p.rollback(original as string));
        expect(res.status).toBe(400);
        expect(String(res.json.error)).toContain('originalTransactionId');
      }
    });

    it('refuses any transaction on a DEMO session, and nothing reaches the wallet', async () => {
      const token = await h.launch('demo-player', { mode: 'DEMO' });
      const before = h.wallet.calls.length;
      const res = await h.tx(h.bet(token, { playerRef: 'demo-player' }));
      expect(res.status).toBe(400);
      expect(String(res.json.error)).toContain('demo');
      expect(h.wallet.calls.length).toBe(before);
    });

    it('answers a body that is not JSON with 400', async () => {
      const res = await signedRequest(h.svc.url, { path: '/v1/wallet/transaction', rawBody: '{"type":', as: PROV_A });
      expect(res.status).toBe(400);
    });
  });

  describe('401: invalid session', () => {
    it('refuses an unknown token, a kicked one and another provider’s, with {"error":"invalid session"}', async () => {
      const p = await player();
      expect((await h.tx(p.bet({ sessionToken: 'nope' }))).json).toEqual({ error: 'invalid session' });
      expect((await h.tx(p.bet(), PROV_B)).status).toBe(401);
      await h.tx(p.bet({ transactionId: 'before-kick-' + p.name }));
      await signedRequest(h.svc.url, { path: '/v1/operator/players/kick', body: { playerRef: p.name }, as: OP1 });
      const win = p.win();
      const afterKick = await h.tx(win);
      expect(afterKick.status).toBe(401);
      expect(afterKick.json).toEqual({ error: 'invalid session' });
      // A kicked session is 401 whatever else is wrong with the request.
      expect((await h.tx(p.win({ currency: 'USD' }))).status).toBe(401);
      // And for a round the service has not seen yet (its transaction is decided on a fresh read, the
      // kick checked beside the claim rather than in the claim's statement).
      const unseen = p.win({ roundId: 'unseen-' + p.name });
      expect((await h.tx(unseen)).status).toBe(401);
      expect(h.walletCallsFor(unseen.transactionId as string)).toHaveLength(0);
      // Refused before anything was recorded or sent: the wallet never saw it, and its id stays free
      // for a valid submission on a new session.
      expect(h.walletCallsFor(win.transactionId as string)).toHaveLength(0);
      const fresh = await h.launch(p.name);
      const again = await h.tx({ ...win, sessionToken: fresh });
      expect(again.status).toBe(200);
      expect(h.walletCallsFor(win.transactionId as string)).toHaveLength(1);
    });
  });

  describe('409: conflicts', () => {
    it('refuses a used transactionId with different content, in the same round or another', async () => {
      const p = await player();
      const bet = p.bet();
      await h.tx(bet);
      const sameRound = await h.tx({ ...bet, amount: 101 });
      expect(sameRound.status).toBe(409);
      const otherRound = await h.tx({ ...bet, roundId: 'elsewhere' });
      expect(otherRound.status).toBe(409);
      expect(h.walletCallsFor(bet.transactionId as string)).toHaveLength(1);
    });

    it('refuses a BET or a WIN on a completed round', async () => {
      const p = await player();
      await h.tx(p.bet());
      await h.tx(p.win());
      expect((await h.tx(p.bet())).status).toBe(409);
      const win = await h.tx(p.win());
      expect(win.status).toBe(409);
      expect(win.json).toEqual({ error: 'round already completed' });
    });

    it('refuses a second ROLLBACK of a BET under another transactionId, and the identical one is answered again', async () => {
      const p = await player();
      const bet = p.bet();
      await h.tx(bet);
      const rb = p.rollback(bet.transactionId as string);
      const first = await h.tx(rb);
      expect(first.json).toEqual({ status: 'OK', balance: 10_000 });
      expect((await h.tx(p.rollback(bet.transactionId as string))).status).toBe(409);
      expect((await h.tx(rb)).text).toBe(first.text);
      expect(h.wallet.balances.get(p.name)).toBe(10_000);
    });
  });

  describe('session expiry (decided here)', () => {
    it('settles the rounds an expired session opened, and refuses new BETs and foreign rounds with 401', async () => {
      const p = await player();
      const bet = p.bet();
      await h.tx(bet);
      const realNow = h.svc.ctx.now;
      h.svc.ctx.now = () => new Date(Date.now() + 5 * 3600_000); // past the 4 h session lifetime
      try {
        expect((await h.tx(p.bet())).json).toEqual({ error: 'invalid session' });
        expect((await h.tx(p.win({ roundId: 'never-opened' }))).status).toBe(401);
        expect((await h.tx(p.win())).status).toBe(200);
        const q = await (async () => p)();
        const stillRollbackable = await h.tx(q.rollback(bet.transactionId as string, { roundId: p.roundId }));
        expect(stillRollbackable.status).toBe(200);
      } finally {
        h.svc.ctx.now = realNow;
      }
    });
  });

  describe('wallet failures', () => {
    it('retries a WIN after 500 twice until OK: the same body every time, a fresh nonce and a valid signature on each', async () => {
      const p = await player();
      await h.tx(p.bet());
      const win = p.win();
      h.wallet.script(win.transactionId as string, { status: 500, body: { error: 'boom' } }, { status: 500, body: { error: 'boom' } });
      const res = await h.tx(win);
      expect(res.status).toBe(502);
      await h.until(() => h.wallet.effects.get(win.transactionId as string) === 1);
      const calls = h.walletCallsFor(win.transactionId as string);
      expect(calls).toHaveLength(3);
      expect(new Set(calls.map((c) => c.rawBody)).size).toBe(1);
      expect(new Set(calls.map((c) => c.nonce)).size).toBe(3);
      expect(calls.every((c) => c.signatureValid)).toBe(true);
      const again = await h.tx(win);
      expect(again.json).toEqual({ status: 'OK', balance: 10_150 });
    });

    it('answers 504 when the wallet does not reply in time, and the WIN is applied once later', async () => {
      const p = await player();
      await h.tx(p.bet());
      const win = p.win();
      h.wallet.script(win.transactionId as string, { hang: true });
      const res = await h.tx(win);
      expect(res.status).toBe(504);
      expect(res.json).toEqual({ error: 'wallet timeout' });
      await h.until(() => h.wallet.effects.get(win.transactionId as string) === 1);
      await new Promise((r) => setTimeout(r, 300));
      expect(h.wallet.effects.get(win.transactionId as string)).toBe(1);
    });

    it('treats a 200 that is not a TransactionResponse as a failure and retries', async () => {
      const p = await player();
      await h.tx(p.bet());
      const win = p.win();
      h.wallet.script(win.transactionId as string, { status: 200, raw: 'OK!' });
      expect((await h.tx(win)).status).toBe(502);
      await h.until(() => h.wallet.effects.get(win.transactionId as string) === 1);
    });

    it('records DECLINED on a WIN as invalid: 502, not retried, visible in the read model', async () => {
      const p = await player();
      await h.tx(p.bet());
      const win = p.win();
      h.wallet.script(win.transactionId as string, { status: 200, body: { status: 'DECLINED', balance: 9900 } });
      const res = await h.tx(win);
      expect(res.status).toBe(502);
      await new Promise((r) => setTimeout(r, 500));
      expect(h.walletCallsFor(win.transactionId as string)).toHaveLength(1);
      await h.until(async () => {
        const { rows } = await h.svc.ctx.pool.query(`SELECT status FROM rm_transactions WHERE transaction_id = $1`, [win.transactionId]);
        return rows[0]?.status === 'invalid';
      });
      expect((await h.tx(win)).status).toBe(502);
    });

    it('does not retry a BET that failed', async () => {
      const p = await player();
      const bet = p.bet();
      h.wallet.script(bet.transactionId as string, { status: 503, body: {} });
      expect((await h.tx(bet)).status).toBe(502);
      await new Promise((r) => setTimeout(r, 1500));
      expect(h.walletCallsFor(bet.transactionId as string)).toHaveLength(1);
    });

    it('answers 502 when the wallet cannot be reached, and delivers the WIN once it can', async () => {
      const p = await player();
      await h.tx(p.bet());
      const catalogOp = h.svc.ctx.catalog.snapshot().operators.get('op-1')!;
      await h.svc.ctx.catalog.apply({ operators: [{ ...catalogOp, walletUrl: 'http://127.0.0.1:9' }] });
      const win = p.win();
      try {
        expect((await h.tx(win)).status).toBe(502);
      } finally {
        await h.svc.ctx.catalog.apply({ operators: [catalogOp] });
      }
      await h.until(() => h.wallet.effects.get(win.transactionId as string) === 1);
    });
  });

  describe('concurrency', () => {
    it('twenty identical BETs at once: one wallet call, one effect, the same reply for all', async () => {
      const p = await player();
      const bet = p.bet();
      h.wallet.script(bet.transactionId as string, { status: 200, body: { status: 'OK', balance: 9900 }, delayMs: 100 });
      const replies = await Promise.all(Array.from({ length: 20 }, () => h.tx(bet)));
      expect(new Set(replies.map((r) => `${r.status} ${r.text}`))).toEqual(new Set(['200 {"status":"OK","balance":9900}']));
      expect(h.walletCallsFor(bet.transactionId as string)).toHaveLength(1);
    });

    it('twenty identical WINs against a failing wallet: never two calls at once, one effect in the end', async () => {
      const p = await player();
      await h.tx(p.bet());
      const win = p.win();
      h.wallet.script(win.transactionId as string, ...Array.from({ length: 4 }, () => ({ status: 500, body: {}, delayMs: 30 })));
      await Promise.all(Array.from({ length: 20 }, () => h.tx(win)));
      await h.until(() => h.wallet.effects.get(win.transactionId as string) === 1);
      expect(h.wallet.maxInFlight.get(win.transactionId as string)).toBe(1);
    });

    it('a BET racing its ROLLBACK: the wallet never sees the rollback first, and the money adds up', async () => {
      const p = await player();
      h.wallet.setLatency('BET', 40);
      let standing = 0;
      try {
        for (let i = 0; i < 8; i++) {
          const roundId = `race-${i}-${randomUUID()}`;
          const bet = p.bet({ roundId });
          const [betRes, rbRes] = await Promise.all([
            h.tx(bet),
            new Promise((r) => setTimeout(r, i * 4)).then(() => h.tx(p.rollback(bet.transactionId as string, { roundId }))),
          ]);
          expect(betRes.status).toBe(200);
          // Either the rollback came before the bet was recorded (400: it names no BET of the round), or it was applied.
          expect([200, 400]).toContain(rbRes.status);
          if (rbRes.status === 400) standing += 100;
        }
      } finally {
        h.wallet.setLatency('BET', 0);
      }
      const order = h.wallet.calls.map((c) => c.body as { type: string; transactionId: string; originalTransactionId?: string; playerRef: string });
      for (const [i, call] of order.entries()) {
        if (call.type !== 'ROLLBACK' || call.playerRef !== p.name) continue;
        const betIndex = order.findIndex((c) => c.transactionId === call.originalTransactionId);
        expect(betIndex).toBeGreaterThanOrEqual(0);
        expect(betIndex).toBeLessThan(i);
      }
      expect(h.wallet.balances.get(p.name)).toBe(10_000 - standing);
    });

    it('two different ROLLBACKs of one BET at once: one succeeds, the other is 409, one refund', async () => {
      const p = await player();
      const bet = p.bet();
      await h.tx(bet);
      const [a, b] = await Promise.all([h.tx(p.rollback(bet.transactionId as string)), h.tx(p.rollback(bet.transactionId as string))]);
      expect([a.status, b.status].sort()).toEqual([200, 409]);
      expect(h.wallet.balances.get(p.name)).toBe(10_000);
    });
  });

  describe('tenancy', () => {
    it('keeps rounds apart per operator: the same roundId under two operators is two rounds', async () => {
      const mine = await player('same-player');
      const theirsToken = await h.launch('same-player', {}, OP2);
      await h.tx(mine.bet());
      await h.tx(mine.win());
      const theirs = await h.tx({ ...mine.bet(), sessionToken: theirsToken });
      expect(theirs.status).toBe(200);
      expect(h.wallet2.calls).toHaveLength(1);
      expect(h.wallet2.calls[0]!.signatureValid).toBe(true);
    });
  });
});
