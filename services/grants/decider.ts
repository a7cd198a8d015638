import { CURRENCY_PATTERN } from '../../shared/bounds.ts';
import { campaignOpen, offersCurrency } from '../../shared/catalog/schema.ts';
import type { CatalogSnapshot } from '../../shared/catalog/store.ts';
import type { Decider, Decision } from '../../shared/decider.ts';
import type { GrantEvent, GrantRequested } from './events.ts';

/**
 * A free-spin grant (API document 2.7, 3.1, 4.1.5): issued once per (operator, idempotencyKey), issued at
 * the provider, cancelled while active. Its stream is its idempotency record.
 */

export const GRANT_STATUSES = ['pending', 'active', 'cancelled', 'failed'] as const;
export type GrantStatus = (typeof GRANT_STATUSES)[number];

/** The grant as operators see it (API document 2.7, GrantResponseBody): its request's terms, and what became of it. */
export type Grant = Omit<GrantRequested['data'], 'grantId' | 'requestedAt'> & {
  id: string;
  externalRef?: string;
  status: GrantStatus;
  lastError?: string;
  createdAt: string;
  updatedAt: string;
};

/**
 * The issue call a pending grant waits for: the request's own (take 0), or a take-over's (GrantIssueTaken,
 * numbered from 1), made at `at` and bounded by `timeoutMs` (absent: a grant requested before the bound
 * was recorded). Kept in the decider's state only: the grant as operators read it (grantOf) leaves it out,
 * though the grant's history (GrantIssueTaken) shows the take.
 */
export interface IssueCall {
  take: number;
  at: string;
  timeoutMs?: number;
}

/** The cancel call an active grant's cancels wait for (GrantCancelRequested): made at `at`, bounded by `timeoutMs`. */
export interface CancelCall {
  at: string;
  timeoutMs: number;
}

/** none: the key was never used. Otherwise the grant, whose `status` tells pending, active, cancelled or failed. */
export type GrantState = { status: 'none' } | (Grant & { issue?: IssueCall; cancel?: CancelCall });

/** The grant as operators see it (without the decider's own bookkeeping), or undefined for none. */
export function grantOf(s: GrantState): Grant | undefined {
  if (s.status === 'none') return undefined;
  const { issue: _issue, cancel: _cancel, ...grant } = s;
  return grant;
}

/** Whether a cancel's provider call may still answer at `now` (its bound plus ISSUE_MARGIN_MS not past): other cancels wait for it. */
export function cancelUnderWay(state: GrantState, now: Date): boolean {
  return state.status === 'active' && state.cancel !== undefined && now.getTime() <= Date.parse(state.cancel.at) + state.cancel.timeoutMs + ISSUE_MARGIN_MS;
}

/**
 * How long past its bound an issue call's process is given to record the provider's answer before the
 * grant counts as abandoned: the call's own timeoutMs plus this.
 */
export const ISSUE_MARGIN_MS = 2000;

/**
 * When a pending grant's issue call is abandoned if its outcome is still not recorded (epoch ms): the call's
 * time plus its bound (`fallbackTimeoutMs`, the provider's timeoutMs now, for a grant that recorded none)
 * plus ISSUE_MARGIN_MS. Undefined when the grant is not pending.
 */
export function issueDeadline(state: GrantState, fallbackTimeoutMs: number): number | undefined {
  if (state.status !== 'pending') return undefined;
  const call = state.issue ?? { take: 0, at: state.createdAt };
  return Date.parse(call.at) + (call.timeoutMs ?? fallbackTimeoutMs) + ISSUE_MARGIN_MS;
}

/** What an operator asks for, after the body's shape was checked (with a campaign, the request's terms were dropped). */
export interface GrantRequest {
  playerRef: string;
  idempotencyKey: string;
  campaignId?: string | undefined;
  gameId?: string | undefined;
  spins?: number | undefined;
  betAmountMinor?: number | undefined;
  currency?: string | undefined;
  expiresAt?: string | undefined;
}

export type ProviderOutcome = { ok: true; externalRef?: string } | { ok: false; error: string };

