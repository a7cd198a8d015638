import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OP1 } from '../helpers/catalog.ts';
import { ADMIN_TOKEN } from '../helpers/service.ts';
import { signedRequest, toTestResponse } from '../helpers/signing.ts';
import { startMoneyHarness, type MoneyHarness } from './harness.ts';

// Contract section 10, time travel: the audit routes of a round, a session stream and a grant take
// `asOf=<RFC 3339>` and answer the state as it was then, folded from the events recorded up to that
// instant, naming the last position folded. Every instant here is an event's createdAt as the route
// shows it; the actions are 10 ms apart, so no two of them share a millisecond.

interface AuditEvent {
  position: string;
  type: string;
  createdAt: string;
}
interface RoundState {
  completed: boolean;
  outstandingBets: string[];
  transactions: Array<{ transactionId: string; type: string; status: string }>;
}
interface TimeTravel<S> {
  asOf?: string;
  position?: string | null;
  state?: S;
  history: Array<{ event: AuditEvent; stateAfter: S }>;
}
type SessionsState = { openSessions: Array<{ token: string }> };
type SessionRow = { token: string; revoked_at: string | null };
type GrantState = { status: string };

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** An instant `ms` milliseconds from an ISO time, in the Z form. */
const shift = (iso: string, ms: number) => new Date(Date.parse(iso) + ms).toISOString();

