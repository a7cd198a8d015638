import { createHash } from 'node:crypto';
import { Router, type Request, type Response } from 'express';
import { badRequest, notFound } from '../../shared/errors.ts';
import { bigJson } from '../../shared/http/big-json.ts';
import { notOurCursor, type Cursors } from '../../shared/http/cursor.ts';
import { preferredType } from '../../shared/http/negotiate.ts';
import { parseOr400 } from '../../shared/http/validate.ts';
import { within } from '../../shared/timeout.ts';
import type { ServiceContext } from '../context.ts';
import { callingOperator } from '../context.ts';
import { roundOf, settlementCells, transactionsPage, type After, type TransactionFilter } from './queries.ts';
import { waitForProjection } from '../../projections/runner.ts';
import { roundsProjection } from '../rounds/projection.ts';
import { bound, ceilMs, roundQuery, settlementQuery, transactionsQuery, type TransactionsQuery } from './schemas.ts';
import { buildStatement, statementCsv } from './statement.ts';

const DEFAULT_LIMIT = 100;

/** How long a list or statement waits for the read model to hold what the log held when it was asked. */
const CATCH_UP_MS = 5000;
/**
 * A transaction's recording time is taken just before its append, so an interval that ended a moment
 * ago may still gain one: a query whose `to` is less than this in the past waits until it is this much.
 */
const APPEND_GRACE_MS = 1000;
/** How long the log's head is waited for (part of CATCH_UP_MS). */
const HEAD_WAIT_MS = 2000;

/**
 * Waits until the rounds read model (which the lists and statements read) holds every event the log
 * held when asked, after the append grace of an interval that has just ended: so an interval wholly in
 * the past gives the same answer asked now and later (contract section 9), not one short of the events
 * the read model had yet to apply. Bounded: past CATCH_UP_MS it answers with what the read model holds.
 */
async function caughtUp(ctx: ServiceContext, to: string | undefined): Promise<void> {
  const grace = to === undefined ? 0 : ceilMs(to) + APPEND_GRACE_MS - Date.now();
  if (grace > 0 && grace <= APPEND_GRACE_MS) await new Promise((r) => setTimeout(r, grace));
  const waited = Date.now();
  // The read model answers even when the log cannot be read now (EventStoreDB down or slow): its reads are Postgres's.
  const head = await within(ctx.eventStore.headPosition(), HEAD_WAIT_MS, () => {
    throw new Error(`no answer in ${HEAD_WAIT_MS} ms`);
  }).catch((err: unknown) => {
    ctx.logger.warn({ err: err instanceof Error ? err.message : String(err) }, "the log's head could not be read: answered with what the rounds read model holds");
    return undefined;
  });
  if (head === undefined) return;
  if (!(await waitForProjection(ctx.pool, roundsProjection.name, head, Math.max(0, CATCH_UP_MS - (Date.now() - waited))))) {
    ctx.logger.warn({ projection: roundsProjection.name, head }, `the rounds read model did not reach the log's head in ${CATCH_UP_MS / 1000} s: answered with what it holds`);
  }
}

/** A query's identity, the operator's included, so a cursor is honoured only by the query that gave it. */
const queryKey = (operatorId: string, q: TransactionsQuery): string =>
  createHash('sha256')
    .update(JSON.stringify([operatorId, q.from ?? null, q.to ?? null, q.roundId ?? null, q.gameId ?? null, q.playerRef ?? null, q.status ?? null]))
    .digest('base64url')
    .slice(0, 16);

/**
 * The cursor: where the next page starts (a log position), the store whose positions those are, and
 * the query it belongs to. Opaque to operators (shared/http/cursor.ts).
 */
function encodeQueryCursor(cursors: Cursors, after: After, store: string, operatorId: string, q: TransactionsQuery): string {
  return cursors.encode({ v: 2, s: store, q: queryKey(operatorId, q), a: `${after.major}.${after.minor}` });
}

