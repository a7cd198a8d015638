import { randomUUID } from 'node:crypto';
import { jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OP1, OP2, PROV_A, testCatalog } from '../helpers/catalog.ts';
import { ADMIN_TOKEN } from '../helpers/service.ts';
import { signedRequest, toTestResponse } from '../helpers/signing.ts';
import { startMoneyHarness, type MoneyHarness } from './harness.ts';

describe('round replay links (API document 4.1.4, contract section 6)', () => {
  let h: MoneyHarness;
  beforeAll(async () => {
    h = await startMoneyHarness('replay', { REPLAY_LINK_TTL_SECONDS: '600' });
  });
  afterAll(async () => h?.close());

  const replay = (body: Record<string, unknown>, as = OP1) => signedRequest<{ replayUrl?: string; error?: string }>(h.svc.url, { path: '/v1/operator/rounds/replay', body, as });

  const playRound = async (gameId = 'fruit-1', as = OP1) => {
    const playerRef = `p-${randomUUID().slice(0, 6)}`;
    const token = await h.launch(playerRef, { gameId, mode: as === OP1 && gameId === 'hidden-3' ? 'DEMO' : 'REAL' }, as);
    const roundId = `round-${randomUUID()}`;
    const res = await h.tx({ transactionId: `b-${randomUUID()}`, sessionToken: token, type: 'BET', roundId, roundComplete: false, playerRef, amount: 10, currency: 'EUR', gameId });
    expect(res.status).toBe(200);
    return roundId;
  };

  it('signs a fresh link for a round the provider has just written, as a JWT the provider can verify', async () => {
    const roundId = await playRound();
    const first = await replay({ roundId, gameId: 'fruit-1' });
    expect(first.status).toBe(200);
    const url = new URL(first.json.replayUrl!);
    expect(`${url.origin}${url.pathname}`).toBe('https://replay.studio-a.test/fruit');
    const { payload, protectedHeader } = await jwtVerify(url.searchParams.get('token')!, new TextEncoder().encode(PROV_A.secret), { audience: 'studio-a' });
    expect(protectedHeader.alg).toBe('HS256');
    expect(payload).toMatchObject({ purpose: 'round-replay', aud: 'studio-a', operatorId: 'op-1', gameId: 'fruit-1', roundId });
    expect(payload.exp! - payload.iat!).toBe(600);
    expect(Math.abs(payload.iat! - Date.now() / 1000)).toBeLessThan(5);
    const second = await replay({ roundId, gameId: 'fruit-1' });
    const again = await jwtVerify(new URL(second.json.replayUrl!).searchParams.get('token')!, new TextEncoder().encode(PROV_A.secret));
    expect(again.payload.jti).not.toBe(payload.jti); // a fresh link every time
  });

  it('appends the token with & when the replay base URL has a query', async () => {
    const playerRef = 'replay-hidden';
    const token = await h.launch(playerRef, { gameId: 'fruit-1' });
    // hidden-3 is not visible to op-2's tenant, but a round of it can still exist for op-1 via the same provider
    const roundId = `round-${randomUUID()}`;
    await h.tx({ transactionId: `b-${randomUUID()}`, sessionToken: token, type: 'BET', roundId, roundComplete: false, playerRef, amount: 10, currency: 'EUR', gameId: 'fruit-1' });
    const res = await replay({ roundId, gameId: 'hidden-3' });
    expect(res.status).toBe(404); // recorded under fruit-1, asked under hidden-3: another game's round
    const url = (await replay({ roundId, gameId: 'fruit-1' })).json.replayUrl!;
    expect(url.startsWith('https://replay.studio-a.test/fruit?token=')).toBe(true);
  });

  it('puts the token in the query, ahead of a fragment, when the replay base URL has one (#/view)', async () => {
    // The harness's catalog (its wallets and provider), with one more game of studio-a, visible to op-1.
    const catalog = testCatalog({ walletUrl: h.wallet.url, wallet2Url: h.wallet2.url, providerUrl: h.provider.url, walletTimeoutMs: 500 });
    const provider = catalog.providers.find((p) => p.id === PROV_A.id)!;
    const operator = catalog.operators.find((o) => o.id === OP1.id)!;
    const game = { ...provider.games[0]!, id: `frag-${randomUUID().slice(0, 8)}`, replayBaseUrl: 'https://replay.studio-a.test/app#/view' };
    const put = await fetch(`${h.svc.url}/v1/admin/catalog`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ providers: [{ ...provider, games: [game] }], operators: [{ ...operator, visibleGames: [...operator.visibleGames, game.id] }] }),
    });
    expect(put.status, await put.text()).toBe(200);
    const playerRef = 'replay-fragment';
    const token = await h.launch(playerRef, { gameId: game.id });
    const roundId = `round-${randomUUID()}`;
    expect((await h.tx({ transactionId: `b-${randomUUID()}`, sessionToken: token, type: 'BET', roundId, roundComplete: false, playerRef, amount: 10, currency: 'EUR', gameId: game.id })).status).toBe(200);
    const url = new URL((await replay({ roundId, gameId: game.id })).json.replayUrl!);
    expect(url.hash).toBe('#/view');
    const claims = (await jwtVerify(url.searchParams.get('token')!, new TextEncoder().encode(PROV_A.secret))).payload;
    expect(claims).toMatchObject({ purpose: 'round-replay', roundId, gameId: game.id });
  });

  it('answers 400 for missing fields and for a game without replay', async () => {
    expect((await replay({ gameId: 'fruit-1' })).status).toBe(400);
    expect((await replay({ roundId: 'x' })).status).toBe(400);
    const unsupported = await replay({ roundId: 'x', gameId: 'gems-2' });
    expect(unsupported.status).toBe(400);
    expect(unsupported.json.error).toContain('replay');
    const extra = await replay({ roundId: 'x', gameId: 'fruit-1', round: 'x' });
    expect([extra.status, extra.json.error]).toEqual([400, 'body: Unrecognized key: "round"']);
  });

  it("answers the same 404 for a missing round, another operator's round and an unknown game", async () => {
    const roundId = await playRound();
    const missing = await replay({ roundId: 'no-such-round', gameId: 'fruit-1' });
    const foreign = await replay({ roundId, gameId: 'fruit-1' }, OP2);
    const unknownGame = await replay({ roundId, gameId: 'nope' });
    for (const res of [missing, foreign, unknownGame]) {
      expect(res.status).toBe(404);
      expect(res.json).toEqual({ error: 'round not found' });
    }
  });
});