describe('time travel on the audit routes (asOf)', () => {
  let h: MoneyHarness;
  beforeAll(async () => {
    h = await startMoneyHarness('timetravel');
  });
  afterAll(async () => h?.close());

  const audit = async <T>(path: string) => toTestResponse<T>(await fetch(`${h.svc.url}/v1/audit${path}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }));
  const asOf = (instant: string) => `?asOf=${encodeURIComponent(instant)}`;

  it('shows a round before its WIN (open, the BET outstanding) and after it (completed), naming the last position folded', async () => {
    const player = `tt-r-${randomUUID().slice(0, 6)}`;
    const roundId = `tt-round-${player}`;
    const token = await h.launch(player);
    const base = { sessionToken: token, roundId, playerRef: player, currency: 'EUR', gameId: 'fruit-1' };
    expect((await h.tx({ ...base, transactionId: `${player}-bet`, type: 'BET', roundComplete: false, amount: 100 })).status).toBe(200);
    await pause(10);
    expect((await h.tx({ ...base, transactionId: `${player}-win`, type: 'WIN', roundComplete: true, amount: 300 })).status).toBe(200);

    const path = `/rounds/studio-a/op-1/${roundId}`;
    let now = await audit<TimeTravel<RoundState>>(path);
    await h.until(async () => (now = await audit<TimeTravel<RoundState>>(path)).json.history.length === 4);
    const events = now.json.history.map((x) => x.event);
    expect(events.map((e) => e.type)).toEqual(['TransactionRecorded', 'TransactionSettled', 'TransactionRecorded', 'TransactionSettled']);
    // Without asOf the answer is as it always was.
    expect(Object.keys(now.json).sort()).toEqual(['history', 'streamId']);

    // Before the WIN: the instant the BET was settled.
    const betSettled = events[1]!;
    const before = await audit<TimeTravel<RoundState> & { streamId: string }>(path + asOf(betSettled.createdAt));
    expect(before.status).toBe(200);
    expect(before.json.streamId).toBe(`round|studio-a|op-1|${roundId}`);
    expect(before.json.asOf).toBe(betSettled.createdAt);
    expect(before.json.position).toBe(betSettled.position);
    expect(before.json.history).toEqual(now.json.history.slice(0, 2));
    expect(before.json.state).toMatchObject({ completed: false, outstandingBets: [`${player}-bet`] });
    expect(before.json.state!.transactions).toEqual([expect.objectContaining({ transactionId: `${player}-bet`, type: 'BET', status: 'applied' })]);
    expect(before.json.state).toEqual(before.json.history.at(-1)!.stateAfter);

    // One millisecond before the WIN was recorded: still the same.
    const winRecorded = events[2]!;
    const justBefore = await audit<TimeTravel<RoundState>>(path + asOf(shift(winRecorded.createdAt, -1)));
    expect(justBefore.json.position).toBe(betSettled.position);
    expect(justBefore.json.history).toHaveLength(2);

    // After the WIN: the instant it was settled (an event recorded at exactly asOf is folded).
    const winSettled = events[3]!;
    const after = await audit<TimeTravel<RoundState>>(path + asOf(winSettled.createdAt));
    expect(after.status).toBe(200);
    expect(after.json.position).toBe(winSettled.position);
    expect(after.json.history).toEqual(now.json.history);
    expect(after.json.state).toMatchObject({ completed: true });
    expect(after.json.state!.transactions.map((t) => [t.transactionId, t.status])).toEqual([
      [`${player}-bet`, 'applied'],
      [`${player}-win`, 'applied'],
    ]);

    // The same instant written in another time zone, with its "+" unencoded (a query string reads it as a space),
    // or with digits past the millisecond, is the same instant.
    const plusOne = new Date(Date.parse(betSettled.createdAt) + 3_600_000).toISOString().replace('Z', '+01:00');
    for (const query of [`?asOf=${plusOne}`, asOf(plusOne), asOf(betSettled.createdAt.replace('Z', '999Z'))]) {
      const res = await audit<TimeTravel<RoundState>>(path + query);
      expect(res.status, query).toBe(200);
      expect(res.json.position, query).toBe(betSettled.position);
    }
  });

  it("shows a player's session stream before a kick (the session open) and after it (none open)", async () => {
    const player = `tt-s-${randomUUID().slice(0, 6)}`;
    const token = await h.launch(player);
    await pause(10);
    expect((await signedRequest(h.svc.url, { path: '/v1/operator/players/kick', body: { playerRef: player }, as: OP1 })).status).toBe(200);

    type Sessions = TimeTravel<SessionsState> & { sessions: SessionRow[] };
    const path = `/players/op-1/${player}/sessions`;
    // The read model catches up with the kick.
    let now = await audit<Sessions>(path);
    await h.until(async () => (now = await audit<Sessions>(path)).json.sessions?.[0]?.revoked_at != null);
    const [started, revoked] = now.json.history.map((x) => x.event);
    expect([started!.type, revoked!.type]).toEqual(['SessionStarted', 'SessionsRevoked']);

    const before = await audit<Sessions>(path + asOf(started!.createdAt));
    expect(before.status).toBe(200);
    expect(before.json.position).toBe(started!.position);
    expect(before.json.history.map((x) => x.event.type)).toEqual(['SessionStarted']);
    expect(before.json.state!.openSessions.map((s) => s.token)).toEqual([token]);
    // The session rows as they stood then: launched, not yet ended.
    expect(before.json.sessions).toEqual([{ ...now.json.sessions[0], revoked_at: null }]);

    const after = await audit<Sessions>(path + asOf(revoked!.createdAt));
    expect(after.status).toBe(200);
    expect(after.json.position).toBe(revoked!.position);
    expect(after.json.history).toEqual(now.json.history);
    expect(after.json.state).toEqual({ openSessions: [] });
    // Derived from the history, the rows are those of the read model.
    expect(after.json.sessions).toEqual(now.json.sessions);
  });

  it('shows a grant before its cancel (active) and after it (cancelled)', async () => {
    const player = `tt-g-${randomUUID().slice(0, 6)}`;
    const grant = await signedRequest<{ id: string; status: string }>(h.svc.url, {
      path: '/v1/operator/free-spins/grants',
      body: { playerRef: player, idempotencyKey: randomUUID(), gameId: 'fruit-1', spins: 3, currency: 'EUR' },
      as: OP1,
    });
    expect(grant.json.status).toBe('active');
    await pause(10);
    // A provider a little slow to cancel: its call's record and its outcome's are apart in time.
    h.provider.script('/v1/free-spins/grants/', { status: 200, body: {}, delayMs: 20 });
    const cancelled = await signedRequest<{ status: string }>(h.svc.url, { path: `/v1/operator/free-spins/grants/${grant.json.id}/cancel`, method: 'POST', as: OP1 });
    expect(cancelled.json.status).toBe('cancelled');

    const path = `/grants/${grant.json.id}`;
    const now = await audit<TimeTravel<GrantState>>(path);
    const events = now.json.history.map((x) => x.event);
    // The cancel's provider call is recorded before it is made (one call at a time); the grant reads the same meanwhile.
    expect(events.map((e) => e.type)).toEqual(['GrantRequested', 'GrantActivated', 'GrantCancelRequested', 'GrantCancelled']);

    const before = await audit<TimeTravel<GrantState>>(path + asOf(events[1]!.createdAt));
    expect(before.status).toBe(200);
    expect(before.json.state).toMatchObject({ id: grant.json.id, status: 'active' });
    expect(before.json.position).toBe(events[1]!.position);
    expect(before.json.history.map((x) => x.stateAfter.status)).toEqual(['pending', 'active']);

    const calling = await audit<TimeTravel<GrantState>>(path + asOf(events[2]!.createdAt));
    expect(calling.json.state).toEqual(before.json.state);
    const after = await audit<TimeTravel<GrantState>>(path + asOf(events[3]!.createdAt));
    expect(after.json.state).toMatchObject({ id: grant.json.id, status: 'cancelled' });
    expect(after.json.position).toBe(events[3]!.position);
    expect(after.json.history).toEqual(now.json.history);
  });

  it('answers an instant before the first event with an empty history and the initial state; a missing stream stays 404', async () => {
    const player = `tt-e-${randomUUID().slice(0, 6)}`;
    const roundId = `tt-early-${player}`;
    const token = await h.launch(player);
    await h.tx({ sessionToken: token, roundId, playerRef: player, currency: 'EUR', gameId: 'fruit-1', transactionId: `${player}-bet`, type: 'BET', roundComplete: false, amount: 5 });
    const grant = await signedRequest<{ id: string }>(h.svc.url, {
      path: '/v1/operator/free-spins/grants',
      body: { playerRef: player, idempotencyKey: randomUUID(), gameId: 'fruit-1', spins: 1, currency: 'EUR' },
      as: OP1,
    });
    const first = async (path: string) => (await audit<TimeTravel<unknown>>(path)).json.history[0]!.event.createdAt;

    const cases: Array<[string, unknown, Record<string, unknown>]> = [
      [`/rounds/studio-a/op-1/${roundId}`, { completed: false, outstandingBets: [], transactions: [] }, { streamId: `round|studio-a|op-1|${roundId}` }],
      [`/players/op-1/${player}/sessions`, { openSessions: [] }, { sessions: [] }],
      [`/grants/${grant.json.id}`, { status: 'none' }, {}],
    ];
    for (const [path, initial, extra] of cases) {
      const instant = shift(await first(path), -1);
      const res = await audit<TimeTravel<unknown>>(path + asOf(instant));
      expect(res.status, path).toBe(200);
      expect(res.json, path).toEqual({ asOf: instant, position: null, state: initial, history: [], ...extra });
    }

    const later = asOf(new Date().toISOString());
    expect((await audit(`/rounds/studio-a/op-2/${roundId}${later}`)).status).toBe(404);
    expect((await audit(`/players/op-1/nobody-${player}/sessions${later}`)).status).toBe(404);
    expect((await audit(`/grants/${randomUUID()}${later}`)).status).toBe(404);
  });

  it('refuses an asOf that is not an RFC 3339 instant with a time zone, with 400 naming asOf', async () => {
    const paths = ['/rounds/studio-a/op-1/any', '/players/op-1/anyone/sessions', `/grants/${randomUUID()}`];
    for (const path of paths) {
      for (const bad of ['yesterday', '2026-11-24T10:00:00', '2026-11-24', '']) {
        const res = await audit<{ error: string }>(path + asOf(bad));
        expect(res.status, `${path} ${bad}`).toBe(400);
        expect(res.json.error, `${path} ${bad}`).toMatch(/^asOf: /);
      }
    }
    // A misspelt asOf is refused, naming it, rather than answering the present as if none were given.
    for (const path of paths) {
      const res = await audit<{ error: string }>(`${path}?asof=2026-11-24T10:00:00Z`);
      expect([res.status, res.json.error], path).toEqual([400, expect.stringMatching(/asof/)]);
    }
    // RFC 3339 allows a lowercase "t" and "z": the same instant as in capitals.
    const grant = `/grants/${randomUUID()}`;
    expect((await audit(grant + asOf('2026-11-24t10:00:00z'))).status).toBe(404);
  });
});
