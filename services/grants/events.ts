import { createHash } from 'node:crypto';
import type { DomainEvent } from '../../shared/decider.ts';

export type GrantRequested = DomainEvent<
  'GrantRequested',
  {
    grantId: string;
    operatorId: string;
    providerId: string;
    gameId: string;
    playerRef: string;
    spins: number;
    betAmountMinor: number;
    currency: string;
    idempotencyKey: string;
    campaignId?: string;
    expiresAt?: string;
    requestedAt: string;
    /**
     * The bound on the issue call this request makes (its provider's timeoutMs then): the grant is
     * abandoned if still pending once it and ISSUE_MARGIN_MS have passed (absent on grants requested
     * before it was recorded: the provider's timeoutMs now stands in).
     */
    issueTimeoutMs?: number;
  }
>;
/**
 * A request found the grant abandoned (still pending past its issue call's deadline: the process calling
 * the provider died) and took the call over: it calls the provider again with the same requestRef, bounded
 * by `timeoutMs`, and until `takenAt` + `timeoutMs` + ISSUE_MARGIN_MS nobody else does. Appended at the
 * revision the taker read, so of takers racing across processes one takes it.
 */
export type GrantIssueTaken = DomainEvent<'GrantIssueTaken', { takenAt: string; timeoutMs: number }>;
export type GrantActivated = DomainEvent<'GrantActivated', { externalRef: string; activatedAt: string }>;
export type GrantFailed = DomainEvent<'GrantFailed', { lastError: string; failedAt: string }>;
/** `call`: the cancel call it answers (its GrantCancelRequested's requestedAt; absent before that event was recorded). */
export type GrantCancelled = DomainEvent<'GrantCancelled', { cancelledAt: string; call?: string }>;
/**
 * An operator's cancel is calling the provider, bounded by `timeoutMs`: appended at the revision the
 * cancel read, so of cancels racing across processes one calls, and the others wait for its outcome
 * (GrantCancelled or GrantCancelFailed) until `requestedAt` + `timeoutMs` + ISSUE_MARGIN_MS, after which
 * the call counts as abandoned and a new cancel may call. The grant as operators read it does not change.
 */
export type GrantCancelRequested = DomainEvent<'GrantCancelRequested', { requestedAt: string; timeoutMs: number }>;
/**
 * The provider accepted a batch for a grant already recorded `failed` (a call given up as abandoned, whose
 * process stalled and then read the acceptance): the grant stays failed, as its operator was told, and the
 * service cancelled the stray batch at the provider (`cancelled`; `error` when that cancel failed).
 */
export type GrantAcceptedAfterFailure = DomainEvent<'GrantAcceptedAfterFailure', { externalRef: string; cancelled: boolean; error?: string; at: string }>;
/**
 * The provider accepted a second batch for a grant already active or cancelled with another one (a
 * provider that does not deduplicate on requestRef, answering both an abandoned call and its taker's):
 * the grant keeps its own batch, and the service cancelled this one at the provider (`cancelled`; `error`
 * when that cancel failed, and the batch is live at the provider).
 */
export type GrantExtraBatch = DomainEvent<'GrantExtraBatch', { externalRef: string; cancelled: boolean; error?: string; at: string }>;
export type GrantCancelFailed = DomainEvent<'GrantCancelFailed', { error: string; failedAt: string; call?: string }>;

export type GrantEvent =
  | GrantRequested
  | GrantIssueTaken
  | GrantActivated
  | GrantFailed
  | GrantCancelRequested
  | GrantCancelled
  | GrantCancelFailed
  | GrantAcceptedAfterFailure
  | GrantExtraBatch;

export const GRANT_EVENT_TYPES: ReadonlySet<string> = new Set<GrantEvent['type']>([
  'GrantRequested',
  'GrantIssueTaken',
  'GrantActivated',
  'GrantFailed',
  'GrantCancelRequested',
  'GrantCancelled',
  'GrantCancelFailed',
  'GrantAcceptedAfterFailure',
  'GrantExtraBatch',
]);

export const grantStream = (grantId: string): string => `grant|${grantId}`;

const GRANT_NAMESPACE = 'seamless-wallet-ledger/free-spin-grant';

/**
 * The grant id follows from (operator, idempotencyKey) (a name-based UUID, RFC 4122 version 5 layout),
 * so the grant's own stream is the idempotency record: the first request creates it, every repeat
 * finds it, across processes and restarts.
 */
export function grantIdFor(operatorId: string, idempotencyKey: string): string {
  const h = createHash('sha1').update(`${GRANT_NAMESPACE}\n${operatorId}\n${idempotencyKey}`).digest();
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const hex = h.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** A grant's stream names no operator: its first event (GrantRequested) does. */
export const isGrantStream = (streamId: string): boolean => streamId.startsWith('grant|');
export const grantRequestOperator = (type: string, data: unknown): string | undefined =>
  type === ('GrantRequested' satisfies GrantEvent['type']) ? (data as GrantRequested['data']).operatorId : undefined;
