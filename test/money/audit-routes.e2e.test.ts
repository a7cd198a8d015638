import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OP1 } from '../helpers/catalog.ts';
import { ADMIN_TOKEN } from '../helpers/service.ts';
import { signedRequest, toTestResponse } from '../helpers/signing.ts';
import { startMoneyHarness, type MoneyHarness } from './harness.ts';

describe('auditor routes (bearer ADMIN_TOKEN)', () => {
  let h: MoneyHarness;
  beforeAll(async () => {
    h = await startMoneyHarness('auditroutes');
  });
  afterAll(async () => h?.close());

  const audit = async <T = Record<string, unknown>>(path: string, token: string | null = ADMIN_TOKEN) =>
    toTestResponse<T>(await fetch(`${h.svc.url}/v1/audit${path}`, { headers: token ? { authorization: `Bearer ${token}` } : {} }));

  it('refuses a missing or wrong token with 401', async () => {
    expect((await audit('/events', null)).status).toBe(401);
    expect((await audit('/events', 'nope')).status).toBe(401);
  });

  it("shows a round's full history with the derived state after each event", async () => {
    const player = `au-${randomUUID().slice(0, 6)}`;
    const token = await h.launch(player);
    const base = { sessionToken: token, roundId: 'audit-round', playerRef: player, currency: 'EUR', gameId: 'fruit-1' };
    await h.tx({ ...base, transactionId: 'au-bet', type: 'BET', roundComplete: false, amount: 100 });
    h.wallet.script('au-win', { status: 500, body: {} });
    await h.tx({ ...base, transactionId: 'au-win', type: 'WIN', roundComplete: true, amount: 300 });
    type History = { history: Array<{ event: { type: string; revision: number }; stateAfter: { completed: boolean; outstandingBets: string[]; transactions: Array<{ transactionId: string; status: string; attempts: number }> } }> };
    // The wallet applies the retried WIN a moment before the worker records its outcome: wait for the record.
    let res = await audit<History>('/rounds/studio-a/op-1/audit-round');
    await h.until(async () => (res = await audit<History>('/rounds/studio-a/op-1/audit-round')).json.history?.length === 5);
    expect(res.status).toBe(200);
    const types = res.json.history.map((x) => x.event.type);
    expect(types).toEqual(['TransactionRecorded', 'TransactionSettled', 'TransactionRecorded', 'TransactionAttemptFailed', 'TransactionSettled']);
    expect(res.json.history.map((x) => x.event.revision)).toEqual([0, 1, 2, 3, 4]);
    expect(res.json.history[0]!.stateAfter).toMatchObject({ completed: false, outstandingBets: ['au-bet'] });
    expect(res.json.history[3]!.stateAfter.transactions.find((t) => t.transactionId === 'au-win')).toMatchObject({ status: 'failed', attempts: 1 });
    expect(res.json.history[4]!.stateAfter).toMatchObject({ completed: true });
    expect(res.json.history[4]!.stateAfter.transactions.find((t) => t.transactionId === 'au-win')).toMatchObject({ status: 'applied', attempts: 2 });
    expect((await audit('/rounds/studio-a/op-2/audit-round')).status).toBe(404);
  });

  it('pages through the global log in order from a position', async () => {
    // Write a known set of events, then page with a small limit until all of them have shown up.
    // The log is eventually consistent (an event appears once every older transaction on the server
    // has ended, including ones in other databases), so a short page means "nothing more yet", not
    // "the end": the auditor, like this test, pages again.
    const player = `au-p-${randomUUID().slice(0, 6)}`;
    const token = await h.launch(player);
    const base = { sessionToken: token, roundId: `paging-${player}`, playerRef: player, currency: 'EUR', gameId: 'fruit-1' };
    await h.tx({ ...base, transactionId: `${player}-b1`, type: 'BET', roundComplete: false, amount: 10 });
    await h.tx({ ...base, transactionId: `${player}-w1`, type: 'WIN', roundComplete: true, amount: 20 });
    const streams = [`player-sessions|op-1|${player}`, `round|studio-a|op-1|${base.roundId}`];
    // The WIN's outcome is recorded right behind its answer: wait for the round's four events.
    await h.until(async () => (await audit<{ events: unknown[] }>(`/streams/${encodeURIComponent(streams[1]!)}`)).json.events?.length === 4);
    const expected = new Set<string>();
    for (const s of streams) {
      const res = await audit<{ events: Array<{ id: string }> }>(`/streams/${encodeURIComponent(s)}`);
      expect(res.status).toBe(200);
      for (const e of res.json.events) expected.add(e.id);
    }
    expect(expected.size).toBeGreaterThanOrEqual(5);

    const all: Array<{ position: string; id: string; streamId: string }> = [];
    let from: string | undefined;
    await h.until(async () => {
      for (let page = 0; page < 1000; page++) {
        const res = await audit<{ events: Array<{ position: string; id: string; streamId: string }>; next: string }>(
          `/events?limit=3${from ? `&from=${encodeURIComponent(from)}` : ''}`,
        );
        expect(res.status).toBe(200);
        expect(res.json.events.length).toBeLessThanOrEqual(3);
        all.push(...res.json.events);
        from = res.json.next;
        if (res.json.events.length < 3) break;
      }
      return [...expected].every((id) => all.some((e) => e.id === id));
    });
    expect(new Set(all.map((e) => e.id)).size).toBe(all.length);
    // Each stream's events come in revision order within the global log.
    for (const s of streams) {
      const ids = all.filter((e) => e.streamId === s).map((e) => e.id);
      expect(ids).toEqual([...expected].filter((id) => ids.includes(id)));
    }
    expect((await audit('/events?from=not-a-position')).status).toBe(400);
    // Shaped as a position, with a number past any log's (2^63 − 1): the caller's error, not the store's.
    for (const from of ['1.99999999999999999999', '9223372036854775808.1']) {
      const res = await audit(`/events?from=${from}`);
      expect([res.status, res.json]).toEqual([400, { error: 'from: not a position of this log' }]);
    }
    expect((await audit('/events?from=9223372036854775807.9223372036854775807')).json).toMatchObject({ events: [] });
    expect((await audit('/events?limit=5000')).status).toBe(400);
    // An unknown parameter is refused, naming it, on every audit route with a query.
    for (const path of ['/events?form=0.0', '/transactions?state=dead', `/streams/${encodeURIComponent('round|x')}?asOf=2026-11-24T10:00:00Z`]) {
      const res = await audit<{ error: string }>(path);
      expect([res.status, res.json.error], path).toEqual([400, expect.stringMatching(/form|state|asOf/)]);
    }
    for (const limit of ['0x10', '1e2', '%205']) expect((await audit(`/events?limit=${limit}`)).status, limit).toBe(400);
  });

  it('pages the log by text as well as by count: events holding large wallet replies come in pages of about 8 MiB, each exactly once', async () => {
    const store = h.svc.ctx.eventStore;
    const from = await store.headPosition();
    const stream = `audit-large-${randomUUID()}`;
    // Twelve events of 1.5 million characters each (an outcome keeps a wallet reply of up to 1 MiB, its
    // body and parsed fields besides): 18 MB in all, appended one at a time.
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      const id = randomUUID();
      ids.push(id);
      await store.append(stream, [{ id, type: 'LargeForTest', data: { n: i, body: String(i % 10).repeat(1_500_000) } }], i === 0 ? 'no_stream' : i - 1);
    }
    const seen: string[] = [];
    const pages: number[] = [];
    let at = from;
    // The log shows an event once every older transaction on the server has ended (another test file's
    // may be open): an empty page means "nothing more yet", so page on until all twelve have come.
    await h.until(async () => {
      const res = await audit<{ events: Array<{ id: string; streamId: string; data: { body?: string } }>; next: string }>(`/events?limit=1000&from=${encodeURIComponent(at)}`);
      expect(res.status).toBe(200);
      const ours = res.json.events.filter((e) => e.streamId === stream);
      seen.push(...ours.map((e) => e.id));
      if (ours.length > 0) pages.push(ours.length);
      // At most 8 MiB of text, or one event however large.
      expect(ours.length === 1 || ours.reduce((n, e) => n + (e.data.body?.length ?? 0), 0) <= 8 * 1024 * 1024).toBe(true);
      at = res.json.next;
      return seen.length >= 12;
    });
    expect(seen).toEqual(ids);
    expect(pages.length).toBeGreaterThanOrEqual(3);
  }, 60_000);

  it("shows one stream, a player's session history and a grant's history", async () => {
    const all = await audit<{ error: string }>('/transactions?status=all');
    expect(all.status).toBe(400);
    expect(all.json.error).toContain('unresolved');
    const player = `au-s-${randomUUID().slice(0, 6)}`;
    await h.launch(player);
    await signedRequest(h.svc.url, { path: '/v1/operator/players/kick', body: { playerRef: player }, as: OP1 });
    const sessions = await audit<{ history: Array<{ event: { type: string }; stateAfter: { openSessions: unknown[] } }> }>(`/players/op-1/${player}/sessions`);
    expect(sessions.json.history.map((x) => [x.event.type, x.stateAfter.openSessions.length])).toEqual([
      ['SessionStarted', 1],
      ['SessionsRevoked', 0],
    ]);
    const stream = await audit<{ events: unknown[] }>(`/streams/${encodeURIComponent(`player-sessions|op-1|${player}`)}`);
    expect(stream.json.events).toHaveLength(2);
    expect((await audit(`/streams/${encodeURIComponent('no|such|stream')}`)).status).toBe(404);

    const grant = await signedRequest<{ id: string }>(h.svc.url, {
      path: '/v1/operator/free-spins/grants',
      body: { playerRef: player, idempotencyKey: randomUUID(), gameId: 'fruit-1', spins: 2, currency: 'EUR' },
      as: OP1,
    });
    const gh = await audit<{ history: Array<{ event: { type: string }; stateAfter: { status: string } }> }>(`/grants/${grant.json.id}`);
    expect(gh.json.history.map((x) => [x.event.type, x.stateAfter.status])).toEqual([
      ['GrantRequested', 'pending'],
      ['GrantActivated', 'active'],
    ]);
  });

  it('shows each read model’s lag at /v1/admin/projections', async () => {
    await h.until(async () => {
      const res = await fetch(`${h.svc.url}/v1/admin/projections`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }).then(toTestResponse<{ projections: Array<{ name: string; eventsBehind: number; msBehind: number }> }>);
      expect(res.status).toBe(200);
      expect(res.json.projections.map((p) => p.name).sort()).toEqual(['chain', 'console', 'grants', 'rounds', 'sessions']);
      return res.json.projections.every((p) => p.eventsBehind === 0 && p.msBehind === 0);
    });
    expect((await fetch(`${h.svc.url}/v1/admin/projections`)).status).toBe(401);
  });

  it('lists still-unsettled and dead-lettered transactions', async () => {
    const player = `au-u-${randomUUID().slice(0, 6)}`;
    const token = await h.launch(player);
    h.wallet.script('au-stuck-bet', { status: 503, body: {} });
    await h.tx({ sessionToken: token, roundId: 'au-u', playerRef: player, currency: 'EUR', gameId: 'fruit-1', transactionId: 'au-stuck-bet', type: 'BET', roundComplete: false, amount: 5 });
    let stuck: { transaction_id: string; status: string; amount: unknown } | undefined;
    await h.until(async () => {
      const res = await audit<{ transactions: Array<{ transaction_id: string; status: string; amount: unknown }> }>('/transactions?status=unsettled');
      stuck = res.json.transactions.find((t) => t.transaction_id === 'au-stuck-bet' && t.status === 'failed');
      return stuck !== undefined;
    });
    // Amounts are integers in minor units everywhere, never strings.
    expect(stuck!.amount).toBe(5);
    const dead = await audit<{ transactions: unknown[] }>('/transactions?status=dead');
    expect(dead.status).toBe(200);
    // A WIN the wallet answered DECLINED (invalid) is never sent again: listed as dead, as operators see it.
    await h.tx({ sessionToken: token, roundId: 'au-u', playerRef: player, currency: 'EUR', gameId: 'fruit-1', transactionId: 'au-ok-bet', type: 'BET', roundComplete: false, amount: 5 });
    h.wallet.script('au-invalid-win', { status: 200, body: { status: 'DECLINED', balance: 9900 } });
    expect((await h.tx({ sessionToken: token, roundId: 'au-u', playerRef: player, currency: 'EUR', gameId: 'fruit-1', transactionId: 'au-invalid-win', type: 'WIN', roundComplete: false, amount: 3 })).status).toBe(502);
    const invalidListed = async (status: string) =>
      (await audit<{ transactions: Array<{ transaction_id: string; status: string }> }>(`/transactions?status=${status}`)).json.transactions.some((t) => t.transaction_id === 'au-invalid-win' && t.status === 'invalid');
    await h.until(() => invalidListed('dead'));
    expect(await invalidListed('unresolved')).toBe(true);
    expect(await invalidListed('unsettled')).toBe(false);
    expect((await audit('/transactions?status=weird')).status).toBe(400);

    // Its ROLLBACK settles it: never sent again, it leaves both lists, keeping its status (contract
    // section 8, rule 5), and its identical resubmission is still answered as it failed, with no call.
    expect((await h.tx({ sessionToken: token, roundId: 'au-u', playerRef: player, currency: 'EUR', gameId: 'fruit-1', transactionId: 'au-stuck-rb', type: 'ROLLBACK', originalTransactionId: 'au-stuck-bet', amount: 5 })).status).toBe(200);
    const listed = async (status: string) =>
      (await audit<{ transactions: Array<{ transaction_id: string }> }>(`/transactions?status=${status}`)).json.transactions.some((t) => t.transaction_id === 'au-stuck-bet');
    await h.until(async () => !(await listed('unsettled')));
    expect(await listed('unresolved')).toBe(false);
    const calls = h.walletCallsFor('au-stuck-bet').length;
    expect((await h.tx({ sessionToken: token, roundId: 'au-u', playerRef: player, currency: 'EUR', gameId: 'fruit-1', transactionId: 'au-stuck-bet', type: 'BET', roundComplete: false, amount: 5 })).status).toBe(502);
    expect(h.walletCallsFor('au-stuck-bet').length).toBe(calls);
  });

  it('offers no status=all: what it listed was only the unresolved transactions (dead or unsettled), so it is status=unresolved, the default', async () => {
    const all = await audit<{ error: string }>('/transactions?status=all');
    expect(all.status).toBe(400);
    expect(all.json.error).toContain('unresolved');
    const player = `au-s-${randomUUID().slice(0, 6)}`;
    const token = await h.launch(player);
    const base = { sessionToken: token, roundId: 'au-s', playerRef: player, currency: 'EUR', gameId: 'fruit-1' };
    expect((await h.tx({ ...base, transactionId: 'au-settled-bet', type: 'BET', roundComplete: false, amount: 5 })).status).toBe(200);
    // Stuck: the worker's retries fail too (one scripted failure let a quick retry settle it before it was listed).
    h.wallet.script('au-s-stuck-win', ...Array.from({ length: 50 }, () => ({ status: 503, body: {} })));
    await h.tx({ ...base, transactionId: 'au-s-stuck-win', type: 'WIN', roundComplete: true, amount: 7 });
    type Listed = { transactions: Array<{ transaction_id: string; status: string }> };
    const ids = (res: { json: Listed }) => res.json.transactions.map((t) => t.transaction_id);
    await h.until(async () => ids(await audit<Listed>('/transactions?status=unresolved')).includes('au-s-stuck-win'));
    // The settled BET is in the read model, and in no list of this route.
    await h.until(async () => (await h.svc.ctx.pool.query(`SELECT 1 FROM rm_transactions WHERE transaction_id = 'au-settled-bet' AND status = 'applied'`)).rowCount === 1);
    for (const query of ['?status=unresolved', '']) {
      const res = await audit<Listed>(`/transactions${query}`);
      expect(res.status).toBe(200);
      expect(ids(res)).toContain('au-s-stuck-win');
      expect(ids(res)).not.toContain('au-settled-bet');
      expect(res.json.transactions.every((t) => ['dead', 'invalid', 'recorded', 'failed', 'timed_out'].includes(t.status))).toBe(true);
    }
  });

  it('pages the list: each transaction once, oldest first, full pages, a last page that says so; a foreign or forged cursor is 400', async () => {
    const player = `au-pg-${randomUUID().slice(0, 6)}`;
    const token = await h.launch(player);
    // Seven failed BETs (each refused once; a BET is not retried): unsettled for good. An eighth is rolled
    // back, which settles it: read by the query, left out by the decider's rule, and it must not cut a page short.
    const ids = Array.from({ length: 8 }, (_, i) => `au-pg-${player}-${i}`);
    for (const [i, id] of ids.entries()) {
      h.wallet.script(id, { status: 503, body: {} });
      const base = { sessionToken: token, roundId: `au-pg-${player}-r${i}`, playerRef: player, currency: 'EUR', gameId: 'fruit-1' };
      expect((await h.tx({ ...base, transactionId: id, type: 'BET', roundComplete: false, amount: 5 + i })).status).toBe(502);
      if (i === 3) expect((await h.tx({ ...base, transactionId: `${id}-rb`, type: 'ROLLBACK', originalTransactionId: id, amount: 5 + i })).status).toBe(200);
    }
    const settledForGood = ids[3]!;
    type Page = { transactions: Array<{ transaction_id: string; recorded_at: string }>; nextCursor: string | null };
    const whole = async () => (await audit<Page>('/transactions?status=unsettled&limit=1000')).json;
    await h.until(async () => (await whole()).transactions.filter((t) => ids.includes(t.transaction_id)).length === 7);
    const all = await whole();
    expect(all.nextCursor).toBeNull();

    // Walk it two at a time: the same transactions in the same order, every page but the last full.
    const walked: string[] = [];
    const sizes: number[] = [];
    let cursor: string | null = null;
    do {
      const res: { status: number; json: Page } = await audit<Page>(`/transactions?status=unsettled&limit=2${cursor === null ? '' : `&cursor=${cursor}`}`);
      expect(res.status).toBe(200);
      walked.push(...res.json.transactions.map((t) => t.transaction_id));
      sizes.push(res.json.transactions.length);
      cursor = res.json.nextCursor;
    } while (cursor !== null && sizes.length < 100);
    expect(walked).toEqual(all.transactions.map((t) => t.transaction_id));
    expect(walked.filter((id) => ids.includes(id))).toEqual(ids.filter((id) => id !== settledForGood));
    expect(sizes.slice(0, -1).every((n) => n === 2)).toBe(true);
    expect(sizes.at(-1)).toBeGreaterThan(0);

    // A cursor belongs to its status; anything else is no cursor of ours, and never a 500.
    const first = (await audit<Page>('/transactions?status=unsettled&limit=1')).json.nextCursor!;
    const other = await audit<{ error: string }>(`/transactions?status=dead&cursor=${first}`);
    expect(other.status).toBe(400);
    expect(other.json.error).toContain('status=unsettled');
    const forged = (k: unknown[]) => Buffer.from(JSON.stringify({ v: 1, l: 'unsettled', k })).toString('base64url');
    for (const bad of ['nope', Buffer.from('null').toString('base64url'), forged(['2026-13-45 10:00:00+00', 'a', 'b']), forged(['0000-01-01 00:00:00+00', 'a', 'b']), forged(['2026-11-30 10:00:00+00', 'a\u0000', 'b']), forged(['2026-11-30 10:00:00+00', '\ud800', 'b'])]) {
      const res = await audit<{ error: string }>(`/transactions?status=unsettled&cursor=${encodeURIComponent(bad)}`);
      expect(res.status, bad).toBe(400);
      expect(res.json.error).toContain('cursor:');
    }
    for (const limit of ['0', '1001', '1.5', 'x']) expect((await audit(`/transactions?limit=${limit}`)).status, limit).toBe(400);
  });
});
