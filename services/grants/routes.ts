import { Router, type Request } from 'express';
import { z } from 'zod';
import { amountMinor, spinCount } from '../../shared/bounds.ts';
import { grantsProjection } from './projection.ts';
import { listGrants } from './queries.ts';
import { waitForProjection } from '../../projections/runner.ts';
import type { Position } from '../../shared/eventstore/port.ts';
import { cancelUnderWay, grantDecider, grantOf, ISSUE_MARGIN_MS, issueDeadline, type Grant, type GrantState, type ProviderOutcome } from './decider.ts';
import { cancelAtProvider, issueAtProvider, providerTimeoutMs, takeOverIssue } from './issue.ts';
import { grantIdFor, grantStream } from './events.ts';
import { AppError, notFound } from '../../shared/errors.ts';
import { handleCommand, readState, type KnownState } from '../../shared/eventstore/command.ts';
import { parseOr400 } from '../../shared/http/validate.ts';
import type { ServiceContext } from '../context.ts';
import { callingOperator } from '../context.ts';

export const issueGrantBody = z.strictObject({
  playerRef: z.string().min(1).max(255),
  idempotencyKey: z.string().min(1).max(255),
  campaignId: z.string().min(1).max(200).optional(),
  gameId: z.string().min(1).max(200).optional(),
  spins: spinCount().optional(),
  betAmountMinor: amountMinor().optional(),
  currency: z.string().optional(),
  expiresAt: z.iso.datetime({ offset: true }).optional(),
});
type IssueGrantBody = z.infer<typeof issueGrantBody>;
// Read alone first (a repeat answers whatever the rest of the body says now), so the rest is not checked here.
const idempotencyKeyOnly = issueGrantBody.pick({ idempotencyKey: true }).loose();

/** The request fields a campaign supplies: with campaignId, the API document (2.7) says the request's are ignored. */
const CAMPAIGN_TERMS = ['gameId', 'spins', 'betAmountMinor', 'currency'] as const;

/**
 * The issue body, validated. With a campaignId the request's game, spins, stake and currency are not read
 * at all (API document 2.7), so they are dropped before validation: whatever they hold (0, absent, out of
 * range, of another type) refuses nothing and reaches nobody.
 */
export function parseIssueBody(raw: unknown): IssueGrantBody {
  if (typeof raw === 'object' && raw !== null && !Array.isArray(raw) && (raw as Record<string, unknown>).campaignId !== undefined) {
    const rest: Record<string, unknown> = { ...(raw as Record<string, unknown>) };
    for (const field of CAMPAIGN_TERMS) delete rest[field];
    return parseOr400(issueGrantBody, rest);
  }
  return parseOr400(issueGrantBody, raw);
}

/**
 * A grant's id in a path: any UUID as RFC 9562 writes one (8-4-4-4-12 hex digits, either case), not only
 * the version 4 ids the service gives grants, so that a well-formed id the client holds is looked up
 * (found in whatever case it is written, or 404) rather than refused as malformed (400).
 */
export const grantIdParam = z.guid({ message: 'expected a UUID' }).transform((id) => id.toLowerCase());
export const listQuery = z.strictObject({ playerRef: z.string().min(1).max(255).optional() });

