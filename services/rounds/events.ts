import type { DomainEvent } from '../../shared/decider.ts';

/** The transaction types (API document 2.10); ADJUSTMENT is the platform's own (admin corrections). */
export const TRANSACTION_TYPES = ['BET', 'WIN', 'ROLLBACK', 'ADJUSTMENT'] as const;
export type TransactionType = (typeof TRANSACTION_TYPES)[number];

/** The body the operator's wallet receives (API document 2.10); stored once and resent identically on every retry. */
export interface TransactionRequest {
  transactionId: string;
  sessionToken: string;
  type: TransactionType;
  roundId: string;
  roundComplete: boolean;
  originalTransactionId?: string;
  playerRef: string;
  amount: number;
  currency: string;
  gameId: string;
  direction?: 'DEBIT' | 'CREDIT';
  metadata?: Record<string, unknown>;
}

/** What the wallet answered with 200 (API document 2.12), parsed, plus its exact text for verbatim replies. */
export interface WalletReply {
  status: 'OK' | 'DECLINED';
  balance: number;
  body: string;
}

/** Who submitted it: a provider, the stale-round reconciler, or the platform admin (adjustments). */
export const ORIGINS = ['provider', 'reconciler', 'admin'] as const;
export type Origin = (typeof ORIGINS)[number];

/** Write-ahead: recorded before the wallet is called, so a crash before the outcome leaves something to act on. */
export type TransactionRecorded = DomainEvent<
  'TransactionRecorded',
  {
    providerId: string;
    operatorId: string;
    origin: Origin;
    request: TransactionRequest;
    /** The exact JSON text sent to the wallet on every attempt (byte-identical retries). */
    walletBody: string;
    contentHash: string;
    recordedAt: string;
  }
>;

/** The wallet answered 200 with a valid reply: applied (OK), declined (DECLINED on a BET) or invalid (DECLINED on anything else). */
export type TransactionSettled = DomainEvent<
  'TransactionSettled',
  {
    transactionId: string;
    outcome: 'applied' | 'declined' | 'invalid';
    reply: WalletReply;
    attempt: number;
    settledAt: string;
    /** How long the wallet call took (recorded since the console; absent on older events). */
    durationMs?: number;
  }
>;

/**
 * An attempt that did not settle: non-200, unusable reply, unreachable, or no reply in time; or (no
 * `durationMs`, `attempt` the calls made so far) a ROLLBACK not sent because its BET was still being
 * attempted at the wallet (services/rounds/dispatch.ts callWallet).
 */
export type TransactionAttemptFailed = DomainEvent<
  'TransactionAttemptFailed',
  {
    transactionId: string;
    outcome: 'failed' | 'timed_out';
    detail: string;
    httpStatus?: number;
    /** The wallet call's number (1 for the first); the calls made so far when none was made. */
    attempt: number;
    failedAt: string;
    durationMs?: number;
    /**
     * An ask for a BET's lost reply that failed (its provider went on with the round as if answered; the
     * earlier attempt's reply was lost with its process): the BET stays recorded and is asked again until
     * the wallet replies. Absent: the attempt's own failure.
     */
    replyLost?: true;
    /**
     * The failed call of a BET its ROLLBACK voided while the call was under way: kept as the BET's attempt
     * (the wallet was called), the BET staying voided. Absent: any other transaction's failure.
     */
    voided?: true;
    /**
     * The call never reached the wallet: no connection was made (refused, no such host, no route, or none
     * within the wallet timeout: `timed_out`), or no call was made (an operator gone from the catalog, a ROLLBACK waiting for its BET). Absent (and on
     * events recorded before the field existed): it may have reached it.
     */
    notSent?: true;
  }
>;

/** Retries stopped (24 h by default); the transaction is kept and visible to auditors. */
export type TransactionDeadLettered = DomainEvent<
  'TransactionDeadLettered',
  { transactionId: string; attempts: number; lastError: string; deadLetteredAt: string }
>;

/**
 * A BET that had not been answered by the wallet when its ROLLBACK was recorded: it is never sent again,
 * and its identical resubmission is answered 409 "bet was rolled back". Recorded with the ROLLBACK. A reply
 * of an attempt that was already in flight is still recorded after it (the wallet's answer is a fact).
 */
export type TransactionVoided = DomainEvent<'TransactionVoided', { transactionId: string; rollbackTransactionId: string; voidedAt: string }>;

/**
 * An admin sent a dead transaction to the wallet again (same transactionId, same body): it is retried
 * like any credit from now on, for a retry window of its own. Who did it and why are part of the history.
 */
export type TransactionRedriven = DomainEvent<'TransactionRedriven', { transactionId: string; by: string; reason: string; redrivenAt: string }>;

/**
 * A provider resubmitted a BET whose call failed or timed out, and the BET is about to be sent to the
 * wallet again (its `attempt`). Recorded under the kick fence before the call, so that a kick of its
 * player acknowledged before it stops it (the append is refused, and nothing is sent), as it stops a new
 * transaction; one acknowledged after it comes after it in the history.
 */
export type TransactionResent = DomainEvent<'TransactionResent', { transactionId: string; attempt: number; resentAt: string }>;

/** The reconciler closed a stale round after rolling back its outstanding bets. */
export type RoundForceClosed = DomainEvent<'RoundForceClosed', { closedAt: string; rolledBack: string[] }>;

export type RoundEvent =
  | TransactionRecorded
  | TransactionSettled
  | TransactionAttemptFailed
  | TransactionDeadLettered
  | TransactionVoided
  | TransactionRedriven
  | TransactionResent
  | RoundForceClosed;

export const ROUND_EVENT_TYPES: ReadonlySet<string> = new Set<RoundEvent['type']>([
  'TransactionRecorded',
  'TransactionSettled',
  'TransactionAttemptFailed',
  'TransactionDeadLettered',
  'TransactionVoided',
  'TransactionRedriven',
  'TransactionResent',
  'RoundForceClosed',
]);

/** A roundId is unique only within (provider, operator). */
export function roundStream(providerId: string, operatorId: string, roundId: string): string {
  return `round|${encodeURIComponent(providerId)}|${encodeURIComponent(operatorId)}|${encodeURIComponent(roundId)}`;
}

export const STALE_ROLLBACK_PREFIX = 'stale-rollback:';
export const RECONCILER_SESSION = 'system:stale-round-reconciler';
export const ADMIN_SESSION = 'system:admin-adjustment';
/** Registry key for transactions the platform itself originates (adjustments); the catalog refuses a provider of that id. */
export { PLATFORM_PROVIDER } from '../../shared/catalog/schema.ts';

/** The operator whose round stream this is (contract section 10: an operator's chain holds its streams' events). */
export function roundStreamOperator(streamId: string): string | undefined {
  const parts = streamId.split('|');
  return parts.length === 4 && parts[0] === 'round' ? decodeURIComponent(parts[2]!) : undefined;
}
