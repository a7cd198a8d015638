import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../../services/service.ts';
import type { EventStore } from '../../shared/eventstore/port.ts';
import { grantDecider, ISSUE_MARGIN_MS, type Grant as GrantRecord } from '../../services/grants/decider.ts';
import { grantIdFor, grantStream } from '../../services/grants/events.ts';
import { finishAbandonedGrants, issueAtProvider, takeOverIssue } from '../../services/grants/issue.ts';
import { readState } from '../../shared/eventstore/command.ts';
import { abandonedGrantCandidates } from '../../services/grants/queries.ts';
import { OP1, OP2, PROV_A, testCatalog } from '../helpers/catalog.ts';
import { startFakeProvider, type FakeProvider } from '../helpers/fakes.ts';
import { eventually, within } from '../helpers/eventually.ts';
import { ADMIN_TOKEN, createTestEnv, startInProcess, type TestEnv } from '../helpers/service.ts';
import { signedRequest } from '../helpers/signing.ts';
import { parseExposition, total } from '../metrics/exposition.ts';

/** The grant as the API answers it, or an error body. */
type Grant = GrantRecord & { error?: string };

describe('free-spin grants (API document 2.7, 3.1, 4.1.5–4.1.8)', () => {
  let env: TestEnv;
  let svc: RunningService & { url: string };
  let provider: FakeProvider;

  beforeAll(async () => {
    env = await createTestEnv('grants');
    provider = await startFakeProvider(PROV_A.secret);
    svc = await startInProcess(env, { ROLES: 'api,projector' });
    await svc.ctx.catalog.apply(testCatalog({ providerUrl: provider.url, providerTimeoutMs: 500 }));
  });
  afterAll(async () => {
    await svc?.stop();
    await provider?.close();
    await env?.cleanup();
  });

  /**
   * Runs `fn` with the provider's timeout at `ms`: a test whose provider answers after a set delay keeps
   * that delay well inside the timeout on a busy machine (the catalog's 500 ms is for the hang tests).
   */
  const withProviderTimeout = async (ms: number, fn: () => Promise<void>) => {
    await svc.ctx.catalog.apply(testCatalog({ providerUrl: provider.url, providerTimeoutMs: ms }));
    try {
      await fn();
    } finally {
      await svc.ctx.catalog.apply(testCatalog({ providerUrl: provider.url, providerTimeoutMs: 500 }));
    }
  };
  const issue = (body: Record<string, unknown>, as = OP1) => signedRequest<Grant>(svc.url, { path: '/v1/operator/free-spins/grants', body, as });
  const get = (id: string, as = OP1) => signedRequest<Grant>(svc.url, { path: `/v1/operator/free-spins/grants/${id}`, as });
  const list = (query = '', as = OP1) => signedRequest<Grant[]>(svc.url, { path: `/v1/operator/free-spins/grants${query}`, as });
  const cancel = (id: string, as = OP1) => signedRequest<Grant>(svc.url, { path: `/v1/operator/free-spins/grants/${id}/cancel`, method: 'POST', as });
  const direct = (over: Record<string, unknown> = {}) => ({ playerRef: 'fs-p', idempotencyKey: randomUUID(), gameId: 'fruit-1', spins: 5, currency: 'EUR', betAmountMinor: 10, ...over });
  const issueCalls = () => provider.calls.filter((c) => c.target === '/v1/free-spins/grants');

  describe('issue', () => {
    it('finishes an abandoned grant with one provider call however many repeats find it at once, and its audit history answers its id in capitals', async () => {
      const key = `orphan-${randomUUID()}`;
      const id = grantIdFor('op-1', key);
      await svc.ctx.eventStore.append(grantStream(id), [{
        id: randomUUID(),
        type: 'GrantRequested',
        data: { grantId: id, operatorId: 'op-1', providerId: 'studio-a', gameId: 'fruit-1', playerRef: 'ab-p', spins: 3, betAmountMinor: 0, currency: 'EUR', idempotencyKey: key, requestedAt: new Date(Date.now() - 60_000).toISOString() },
      }], 'no_stream');
      provider.script('/v1/free-spins/grants', { status: 200, body: { externalRef: 'ext-abandoned' }, delayMs: 200 });
      const body = { playerRef: 'ab-p', idempotencyKey: key, gameId: 'fruit-1', spins: 3, currency: 'EUR' };
      let answers: Array<Awaited<ReturnType<typeof issue>>> = [];
      await withProviderTimeout(5000, async () => {
        answers = await Promise.all([issue(body), issue(body), issue(body)]);
      });
      expect(answers.map((a) => [a.status, a.json.status, a.json.externalRef])).toEqual(answers.map(() => [200, 'active', 'ext-abandoned']));
      expect(issueCalls().filter((c) => (c.body as { requestRef: string }).requestRef === id)).toHaveLength(1);
      const audit = await fetch(`${svc.url}/v1/audit/grants/${id.toUpperCase()}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      expect(audit.status).toBe(200);
    });

    it('issues an active grant with the provider’s externalRef, 201, after a signed provider call', async () => {
      const body = direct({ expiresAt: '2026-12-31T23:59:59Z' });
      const res = await issue(body);
      expect(res.status).toBe(201);
      expect(res.json).toMatchObject({
        operatorId: 'op-1', providerId: 'studio-a', gameId: 'fruit-1', playerRef: 'fs-p', spins: 5, betAmountMinor: 10, currency: 'EUR',
        status: 'active', idempotencyKey: body.idempotencyKey, expiresAt: '2026-12-31T23:59:59Z',
      });
      expect(res.json.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(res.json.externalRef).toMatch(/^ext-/);
      expect(res.json.lastError).toBeUndefined();
      const call = issueCalls().at(-1)!;
      expect(call.signatureValid).toBe(true);
      expect(call.body).toEqual({ requestRef: res.json.id, operatorId: 'op-1', playerRef: 'fs-p', gameId: 'fruit-1', spins: 5, betAmountMinor: 10, currency: 'EUR', expiresAt: '2026-12-31T23:59:59Z' });
    });

    it('refuses a field the body does not have on a new key (400, no grant, no provider call), and answers a repeat of a used key whatever its body holds', async () => {
      const key = randomUUID();
      const calls = issueCalls().length;
      const refused = await issue({ ...direct({ idempotencyKey: key }), expiresat: '2030-01-01T00:00:00Z' });
      expect([refused.status, refused.json.error]).toEqual([400, 'body: Unrecognized key: "expiresat"']);
      expect(issueCalls()).toHaveLength(calls);
      const issued = await issue(direct({ idempotencyKey: key }));
      expect(issued.status).toBe(201);
      const repeated = await issue({ ...direct({ idempotencyKey: key }), anything: 1 });
      expect([repeated.status, repeated.json]).toEqual([200, issued.json]);
    });

    it('uses 0 (the wallet default stake) when betAmountMinor is omitted', async () => {
      const res = await issue(direct({ betAmountMinor: undefined }));
      expect(res.json.betAmountMinor).toBe(0);
    });

    it('takes game, spins, stake and currency from a campaign, ignoring the request’s', async () => {
      const res = await issue({ playerRef: 'fs-c', idempotencyKey: randomUUID(), campaignId: 'welcome-10', gameId: 'gems-2', spins: 99, currency: 'USD' });
      expect(res.status).toBe(201);
      expect(res.json).toMatchObject({ campaignId: 'welcome-10', gameId: 'fruit-1', spins: 10, betAmountMinor: 20, currency: 'EUR', status: 'active' });
    });

    // API document 2.7: "When set, gameId, spins, betAmountMinor and currency in the request are ignored and read
    // from the campaign". Ignored means not read at all: whatever those four hold, the campaign's terms are issued.
    it.each([
      ['spins 0', { spins: 0 }],
      ['no game, spins, stake or currency at all', {}],
      ['negative spins and stake', { spins: -3, betAmountMinor: -1 }],
      ['spins past the bound', { spins: Number.MAX_SAFE_INTEGER }],
      ['fractional spins', { spins: 1.5 }],
      ['an unknown game', { gameId: 'nope' }],
      ['a game not visible to the operator', { gameId: 'hidden-3' }],
      ['an unsupported or lower-case currency', { currency: 'gbp' }],
      ['values of the wrong type', { gameId: 42, spins: 'ten', betAmountMinor: null, currency: ['EUR'] }],
    ])('with a campaign, ignores the request’s %s', async (_label, over) => {
      const res = await issue({ playerRef: 'fs-ci', idempotencyKey: randomUUID(), campaignId: 'welcome-10', ...over });
      expect(res.status, res.json.error).toBe(201);
      expect(res.json).toMatchObject({ campaignId: 'welcome-10', gameId: 'fruit-1', spins: 10, betAmountMinor: 20, currency: 'EUR', status: 'active' });
      expect(issueCalls().at(-1)!.body).toMatchObject({ requestRef: res.json.id, gameId: 'fruit-1', spins: 10, betAmountMinor: 20, currency: 'EUR' });
    });

    it('records a failed provider call as a failed grant with lastError, answers 502, and consumes the key', async () => {
      provider.script('/v1/free-spins/grants', { status: 500, body: { error: 'boom' } });
      const body = direct();
      const res = await issue(body);
      expect(res.status).toBe(502);
      expect(res.json.error).toContain('provider answered 500');
      const again = await issue(body);
      expect(again.status).toBe(200);
      expect(again.json).toMatchObject({ status: 'failed', lastError: 'provider answered 500' });
      expect(again.json.externalRef).toBeUndefined();
      const calls = issueCalls().filter((c) => (c.body as { requestRef: string }).requestRef === again.json.id);
      expect(calls).toHaveLength(1); // the key is consumed: no second batch attempt
      expect((await issue({ ...body, idempotencyKey: randomUUID() })).status).toBe(201); // a fresh key works
    });

    it('treats a provider timeout as a failure', async () => {
      provider.script('/v1/free-spins/grants', { hang: true });
      const res = await issue(direct());
      expect(res.status).toBe(502);
      expect(res.json.error).toContain('did not answer in time');
    });

    it('answers a repeated key with 200 and the original grant unchanged, calling the provider no second time', async () => {
      const body = direct();
      const first = await issue(body);
      const before = issueCalls().length;
      const again = await issue({ ...body, spins: 7, gameId: 'gems-2' });
      expect(again.status).toBe(200);
      expect(again.json).toEqual(first.json);
      // Whatever the body says now, even what a new request would be refused for (contract 4: the key is the identity).
      for (const changed of [{ spins: 0 }, { betAmountMinor: -1 }, { expiresAt: 'soon' }, { playerRef: '' }, { unknownField: true }]) {
        const repeat = await issue({ ...body, ...changed });
        expect(repeat.status, JSON.stringify(changed)).toBe(200);
        expect(repeat.json).toEqual(first.json);
      }
      expect(issueCalls().length).toBe(before);
      // A key that is missing or malformed is still 400.
      expect((await issue({ ...body, idempotencyKey: '' })).status).toBe(400);
    });

    it('five concurrent requests with one key: one grant, one provider call, the same grant in all five answers', async () => {
      provider.script('/v1/free-spins/grants', { status: 200, body: { externalRef: 'ext-slow' }, delayMs: 150 });
      const body = direct();
      const before = issueCalls().length;
      const answers = await Promise.all(Array.from({ length: 5 }, () => issue(body)));
      expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 200, 201]);
      expect(new Set(answers.map((a) => JSON.stringify(a.json))).size).toBe(1);
      expect(answers[0]!.json).toMatchObject({ status: 'active', externalRef: 'ext-slow' });
      expect(issueCalls().length - before).toBe(1);
    });

    it('keeps keys per operator: the same key under two operators is two grants', async () => {
      const key = randomUUID();
      const mine = await issue(direct({ idempotencyKey: key }));
      const theirs = await issue(direct({ idempotencyKey: key }), OP2);
      expect(theirs.status).toBe(201);
      expect(theirs.json.id).not.toBe(mine.json.id);
    });

    it.each([
      ['playerRef missing', { playerRef: undefined }, 400, 'playerRef'],
      ['idempotencyKey missing', { idempotencyKey: undefined }, 400, 'idempotencyKey'],
      ['gameId missing without a campaign', { gameId: undefined }, 400, 'gameId'],
      ['spins missing without a campaign', { spins: undefined }, 400, 'spins'],
      ['spins zero', { spins: 0 }, 400, 'spins'],
      ['spins negative', { spins: -3 }, 400, 'spins'],
      ['spins fractional', { spins: 1.5 }, 400, 'spins'],
      ['currency missing without a campaign', { currency: undefined }, 400, 'currency'],
      ['a currency the provider does not support', { currency: 'GBP' }, 400, 'currency'],
      ['a lower-case currency', { currency: 'eur' }, 400, 'currency'],
      ['a negative stake', { betAmountMinor: -1 }, 400, 'betAmountMinor'],
      ['an expiresAt that is not RFC 3339', { expiresAt: 'next week' }, 400, 'expiresAt'],
      ['an inactive campaign', { campaignId: 'paused' }, 400, 'campaign'],
      ['a campaign outside its validity window', { campaignId: 'expired' }, 400, 'campaign'],
      ['an unknown campaign', { campaignId: 'nope' }, 404, 'campaign'],
      ['an unknown game', { gameId: 'nope' }, 404, 'game'],
      ['a game not visible to the operator', { gameId: 'hidden-3' }, 403, 'not visible'],
    ])('refuses %s', async (_label, over, status, text) => {
      const before = issueCalls().length;
      const res = await issue(direct(over));
      expect(res.status).toBe(status);
      expect(res.json.error).toContain(text);
      expect(issueCalls().length).toBe(before);
    });
  });

  describe('read', () => {
    it('returns what POST returned, at once, from get and list (read-your-writes), newest first', async () => {
      const player = `fs-list-${randomUUID().slice(0, 6)}`;
      const a = (await issue(direct({ playerRef: player }))).json;
      const b = (await issue(direct({ playerRef: player }))).json;
      expect((await get(a.id)).json).toEqual(a);
      expect((await get(a.id.toUpperCase())).json).toEqual(a);
      const listed = (await list(`?playerRef=${player}`)).json;
      expect(listed).toEqual([b, a]);
      const all = (await list()).json;
      expect(all.map((g) => g.id)).toEqual(expect.arrayContaining([a.id, b.id]));
      expect(all.every((g) => g.operatorId === 'op-1')).toBe(true);
      const times = all.map((g) => g.createdAt);
      expect([...times].sort().reverse()).toEqual(times);
    });

    it('answers 400 for an id that is not a UUID, 404 for an unknown one', async () => {
      const bad = await get('not-a-uuid');
      expect(bad.status).toBe(400);
      expect(bad.json.error).toContain('UUID');
      expect((await get(randomUUID())).status).toBe(404);
      expect((await cancel('nope')).status).toBe(400);
      // Shaped as a UUID (8-4-4-4-12 hex digits) though of no RFC 9562 version or variant, the nil one, in
      // capitals: a UUID the client may well hold, which names no grant (404), not a malformed id (400).
      for (const id of ['00000000-0000-0000-0000-000000000000', '12345678-1234-1234-1234-123456789012', randomUUID().toUpperCase()]) {
        expect((await get(id)).status, id).toBe(404);
        expect((await cancel(id)).status, id).toBe(404);
      }
      expect((await get('12345678-1234-1234-1234-12345678901')).status).toBe(400);
    });

    it("hides another operator's grant: 404 on get and cancel, absent from the list", async () => {
      const theirs = (await issue(direct({ playerRef: 'fs-other' }), OP2)).json;
      expect((await get(theirs.id)).status).toBe(404);
      expect((await cancel(theirs.id)).status).toBe(404);
      expect((await list()).json.map((g) => g.id)).not.toContain(theirs.id);
      expect((await get(theirs.id, OP2)).json.status).toBe('active');
    });
  });

  describe('cancel', () => {
    it('cancels an active grant through a signed provider call; get and list show it at once', async () => {
      const g = (await issue(direct())).json;
      const res = await cancel(g.id);
      expect(res.status).toBe(200);
      expect(res.json).toMatchObject({ id: g.id, status: 'cancelled', externalRef: g.externalRef });
      const call = provider.calls.at(-1)!;
      expect(call.target).toBe(`/v1/free-spins/grants/${g.externalRef}/cancel`);
      expect(call.body).toEqual({ requestRef: g.id });
      expect(call.signatureValid).toBe(true);
      expect((await get(g.id)).json).toEqual(res.json);
      expect((await list(`?playerRef=${g.playerRef}`)).json.find((x) => x.id === g.id)).toEqual(res.json);
    });

    it('keeps the grant active and answers 502 when the provider’s cancel fails or times out; a retry then succeeds', async () => {
      const g = (await issue(direct())).json;
      provider.script('/v1/free-spins/grants/', { status: 503, body: {} });
      const failed = await cancel(g.id);
      expect(failed.status).toBe(502);
      expect((await get(g.id)).json.status).toBe('active');
      provider.script('/v1/free-spins/grants/', { hang: true });
      expect((await cancel(g.id)).status).toBe(502);
      expect((await get(g.id)).json.status).toBe('active');
      const retried = await cancel(g.id);
      expect(retried.status).toBe(200);
      expect(retried.json.status).toBe('cancelled');
    });

    it('takes no body but {} (400 naming the field, the grant left active, nobody called)', async () => {
      const g = (await issue(direct())).json;
      const before = provider.calls.length;
      const withBody = await signedRequest<{ error: string }>(svc.url, { path: `/v1/operator/free-spins/grants/${g.id}/cancel`, method: 'POST', body: { reason: 'x' }, as: OP1 });
      expect([withBody.status, withBody.json.error]).toEqual([400, 'body: Unrecognized key: "reason"']);
      expect(provider.calls.length).toBe(before);
      expect((await get(g.id)).json.status).toBe('active');
      const empty = await signedRequest<Grant>(svc.url, { path: `/v1/operator/free-spins/grants/${g.id}/cancel`, method: 'POST', body: {}, as: OP1 });
      expect([empty.status, empty.json.status]).toEqual([200, 'cancelled']);
    });

    it('refuses to cancel a cancelled or a failed grant with 400, calling nobody', async () => {
      const g = (await issue(direct())).json;
      await cancel(g.id);
      provider.script('/v1/free-spins/grants', { status: 500, body: {} });
      const key = randomUUID();
      await issue(direct({ idempotencyKey: key }));
      const failed = (await issue(direct({ idempotencyKey: key }))).json;
      const before = provider.calls.length;
      for (const id of [g.id, failed.id]) {
        const res = await cancel(id);
        expect(res.status).toBe(400);
        expect(res.json.error).toContain('not cancellable');
      }
      expect(provider.calls.length).toBe(before);
    });

    it('cancels at once (a double click) call the provider once and all answer the cancelled grant; one whose call failed is followed by the next in turn', async () => {
      const g = (await issue(direct())).json;
      const cancelsOf = (externalRef: unknown) => provider.calls.filter((c) => c.target === `/v1/free-spins/grants/${String(externalRef)}/cancel`).length;
      // Slow enough that the three overlap (within a timeout a busy machine cannot reach).
      provider.script('/v1/free-spins/grants/', { status: 200, body: {}, delayMs: 300 });
      let answers: Array<Awaited<ReturnType<typeof cancel>>> = [];
      await withProviderTimeout(5000, async () => {
        answers = await Promise.all([cancel(g.id), cancel(g.id), cancel(g.id)]);
      });
      expect(answers.map((a) => [a.status, a.json.status])).toEqual([
        [200, 'cancelled'],
        [200, 'cancelled'],
        [200, 'cancelled'],
      ]);
      expect(cancelsOf(g.externalRef)).toBe(1);
      // The first call fails: the other cancel, which waited for it, calls in turn and succeeds.
      const h = (await issue(direct())).json;
      provider.script('/v1/free-spins/grants/', { status: 503, body: {}, delayMs: 300 });
      let first = answers[0]!;
      let second = answers[0]!;
      await withProviderTimeout(5000, async () => {
        [first, second] = await Promise.all([cancel(h.id), cancel(h.id)]);
      });
      expect([first.status, second.status].sort()).toEqual([200, 502]);
      expect(cancelsOf(h.externalRef)).toBe(2);
      expect((await get(h.id)).json.status).toBe('cancelled');
    });

    /** What an answer said, and what the list said right after it: [status, the grant's status, the listed grant's status]. */
    type Seen = [number, string | undefined, string | undefined];
    /**
     * Runs `calls` while the grants read model is held back for a second (its writes wait for a table
     * lock; reads do not), each followed at once by the list; what each saw.
     */
    const whileReadModelHeld = async (calls: Array<() => Promise<Seen>>): Promise<Seen[]> => {
      const holder = await svc.ctx.pool.connect();
      try {
        await holder.query('BEGIN');
        await holder.query('LOCK TABLE rm_grants IN SHARE MODE');
        const release = new Promise<void>((resolve) => setTimeout(() => void holder.query('COMMIT').then(() => resolve()), 1000));
        let seen: Seen[] = [];
        await withProviderTimeout(5000, async () => {
          [seen] = await Promise.all([Promise.all(calls.map((call) => call())), release]);
        });
        return seen;
      } finally {
        await holder.query('ROLLBACK').catch(() => undefined);
        holder.release();
      }
    };
    const listedStatus = async (playerRef: string, id: string) => (await list(`?playerRef=${playerRef}`)).json.find((x) => x.id === id)?.status;

    it('a repeated key that waited for the first request\'s call answers once the list shows the grant, as the first does', async () => {
      const body = direct({ playerRef: `fs-rep-${randomUUID().slice(0, 6)}` });
      provider.script('/v1/free-spins/grants', { status: 200, body: { externalRef: 'ext-repeat-visible' }, delayMs: 300 });
      const issueThenList = async (): Promise<Seen> => {
        const res = await issue(body);
        return [res.status, res.json.status, await listedStatus(body.playerRef, res.json.id)];
      };
      expect(await whileReadModelHeld([issueThenList, () => new Promise((r) => setTimeout(r, 100)).then(issueThenList)])).toEqual([
        [201, 'active', 'active'],
        [200, 'active', 'active'],
      ]);
    });

    it('a cancel that waited for another\'s call answers once the list shows the grant cancelled, as the one that called does', async () => {
      const g = (await issue(direct())).json;
      provider.script('/v1/free-spins/grants/', { status: 200, body: {}, delayMs: 300 });
      const cancelThenList = async (): Promise<Seen> => {
        const res = await cancel(g.id);
        return [res.status, res.json.status, await listedStatus(g.playerRef, g.id)];
      };
      expect(await whileReadModelHeld([cancelThenList, cancelThenList])).toEqual([
        [200, 'cancelled', 'cancelled'],
        [200, 'cancelled', 'cancelled'],
      ]);
    });
  });
});

describe('free-spin grants across a restart of the service', () => {
  let env: TestEnv;
  let provider: FakeProvider;

  beforeAll(async () => {
    env = await createTestEnv('grantsrestart');
    provider = await startFakeProvider(PROV_A.secret);
  });
  afterAll(async () => {
    await provider?.close();
    await env?.cleanup();
  });

  it('remembers keys and grants, and finishes a grant a dead process left pending without issuing it twice', async () => {
    const first = await startInProcess(env, { ROLES: 'api,projector' });
    await first.ctx.catalog.apply(testCatalog({ providerUrl: provider.url, providerTimeoutMs: 300 }));
    const body = { playerRef: 'r-p', idempotencyKey: 'restart-key', gameId: 'fruit-1', spins: 3, currency: 'EUR' };
    const issued = await signedRequest<Grant>(first.url, { path: '/v1/operator/free-spins/grants', body, as: OP1 });
    expect(issued.status).toBe(201);
    // A process that died between recording the request and hearing from the provider left this behind.
    const orphanKey = { ...body, idempotencyKey: 'orphan-key' };
    const orphanId = grantIdFor('op-1', 'orphan-key');
    await first.ctx.eventStore.append(grantStream(orphanId), [{
      id: randomUUID(),
      type: 'GrantRequested',
      data: { grantId: orphanId, operatorId: 'op-1', providerId: 'studio-a', gameId: 'fruit-1', playerRef: 'r-p', spins: 3, betAmountMinor: 0, currency: 'EUR', idempotencyKey: 'orphan-key', requestedAt: new Date(Date.now() - 60_000).toISOString() },
    }], 'no_stream');
    await first.stop();

    const second = await startInProcess(env, { ROLES: 'api,projector' });
    try {
      const again = await signedRequest<Grant>(second.url, { path: '/v1/operator/free-spins/grants', body, as: OP1 });
      expect(again.status).toBe(200);
      expect(again.json).toEqual(issued.json);
      const finished = await signedRequest<Grant>(second.url, { path: '/v1/operator/free-spins/grants', body: orphanKey, as: OP1 });
      expect(finished.status).toBe(200);
      expect(finished.json.status).toBe('active');
      const refs = provider.calls.filter((c) => c.target === '/v1/free-spins/grants').map((c) => (c.body as { requestRef: string }).requestRef);
      expect(finished.json.id).toBe(orphanId);
      expect(refs.filter((r) => r === orphanId)).toHaveLength(1);
      expect(refs.filter((r) => r === issued.json.id)).toHaveLength(1);
    } finally {
      await second.stop();
    }
  });
});

describe('free-spin grants abandoned mid-call, across api processes (one taker, and the reconciler finishes them)', () => {
  let env: TestEnv;
  let provider: FakeProvider;

  beforeAll(async () => {
    env = await createTestEnv('grantstakeover');
    provider = await startFakeProvider(PROV_A.secret);
  });
  afterAll(async () => {
    await provider?.close();
    await env?.cleanup();
  });

  /** A grant a process recorded and then died before the provider answered (requested a minute ago). */
  const abandon = async (svc: RunningService, key: string, bound?: number) => {
    const id = grantIdFor('op-1', key);
    await svc.ctx.eventStore.append(grantStream(id), [{
      id: randomUUID(),
      type: 'GrantRequested',
      data: {
        grantId: id, operatorId: 'op-1', providerId: 'studio-a', gameId: 'fruit-1', playerRef: 'to-p', spins: 3, betAmountMinor: 0, currency: 'EUR',
        idempotencyKey: key, requestedAt: new Date(Date.now() - 60_000).toISOString(), ...(bound !== undefined ? { issueTimeoutMs: bound } : {}),
      },
    }], 'no_stream');
    return id;
  };
  const callsFor = (id: string) => provider.calls.filter((c) => c.target === '/v1/free-spins/grants' && (c.body as { requestRef: string }).requestRef === id);

  it('repeats reaching two api processes at once make one provider call, and both answer the grant it made', async () => {
    const [a, b] = [await startInProcess(env, { ROLES: 'api,projector' }), await startInProcess(env, { ROLES: 'api' })];
    try {
      for (const svc of [a, b]) await svc.ctx.catalog.apply(testCatalog({ providerUrl: provider.url, providerTimeoutMs: 1000 }));
      const key = `two-${randomUUID()}`;
      const id = await abandon(a, key, 300);
      provider.script('/v1/free-spins/grants', { status: 200, body: { externalRef: 'ext-one-taker' }, delayMs: 300 });
      const body = { playerRef: 'to-p', idempotencyKey: key, gameId: 'fruit-1', spins: 3, currency: 'EUR' };
      const answers = await Promise.all([a, b, a, b].map((svc) => signedRequest<Grant>(svc.url, { path: '/v1/operator/free-spins/grants', body, as: OP1 })));
      expect(answers.map((r) => [r.status, r.json.status, r.json.externalRef])).toEqual(answers.map(() => [200, 'active', 'ext-one-taker']));
      expect(callsFor(id)).toHaveLength(1);
      // The take is in the grant's history for auditors; operators see no trace of it.
      const events = (await a.ctx.eventStore.readStream(grantStream(id))).map((e) => e.type);
      expect(events).toEqual(['GrantRequested', 'GrantIssueTaken', 'GrantActivated']);
      expect(Object.keys(answers[0]!.json)).not.toContain('issue');
    } finally {
      await b.stop();
      await a.stop();
    }
  });

  it('the reconciler finishes an abandoned grant nobody repeats: get and list show it active, cancel works, one provider call', async () => {
    const svc = await startInProcess(env, { ROLES: 'api,projector,reconciler', RECONCILE_INTERVAL_SECONDS: '1' });
    try {
      await svc.ctx.catalog.apply(testCatalog({ providerUrl: provider.url, providerTimeoutMs: 500 }));
      // One recorded before the issue call's bound was (the provider's timeoutMs now stands in), one after.
      const ids = [await abandon(svc, `quiet-${randomUUID()}`), await abandon(svc, `quiet-${randomUUID()}`, 500)];
      for (const id of ids) {
        const got = await eventually(
          () => signedRequest<Grant>(svc.url, { path: `/v1/operator/free-spins/grants/${id}`, as: OP1 }),
          (r) => r.json.status !== 'pending',
        );
        expect([got.status, got.json.status]).toEqual([200, 'active']);
        expect(callsFor(id)).toHaveLength(1);
        const listed = await eventually(
          () => signedRequest<Grant[]>(svc.url, { path: '/v1/operator/free-spins/grants?playerRef=to-p', as: OP1 }),
          (r) => r.json.find((g) => g.id === id)?.status === 'active',
        );
        expect(listed.json.find((g) => g.id === id)?.externalRef).toBe(got.json.externalRef);
        const cancelled = await signedRequest<Grant>(svc.url, { path: `/v1/operator/free-spins/grants/${id}/cancel`, method: 'POST', as: OP1 });
        expect([cancelled.status, cancelled.json.status]).toEqual([200, 'cancelled']);
      }
      // Finished grants are left alone by later passes.
      await svc.grantFinisher!.pass();
      for (const id of ids) expect(callsFor(id)).toHaveLength(1);
    } finally {
      await svc.stop();
    }
  });

  it('a request that stalled past its deadline while its call was taken over answers with the taker’s outcome, never 201 pending', async () => {
    const svc = await startInProcess(env, { ROLES: 'api,projector' });
    const store = svc.ctx.eventStore;
    try {
      await svc.ctx.catalog.apply(testCatalog({ providerUrl: provider.url, providerTimeoutMs: 1500 }));
      // The request's own append stalls past its call's deadline (1.5 s + 2 s) before it lands.
      svc.ctx.eventStore = Object.assign(Object.create(store) as EventStore, {
        append: async (...args: Parameters<EventStore['append']>) => {
          if (args[1][0]?.type === 'GrantRequested') await new Promise((r) => setTimeout(r, 3600));
          return store.append(...args);
        },
      });
      // The request's own call answers after 1.2 s: the window in which the taker must find the grant
      // abandoned (it was 150 ms, which a loaded machine missed, and the next tests took the reply left over).
      provider.script('/v1/free-spins/grants', { status: 503, body: {}, delayMs: 1200 }, { status: 503, body: {}, delayMs: 400 });
      const key = `stalled-${randomUUID()}`;
      const id = grantIdFor('op-1', key);
      const answer = signedRequest<Grant>(svc.url, { path: '/v1/operator/free-spins/grants', body: { playerRef: 'to-p', idempotencyKey: key, gameId: 'fruit-1', spins: 3, currency: 'EUR' }, as: OP1 });
      await eventually(async () => (await store.readStream(grantStream(id))).length, (n) => n > 0);
      // Another process finds it abandoned and takes the call over while the request's own call runs.
      const taker = takeOverIssue(svc.ctx, id);
      const [answered, taken] = await Promise.all([answer, taker]);
      expect(taken?.state.status).toBe('failed');
      // The taker's outcome (its 503, or its timeout on a loaded machine), as the grant records it.
      const lastError = taken?.state.status === 'failed' ? taken.state.lastError : undefined;
      expect([answered.status, answered.json.error]).toEqual([502, `provider call failed: ${lastError}`]);
      expect((await store.readStream(grantStream(id))).map((e) => e.type)).toEqual(['GrantRequested', 'GrantIssueTaken', 'GrantFailed']);
    } finally {
      svc.ctx.eventStore = store;
      provider.unscript('/v1/free-spins/grants');
      await svc.stop();
    }
  });

  it('a request whose call was taken over stops waiting once its client has gone: it takes no call over itself, the grant is left to the reconciler', async () => {
    const svc = await startInProcess(env, { ROLES: 'api,projector' });
    try {
      await svc.ctx.catalog.apply(testCatalog({ providerUrl: provider.url, providerTimeoutMs: 1000 }));
      const key = `gone-${randomUUID()}`;
      const id = grantIdFor('op-1', key);
      // The request's own call fails slowly; meanwhile another process takes the call over (as if it found it abandoned) and dies.
      // Slow enough that the take below lands before it on a loaded machine.
      provider.script('/v1/free-spins/grants', { status: 503, body: {}, delayMs: 1500 });
      const client = new AbortController();
      const answer = signedRequest<Grant>(svc.url, { path: '/v1/operator/free-spins/grants', body: { playerRef: 'to-p', idempotencyKey: key, gameId: 'fruit-1', spins: 3, currency: 'EUR' }, as: OP1, signal: client.signal })
        .then(() => 'answered', () => 'aborted');
      await eventually(async () => (await svc.ctx.eventStore.readStream(grantStream(id))).length, (n) => n === 1);
      await svc.ctx.eventStore.append(grantStream(id), [{ id: randomUUID(), type: 'GrantIssueTaken', data: { takenAt: new Date().toISOString(), timeoutMs: 200 } }], 0);
      // The request's own failure no longer decides (the take's call is awaited): it waits; its client gives up.
      await eventually(async () => callsFor(id).length, (n) => n === 1);
      client.abort();
      expect(await answer).toBe('aborted');
      // Past the take's deadline (200 ms + 2 s), a request still waiting would take the call over itself.
      await new Promise((r) => setTimeout(r, 200 + ISSUE_MARGIN_MS + 1200));
      expect(callsFor(id)).toHaveLength(1);
      expect((await readState(svc.ctx.eventStore, grantStream(id), grantDecider)).state.status).toBe('pending');
      // The reconciler role finishes it.
      provider.script('/v1/free-spins/grants', { status: 200, body: { externalRef: 'ext-after-gone' } });
      expect((await takeOverIssue(svc.ctx, id))?.state).toMatchObject({ status: 'active', externalRef: 'ext-after-gone' });
    } finally {
      await svc.stop();
    }
  });

  it('a batch the provider accepts for a grant already failed is cancelled at the provider; the grant stays failed, the stray batch in its history', async () => {
    const svc = await startInProcess(env, { ROLES: 'api,projector' });
    try {
      await svc.ctx.catalog.apply(testCatalog({ providerUrl: provider.url, providerTimeoutMs: 500 }));
      const id = await abandon(svc, `stray-${randomUUID()}`, 500);
      // The take-over's call fails: the grant is failed, and its operator told so.
      provider.script('/v1/free-spins/grants', { status: 503, body: {} });
      expect((await takeOverIssue(svc.ctx, id))?.state.status).toBe('failed');
      // Then the abandoned call's process, which had stalled, reads the provider's acceptance after all.
      provider.script('/v1/free-spins/grants', { status: 200, body: { externalRef: 'ext-stray' } });
      const known = await readState(svc.ctx.eventStore, grantStream(id), grantDecider);
      const late = await issueAtProvider(svc.ctx, known, { take: 0, at: new Date().toISOString(), timeoutMs: 500 });
      expect(late.state.status).toBe('failed');
      const cancels = provider.calls.filter((c) => c.target === '/v1/free-spins/grants/ext-stray/cancel');
      expect(cancels.map((c) => c.body)).toEqual([{ requestRef: id }]);
      const events = await svc.ctx.eventStore.readStream(grantStream(id));
      expect(events.map((e) => e.type)).toEqual(['GrantRequested', 'GrantIssueTaken', 'GrantFailed', 'GrantAcceptedAfterFailure']);
      expect(events[3]!.data).toMatchObject({ externalRef: 'ext-stray', cancelled: true });
      const got = await signedRequest<Grant>(svc.url, { path: `/v1/operator/free-spins/grants/${id}`, as: OP1 });
      expect([got.json.status, got.json.lastError, got.json.externalRef]).toEqual(['failed', 'provider answered 503', undefined]);

      // Again, but the provider will not cancel the stray batch: the grant shows it, active, and its operator cancels it.
      const other = await abandon(svc, `stray-${randomUUID()}`, 500);
      provider.script('/v1/free-spins/grants', { status: 503, body: {} });
      await takeOverIssue(svc.ctx, other);
      provider.script('/v1/free-spins/grants', { status: 200, body: { externalRef: 'ext-stray-live' } });
      provider.script('/v1/free-spins/grants/ext-stray-live/cancel', { status: 503, body: {} });
      const live = await issueAtProvider(svc.ctx, await readState(svc.ctx.eventStore, grantStream(other), grantDecider), { take: 0, at: new Date().toISOString(), timeoutMs: 500 });
      expect(live.state).toMatchObject({ status: 'active', externalRef: 'ext-stray-live' });
      const shown = await eventually(() => signedRequest<Grant>(svc.url, { path: `/v1/operator/free-spins/grants/${other}`, as: OP1 }), (r) => r.json.status === 'active');
      expect([shown.json.status, shown.json.externalRef, shown.json.lastError]).toEqual(['active', 'ext-stray-live', undefined]);
      const cancelled = await signedRequest<Grant>(svc.url, { path: `/v1/operator/free-spins/grants/${other}/cancel`, method: 'POST', as: OP1 });
      expect([cancelled.status, cancelled.json.status]).toEqual([200, 'cancelled']);
    } finally {
      await svc.stop();
    }
  });

  it('a second batch a non-deduplicating provider accepts for a grant already active is cancelled at the provider; the grant keeps its own', async () => {
    const svc = await startInProcess(env, { ROLES: 'api,projector' });
    const strayTotal = async (grant: string, cancelled: boolean) =>
      total(parseExposition(await (await fetch(`${svc.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text()), 'grant_stray_batches_total', { grant, cancelled: String(cancelled) });
    try {
      await svc.ctx.catalog.apply(testCatalog({ providerUrl: provider.url, providerTimeoutMs: 500 }));
      const id = await abandon(svc, `extra-${randomUUID()}`, 500);
      // The take-over's call is accepted: the grant is active with that batch.
      provider.script('/v1/free-spins/grants', { status: 200, body: { externalRef: 'ext-first' } });
      expect((await takeOverIssue(svc.ctx, id))?.state).toMatchObject({ status: 'active', externalRef: 'ext-first' });
      // The abandoned call's process reads its own acceptance: a provider that does not deduplicate on requestRef made a second batch.
      provider.script('/v1/free-spins/grants', { status: 200, body: { externalRef: 'ext-second' } });
      const second = await issueAtProvider(svc.ctx, await readState(svc.ctx.eventStore, grantStream(id), grantDecider), { take: 0, at: new Date().toISOString(), timeoutMs: 500 });
      expect(second.state).toMatchObject({ status: 'active', externalRef: 'ext-first' });
      expect(provider.calls.filter((c) => c.target === '/v1/free-spins/grants/ext-second/cancel').map((c) => c.body)).toEqual([{ requestRef: id }]);
      expect(provider.calls.filter((c) => c.target === '/v1/free-spins/grants/ext-first/cancel')).toEqual([]);
      const events = await svc.ctx.eventStore.readStream(grantStream(id));
      expect(events.map((e) => e.type)).toEqual(['GrantRequested', 'GrantIssueTaken', 'GrantActivated', 'GrantExtraBatch']);
      expect(events[3]!.data).toMatchObject({ externalRef: 'ext-second', cancelled: true });
      expect(await strayTotal('active', true)).toBe(1);
      // The same batch answered again (a provider that deduplicates) is not stray: nothing cancelled, nothing recorded.
      provider.script('/v1/free-spins/grants', { status: 200, body: { externalRef: 'ext-first' } });
      await issueAtProvider(svc.ctx, await readState(svc.ctx.eventStore, grantStream(id), grantDecider), { take: 0, at: new Date().toISOString(), timeoutMs: 500 });
      expect(provider.calls.filter((c) => c.target === '/v1/free-spins/grants/ext-first/cancel')).toEqual([]);
      expect(await svc.ctx.eventStore.readStream(grantStream(id))).toHaveLength(4);

      // The operator cancels the grant; a late second batch is then cancelled too, and one the provider will not cancel is recorded and counted.
      const cancelled = await signedRequest<Grant>(svc.url, { path: `/v1/operator/free-spins/grants/${id}/cancel`, method: 'POST', as: OP1 });
      expect([cancelled.status, cancelled.json.status]).toEqual([200, 'cancelled']);
      provider.script('/v1/free-spins/grants', { status: 200, body: { externalRef: 'ext-third' } });
      provider.script('/v1/free-spins/grants/ext-third/cancel', { status: 503, body: {} });
      const third = await issueAtProvider(svc.ctx, await readState(svc.ctx.eventStore, grantStream(id), grantDecider), { take: 0, at: new Date().toISOString(), timeoutMs: 500 });
      expect(third.state).toMatchObject({ status: 'cancelled', externalRef: 'ext-first' });
      const last = (await svc.ctx.eventStore.readStream(grantStream(id))).at(-1)!;
      expect([last.type, last.data]).toEqual(['GrantExtraBatch', expect.objectContaining({ externalRef: 'ext-third', cancelled: false, error: 'provider answered 503' })]);
      expect(await strayTotal('cancelled', false)).toBe(1);
      const got = await signedRequest<Grant>(svc.url, { path: `/v1/operator/free-spins/grants/${id}`, as: OP1 });
      expect([got.json.status, got.json.externalRef]).toEqual(['cancelled', 'ext-first']);
    } finally {
      await svc.stop();
    }
  });

  it('a stop ends the reconciler’s finishing after the provider calls under way, starting none', async () => {
    const slow = await startFakeProvider(PROV_A.secret);
    slow.setDefault('/v1/free-spins/grants', { status: 200, body: { externalRef: 'late' }, delayMs: 1500 });
    const svc = await startInProcess(env, { ROLES: 'api,projector,reconciler', RECONCILE_INTERVAL_SECONDS: '1' });
    let stopped = false;
    try {
      await svc.ctx.catalog.apply(testCatalog({ providerUrl: slow.url, providerTimeoutMs: 1000 }));
      for (let i = 0; i < 40; i++) await abandon(svc, `hung-${randomUUID()}`, 1000);
      const grantCalls = () => slow.calls.filter((c) => c.target === '/v1/free-spins/grants').length;
      await eventually(async () => grantCalls(), (n) => n > 0);
      const atStop = grantCalls();
      expect(await within(svc.stop(), 5000)).toBeUndefined();
      stopped = true;
      // Only calls already past their lane's check when the stop began (at most one a lane) may follow it.
      expect(grantCalls() - atStop).toBeLessThanOrEqual(8);
      expect(grantCalls()).toBeLessThan(40);
    } finally {
      if (!stopped) await svc.stop();
      await slow.close();
    }
  });

  it('a failed take-over is recorded failed, with the reason, and is not taken again', async () => {
    const svc = await startInProcess(env, { ROLES: 'api,projector' });
    try {
      await svc.ctx.catalog.apply(testCatalog({ providerUrl: provider.url, providerTimeoutMs: 500 }));
      const id = await abandon(svc, `fails-${randomUUID()}`, 500);
      provider.script('/v1/free-spins/grants', { status: 503, body: { error: 'down' } });
      // (No reconciler role in this process: nothing takes it over behind the test's back.)
      const issued = await takeOverIssue(svc.ctx, id);
      expect(issued?.state.status).toBe('failed');
      expect(await takeOverIssue(svc.ctx, id)).toBeUndefined();
      const got = await signedRequest<Grant>(svc.url, { path: `/v1/operator/free-spins/grants/${id}`, as: OP1 });
      expect([got.json.status, got.json.lastError]).toEqual(['failed', 'provider answered 503']);
      expect(callsFor(id)).toHaveLength(1);

      // A grant of a provider this process's catalog does not hold is left to a process that knows it.
      const unknownId = grantIdFor('op-1', `ghost-${randomUUID()}`);
      await svc.ctx.eventStore.append(grantStream(unknownId), [{
        id: randomUUID(),
        type: 'GrantRequested',
        data: { grantId: unknownId, operatorId: 'op-1', providerId: 'studio-gone', gameId: 'fruit-1', playerRef: 'to-p', spins: 3, betAmountMinor: 0, currency: 'EUR', idempotencyKey: 'ghost', requestedAt: new Date(Date.now() - 60_000).toISOString() },
      }], 'no_stream');
      await eventually(() => abandonedGrantCandidates(svc.ctx.pool, new Date()), (ids) => ids.includes(unknownId));
      await finishAbandonedGrants(svc.ctx);
      expect((await svc.ctx.eventStore.readStream(grantStream(unknownId))).map((e) => e.type)).toEqual(['GrantRequested']);
    } finally {
      await svc.stop();
    }
  });
});