function decodeQueryCursor(cursors: Cursors, cursor: string, store: string, operatorId: string, q: TransactionsQuery): After {
  const c = cursors.decode(cursor);
  const at = typeof c.a === 'string' ? /^(\d{1,19})\.(\d{1,19})$/.exec(c.a) : null;
  if (c.v !== 2 || typeof c.s !== 'string' || typeof c.q !== 'string' || !at) throw notOurCursor();
  if (c.q !== queryKey(operatorId, q)) throw badRequest('cursor: it belongs to another query (keep from, to, roundId, gameId, playerRef and status as they were, and ask as the operator it was given to)');
  if (c.s !== store) throw badRequest('cursor: the history has moved to another event store since it was given; start again without a cursor');
  // A position is two bigints: a number past them is no cursor of ours (and no query of Postgres's).
  const MAX = 9_223_372_036_854_775_807n;
  if (BigInt(at[1]!) > MAX || BigInt(at[2]!) > MAX) throw notOurCursor();
  return { major: at[1]!, minor: at[2]! };
}

/**
 * The operator's settlement statement of the query's `[from, to)`, as JSON or, asked for text/csv, its
 * lines as CSV: the operator's route and the console's (for any operator) answer it alike.
 */
export async function sendStatement(ctx: ServiceContext, req: Request, res: Response, operatorId: string): Promise<void> {
  const q = parseOr400(settlementQuery, req.query, 'query');
  await caughtUp(ctx, q.to);
  const statement = buildStatement(q.from, q.to, await settlementCells(ctx.pool, operatorId, bound(q.from), bound(q.to)));
  if (preferredType(req.get('accept'), ['application/json', 'text/csv']) === 'text/csv') res.type('text/csv; charset=utf-8').send(statementCsv(statement));
  else res.type('application/json').send(bigJson(statement));
}

/** GET /v1/operator/transactions, /rounds/{roundId} and /reports/settlement (contract section 9). */
export function reconciliationRoutes(ctx: ServiceContext): Router {
  const router = Router();

  router.get('/transactions', async (req, res) => {
    const operator = callingOperator(ctx, req);
    const q = parseOr400(transactionsQuery, req.query, 'query');
    const after = q.cursor !== undefined ? decodeQueryCursor(ctx.cursors, q.cursor, ctx.eventStore.kind, operator.id, q) : undefined;
    // A query's first page reads what the log held when asked; the next pages follow on from it.
    if (after === undefined) await caughtUp(ctx, q.to);
    const filter: TransactionFilter = {
      ...(q.roundId !== undefined
        ? { roundId: q.roundId, gameId: q.gameId! }
        : { from: bound(q.from!), to: bound(q.to!) }),
      playerRef: q.playerRef,
      status: q.status,
    };
    const page = await transactionsPage(ctx.pool, operator.id, filter, q.limit ?? DEFAULT_LIMIT, after);
    res.json({ transactions: page.transactions, nextCursor: page.last ? encodeQueryCursor(ctx.cursors, page.last, ctx.eventStore.kind, operator.id, q) : null });
  });

  router.get('/rounds/:roundId', async (req, res) => {
    const operator = callingOperator(ctx, req);
    const roundId = String(req.params.roundId);
    if (roundId.length > 255) throw badRequest('roundId: expected at most 255 characters');
    const { gameId } = parseOr400(roundQuery, req.query, 'query');
    // What the log held when asked, as a list's first page: a round asked for right after its last
    // transaction was answered shows it.
    await caughtUp(ctx, undefined);
    const round = await roundOf(ctx.pool, operator.id, roundId, gameId);
    // Another operator's round, another game's round and no round at all look the same, as for replay.
    if (!round) throw notFound('round not found');
    // Exact however large (each amount is at most 2^53 - 1, their sum need not be), as the statement's sums.
    const sum = (type: string) => round.transactions.filter((t) => t.type === type && t.status === 'applied').reduce((s, t) => s + BigInt(t.amount), 0n);
    res.type('application/json').send(bigJson({
      roundId: round.roundId,
      gameId: round.gameId,
      providerId: round.providerId,
      playerRef: round.playerRef,
      currency: round.currency,
      status: round.status,
      openedAt: round.openedAt,
      ...(round.closedAt !== undefined ? { closedAt: round.closedAt } : {}),
      betMinor: sum('BET'),
      winMinor: sum('WIN'),
      refundMinor: sum('ROLLBACK'),
      transactions: round.transactions,
    }));
  });

  router.get('/reports/settlement', async (req, res) => {
    await sendStatement(ctx, req, res, callingOperator(ctx, req).id);
  });

  return router;
}
