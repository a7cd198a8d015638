import { Router } from 'express';
import { z } from 'zod';
import { recordedAtText } from '../chain/link.ts';
import { grantDecider, grantOf } from '../grants/decider.ts';
import { grantIdParam } from '../grants/routes.ts';
import { grantStream } from '../grants/events.ts';
import { isClosed, mayRedrive, outstandingBets, roundDecider, type RoundState } from '../rounds/decider.ts';
import { roundStream } from '../rounds/events.ts';
import { openSessions, playerSessionsDecider, type PlayerSessionsState } from '../sessions/decider.ts';
import { playerSessionsStream, type SessionEvent } from '../sessions/events.ts';
import { badRequest, notFound } from '../../shared/errors.ts';
import type { Decider, DomainEvent, Refusal } from '../../shared/decider.ts';
import { isPosition, START, type RecordedEvent } from '../../shared/eventstore/port.ts';
import { BATCH_BYTES } from '../../shared/eventstore/text-size.ts';
import { queryInstant, queryLimit } from '../../shared/http/query.ts';
import { parseOr400 } from '../../shared/http/validate.ts';
import type { ServiceContext } from '../context.ts';
import { firstRecordedAt } from './migrate.ts';
import { decodeTxCursor, encodeTxCursor, unresolvedPage, UNRESOLVED_LISTS } from './unresolved.ts';

const eventView = (e: RecordedEvent) => ({
  position: e.position,
  streamId: e.streamId,
  revision: e.revision,
  id: e.id,
  type: e.type,
  data: e.data,
  metadata: e.metadata,
  createdAt: recordedAtText(e.createdAt),
});

/** Every event of a stream with the state the decider derives after it. */
function history<S, E extends DomainEvent>(events: RecordedEvent[], decider: Pick<Decider<never, S, E, Refusal>, 'initialState' | 'evolve'>, view: (s: S) => unknown) {
  let state = decider.initialState();
  return events.map((e) => {
    state = decider.evolve(state, e as unknown as E, e);
    return { event: eventView(e), stateAfter: view(state) };
  });
}

/**
 * Time travel (contract section 10): `asOf`, an RFC 3339 instant with a time zone. A query string
 * decodes an unencoded "+" as a space, so "…T10:00:00 01:00" (no other valid form) is read as the
 * "+01:00" the caller wrote.
 */
export const asOfQuery = z.strictObject({
  asOf: queryInstant('not an RFC 3339 date-time with a time zone, such as 2026-11-24T10:00:00.000Z').optional(),
});

/**
 * The events of a stream recorded at or before `asOf` (all of them without it). An event's time is
 * when it was first recorded, in milliseconds: its createdAt as these routes show it (the store's own
 * time of the append), or for an event moved from another store the time that store recorded, which its
 * metadata keeps (movedFrom.createdAt; firstRecordedAt), so an
 * event shown at exactly `asOf` is included, and digits of `asOf` past the millisecond change nothing
 * (Date.parse drops them). The stream's prefix up to the first later event is taken, so the fold is
 * always a state the stream really passed through, even were two appends' clocks out of order.
 */
function recordedBy(events: RecordedEvent[], asOf: string | undefined): RecordedEvent[] {
  if (asOf === undefined) return events;
  const limit = Date.parse(asOf);
  const later = events.findIndex((e) => firstRecordedAt(e).getTime() > limit);
  return later === -1 ? events : events.slice(0, later);
}

/**
 * A stream's history folded up to `asOf`: `history` as without it, restricted to the events recorded by
 * then, plus `asOf` (echoed), `position` (of the last event folded, null when none was recorded yet)
 * and `state` (the state then, in the view the history uses: the decider's initial state when none).
 * Without `asOf` the answer is the history alone, as before (the response schemas of
 * services/api/schemas.ts are closed objects; `state` and `position` join them there first).
 */
function timeTravel<S, E extends DomainEvent>(events: RecordedEvent[], asOf: string | undefined, decider: Pick<Decider<never, S, E, Refusal>, 'initialState' | 'evolve'>, view: (s: S) => unknown) {
  const folded = recordedBy(events, asOf);
  const entries = history(folded, decider, view);
  if (asOf === undefined) return { history: entries };
  return { asOf, position: folded.at(-1)?.position ?? null, state: entries.at(-1)?.stateAfter ?? view(decider.initialState()), history: entries };
}

const roundView = (s: RoundState) => ({
  completed: isClosed(s),
  playerRef: s.status === 'new' ? undefined : s.playerRef,
  gameId: s.status === 'new' ? undefined : s.gameId,
  lastActivityAt: s.status === 'new' ? undefined : s.lastActivityAt,
  outstandingBets: outstandingBets(s).map((t) => t.request.transactionId),
  transactions: [...s.txs.values()].map((t) => ({
    transactionId: t.request.transactionId,
    type: t.request.type,
    amount: t.request.amount,
    origin: t.origin,
    status: t.status,
    attempts: t.attempts,
    redrivable: mayRedrive(t.request.type, t.status),
    ...(t.rolledBackBy !== undefined ? { rolledBackBy: t.rolledBackBy } : {}),
    ...(t.reply ? { reply: { status: t.reply.status, balance: t.reply.balance } } : {}),
    ...(t.lastError !== undefined ? { lastError: t.lastError } : {}),
  })),
});

const sessionsView = (s: PlayerSessionsState) => ({ openSessions: openSessions(s).map((o) => ({ token: o.token, providerId: o.providerId, expiresAt: o.expiresAt, demo: o.demo })) });

/**
 * A player's session rows as `sessionsOfPlayer` gives them (session_tokens joined with rm_sessions),
 * derived from the player's session events as the sessions projection derives them: a kick ends every
 * session started before it and not ended yet.
 */