describe('admin adjustments', () => {
  let h: MoneyHarness;
  beforeAll(async () => {
    h = await startMoneyHarness('adjust');
  });
  afterAll(async () => h?.close());

  const adjust = async (body: Record<string, unknown>, token = ADMIN_TOKEN) =>
    toTestResponse<Record<string, unknown>>(
      await fetch(`${h.svc.url}/v1/admin/adjustments`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }),
    );

  it('sends an ADJUSTMENT with its direction to the wallet, signed, and answers the outcome', async () => {
    const res = await adjust({ operatorId: 'op-1', playerRef: 'adj-p', amount: 500, currency: 'EUR', direction: 'CREDIT', reason: 'goodwill', transactionId: 'adj-1' });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ transactionId: 'adj-1', status: 'applied', reply: { status: 'OK', balance: 10_500 } });
    const [call] = h.walletCallsFor('adj-1');
    expect(call!.signatureValid).toBe(true);
    expect(call!.body).toEqual({
      transactionId: 'adj-1',
      sessionToken: 'system:admin-adjustment',
      type: 'ADJUSTMENT',
      roundId: 'adjustment:adj-1',
      roundComplete: false,
      playerRef: 'adj-p',
      amount: 500,
      currency: 'EUR',
      gameId: '',
      direction: 'CREDIT',
      metadata: { reason: 'goodwill' },
    });
    const debit = await adjust({ operatorId: 'op-1', playerRef: 'adj-p', amount: 200, currency: 'EUR', direction: 'DEBIT', reason: 'correction' });
    expect(debit.json).toMatchObject({ status: 'applied', reply: { balance: 10_300 } });
  });

  it('is idempotent on transactionId and refuses its reuse with other content', async () => {
    const body = { operatorId: 'op-1', playerRef: 'adj-q', amount: 5, currency: 'EUR', direction: 'CREDIT', reason: 'r', transactionId: 'adj-2' };
    await adjust(body);
    expect((await adjust(body)).json).toMatchObject({ status: 'applied' });
    expect(h.walletCallsFor('adj-2')).toHaveLength(1);
    expect((await adjust({ ...body, amount: 6 })).status).toBe(409);
  });

  it('is retried like a WIN when the wallet fails', async () => {
    h.wallet.script('adj-3', { status: 500, body: {} });
    const res = await adjust({ operatorId: 'op-1', playerRef: 'adj-r', amount: 5, currency: 'EUR', direction: 'CREDIT', reason: 'r', transactionId: 'adj-3' });
    expect(res.status).toBe(202);
    expect(res.json).toMatchObject({ status: 'failed', retrying: true });
    await h.until(() => h.wallet.effects.get('adj-3') === 1);
  });

  it('refuses a missing bearer token, an unknown operator and bad fields', async () => {
    expect((await adjust({}, 'wrong')).status).toBe(401);
    expect((await adjust({ operatorId: 'op-x', playerRef: 'p', amount: 5, currency: 'EUR', direction: 'CREDIT', reason: 'r' })).status).toBe(404);
    const bad = await adjust({ operatorId: 'op-1', playerRef: 'p', amount: 5, currency: 'EUR', direction: 'SIDEWAYS', reason: 'r' });
    expect(bad.status).toBe(400);
    expect(String(bad.json.error)).toContain('direction');
    // A field the body does not have (a misspelt one would be dropped otherwise): refused, nothing sent.
    const misspelt = await adjust({ operatorId: 'op-1', playerRef: 'p', amount: 5, currency: 'EUR', direction: 'CREDIT', reason: 'r', transactionID: 'adj-typo' });
    expect([misspelt.status, misspelt.json.error]).toEqual([400, 'body: Unrecognized key: "transactionID"']);
  });
});