export type GrantCommand =
  | { type: 'RequestGrant'; grantId: string; operatorId: string; request: GrantRequest; catalog: CatalogSnapshot; now: Date }
  /** Take over the issue call of a grant abandoned mid-call; `timeoutMs`: the provider's timeoutMs now, which bounds the new call. */
  | { type: 'TakeOverIssue'; timeoutMs: number; now: Date }
  /** `take`: which issue call answered (IssueCall.take of the call made). */
  | { type: 'RecordIssueOutcome'; outcome: ProviderOutcome; take: number; now: Date }
  /** A batch accepted that is not the grant's (strayBatch), and the answer to its cancel at the provider. */
  | { type: 'RecordStrayBatch'; externalRef: string; cancel: ProviderOutcome; now: Date }
  /** An operator's cancel, before the provider is called; `timeoutMs`: the provider's timeoutMs now, which bounds the call. */
  | { type: 'RequestCancel'; timeoutMs: number; now: Date }
  /** `call`: the cancel call it answers (its GrantCancelRequested's requestedAt). */
  | { type: 'RecordCancelOutcome'; outcome: ProviderOutcome; call: string; now: Date };

export type GrantRefusal =
  | { kind: 'campaign-not-found' }
  | { kind: 'campaign-inactive' }
  | { kind: 'grant-term-missing'; field: 'gameId' | 'spins' | 'currency' }
  | { kind: 'game-not-found' }
  | { kind: 'game-not-visible' }
  | { kind: 'currency-format' }
  | { kind: 'grant-currency-unsupported'; currency: string }
  | { kind: 'grant-not-cancellable'; status: GrantStatus | 'none' };

/**
 * What the grant is for: the campaign's terms when one is named (API document 2.7: the request's are
 * ignored), else the request's; then the game must exist, be visible to the operator, and take the currency.
 */
function decideRequest(cmd: Extract<GrantCommand, { type: 'RequestGrant' }>, state: GrantState): Decision<GrantEvent, GrantRefusal> {
  // The key is the identity: a repeat gets the original grant, whatever the body says now.
  if (state.status !== 'none') return [];
  const { request: r, catalog } = cmd;
  let terms: { gameId: string; spins: number; betAmountMinor: number; currency: string };
  if (r.campaignId !== undefined) {
    const campaign = catalog.campaigns.get(r.campaignId);
    if (!campaign) return { kind: 'campaign-not-found' };
    if (!campaignOpen(campaign, cmd.now)) return { kind: 'campaign-inactive' };
    terms = { gameId: campaign.gameId, spins: campaign.spins, betAmountMinor: campaign.betAmountMinor, currency: campaign.currency };
  } else {
    if (r.gameId === undefined) return { kind: 'grant-term-missing', field: 'gameId' };
    if (r.spins === undefined) return { kind: 'grant-term-missing', field: 'spins' };
    if (r.currency === undefined) return { kind: 'grant-term-missing', field: 'currency' };
    terms = { gameId: r.gameId, spins: r.spins, betAmountMinor: r.betAmountMinor ?? 0, currency: r.currency };
  }
  const entry = catalog.games.get(terms.gameId);
  if (!entry) return { kind: 'game-not-found' };
  if (!catalog.operators.get(cmd.operatorId)?.visibleGames.includes(terms.gameId)) return { kind: 'game-not-visible' };
  if (!CURRENCY_PATTERN.test(terms.currency)) return { kind: 'currency-format' };
  if (!offersCurrency(entry.provider, terms.currency)) return { kind: 'grant-currency-unsupported', currency: terms.currency };
  const data: GrantRequested['data'] = {
    grantId: cmd.grantId,
    operatorId: cmd.operatorId,
    providerId: entry.provider.id,
    gameId: terms.gameId,
    playerRef: r.playerRef,
    spins: terms.spins,
    betAmountMinor: terms.betAmountMinor,
    currency: terms.currency,
    idempotencyKey: r.idempotencyKey,
    ...(r.campaignId !== undefined ? { campaignId: r.campaignId } : {}),
    ...(r.expiresAt !== undefined ? { expiresAt: r.expiresAt } : {}),
    requestedAt: cmd.now.toISOString(),
    issueTimeoutMs: entry.provider.timeoutMs,
  };
  return [{ type: 'GrantRequested', data }];
}

/**
 * A pending grant whose issue call is past its deadline (issueDeadline) is taken over: one taker at a
 * time, since the take is appended at the revision it was decided on and moves the deadline. Nothing for a
 * grant not pending, or whose call may still answer.
 */
function decideTakeOver(cmd: Extract<GrantCommand, { type: 'TakeOverIssue' }>, state: GrantState): GrantEvent[] {
  const deadline = issueDeadline(state, cmd.timeoutMs);
  if (deadline === undefined || cmd.now.getTime() < deadline) return [];
  return [{ type: 'GrantIssueTaken', data: { takenAt: cmd.now.toISOString(), timeoutMs: cmd.timeoutMs } }];
}