export function grantRoutes(ctx: ServiceContext): Router {
  const router = Router();

  const load = async (id: string) => readState(ctx.eventStore, grantStream(id), grantDecider);

  /** The caller's grant, or 404: another operator's grant behaves as nonexistent. */
  const ownGrant = async (req: Request): Promise<{ grant: Grant; revision: number; state: GrantState }> => {
    const operator = callingOperator(ctx, req);
    const id = parseOr400(grantIdParam, req.params.id, 'id');
    const { state, revision } = await load(id);
    const grant = grantOf(state);
    if (!grant || grant.operatorId !== operator.id) throw notFound('grant not found');
    return { grant, revision, state };
  };

  /**
   * Read-your-writes for lists: answer once the grants read model has applied this change, or the
   * grant's last event when the answer is what another request wrote (bounded: without a running
   * projector the answer is not held back for long).
   */
  const visible = async (next: GrantState, position: Position | undefined): Promise<Grant> => {
    const state = grantOf(next);
    if (!state) throw new Error('grant state missing after append');
    if (position !== undefined) await waitForProjection(ctx.pool, grantsProjection.name, position, 3000);
    return state;
  };

  /**
   * A repeat of a key: the original grant, once it has left pending. A grant still pending past its issue
   * call's deadline was abandoned by a process that died mid-call; this request takes the call over
   * (takeOverIssue: one taker across processes; the provider deduplicates on requestRef, so the batch is
   * never issued twice). Waits at most one more call's length past the deadline first seen, then answers
   * the grant as it stands (pending while another taker's call is under way); `untilSettled`: until it
   * has left pending (the request that created it, whose own call was taken over), taking the call over
   * itself whenever it is abandoned again, unless its client has gone (`gone`: undefined, nobody to
   * answer; the reconciler role, or a repeat, finishes the grant).
   */
  async function settled(id: string): Promise<Grant>;
  async function settled(id: string, untilSettled: true, gone: () => boolean): Promise<Grant | undefined>;
  async function settled(id: string, untilSettled = false, gone: () => boolean = () => false): Promise<Grant | undefined> {
    let waitUntil: number | undefined;
    for (;;) {
      if (gone()) return undefined;
      const known = await load(id);
      const { state } = known;
      if (state.status === 'none') throw new AppError(500, 'grant vanished');
      if (state.status !== 'pending') return visible(state, known.position);
      const timeoutMs = providerTimeoutMs(ctx, state.providerId);
      const due = issueDeadline(state, timeoutMs)! - ctx.now().getTime();
      waitUntil ??= Date.now() + Math.max(0, due) + timeoutMs + ISSUE_MARGIN_MS;
      if (due <= 0) {
        const issued = await takeOverIssue(ctx, id, known);
        if (issued) return visible(issued.state, issued.position);
      }
      if (!untilSettled && Date.now() >= waitUntil) return visible(state, known.position);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  router.post('/free-spins/grants', async (req, res) => {
    const operator = callingOperator(ctx, req);
    // The response closes before it is written only when the client has gone.
    let clientGone = false;
    res.once('close', () => {
      clientGone = true;
    });
    // The key is the identity: a repeat gets the original grant, whatever its status and whatever the body
    // says now, even what a new request would be refused for; so the key alone is read first.
    const { idempotencyKey } = parseOr400(idempotencyKeyOnly, req.body);
    const id = grantIdFor(operator.id, idempotencyKey);
    if ((await load(id)).state.status !== 'none') {
      res.status(200).json(await settled(id));
      return;
    }
    const body = parseIssueBody(req.body);
    // Appended only if the grant's stream does not exist: of concurrent requests with one key, one creates it.
    const created = await handleCommand(ctx.eventStore, grantStream(id), grantDecider, {
      type: 'RequestGrant',
      grantId: id,
      operatorId: operator.id,
      request: body,
      catalog: ctx.catalog.snapshot(),
      now: ctx.now(),
    });
    if (created.events.length === 0 || created.next.status === 'none') {
      res.status(200).json(await settled(id));
      return;
    }
    const issued = await issueAtProvider(ctx, { state: created.next, revision: created.revision }, created.next.issue ?? { take: 0, at: created.next.createdAt });
    // Still pending: this call was taken over meanwhile (this process stalled past its deadline), and the
    // taker's call decides; its outcome is the answer.
    const grant = issued.state.status === 'pending' ? await settled(id, true, () => clientGone) : await visible(issued.state, issued.position);
    if (grant === undefined) {
      ctx.logger.info({ grantId: id }, 'grant request gone before its taken-over call settled: the reconciler or a repeat of the key finishes the grant');
      return;
    }
    if (grant.status === 'failed') throw new AppError(502, `provider call failed: ${grant.lastError ?? 'unknown error'}`);
    res.status(201).json(grant);
  });

  router.get('/free-spins/grants', async (req, res) => {
    const operator = callingOperator(ctx, req);
    const { playerRef } = parseOr400(listQuery, req.query, 'query');
    res.json(await listGrants(ctx.pool, operator.id, playerRef));
  });

  router.get('/free-spins/grants/:id', async (req, res) => {
    res.json((await ownGrant(req)).grant);
  });

  /**
   * Cancels an active grant with one provider call at a time (RequestCancel records the call first). A
   * cancel that finds another's call under way waits for its outcome: cancelled, it is this one's answer
   * too; still active (that call failed, or its process died mid-call), this cancel calls in turn.
   */
  const cancelGrant = async (id: string, known: KnownState<GrantState>): Promise<{ next: GrantState; position: Position | undefined; outcome: ProviderOutcome }> => {
    const stream = grantStream(id);
    for (let current = known; ; ) {
      const providerId = current.state.status === 'none' ? '' : current.state.providerId;
      // Refused (not active) as the decider says; nothing appended: another cancel's call is under way.
      const requested = await handleCommand(ctx.eventStore, stream, grantDecider, { type: 'RequestCancel', timeoutMs: providerTimeoutMs(ctx, providerId), now: ctx.now() }, { known: current });
      const [recordedCall] = requested.events;
      const grant = grantOf(requested.next);
      if (recordedCall?.type === 'GrantCancelRequested' && grant) {
        const call = recordedCall.data.requestedAt;
        const { outcome } = await cancelAtProvider(ctx, grant, grant.externalRef ?? '');
        const recorded = await handleCommand(ctx.eventStore, stream, grantDecider, { type: 'RecordCancelOutcome', outcome, call, now: ctx.now() }, { known: { state: requested.next, revision: requested.revision } });
        return { next: recorded.next, position: recorded.position, outcome };
      }
      current = { state: requested.next, revision: requested.revision };
      let position: Position | undefined;
      while (cancelUnderWay(current.state, ctx.now())) {
        await new Promise((r) => setTimeout(r, 50));
        ({ position, ...current } = await load(id));
      }
      // The other call's outcome is this cancel's answer: given once the lists show it too.
      if (current.state.status === 'cancelled') return { next: current.state, position, outcome: { ok: true } };
    }
  };

  router.post('/free-spins/grants/:id/cancel', async (req, res) => {
    // No body (API document 2.7); `{}` is taken too, anything more is refused like any other body's unknown field.
    if (req.body !== undefined) parseOr400(z.strictObject({}), req.body);
    const { grant, revision, state } = await ownGrant(req);
    const { next, position, outcome } = await cancelGrant(grant.id, { state, revision });
    const updated = await visible(next, position);
    if (!outcome.ok && updated.status === 'active') throw new AppError(502, `provider cancel failed: ${outcome.error}; the grant stays active, retry the cancel`);
    res.json(updated);
  });

  return router;
}