describe('retries stop after the retry window: dead letter', () => {
  let h: MoneyHarness;
  beforeAll(async () => {
    h = await startMoneyHarness('deadletter', { DISPATCH_RETRY_WINDOW_SECONDS: '2' });
  });
  afterAll(async () => h?.close());

  it('dead-letters a WIN the wallet never accepts, keeps it, and shows it to auditors', async () => {
    const playerRef = 'dl-p';
    const token = await h.launch(playerRef);
    const base = { sessionToken: token, roundId: 'dl-round', playerRef, currency: 'EUR', gameId: 'fruit-1' };
    await h.tx({ ...base, transactionId: 'dl-bet', type: 'BET', roundComplete: false, amount: 10 });
    h.wallet.script('dl-win', ...Array.from({ length: 100 }, () => ({ status: 500, body: {} })));
    expect((await h.tx({ ...base, transactionId: 'dl-win', type: 'WIN', roundComplete: true, amount: 10 })).status).toBe(502);
    await h.until(async () => {
      const { rows } = await h.svc.ctx.pool.query(`SELECT status, dead_lettered_at FROM rm_transactions WHERE transaction_id = 'dl-win'`);
      return rows[0]?.status === 'dead';
    });
    const attempts = h.walletCallsFor('dl-win').length;
    expect(attempts).toBeGreaterThan(2);
    await new Promise((r) => setTimeout(r, 1000));
    expect(h.walletCallsFor('dl-win').length).toBe(attempts); // no more retries
    const res = await h.tx({ ...base, transactionId: 'dl-win', type: 'WIN', roundComplete: true, amount: 10 });
    expect(res.status).toBe(502);
    expect(String(res.json.error)).toContain('retries stopped');
    // Auditors see it among the dead-lettered transactions, and only there.
    const listed = async (status: string) =>
      toTestResponse<{ transactions: Array<{ transaction_id: string; status: string }> }>(
        await fetch(`${h.svc.url}/v1/audit/transactions?status=${status}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }),
      );
    expect((await listed('dead')).json.transactions.filter((t) => t.transaction_id === 'dl-win')).toEqual([expect.objectContaining({ status: 'dead' })]);
    expect((await listed('unsettled')).json.transactions.map((t) => t.transaction_id)).not.toContain('dl-win');
  });
});

describe('Redis is not the record of truth', () => {
  let h: MoneyHarness;
  beforeAll(async () => {
    h = await startMoneyHarness('redisloss', { DISPATCH_BACKOFF_BASE_MS: '1500', DISPATCH_BACKOFF_MAX_MS: '1500' });
  });
  afterAll(async () => h?.close());

  it('a WIN waiting for its retry when Redis is flushed is still applied, once', async () => {
    const playerRef = 'flush-p';
    const token = await h.launch(playerRef);
    const base = { sessionToken: token, roundId: 'flush-round', playerRef, currency: 'EUR', gameId: 'fruit-1' };
    await h.tx({ ...base, transactionId: 'flush-bet', type: 'BET', roundComplete: false, amount: 10 });
    h.wallet.script('flush-win', { status: 500, body: {} });
    expect((await h.tx({ ...base, transactionId: 'flush-win', type: 'WIN', roundComplete: true, amount: 40 })).status).toBe(502);
    await h.svc.ctx.redis.flushdb(); // the delayed retry job is gone
    await h.until(() => h.wallet.effects.get('flush-win') === 1);
    await new Promise((r) => setTimeout(r, 2500));
    expect(h.wallet.effects.get('flush-win')).toBe(1);
    expect(h.wallet.balances.get(playerRef)).toBe(10_030);
  });
});