/** A 200 with an externalRef: the provider accepted the batch. */
const accepted = (o: ProviderOutcome): o is { ok: true; externalRef: string } => o.ok && o.externalRef !== undefined && o.externalRef.length > 0;

/**
 * The provider's answer to an issue call, for a pending grant: a batch the provider accepted (a 200 with
 * an externalRef) makes it active, from any call (a superseded one's too: the provider accepted it). A
 * failure ends it only from the call now awaited (IssueCall.take); a superseded call's failure says
 * nothing of the call that replaced it. Nothing for a grant that left pending: `failed` is final (its
 * operator was told, and its key is used up; a batch accepted too late is cancelled at the provider,
 * strayBatch, decideStrayBatch), and an active grant keeps its first batch. A 200 without an
 * externalRef is a failure.
 */
function decideIssueOutcome(cmd: Extract<GrantCommand, { type: 'RecordIssueOutcome' }>, state: GrantState): GrantEvent[] {
  if (state.status !== 'pending') return [];
  const at = cmd.now.toISOString();
  const o = cmd.outcome;
  if (accepted(o)) return [{ type: 'GrantActivated', data: { externalRef: o.externalRef, activatedAt: at } }];
  if (cmd.take !== (state.issue?.take ?? 0)) return [];
  return [{ type: 'GrantFailed', data: { lastError: o.ok ? 'provider answered 200 without an externalRef' : o.error, failedAt: at } }];
}

/**
 * Whether an issue call's answer is a batch the provider accepted that the grant, as recorded after it,
 * does not hold: a stray batch the service must cancel at the provider. Either the grant is already
 * `failed` (a call given up as abandoned whose process stalled, then read the acceptance), or it is
 * `active` or `cancelled` with another batch (a provider that does not deduplicate on requestRef accepted
 * both the abandoned call and its taker's). The batch the grant holds, answered again, is not stray.
 */
export function strayBatch(outcome: ProviderOutcome, after: GrantState): string | undefined {
  if (after.status === 'none' || after.status === 'pending' || !accepted(outcome)) return undefined;
  return outcome.externalRef === after.externalRef ? undefined : outcome.externalRef;
}

/**
 * A stray batch (strayBatch), and whether its cancel at the provider succeeded: kept in the grant's
 * history. For a failed grant: cancelled, the grant stays failed, as its operator was told; not
 * cancelled, the provider holds a live batch, and the grant shows it: active with its externalRef (the one
 * way a failed grant changes), so that its operator sees the spins the player has and can cancel them
 * with the cancel route. For a grant active or cancelled with another batch, the grant keeps its own
 * (GrantExtraBatch): a second batch of one grant has no place in it, so one the provider would not cancel
 * is left to the platform team (the service logs it as an error).
 */
function decideStrayBatch(cmd: Extract<GrantCommand, { type: 'RecordStrayBatch' }>, state: GrantState): GrantEvent[] {
  if (strayBatch({ ok: true, externalRef: cmd.externalRef }, state) === undefined) return [];
  const c = cmd.cancel;
  const at = cmd.now.toISOString();
  const outcome = c.ok ? { externalRef: cmd.externalRef, cancelled: true, at } : { externalRef: cmd.externalRef, cancelled: false, error: c.error, at };
  if (state.status !== 'failed') return [{ type: 'GrantExtraBatch', data: outcome }];
  if (c.ok) return [{ type: 'GrantAcceptedAfterFailure', data: outcome }];
  return [
    { type: 'GrantAcceptedAfterFailure', data: outcome },
    { type: 'GrantActivated', data: { externalRef: cmd.externalRef, activatedAt: at } },
  ];
}

/** Only an active grant can be cancelled (asked before the provider is called). */
export function cancelRefusal(state: GrantState): GrantRefusal | undefined {
  return state.status === 'active' ? undefined : { kind: 'grant-not-cancellable', status: state.status };
}

/**
 * A cancel of an active grant calls the provider once at a time: recorded before the call (at the
 * revision read, so one of racing cancels records it), nothing while another cancel's call may still
 * answer (cancelUnderWay: the caller waits for its outcome).
 */
function decideRequestCancel(cmd: Extract<GrantCommand, { type: 'RequestCancel' }>, state: GrantState): Decision<GrantEvent, GrantRefusal> {
  const refusal = cancelRefusal(state);
  if (refusal) return refusal;
  if (cancelUnderWay(state, cmd.now)) return [];
  return [{ type: 'GrantCancelRequested', data: { requestedAt: cmd.now.toISOString(), timeoutMs: cmd.timeoutMs } }];
}

