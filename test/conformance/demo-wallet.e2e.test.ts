import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoWallet, type DemoWallet } from '../../services/sandbox/demo-wallet.ts';
import { signedCall } from '../../shared/http/outbound.ts';
import { sign } from '../../shared/http/signature.ts';

const SECRET = 'demo-wallet-secret';
let wallet: DemoWallet;
let seq = 0;

beforeAll(async () => {
  wallet = await startDemoWallet({ secret: SECRET, startingBalance: 1_000, signatureWindowSeconds: 60 });
});
afterAll(async () => wallet?.close());

interface Reply {
  status: number;
  contentType: string | undefined;
  text: string;
  json: unknown;
}

/** A call signed as the service signs it (its own outbound code). */
async function call(method: 'GET' | 'POST', target: string, body?: unknown): Promise<Reply> {
  const r = await signedCall({
    baseUrl: wallet.url,
    pathAndQuery: target,
    method,
    ...(body === undefined ? {} : typeof body === 'string' ? { rawBody: body } : { body }),
    secret: SECRET,
    timeoutMs: 5000,
  });
  if (r.kind !== 'response') throw new Error(`no reply: ${r.kind}`);
  let json: unknown;
  try {
    json = JSON.parse(r.body);
  } catch {
    json = undefined;
  }
  return { status: r.status, contentType: r.contentType, text: r.body, json };
}

const player = () => `p-${++seq}-${randomBytes(3).toString('hex')}`;
const tx = (p: string, fields: Record<string, unknown>) => ({
  sessionToken: 'sess-1',
  roundId: 'r-1',
  roundComplete: false,
  playerRef: p,
  currency: 'EUR',
  gameId: 'fruit-1',
  ...fields,
});
const post = (body: unknown) => call('POST', '/v1/wallet/transaction', body);
const balance = async (p: string) => (await call('GET', `/v1/wallet/balance?playerRef=${encodeURIComponent(p)}`)).json;

/** A hand-made request, for the ones the service's outbound code would never send. */
async function rawRequest(target: string, body: string | undefined, h: { timestamp?: number; nonce?: string | null; secret?: string; signedTarget?: string }) {
  const timestamp = String(h.timestamp ?? Math.floor(Date.now() / 1000));
  const nonce = h.nonce === undefined ? randomBytes(8).toString('hex') : h.nonce;
  const method = body === undefined ? 'GET' : 'POST';
  const signature = sign(h.secret ?? SECRET, { timestamp, nonce: nonce ?? '', method, target: h.signedTarget ?? target, body: body ?? '' });
  const headers: Record<string, string> = { 'x-timestamp': timestamp, 'x-signature': signature };
  if (nonce !== null) headers['x-nonce'] = nonce;
  const res = await fetch(wallet.url + target, { method, headers, ...(body !== undefined ? { body } : {}) });
  return { status: res.status, contentType: res.headers.get('content-type'), text: await res.text() };
}

