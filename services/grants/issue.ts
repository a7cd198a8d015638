import type { Position } from '../../shared/eventstore/port.ts';
import { handleCommand, readState, type KnownState } from '../../shared/eventstore/command.ts';
import { providerTarget, signedCall, type OutboundResult } from '../../shared/http/outbound.ts';
import type { Logger } from '../../shared/logger.ts';
import { everyInterval } from '../../shared/periodic.ts';
import type { ServiceContext } from '../context.ts';
import { grantDecider, strayBatch, type Grant, type GrantState, type IssueCall, type ProviderOutcome } from './decider.ts';
import { grantStream } from './events.ts';
import { abandonedGrantCandidates } from './queries.ts';
import type { ProviderCancelRequest, ProviderGrantRequest } from './schemas.ts';

/**
 * Issuing a grant at its provider: the request's own call, and the take-over of a call a process abandoned
 * (it died between recording the request and recording the provider's answer). Used by the operator routes
 * (a repeat of the key finishes it) and by the reconciler role (it finishes those nobody repeats).
 */

/** What a failed provider call is recorded as. */
export function describeCall(r: OutboundResult): string {
  switch (r.kind) {
    case 'timeout':
      return 'provider did not answer in time';
    case 'unreachable':
      return `provider unreachable: ${r.error}`;
    case 'oversized':
      return 'provider reply over 1 MiB';
    case 'response':
      return `provider answered ${r.status}`;
    default: {
      const unknown: never = r;
      return String(unknown);
    }
  }
}

/** The provider's answer as the decider sees it: a 200 (with the externalRef it carries, if any), or a failure. */
function outcomeOf(r: OutboundResult): ProviderOutcome {
  if (r.kind !== 'response' || r.status !== 200) return { ok: false, error: describeCall(r) };
  try {
    const ref = (JSON.parse(r.body) as { externalRef?: unknown }).externalRef;
    return typeof ref === 'string' ? { ok: true, externalRef: ref } : { ok: true };
  } catch {
    return { ok: true };
  }
}

/** The provider's timeoutMs now (5 s for a provider gone from the catalog, whose call fails at once anyway). */
export function providerTimeoutMs(ctx: ServiceContext, providerId: string): number {
  return ctx.catalog.snapshot().providers.get(providerId)?.timeoutMs ?? 5000;
}

export interface Issued {
  state: GrantState;
  revision: number;
  position: Position | undefined;
}

/**
 * Calls the provider to issue the batch (requestRef = grant id, so a repeat is deduplicated there), bounded
 * by the call's recorded timeoutMs (not the catalog's now, which may have changed since), and records its
 * answer as `call`'s.
 */
export async function issueAtProvider(ctx: ServiceContext, known: KnownState<GrantState>, call: IssueCall): Promise<Issued> {
  const grant = known.state;
  if (grant.status === 'none') throw new Error('issue of a grant that does not exist');
  const provider = ctx.catalog.snapshot().providers.get(grant.providerId);
  const result: OutboundResult = provider
    ? await signedCall({
        ...providerTarget(provider),
        timeoutMs: call.timeoutMs ?? provider.timeoutMs,
        pathAndQuery: '/v1/free-spins/grants',
        method: 'POST',
        body: {
          requestRef: grant.id,
          operatorId: grant.operatorId,
          playerRef: grant.playerRef,
          gameId: grant.gameId,
          spins: grant.spins,
          betAmountMinor: grant.betAmountMinor,
          currency: grant.currency,
          ...(grant.expiresAt !== undefined ? { expiresAt: grant.expiresAt } : {}),
        } satisfies ProviderGrantRequest,
      })
    : { kind: 'unreachable', error: `provider ${grant.providerId} is not in the catalog` };
  const outcome = outcomeOf(result);
  const recorded = await handleCommand(ctx.eventStore, grantStream(grant.id), grantDecider, { type: 'RecordIssueOutcome', outcome, take: call.take, now: ctx.now() }, { known });
  const stray = strayBatch(outcome, recorded.next);
  if (stray === undefined) return { state: recorded.next, revision: recorded.revision, position: recorded.position };
  // Accepted, but not the grant's batch: the grant already failed (its operator was told, its key used up),
  // or holds another batch (a provider that does not deduplicate on requestRef). The batch is cancelled at
  // the provider, and both are kept in the grant's history (decideStrayBatch).
  const status = recorded.next.status;
  ctx.logger.warn({ grantId: grant.id, externalRef: stray, status }, `provider accepted a batch for a grant already ${status}: cancelling it at the provider`);
  const cancel = await cancelAtProvider(ctx, grant, stray);
  ctx.metrics.strayBatch(status, cancel.outcome.ok);
  if (!cancel.outcome.ok) {
    ctx.logger.error(
      { grantId: grant.id, externalRef: stray, status, error: cancel.outcome.error },
      status === 'failed'
        ? 'could not cancel a stray batch at the provider: the grant shows it, active, for its operator to cancel'
        : 'could not cancel a second batch of a grant at the provider: the player holds it; cancel it at the provider by hand',
    );
  }
  const kept = await handleCommand(ctx.eventStore, grantStream(grant.id), grantDecider, { type: 'RecordStrayBatch', externalRef: stray, cancel: cancel.outcome, now: ctx.now() }, {
    known: { state: recorded.next, revision: recorded.revision },
  });
  return { state: kept.next, revision: kept.revision, position: kept.position };
}

