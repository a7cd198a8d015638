import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grantsProjection } from '../../services/grants/projection.ts';
import { waitForProjection } from '../../projections/runner.ts';
import { grantIdFor, grantStream } from '../../services/grants/events.ts';
import { OP1, OP2, PROV_A, testCatalog } from '../helpers/catalog.ts';
import { ADMIN_TOKEN } from '../helpers/service.ts';
import { signedRequest, toTestResponse } from '../helpers/signing.ts';
import { startMoneyHarness, type MoneyHarness } from '../money/harness.ts';

/**
 * #18 part 8, "no poison input": every number the service accepts fits where it is stored and
 * projected. At each bound: the maximum is accepted and comes back exactly from the read models, the
 * maximum plus one is a 400 `{"error": "<field>: ..."}` and nothing is recorded.
 */
const MAX_SAFE = Number.MAX_SAFE_INTEGER; // 9007199254740991, the largest amount in minor units
const MAX_SPINS = 1_000_000;

type Body = Record<string, unknown> & { error?: string };

describe('bounds on every number the service accepts (#18 part 8)', () => {
  let h: MoneyHarness;
  beforeAll(async () => {
    h = await startMoneyHarness('bounds');
  });
  afterAll(async () => h?.close());

  const issue = (body: Record<string, unknown>, as = OP1) => signedRequest<Body>(h.svc.url, { path: '/v1/operator/free-spins/grants', body, as });
  const list = (as = OP1) => signedRequest<Body[]>(h.svc.url, { path: '/v1/operator/free-spins/grants', as });
  const grant = (over: Record<string, unknown> = {}) => ({ playerRef: 'b-p', idempotencyKey: randomUUID(), gameId: 'fruit-1', spins: 5, currency: 'EUR', betAmountMinor: 10, ...over });
  const putCatalog = async (body: unknown) =>
    toTestResponse<{ error?: string }>(
      await fetch(`${h.svc.url}/v1/admin/catalog`, { method: 'PUT', headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` }, body: JSON.stringify(body) }),
    );

  describe('free-spin grants', () => {
    it(`accepts spins = ${MAX_SPINS} and betAmountMinor = 2^53-1, and lists them exactly`, async () => {
      const body = grant({ spins: MAX_SPINS, betAmountMinor: MAX_SAFE });
      const res = await issue(body);
      expect(res.status).toBe(201);
      expect(res.json).toMatchObject({ spins: MAX_SPINS, betAmountMinor: MAX_SAFE, status: 'active' });
      const listed = (await list()).json.find((g) => g.id === res.json.id);
      expect(listed).toMatchObject({ spins: MAX_SPINS, betAmountMinor: MAX_SAFE, status: 'active' });
    });

    it.each([
      ['spins', { spins: MAX_SPINS + 1 }],
      ['spins', { spins: MAX_SAFE }], // the reproduction of the issue: was 201, then the projection failed for good
      ['betAmountMinor', { betAmountMinor: MAX_SAFE + 1 }],
    ])('refuses %s above its maximum with 400 naming it, and records nothing', async (field, over) => {
      const body = grant(over);
      const res = await issue(body);
      expect(res.status).toBe(400);
      expect(res.json.error).toMatch(new RegExp(`^${field}: `));
      expect(await h.svc.ctx.eventStore.readStream(grantStream(grantIdFor(OP1.id, body.idempotencyKey)))).toEqual([]);
    });

    it('keeps every operator’s grant list moving after an out-of-range request', async () => {
      expect((await issue(grant({ spins: MAX_SAFE }))).status).toBe(400);
      const theirs = await issue(grant(), OP2);
      expect(theirs.status).toBe(201);
      expect((await list(OP2)).json.map((g) => g.id)).toContain(theirs.json.id);
      expect((await fetch(`${h.svc.url}/readyz`)).status).toBe(200);
    });

    it('projects a grant recorded before the bound with spins = 2^53-1 (the read model column is bigint)', async () => {
      const id = randomUUID();
      const now = new Date().toISOString();
      const { position } = await h.svc.ctx.eventStore.append(grantStream(id), [
        {
          id: randomUUID(),
          type: 'GrantRequested',
          data: {
            grantId: id, operatorId: OP1.id, providerId: 'studio-a', gameId: 'fruit-1', playerRef: 'b-old', spins: MAX_SAFE, betAmountMinor: MAX_SAFE,
            currency: 'EUR', idempotencyKey: `old-${id}`, requestedAt: now,
          },
        },
      ], 'no_stream');
      expect(await waitForProjection(h.svc.ctx.pool, grantsProjection.name, position, 5000)).toBe(true);
      const listed = (await list()).json.find((g) => g.id === id);
      expect(listed).toMatchObject({ spins: MAX_SAFE, betAmountMinor: MAX_SAFE, status: 'pending' });
    });
  });

  describe('provider transactions and adjustments', () => {
    it('accepts amount = 2^53-1 and the rounds read model holds it exactly', async () => {
      const token = await h.launch('b-tx');
      const bet = h.bet(token, { playerRef: 'b-tx', amount: MAX_SAFE });
      const res = await h.tx(bet);
      expect(res.status).toBe(200);
      expect(res.json).toMatchObject({ status: 'DECLINED' }); // the fake wallet holds 10000
      await h.until(async () => {
        const { rows } = await h.svc.ctx.pool.query<{ amount: string }>('SELECT amount FROM rm_transactions WHERE transaction_id = $1', [bet.transactionId]);
        return rows[0]?.amount === String(MAX_SAFE);
      });
    });

    it("sums a round's wins past 2^53 exactly in the console's player page, as the operator's round does", async () => {
      const player = 'b-sum';
      const token = await h.launch(player);
      // Each reply's balance stays a safe integer: -(2^53-1), 0, 2^53-2.
      h.wallet.balances.set(player, -MAX_SAFE);
      const base = h.bet(token, { playerRef: player, amount: 0, roundComplete: false });
      expect((await h.tx(base)).status).toBe(200);
      for (const [i, amount] of [MAX_SAFE, MAX_SAFE - 1].entries()) {
        const win = { ...base, transactionId: `${String(base.transactionId)}-w${i}`, type: 'WIN', amount, roundComplete: i === 1 };
        const res = await h.tx(win);
        expect(res.status, res.text).toBe(200);
      }
      const exact = '18014398509481981'; // 2^54-3, odd: a double has no such value (it reads ...980)
      await h.until(async () => {
        const res = await fetch(`${h.svc.url}/v1/admin/console/players/${OP1.id}/${player}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
        return (await res.text()).includes(`"winMinor":${exact}`);
      });
      const round = await signedRequest(h.svc.url, { path: `/v1/operator/rounds/${String(base.roundId)}?gameId=${String(base.gameId)}`, as: OP1 });
      expect(round.text).toContain(`"winMinor":${exact}`);
    });

    it('refuses amount = 2^53 with 400 naming it', async () => {
      const token = await h.launch('b-tx2');
      const res = await h.tx(h.bet(token, { playerRef: 'b-tx2', amount: MAX_SAFE + 1 }));
      expect(res.status).toBe(400);
      expect(res.json.error).toMatch(/^amount: /);
    });

    it('refuses metadata holding a number past a double (1e400 would be stored and forwarded as null) with 400 naming it', async () => {
      const token = await h.launch('b-meta');
      const bet = h.bet(token, { playerRef: 'b-meta' });
      const rawBody = JSON.stringify(bet).replace(/}$/, ',"metadata":{"jackpot":{"amountMinor":1e400}}}');
      const res = await signedRequest<Body>(h.svc.url, { path: '/v1/wallet/transaction', rawBody, as: PROV_A });
      expect(res.status).toBe(400);
      expect(res.json.error).toMatch(/^body: the number 1e400 \(at "amountMinor"\) cannot be passed on unchanged: it would reach the wallet as null/);
      expect(h.walletCallsFor(bet.transactionId as string)).toHaveLength(0);
    });

    it('refuses a number a double would change (an amount of 100.0000000000000001 read as 100, an id of 20 digits rounded), recording nothing; the same values written otherwise pass as they are', async () => {
      const token = await h.launch('b-exact');
      const send = (bet: Record<string, unknown>, tail: string) =>
        signedRequest<Body>(h.svc.url, { path: '/v1/wallet/transaction', rawBody: JSON.stringify(bet).replace(/}$/, tail), as: PROV_A });
      const bet = h.bet(token, { playerRef: 'b-exact' });
      const { amount: _amount, ...noAmount } = bet;
      const inexactAmount = await send(noAmount, ',"amount":100.0000000000000001}');
      expect([inexactAmount.status, inexactAmount.json.error]).toEqual([400, expect.stringMatching(/^body: the number 100\.0000000000000001 \(at "amount"\) cannot be passed on unchanged: it would reach the wallet as 100 /)]);
      const inexactId = await send(bet, ',"metadata":{"jackpot":{"poolId":12345678901234567891}}}');
      expect([inexactId.status, inexactId.json.error]).toEqual([400, expect.stringMatching(/^body: the number 12345678901234567891 \(at "poolId"\) cannot be passed on unchanged: it would reach the wallet as 12345678901234567000 /)]);
      expect(h.walletCallsFor(bet.transactionId as string)).toHaveLength(0);
      // The id stays free; numbers a double holds exactly, however written, reach the wallet with their value.
      const exact = await send(noAmount, ',"amount":1e2,"metadata":{"ratio":1.50,"poolId":1234567890123456,"tiny":-0.000001}}');
      expect(exact.status, JSON.stringify(exact.json)).toBe(200);
      const sent = h.walletCallsFor(bet.transactionId as string)[0]!.body as { amount: number; metadata: unknown };
      expect([sent.amount, sent.metadata]).toEqual([100, { ratio: 1.5, poolId: 1234567890123456, tiny: -0.000001 }]);
    });

    const adjust = async (amount: number) =>
      toTestResponse<Body>(
        await fetch(`${h.svc.url}/v1/admin/adjustments`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
          body: JSON.stringify({ operatorId: OP1.id, playerRef: 'b-adj', amount, currency: 'EUR', direction: 'DEBIT', reason: 'bounds test' }),
        }),
      );

    it('refuses an adjustment whose amount a double would change, naming it', async () => {
      const res = await toTestResponse<Body>(
        await fetch(`${h.svc.url}/v1/admin/adjustments`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
          body: `{"operatorId":"${OP1.id}","playerRef":"b-adj-exact","amount":5.0000000000000001,"currency":"EUR","direction":"DEBIT","reason":"bounds test"}`,
        }),
      );
      expect([res.status, res.json.error]).toEqual([400, expect.stringMatching(/^body: the number 5\.0000000000000001 \(at "amount"\) cannot be passed on unchanged/)]);
    });

    it('refuses an adjustment that says nothing of why, or names a game the catalog does not have, sending nothing; a catalog game is taken', async () => {
      const post = (over: Record<string, unknown>) =>
        fetch(`${h.svc.url}/v1/admin/adjustments`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
          body: JSON.stringify({ operatorId: OP1.id, playerRef: 'b-adj-why', amount: 5, currency: 'EUR', direction: 'CREDIT', reason: 'bounds test', ...over }),
        }).then((r) => toTestResponse<Body>(r));
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ reason: '   ' }, 'reason: say why'],
        [{ reason: undefined }, 'reason: say why'],
        [{ reason: 'x'.repeat(1001) }, 'reason: at most 1000 characters'],
        [{ gameId: 'no-such-game' }, 'gameId: unknown game "no-such-game"'],
      ];
      for (const [over, error] of cases) {
        const transactionId = `adj-why-${randomUUID()}`;
        const res = await post({ ...over, transactionId });
        expect([res.status, res.json]).toEqual([400, { error }]);
        expect(h.walletCallsFor(transactionId)).toHaveLength(0);
      }
      // A name given twice (the admin's own tooling, say): read with its last value, it would send 500, not 5.
      const twiceId = `adj-why-${randomUUID()}`;
      const twice = await fetch(`${h.svc.url}/v1/admin/adjustments`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
        body: `{"operatorId":"${OP1.id}","playerRef":"b-adj-why","amount":5,"currency":"EUR","direction":"CREDIT","reason":"bounds test","transactionId":"${twiceId}","amount":500}`,
      }).then((r) => toTestResponse<Body>(r));
      expect([twice.status, twice.json]).toEqual([400, { error: 'body: the name "amount" is given twice in one object; give each once' }]);
      expect(h.walletCallsFor(twiceId)).toHaveLength(0);
      const ok = await post({ gameId: 'fruit-1', reason: ' kept as written ' });
      expect([ok.status, ok.json.status]).toEqual([200, 'applied']);
      const sent = h.walletCallsFor(ok.json.transactionId as string)[0]!.body as { gameId: string; metadata: unknown };
      expect([sent.gameId, sent.metadata]).toEqual(['fruit-1', { reason: ' kept as written ' }]);
    });

    it('accepts an adjustment of 2^53-1 and refuses 2^53 with 400 naming amount', async () => {
      const ok = await adjust(MAX_SAFE);
      expect(ok.status).toBe(200);
      expect(ok.json).toMatchObject({ status: 'applied' });
      await h.until(async () => {
        const { rows } = await h.svc.ctx.pool.query<{ amount: string }>('SELECT amount FROM rm_transactions WHERE transaction_id = $1', [ok.json.transactionId]);
        return rows[0]?.amount === String(MAX_SAFE);
      });
      const over = await adjust(MAX_SAFE + 1);
      expect(over.status).toBe(400);
      expect(over.json.error).toMatch(/^amount: /);
    });
  });

  it('refuses U+0000 in a path or query (%00), which Postgres cannot compare, with 400 after the signature, on every kind of route', async () => {
    for (const path of ['/v1/operator/free-spins/grants?playerRef=a%00b', '/v1/operator/transactions?roundId=r%00&gameId=fruit-1', '/v1/operator/rounds/r%00?gameId=fruit-1']) {
      const res = await signedRequest<Body>(h.svc.url, { path, as: OP1 });
      expect([path, res.status, res.json.error]).toEqual([path, 400, 'url: text holds U+0000, which cannot be stored']);
      // Unsigned: refused as any unsigned request is (no nonce, 400 invalid nonce), before the URL is read.
      expect(await (await fetch(`${h.svc.url}${path}`)).json()).toEqual({ error: 'invalid nonce' });
    }
    for (const path of ['/v1/audit/streams/a%00b', '/v1/audit/rounds/studio-a/op-1/r%00', '/v1/admin/projections?x=%00']) {
      const res = await toTestResponse<Body>(await fetch(`${h.svc.url}${path}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }));
      expect([path, res.status, res.json.error]).toEqual([path, 400, 'url: text holds U+0000, which cannot be stored']);
    }
  });

  describe('catalog numbers', () => {
    const base = () => testCatalog({ walletUrl: h.wallet.url, providerUrl: h.provider.url });
    const withProvider = (over: Record<string, unknown>) => {
      const c = base();
      return { providers: [{ ...c.providers[0]!, ...over }] };
    };
    const withOperator = (over: Record<string, unknown>) => {
      const c = base();
      return { providers: c.providers, operators: [{ ...c.operators[0]!, id: 'op-bounds', ...over }] };
    };
    const withCampaign = (over: Record<string, unknown>) => {
      const c = base();
      return { campaigns: [{ ...c.campaigns[0]!, id: 'bounds-campaign', ...over }] };
    };

    it.each([
      ['providers[0].timeoutMs', withProvider, { timeoutMs: 60_000 }, { timeoutMs: 60_001 }],
      ['providers[0].timeoutMs', withProvider, { timeoutMs: 1 }, { timeoutMs: 0 }],
      ['operators[0].walletTimeoutMs', withOperator, { walletTimeoutMs: 60_000 }, { walletTimeoutMs: 60_001 }],
      ['operators[0].rateLimit.limit', withOperator, { rateLimit: { limit: 1_000_000, windowSeconds: 1 } }, { rateLimit: { limit: 1_000_001, windowSeconds: 1 } }],
      ['operators[0].rateLimit.windowSeconds', withOperator, { rateLimit: { limit: 10, windowSeconds: 86_400 } }, { rateLimit: { limit: 10, windowSeconds: 86_401 } }],
      ['campaigns[0].spins', withCampaign, { spins: MAX_SPINS }, { spins: MAX_SPINS + 1 }],
      ['campaigns[0].betAmountMinor', withCampaign, { betAmountMinor: MAX_SAFE }, { betAmountMinor: MAX_SAFE + 1 }],
    ] as const)('%s: accepts the bound, refuses one past it with 400 naming the field', async (field, build, ok, bad) => {
      const accepted = await putCatalog(build(ok));
      expect(accepted.status, accepted.text).toBe(200);
      const refused = await putCatalog(build(bad));
      expect(refused.status).toBe(400);
      expect(refused.json.error).toContain(`catalog: ${field}: `);
      // Put the harness's catalog back for the other tests.
      expect((await putCatalog(base())).status).toBe(200);
    });

    it('an operator whose rate window is at the maximum still gets answers (Redis takes the expiry)', async () => {
      expect((await putCatalog(base())).status).toBe(200);
      const c = base();
      expect((await putCatalog({ operators: [{ ...c.operators[1]!, rateLimit: { limit: 1_000_000, windowSeconds: 86_400 } }] })).status).toBe(200);
      const res = await signedRequest(h.svc.url, { path: '/v1/operator/games', as: OP2 });
      expect(res.status).toBe(200);
      expect((await putCatalog(base())).status).toBe(200);
    });

    it('a campaign of the maximum size issues a grant that lists exactly', async () => {
      expect((await putCatalog(withCampaign({ spins: MAX_SPINS, betAmountMinor: MAX_SAFE }))).status).toBe(200);
      const res = await issue({ playerRef: 'b-camp', idempotencyKey: randomUUID(), campaignId: 'bounds-campaign' });
      expect(res.status).toBe(201);
      expect((await list()).json.find((g) => g.id === res.json.id)).toMatchObject({ spins: MAX_SPINS, betAmountMinor: MAX_SAFE, campaignId: 'bounds-campaign' });
    });
  });
});