describe('demo wallet: signatures (contract section 3, target = path + query)', () => {
  it('answers the documented refusals: 400 invalid nonce, 401 plain-text invalid signature, 401 replayed request', async () => {
    const p = player();
    const target = `/v1/wallet/balance?playerRef=${p}`;
    expect(await rawRequest(target, undefined, { nonce: null })).toMatchObject({ status: 400, text: '{"error":"invalid nonce"}' });
    expect(await rawRequest(target, undefined, { nonce: 'n'.repeat(65) })).toMatchObject({ status: 400 });
    expect(await rawRequest(target, undefined, { secret: 'wrong' })).toEqual({ status: 401, contentType: 'text/plain', text: 'invalid signature' });
    // The query is signed: playerRef swapped after signing is refused.
    expect(await rawRequest(`/v1/wallet/balance?playerRef=${p}-x`, undefined, { signedTarget: target })).toMatchObject({ status: 401 });
    // Outside the configured 60 s window, either way; inside it, accepted.
    // The wallet's clock may tick a second between our reading and its check, which brings a timestamp
    // 61 s ahead to 60 s ahead (inside): ahead is tested at 62 s, read afresh for the request.
    const now = () => Math.floor(Date.now() / 1000);
    expect(await rawRequest(target, undefined, { timestamp: now() - 61 })).toMatchObject({ status: 401 });
    expect(await rawRequest(target, undefined, { timestamp: now() + 62 })).toMatchObject({ status: 401 });
    expect(await rawRequest(target, undefined, { timestamp: now() - 50 })).toMatchObject({ status: 200, text: '{"balance":1000}' });

    const nonce = randomBytes(8).toString('hex');
    // A forged request does not burn the nonce it carries...
    expect(await rawRequest(target, undefined, { nonce, secret: 'wrong' })).toMatchObject({ status: 401 });
    expect(await rawRequest(target, undefined, { nonce })).toMatchObject({ status: 200 });
    // ...a genuine one does.
    expect(await rawRequest(target, undefined, { nonce })).toMatchObject({ status: 401, text: '{"error":"replayed request"}' });
  });

  it('checks the body hash: a transaction altered after signing is refused and not applied', async () => {
    const p = player();
    const signed = JSON.stringify(tx(p, { transactionId: 't-1', type: 'WIN', amount: 0 }));
    const sent = signed.replace('"amount":0', '"amount":500');
    const timestamp = String(Math.floor(Date.now() / 1000));
    const nonce = randomBytes(8).toString('hex');
    const signature = sign(SECRET, { timestamp, nonce, method: 'POST', target: '/v1/wallet/transaction', body: signed });
    const res = await fetch(`${wallet.url}/v1/wallet/transaction`, { method: 'POST', headers: { 'x-timestamp': timestamp, 'x-nonce': nonce, 'x-signature': signature }, body: sent });
    expect(res.status).toBe(401);
    expect(wallet.balanceOf(p)).toBe(1_000);
  });
});