/** The provider's answer to the cancel call: cancelled, or still active with the failure kept in the history (API document 3.1). */
function decideCancelOutcome(cmd: Extract<GrantCommand, { type: 'RecordCancelOutcome' }>, state: GrantState): GrantEvent[] {
  if (cancelRefusal(state)) return [];
  const at = cmd.now.toISOString();
  return cmd.outcome.ok
    ? [{ type: 'GrantCancelled', data: { cancelledAt: at, call: cmd.call } }]
    : [{ type: 'GrantCancelFailed', data: { error: cmd.outcome.error, failedAt: at, call: cmd.call } }];
}

function evolve(state: GrantState, event: GrantEvent): GrantState {
  switch (event.type) {
    case 'GrantRequested': {
      const d = event.data;
      return {
        id: d.grantId,
        ...(d.campaignId !== undefined ? { campaignId: d.campaignId } : {}),
        operatorId: d.operatorId,
        providerId: d.providerId,
        gameId: d.gameId,
        playerRef: d.playerRef,
        spins: d.spins,
        betAmountMinor: d.betAmountMinor,
        currency: d.currency,
        status: 'pending',
        idempotencyKey: d.idempotencyKey,
        ...(d.expiresAt !== undefined ? { expiresAt: d.expiresAt } : {}),
        createdAt: d.requestedAt,
        updatedAt: d.requestedAt,
        issue: { take: 0, at: d.requestedAt, ...(d.issueTimeoutMs !== undefined ? { timeoutMs: d.issueTimeoutMs } : {}) },
      };
    }
    case 'GrantIssueTaken':
      // The grant as operators read it does not change: still pending, its call made again.
      return state.status === 'none' ? state : { ...state, issue: { take: (state.issue?.take ?? 0) + 1, at: event.data.takenAt, timeoutMs: event.data.timeoutMs } };
    case 'GrantActivated': {
      if (state.status === 'none') return state;
      // No call is awaited any more; and from failed (a stray batch its provider would not cancel), the failure no longer describes the grant.
      const { issue: _issue, lastError: _lastError, ...rest } = state;
      return { ...rest, status: 'active', externalRef: event.data.externalRef, updatedAt: event.data.activatedAt };
    }
    case 'GrantAcceptedAfterFailure':
    case 'GrantExtraBatch':
      // The grant keeps its status and its own batch (failed, as its operator was told); the stray batch is in its history.
      return state;
    case 'GrantFailed': {
      if (state.status === 'none') return state;
      const { issue: _issue, ...rest } = state;
      return { ...rest, status: 'failed', lastError: event.data.lastError, updatedAt: event.data.failedAt };
    }
    case 'GrantCancelRequested':
      // The grant as operators read it does not change while its cancel calls the provider.
      return state.status === 'none' ? state : { ...state, cancel: { at: event.data.requestedAt, timeoutMs: event.data.timeoutMs } };
    case 'GrantCancelled': {
      if (state.status === 'none') return state;
      const { cancel: _cancel, ...rest } = state;
      return { ...rest, status: 'cancelled', updatedAt: event.data.cancelledAt };
    }
    case 'GrantCancelFailed': {
      // The grant stays active (API document 3.1); the failure is kept in the history, and updatedAt says when it was last acted on.
      // A call given up as abandoned that answers late leaves the marker of the call made since (its own outcome will follow).
      if (state.status === 'none') return state;
      const { cancel, ...rest } = state;
      const another = cancel !== undefined && event.data.call !== undefined && event.data.call !== cancel.at;
      return { ...rest, ...(another ? { cancel } : {}), updatedAt: event.data.failedAt };
    }
    default: {
      const unknown: never = event;
      return unknown;
    }
  }
}

export const grantDecider: Decider<GrantCommand, GrantState, GrantEvent, GrantRefusal> = {
  initialState: () => ({ status: 'none' }),
  evolve,
  decide(command, state) {
    switch (command.type) {
      case 'RequestGrant':
        return decideRequest(command, state);
      case 'TakeOverIssue':
        return decideTakeOver(command, state);
      case 'RecordIssueOutcome':
        return decideIssueOutcome(command, state);
      case 'RecordStrayBatch':
        return decideStrayBatch(command, state);
      case 'RequestCancel':
        return decideRequestCancel(command, state);
      case 'RecordCancelOutcome':
        return decideCancelOutcome(command, state);
      default: {
        const unknown: never = command;
        return unknown;
      }
    }
  },
};