function sessionRowsOf(events: RecordedEvent[]) {
  const rows: Array<{ token: string; provider_id: string; game_id: string; currency: string; language: string | null; demo: boolean; created_at: string; expires_at: string; revoked_at: string | null }> = [];
  for (const recorded of events) {
    const e = recorded as unknown as SessionEvent;
    if (e.type === 'SessionStarted') {
      const d = e.data;
      rows.push({ token: d.token, provider_id: d.providerId, game_id: d.gameId, currency: d.currency, language: d.language ?? null, demo: d.demo, created_at: d.createdAt, expires_at: d.expiresAt, revoked_at: null });
    } else if (e.type === 'SessionsRevoked') {
      for (const row of rows) row.revoked_at ??= e.data.revokedAt;
    }
  }
  return rows;
}

export const eventsQuery = z.strictObject({ from: z.string().min(1).max(100).optional(), limit: queryLimit(1000).default(100) });
/**
 * `unresolved` (dead or unsettled) was called `all` until issue #24, though it never listed a settled
 * transaction; `all` is refused, naming its new name, rather than quietly meaning something else.
 */
export const txQuery = z.strictObject({
  status: z
    .enum(UNRESOLVED_LISTS, {
      error: (issue) =>
        issue.input === 'all'
          ? 'not dead, unsettled or unresolved ("all" was renamed "unresolved": it lists the dead and the unsettled, never the settled)'
          : 'not dead, unsettled or unresolved',
    })
    .default('unresolved'),
  limit: queryLimit(1000).default(1000),
  cursor: z.string().min(1).max(12_000).optional(),
});

/** /v1/audit: read-only views of the history of record (bearer ADMIN_TOKEN). */
export function auditRoutes(ctx: ServiceContext): Router {
  const router = Router();

  router.get('/events', async (req, res) => {
    const { from, limit } = parseOr400(eventsQuery, req.query, 'query');
    if (from !== undefined && !isPosition(from)) throw badRequest('from: not a position of this log');
    let events: RecordedEvent[];
    try {
      // At most `limit` events and BATCH_BYTES (always one event, however large): an outcome keeps its
      // wallet's reply verbatim, up to 1 MiB, and 1,000 of them would be a gigabyte of JSON, more than one
      // answer can hold (V8's strings end at 512 MiB).
      ({ events } = await ctx.eventStore.readPage({ from: from ?? START, maxCount: limit, maxBytes: BATCH_BYTES }));
    } catch (err) {
      if (err instanceof Error && /position/.test(err.message)) throw badRequest('from: not a position of this log');
      throw err;
    }
    res.json({ events: events.map(eventView), next: events.at(-1)?.position ?? from ?? START });
  });

  router.get('/streams/:streamId', async (req, res) => {
    // No parameters: one given (an asOf, which only the rounds, sessions and grants routes take) is refused.
    parseOr400(z.strictObject({}), req.query, 'query');
    const streamId = String(req.params.streamId);
    const events = await ctx.eventStore.readStream(streamId);
    if (events.length === 0) throw notFound('stream not found');
    res.json({ streamId, events: events.map(eventView) });
  });

  router.get('/rounds/:providerId/:operatorId/:roundId', async (req, res) => {
    const { asOf } = parseOr400(asOfQuery, req.query, 'query');
    const stream = roundStream(String(req.params.providerId), String(req.params.operatorId), String(req.params.roundId));
    const events = await ctx.eventStore.readStream(stream);
    if (events.length === 0) throw notFound('round not found');
    res.json({ streamId: stream, ...timeTravel(events, asOf, roundDecider, roundView) });
  });

  router.get('/players/:operatorId/:playerRef/sessions', async (req, res) => {
    const { asOf } = parseOr400(asOfQuery, req.query, 'query');
    const operatorId = String(req.params.operatorId);
    const playerRef = String(req.params.playerRef);
    const events = await ctx.eventStore.readStream(playerSessionsStream(operatorId, playerRef));
    if (events.length === 0) throw notFound('no sessions for this player');
    // `sessions`: every session launched, with when a kick ended it, from the same events as the history
    // it is answered with (as of `asOf`: the sessions launched by then, `revoked_at` set only by a kick
    // recorded by then). Not the read model's rows: they may lag the stream, listing a kick in the history
    // and no session beside it; and they hold today's `revoked_at`. The open ones are `state`.
    const sessions = sessionRowsOf(asOf === undefined ? events : recordedBy(events, asOf));
    res.json({ ...timeTravel(events, asOf, playerSessionsDecider, sessionsView), sessions });
  });

  router.get('/grants/:id', async (req, res) => {
    const { asOf } = parseOr400(asOfQuery, req.query, 'query');
    // A grant id read as the operator routes read it (grantIdParam: a UUID, whatever its case); anything
    // else is no grant's id, and found by none.
    const id = grantIdParam.safeParse(req.params.id);
    const events = await ctx.eventStore.readStream(grantStream(id.success ? id.data : String(req.params.id)));
    if (events.length === 0) throw notFound('grant not found');
    // The grant as operators see it (grantOf), not the decider's bookkeeping of the issue call.
    res.json(timeTravel(events, asOf, grantDecider, (g) => grantOf(g) ?? g));
  });

  router.get('/transactions', async (req, res) => {
    const { status, limit, cursor } = parseOr400(txQuery, req.query, 'query');
    const page = await unresolvedPage(ctx.pool, status, limit, cursor === undefined ? undefined : decodeTxCursor(ctx.cursors, cursor, status));
    res.json({ transactions: page.rows, nextCursor: page.next === undefined ? null : encodeTxCursor(ctx.cursors, status, page.next) });
  });

  return router;
}
