import { Router } from 'express';
import { z } from 'zod';
import { grantDecider } from '../grants/decider.ts';
import { grantStream } from '../grants/events.ts';
import { isClosed, outstandingBets, roundDecider, UNSETTLED_STATUSES, type RoundState, type TxStatus } from '../rounds/decider.ts';
import { transactionsIn } from '../rounds/queries.ts';
import { roundStream } from '../rounds/events.ts';
import { openSessions, playerSessionsDecider, type PlayerSessionsState } from '../sessions/decider.ts';
import { sessionsOfPlayer } from '../sessions/queries.ts';
import { playerSessionsStream } from '../sessions/events.ts';
import { badRequest, notFound } from '../../shared/errors.ts';
import type { Decider, DomainEvent, Refusal } from '../../shared/decider.ts';
import { START, type RecordedEvent } from '../../shared/eventstore/port.ts';
import { parseOr400 } from '../../shared/http/validate.ts';
import type { ServiceContext } from '../context.ts';

const eventView = (e: RecordedEvent) => ({
  position: e.position,
  streamId: e.streamId,
  revision: e.revision,
  id: e.id,
  type: e.type,
  data: e.data,
  metadata: e.metadata,
  createdAt: e.createdAt.toISOString(),
});

/** Every event of a stream with the state the decider derives after it. */
function history<S, E extends DomainEvent>(events: RecordedEvent[], decider: Pick<Decider<never, S, E, Refusal>, 'initialState' | 'evolve'>, view: (s: S) => unknown) {
  let state = decider.initialState();
  return events.map((e) => {
    state = decider.evolve(state, e as unknown as E, e);
    return { event: eventView(e), stateAfter: view(state) };
  });
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
    ...(t.rolledBackBy !== undefined ? { rolledBackBy: t.rolledBackBy } : {}),
    ...(t.reply ? { reply: { status: t.reply.status, balance: t.reply.balance } } : {}),
    ...(t.lastError !== undefined ? { lastError: t.lastError } : {}),
  })),
});

const sessionsView = (s: PlayerSessionsState) => ({ openSessions: openSessions(s).map((o) => ({ token: o.token, providerId: o.providerId, expiresAt: o.expiresAt, demo: o.demo })) });

export const eventsQuery = z.object({ from: z.string().min(1).max(100).optional(), limit: z.coerce.number().int().min(1).max(1000).default(100) });
/**
 * `unresolved` (dead or unsettled) was called `all` until issue #24, though it never listed a settled
 * transaction; `all` is refused, naming its new name, rather than quietly meaning something else.
 */
export const txQuery = z.object({
  status: z
    .enum(['dead', 'unsettled', 'unresolved'], {
      error: (issue) =>
        issue.input === 'all'
          ? 'not dead, unsettled or unresolved ("all" was renamed "unresolved": it lists the dead and the unsettled, never the settled)'
          : 'not dead, unsettled or unresolved',
    })
    .default('unresolved'),
});

/** /v1/audit: read-only views of the history of record (bearer ADMIN_TOKEN). */
export function auditRoutes(ctx: ServiceContext): Router {
  const router = Router();

  router.get('/events', async (req, res) => {
    const { from, limit } = parseOr400(eventsQuery, req.query, 'query');
    let events: RecordedEvent[];
    try {
      events = await ctx.eventStore.readAll({ from: from ?? START, maxCount: limit });
    } catch (err) {
      if (err instanceof Error && /position/.test(err.message)) throw badRequest('from: not a position of this log');
      throw err;
    }
    res.json({ events: events.map(eventView), next: events.at(-1)?.position ?? from ?? START });
  });

  router.get('/streams/:streamId', async (req, res) => {
    const streamId = String(req.params.streamId);
    const events = await ctx.eventStore.readStream(streamId);
    if (events.length === 0) throw notFound('stream not found');
    res.json({ streamId, events: events.map(eventView) });
  });

  router.get('/rounds/:providerId/:operatorId/:roundId', async (req, res) => {
    const stream = roundStream(String(req.params.providerId), String(req.params.operatorId), String(req.params.roundId));
    const events = await ctx.eventStore.readStream(stream);
    if (events.length === 0) throw notFound('round not found');
    res.json({ streamId: stream, history: history(events, roundDecider, roundView) });
  });

  router.get('/players/:operatorId/:playerRef/sessions', async (req, res) => {
    const operatorId = String(req.params.operatorId);
    const playerRef = String(req.params.playerRef);
    const events = await ctx.eventStore.readStream(playerSessionsStream(operatorId, playerRef));
    if (events.length === 0) throw notFound('no sessions for this player');
    res.json({ history: history(events, playerSessionsDecider, sessionsView), sessions: await sessionsOfPlayer(ctx.pool, operatorId, playerRef) });
  });

  router.get('/grants/:id', async (req, res) => {
    const events = await ctx.eventStore.readStream(grantStream(String(req.params.id)));
    if (events.length === 0) throw notFound('grant not found');
    res.json({ history: history(events, grantDecider, (g) => g) });
  });

  router.get('/transactions', async (req, res) => {
    const { status } = parseOr400(txQuery, req.query, 'query');
    const statuses: readonly TxStatus[] = status === 'dead' ? ['dead'] : status === 'unsettled' ? UNSETTLED_STATUSES : ['dead', ...UNSETTLED_STATUSES]; // unresolved
    res.json({ transactions: await transactionsIn(ctx.pool, statuses) });
  });

  return router;
}