/** Cancels the batch `externalRef` of `grant` at its provider (API document 3.1): the answer as the decider sees it. */
export async function cancelAtProvider(ctx: ServiceContext, grant: Pick<Grant, 'id' | 'providerId'>, externalRef: string): Promise<{ outcome: ProviderOutcome }> {
  const provider = ctx.catalog.snapshot().providers.get(grant.providerId);
  const result: OutboundResult = provider
    ? await signedCall({
        ...providerTarget(provider),
        pathAndQuery: `/v1/free-spins/grants/${encodeURIComponent(externalRef)}/cancel`,
        method: 'POST',
        body: { requestRef: grant.id } satisfies ProviderCancelRequest,
      })
    : { kind: 'unreachable', error: `provider ${grant.providerId} is not in the catalog` };
  return { outcome: result.kind === 'response' && result.status === 200 ? { ok: true } : { ok: false, error: describeCall(result) } };
}

/**
 * Takes over the issue call of grant `id` if it is abandoned (the decider's TakeOverIssue: pending past its
 * call's deadline) and makes the call again. Undefined when there was nothing to take: the grant is not
 * pending, its call may still answer, or another taker (in any process) took it first.
 */
export async function takeOverIssue(ctx: ServiceContext, id: string, known?: KnownState<GrantState>, options: { knownProviderOnly?: boolean } = {}): Promise<Issued | undefined> {
  const stream = grantStream(id);
  const current = known ?? (await readState(ctx.eventStore, stream, grantDecider));
  if (current.state.status !== 'pending') return undefined;
  if (options.knownProviderOnly && !ctx.catalog.snapshot().providers.has(current.state.providerId)) return undefined;
  const timeoutMs = providerTimeoutMs(ctx, current.state.providerId);
  const taken = await handleCommand(ctx.eventStore, stream, grantDecider, { type: 'TakeOverIssue', timeoutMs, now: ctx.now() }, { known: current });
  if (taken.events.length === 0 || taken.next.status !== 'pending' || !taken.next.issue) return undefined;
  ctx.logger.info({ grantId: id, take: taken.next.issue.take }, 'abandoned grant: issue call taken over');
  return issueAtProvider(ctx, { state: taken.next, revision: taken.revision }, taken.next.issue);
}

/** The most abandoned grants a reconciler finishes at once (each is one provider call). */
const FINISHING_AT_ONCE = 8;

/**
 * One pass of the reconciler over grants left pending: each whose issue call is past its deadline is taken
 * over and finished (the decider decides which are due; the read model only lists candidates). Returns
 * how many it finished.
 */
export async function finishAbandonedGrants(ctx: ServiceContext, stopping: () => boolean = () => false): Promise<number> {
  const candidates = await abandonedGrantCandidates(ctx.pool, new Date(ctx.now().getTime() - 1000));
  let finished = 0;
  const next = candidates[Symbol.iterator]();
  const lane = async () => {
    // A stop ends the pass after the calls under way (each bounded by its provider's timeoutMs).
    for (let c = next.next(); !c.done && !stopping(); c = next.next()) {
      const id = c.value;
      try {
        // A provider this process's catalog does not know is left to one that does (or to a repeat).
        const issued = await takeOverIssue(ctx, id, undefined, { knownProviderOnly: true });
        if (issued) finished++;
      } catch (err) {
        ctx.logger.warn({ err, grantId: id }, 'could not finish an abandoned grant; the next pass tries again');
      }
    }
  };
  await Promise.all(Array.from({ length: FINISHING_AT_ONCE }, lane));
  return finished;
}

export interface GrantFinisher {
  pass(): Promise<number>;
  close(): Promise<void>;
}

/** The reconciler role's finishing of abandoned grants, every `intervalSeconds`. */
export function startGrantFinisher(ctx: ServiceContext, intervalSeconds: number, logger: Logger): GrantFinisher {
  let stopping = false;
  const periodic = everyInterval(intervalSeconds * 1000, async () => {
    const finished = await finishAbandonedGrants(ctx, () => stopping).catch((err: unknown) => {
      logger.error({ err }, 'grant finisher pass failed');
      return 0;
    });
    if (finished > 0) logger.info({ finished }, 'abandoned grants finished');
  });
  return {
    pass: () => finishAbandonedGrants(ctx, () => stopping),
    close: async () => {
      stopping = true;
      await periodic.stop();
    },
  };
}