describe('demo wallet: transactions (API document 4.2)', () => {
  it('refuses a malformed TransactionRequest with 400 and applies nothing', async () => {
    const p = player();
    const before = wallet.entries().length;
    const bad: unknown[] = [
      tx(p, { transactionId: 'b-1', type: 'BET', amount: 1.5 }),
      tx(p, { transactionId: 'b-2', type: 'BET', amount: -1 }),
      tx(p, { transactionId: 'b-3', type: 'BET', amount: '10' }),
      tx(p, { transactionId: 'b-4', type: 'BET', amount: 10, currency: 'eur' }),
      tx(p, { transactionId: 'b-5', type: 'BET', amount: 10, roundComplete: undefined }),
      tx(p, { transactionId: 'b-6', type: 'ROLLBACK', amount: 10 }),
      tx(p, { transactionId: 'b-7', type: 'ADJUSTMENT', amount: 10 }),
      tx(p, { transactionId: 'b-8', type: 'PAYOUT', amount: 10 }),
      tx(p, { transactionId: 'b-9', type: 'WIN', amount: 10, metadata: [1] }),
      '{"transactionId":',
    ];
    for (const body of bad) {
      const r = await post(body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json).toEqual({ error: expect.any(String) });
    }
    expect(wallet.entries().length).toBe(before);
    expect(wallet.balanceOf(p)).toBe(1_000);
  });

  it('BET debits, WIN credits (zero included), ADJUSTMENT applies its direction; replies and the balance endpoint agree', async () => {
    const p = player();
    const bet = await post(tx(p, { transactionId: 'b-1', type: 'BET', amount: 300 }));
    expect(bet).toMatchObject({ status: 200, contentType: 'application/json', json: { status: 'OK', balance: 700 } });
    expect((await post(tx(p, { transactionId: 'w-0', type: 'WIN', amount: 0, roundComplete: false }))).json).toEqual({ status: 'OK', balance: 700 });
    expect((await post(tx(p, { transactionId: 'w-1', type: 'WIN', amount: 50, roundComplete: true }))).json).toEqual({ status: 'OK', balance: 750 });
    const adj = { sessionToken: 'system:admin-adjustment', gameId: '', roundId: 'adjustment:a-1', metadata: { reason: 'goodwill' } };
    expect((await post(tx(p, { ...adj, transactionId: 'a-1', type: 'ADJUSTMENT', amount: 25, direction: 'CREDIT' }))).json).toEqual({ status: 'OK', balance: 775 });
    expect((await post(tx(p, { ...adj, transactionId: 'a-2', type: 'ADJUSTMENT', amount: 75, direction: 'DEBIT' }))).json).toEqual({ status: 'OK', balance: 700 });
    expect(await balance(p)).toEqual({ balance: 700 });
    expect(wallet.entries().filter((e) => e.playerRef === p)).toEqual([
      { transactionId: 'b-1', playerRef: p, type: 'BET', amount: 300, status: 'OK', balance: 700 },
      { transactionId: 'w-0', playerRef: p, type: 'WIN', amount: 0, status: 'OK', balance: 700 },
      { transactionId: 'w-1', playerRef: p, type: 'WIN', amount: 50, status: 'OK', balance: 750 },
      { transactionId: 'a-1', playerRef: p, type: 'ADJUSTMENT', amount: 25, status: 'OK', balance: 775 },
      { transactionId: 'a-2', playerRef: p, type: 'ADJUSTMENT', amount: 75, status: 'OK', balance: 700 },
    ]);
  });

  it('replays the stored reply verbatim on a repeat, per player, and lists the transaction once', async () => {
    const p = player();
    const q = player();
    const first = await post(tx(p, { transactionId: 'same-id', type: 'BET', amount: 100 }));
    await post(tx(p, { transactionId: 'b-2', type: 'BET', amount: 100 }));
    const repeat = await post(tx(p, { transactionId: 'same-id', type: 'BET', amount: 100 }));
    expect(repeat.text).toBe(first.text);
    expect(repeat.json).toEqual({ status: 'OK', balance: 900 });
    expect(wallet.balanceOf(p)).toBe(800);
    // The same id for another player is that player's own transaction.
    expect((await post(tx(q, { transactionId: 'same-id', type: 'BET', amount: 100 }))).json).toEqual({ status: 'OK', balance: 900 });
    expect(wallet.entries().filter((e) => e.transactionId === 'same-id').map((e) => e.playerRef)).toEqual([p, q]);
  });

  it('applies identical requests arriving together once', async () => {
    const p = player();
    const body = tx(p, { transactionId: 'burst', type: 'BET', amount: 10 });
    const replies = await Promise.all(Array.from({ length: 20 }, () => post(body)));
    expect(new Set(replies.map((r) => r.text))).toEqual(new Set(['{"status":"OK","balance":990}']));
    expect(wallet.balanceOf(p)).toBe(990);
  });

  it('DECLINES a BET beyond the balance, leaving the balance as it was', async () => {
    const p = player();
    expect((await post(tx(p, { transactionId: 'big', type: 'BET', amount: 1_001 }))).json).toEqual({ status: 'DECLINED', balance: 1_000 });
    expect((await post(tx(p, { transactionId: 'all', type: 'BET', amount: 1_000 }))).json).toEqual({ status: 'OK', balance: 0 });
    expect(wallet.balanceOf(p)).toBe(0);
  });

  it("ROLLBACK refunds the bet's own amount once, whatever amount it carries and however often it comes", async () => {
    const p = player();
    await post(tx(p, { transactionId: 'bet', type: 'BET', amount: 400 }));
    const rb = await post(tx(p, { transactionId: 'rb-1', type: 'ROLLBACK', amount: 1, originalTransactionId: 'bet' }));
    expect(rb.json).toEqual({ status: 'OK', balance: 1_000 });
    expect((await post(tx(p, { transactionId: 'rb-1', type: 'ROLLBACK', amount: 1, originalTransactionId: 'bet' }))).text).toBe(rb.text);
    // A second rollback of the same bet under another id refunds nothing.
    expect((await post(tx(p, { transactionId: 'rb-2', type: 'ROLLBACK', amount: 400, originalTransactionId: 'bet' }))).json).toEqual({ status: 'OK', balance: 1_000 });
    // Nor does a ROLLBACK carrying more than its bet get more than the bet back.
    await post(tx(p, { transactionId: 'bet-2', type: 'BET', amount: 100 }));
    expect((await post(tx(p, { transactionId: 'rb-3', type: 'ROLLBACK', amount: 900, originalTransactionId: 'bet-2' }))).json).toEqual({ status: 'OK', balance: 1_000 });
    const stale = tx(p, { transactionId: 'stale-rollback:bet', sessionToken: 'system:stale-round-reconciler', type: 'ROLLBACK', amount: 400, originalTransactionId: 'bet' });
    expect((await post(stale)).json).toEqual({ status: 'OK', balance: 1_000 });
    expect(wallet.balanceOf(p)).toBe(1_000);
  });

  it('a ROLLBACK before its BET refunds nothing and answers OK; the BET arriving afterwards is declined, never debited', async () => {
    const p = player();
    expect((await post(tx(p, { transactionId: 'rb', type: 'ROLLBACK', amount: 200, originalTransactionId: 'late-bet' }))).json).toEqual({ status: 'OK', balance: 1_000 });
    // A second ROLLBACK of that bet under another id (the reconciler's) changes nothing either.
    expect((await post(tx(p, { transactionId: 'stale-rollback:late-bet', type: 'ROLLBACK', amount: 200, originalTransactionId: 'late-bet' }))).json).toEqual({ status: 'OK', balance: 1_000 });
    const late = await post(tx(p, { transactionId: 'late-bet', type: 'BET', amount: 200 }));
    expect(late.json).toEqual({ status: 'DECLINED', balance: 1_000 });
    // Its repeat gets the same answer: the refusal is stored like any reply.
    expect((await post(tx(p, { transactionId: 'late-bet', type: 'BET', amount: 200 }))).text).toBe(late.text);
    expect((await post(tx(p, { transactionId: 'rb-late', type: 'ROLLBACK', amount: 200, originalTransactionId: 'late-bet' }))).json).toEqual({ status: 'OK', balance: 1_000 });
    expect(wallet.balanceOf(p)).toBe(1_000);
    // Tombstones are per player, as idempotency is: another player's bet under that id is its own.
    expect((await post(tx(player(), { transactionId: 'late-bet', type: 'BET', amount: 200 }))).json).toEqual({ status: 'OK', balance: 800 });
  });

  it('a ROLLBACK of a declined bet refunds nothing', async () => {
    const p = player();
    await post(tx(p, { transactionId: 'big', type: 'BET', amount: 5_000 }));
    expect((await post(tx(p, { transactionId: 'rb', type: 'ROLLBACK', amount: 5_000, originalTransactionId: 'big' }))).json).toEqual({ status: 'OK', balance: 1_000 });
  });

  it('never DECLINES an ADJUSTMENT: a DEBIT it cannot cover is a non-200, not stored, so the retry applies once funds are there', async () => {
    const p = player();
    const body = tx(p, { transactionId: 'adj', sessionToken: 'system:admin-adjustment', type: 'ADJUSTMENT', amount: 1_500, direction: 'DEBIT', gameId: '' });
    const refused = await post(body);
    expect(refused.status).toBe(409);
    expect(wallet.entries().some((e) => e.playerRef === p)).toBe(false);
    wallet.setBalance(p, 2_000);
    expect((await post(body)).json).toEqual({ status: 'OK', balance: 500 });
  });

  it('funds a new player once, answers the balance endpoint, and refuses what it does not serve', async () => {
    const p = player();
    expect(await balance(p)).toEqual({ balance: 1_000 });
    wallet.setBalance(p, 42);
    expect(await balance(p)).toEqual({ balance: 42 });
    expect(() => wallet.setBalance(p, 1.5)).toThrow(/integer/);
    expect((await call('GET', '/v1/wallet/balance')).status).toBe(400);
    expect((await call('GET', '/v1/wallet/other')).status).toBe(404);
    expect((await call('POST', '/v1/wallet/transaction', JSON.stringify({ pad: 'x'.repeat(70 * 1024) }))).status).toBe(413);
  });
});
