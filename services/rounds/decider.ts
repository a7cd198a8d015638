import type { Decider, Decision, EventMeta } from '../../shared/decider.ts';
import {
  RECONCILER_SESSION,
  STALE_ROLLBACK_PREFIX,
  type Origin,
  type RoundEvent,
  type RoundForceClosed,
  type TransactionAttemptFailed,
  type TransactionRecorded,
  type TransactionRequest,
  type WalletReply,
} from './events.ts';

/**
 * The round: every rule of contract sections 5 and 8 about transactions, decided against the round's
 * own history. Commands: record a transaction, record a wallet attempt's outcome, dead-letter one whose
 * retries ran out, force-close a stale round. The rules the dispatcher and the reconciler follow
 * (mayAttempt, betToAwaitBefore, retriesExhausted, staleRollbacks) live here too, as pure functions of
 * the state.
 */

/** Every status a transaction can be in. voided: a BET rolled back before the wallet answered it; never sent again. */
export const TX_STATUSES = ['recorded', 'applied', 'declined', 'invalid', 'failed', 'timed_out', 'dead', 'voided'] as const;
export type TxStatus = (typeof TX_STATUSES)[number];

/** Settled for good: the wallet answered, retries stopped, or (a BET) rolled back before the wallet answered it. */
export const isFinal = (s: TxStatus): boolean => s === 'applied' || s === 'declined' || s === 'invalid' || s === 'dead' || s === 'voided';

/** Unsettled: recorded and not settled for good (the wallet may still be asked). The one definition. */
export const UNSETTLED_STATUSES: readonly TxStatus[] = TX_STATUSES.filter((s) => !isFinal(s));

/**
 * A transaction's status as operators reconcile it (contract section 9): applied (the wallet answered
 * OK), declined (a BET answered DECLINED), pending (not yet accepted and still being attempted or
 * retried), failed (a BET the wallet never accepted; not retried), voided (a BET rolled back before it
 * reached the wallet), dead (retries stopped). A credit the wallet answered DECLINED is dead too: it is
 * never sent again, and the wallet did not take it.
 */
export const OPERATOR_STATUSES = ['applied', 'declined', 'pending', 'failed', 'voided', 'dead'] as const;
export type OperatorStatus = (typeof OPERATOR_STATUSES)[number];

/** What the wallet has not acknowledged, as a settlement statement counts it (its "unsettled" buckets). */
export const UNACKNOWLEDGED: readonly OperatorStatus[] = ['pending', 'failed', 'dead'];

/**
 * A BET its ROLLBACK settled, whatever became of the BET: it is never sent again (mayAttempt), so nothing
 * is left to wait for (contract section 8, rule 5). A failed or timed-out one keeps its status.
 */
const settledByRollback = (type: TransactionRequest['type'], rolledBack: boolean): boolean => type === 'BET' && rolledBack;

/**
 * Money the console lists as stuck: what the wallet has not acknowledged, except a BET that was rolled
 * back (settledByRollback).
 */
export const isStuck = (type: TransactionRequest['type'], status: TxStatus, rolledBack: boolean): boolean =>
  UNACKNOWLEDGED.includes(operatorStatus(type, status)) && !settledByRollback(type, rolledBack);

/** Unsettled as the audit lists it: not settled for good (UNSETTLED_STATUSES), and not a BET a ROLLBACK settled. */
export const isUnsettled = (type: TransactionRequest['type'], status: TxStatus, rolledBack: boolean): boolean =>
  UNSETTLED_STATUSES.includes(status) && !settledByRollback(type, rolledBack);

export function operatorStatus(type: TransactionRequest['type'], status: TxStatus): OperatorStatus {
  switch (status) {
    case 'applied':
    case 'declined':
    case 'voided':
    case 'dead':
      return status;
    case 'invalid':
      return 'dead';
    case 'recorded':
      return 'pending';
    case 'failed':
    case 'timed_out':
      return isCredit(type) ? 'pending' : 'failed';
    default: {
      const unknown: never = status;
      return unknown;
    }
  }
}

/** A BET or WIN that says roundComplete completes its round (API document 2.10). */
export const completesRound = (r: Pick<TransactionRequest, 'type' | 'roundComplete'>): boolean => (r.type === 'BET' || r.type === 'WIN') && r.roundComplete;

/** Credits are retried until the wallet answers; a BET is attempted once (its provider resubmits), unless its reply was lost (workerAttempts). */
export const isCredit = (t: TransactionRequest['type']): boolean => t !== 'BET';

/**
 * What operators see as dead (operatorStatus): retries stopped, and a credit the wallet answered DECLINED,
 * which is never sent again either; both wait for the platform team's adjustment or re-drive.
 */
export const DEAD_STATUSES: readonly TxStatus[] = TX_STATUSES.filter((s) => operatorStatus('WIN', s) === 'dead');

/**
 * Whether the worker asks the wallet for a transaction of this round: a credit until it is settled for
 * good. A BET is attempted once and never retried (contract section 5), so only a BET still recorded (no
 * outcome of its own attempt recorded), not rolled back, whose round holds a transaction its provider
 * recorded after it: its provider went on with the round as if it had the BET's answer. That is the BET whose process
 * answered the provider with the wallet's reply and died before the outcome was recorded (the outcome is
 * recorded behind the answer only for a wallet reply, so what was lost is a reply the wallet stored).
 * Asked with the same body, the wallet answers with that stored reply and moves no money (API document
 * 4.2 rule 2). It is asked until the wallet replies, as a credit is retried: an ask that fails leaves the
 * BET recorded (asksForLostReply), because the provider acted on an answer the history must learn. A BET
 * whose provider got no answer and went on anyway is then applied, as the provider assumed. mayAttempt
 * still decides on the round.
 */
export function workerAttempts(state: RoundState, transactionId: string): boolean {
  const tx = state.txs.get(transactionId);
  if (!tx || isFinal(tx.status)) return false;
  if (isCredit(tx.request.type)) return true;
  if (tx.status !== 'recorded' || tx.rolledBackBy !== undefined) return false;
  // The round's transactions in the order they were first recorded (the map's insertion order). Only the
  // provider's own count: the reconciler's stale rollbacks of a force-closed round's other bets say nothing
  // about this one (its provider got no answer for it and went on with nothing), and asking for it would
  // send it for the first time, then refund it.
  const ids = [...state.txs.keys()];
  return ids.slice(ids.indexOf(transactionId) + 1).some((id) => state.txs.get(id)!.origin === 'provider');
}

/**
 * Whether a wallet reply to a call of this transaction (as it stood before the call) may be answered
 * before its outcome is recorded (ADR 4): only where a reply lost with its process is learned again from
 * the wallet. A credit is sent again until answered; a BET still recorded (its first call, or one whose
 * earlier asks failed) is asked for once its provider goes on (workerAttempts). Not a BET's later call,
 * made for its provider's resubmission after a failed one: the worker never sends a BET its provider was
 * told failed (contract section 5), and whether the provider got the later reply or another failure (its
 * session kicked meanwhile, say) the history cannot tell, so a reply lost after its answer would leave
 * the BET failed while the wallet took it and the provider was told it stands. (A BET its ROLLBACK voids
 * while its first call is under way is not asked for either: its reply, lost, leaves the history saying
 * voided with no attempt, while the ROLLBACK, retried until the wallet answers, refunds what it took.)
 */
export const replyLearnableAgain = (tx: TxState): boolean => isCredit(tx.request.type) || tx.status === 'recorded';

/**
 * Whether a failed attempt on this transaction was an ask for a BET's lost reply (workerAttempts): the
 * worker's attempt on a BET still recorded. Its failure leaves the BET recorded, asked again until the
 * wallet replies. A submission's failure is always the BET's own, even after a failed ask: its provider is
 * answered with it, and the failure of a BET's own attempt is final for the worker (contract section 5).
 */
function asksForLostReply(tx: TxState, by: AttemptBy): boolean {
  return tx.request.type === 'BET' && tx.status === 'recorded' && by === 'worker';
}

/**
 * What a failed attempt leaves a transaction as: failed or timed out; still recorded after an ask for a
 * lost reply; voided after the call a BET's ROLLBACK found under way.
 */
export const statusAfterFailure = (d: TransactionAttemptFailed['data']): TxStatus => (d.voided ? 'voided' : d.replyLost ? 'recorded' : d.outcome);

export interface TxState {
  request: TransactionRequest;
  providerId: string;
  operatorId: string;
  origin: Origin;
  walletBody: string;
  contentHash: string;
  status: TxStatus;
  attempts: number;
  reply?: WalletReply;
  lastError?: string;
  recordedAt: string;
  /** For a BET: the ROLLBACK recorded against it. */
  rolledBackBy?: string;
  /** When an admin re-drove it: its retry window runs from then. */
  redrivenAt?: string;
  /**
   * Whether a call of it may have reached the wallet: one answered, or one that failed or timed out
   * after a connection was made (an attempt recorded without `notSent`). False while every call failed
   * before a connection was made (or none was made).
   */
  reachedWallet: boolean;
  /** The call a provider's resubmission announced (TransactionResent): its attempt number. */
  announced?: number;
}

/** What a round with at least one transaction knows: its player, currency and game are those of its first transaction. */
interface RoundFacts {
  txs: ReadonlyMap<string, TxState>;
  playerRef: string;
  currency: string;
  gameId: string;
  lastActivityAt: string;
}

/**
 * new: nothing recorded. open: takes BETs and WINs. completed: a BET or WIN said roundComplete (only
 * ROLLBACKs and outcomes join it). force-closed: the reconciler closed it as stale, its outstanding bets
 * are being rolled back.
 */
export type RoundState =
  | { status: 'new'; txs: ReadonlyMap<string, TxState> }
  | ({ status: 'open' } & RoundFacts)
  | ({ status: 'completed' } & RoundFacts)
  | ({ status: 'force-closed' } & RoundFacts);

export const isClosed = (s: RoundState): boolean => s.status === 'completed' || s.status === 'force-closed';

/** A BET that may still hold the player's money: not declined, not rolled back. Outstanding in a round its provider has not completed (outstandingBets). */
export const isOutstanding = (t: TxState): boolean => t.request.type === 'BET' && t.status !== 'declined' && t.rolledBackBy === undefined;

/**
 * The round's outstanding bets (contract section 8, stale rounds): BETs not declined, not rolled back,
 * in a round without roundComplete. What the reconciler would refund: none once the provider completed
 * the round (its bets were played out); a force-closed round's until each is rolled back. The one
 * definition of "outstanding".
 */
export const outstandingBets = (state: RoundState): TxState[] => (state.status === 'completed' ? [] : [...state.txs.values()].filter(isOutstanding));

/**
 * A round's figures as operators and the reconciler read them (rm_rounds): how many BETs, WINs and
 * ROLLBACKs, the amounts the wallet applied, the outstanding bets. The projection computes the same in
 * SQL for a batch at a time; a property test checks the two agree on random histories.
 */
export function roundFigures(state: RoundState): { bets: number; betAmount: number; wins: number; winAmount: number; rollbacks: number; outstandingBets: number } {
  const txs = [...state.txs.values()];
  const of = (type: TransactionRequest['type']) => txs.filter((t) => t.request.type === type);
  const applied = (list: TxState[]) => list.filter((t) => t.status === 'applied').reduce((sum, t) => sum + t.request.amount, 0);
  return {
    bets: of('BET').length,
    betAmount: applied(of('BET')),
    wins: of('WIN').length,
    winAmount: applied(of('WIN')),
    rollbacks: of('ROLLBACK').length,
    outstandingBets: outstandingBets(state).length,
  };
}

export type WalletOutcome =
  | { kind: 'reply'; reply: WalletReply }
  /** `notSent`: the call never reached the wallet (no connection was made, or none was tried). */
  | { kind: 'failed'; detail: string; httpStatus?: number; notSent?: true }
  /** `notSent`: no connection was made within the timeout (a wallet host that drops packets). */
  | { kind: 'timed_out'; notSent?: true };

/** How the submitter's session stands: a kick (revoked) wins over expiry. */
export type SessionStanding = 'active' | 'expired' | 'revoked';

export type RoundCommand =
  | {
      type: 'RecordTransaction';
      request: TransactionRequest;
      providerId: string;
      operatorId: string;
      origin: Origin;
      contentHash: string;
      session: SessionStanding;
      now: Date;
    }
  | { type: 'RecordOutcome'; transactionId: string; attempt: number; outcome: WalletOutcome; by: AttemptBy; now: Date; durationMs?: number }
  | { type: 'Redrive'; transactionId: string; by: string; reason: string; now: Date }
  /** A provider's resubmission of a BET whose call failed or timed out, about to be sent again (TransactionResent). */
  | { type: 'Resend'; transactionId: string; now: Date }
  | { type: 'DeadLetter'; transactionId: string; retryWindowSeconds: number; now: Date }
  /** `callsUnderWay`: the outstanding BETs whose wallet call is under way now (their dispatch lease is held), which a round is not closed under. */
  | { type: 'CloseStaleRound'; staleAfterSeconds: number; callsUnderWay: readonly string[]; now: Date };

/** Who made a wallet attempt: the submission that recorded it or a resubmission of it, or the worker (retries, and asks for a lost reply). */
export type AttemptBy = 'submission' | 'worker';

export type RoundRefusal =
  | { kind: 'transaction-id-reused' }
  | { kind: 'session-invalid' }
  | { kind: 'round-of-another-player' }
  | { kind: 'rollback-target-not-a-bet' }
  | { kind: 'rollback-amount-mismatch'; betAmount: number }
  | { kind: 'rollback-currency-mismatch'; betCurrency: string }
  | { kind: 'bet-already-rolled-back' }
  | { kind: 'round-in-another-currency' }
  | { kind: 'round-completed' }
  | { kind: 'transaction-not-found' }
  | { kind: 'bet-not-redriven' }
  | { kind: 'not-dead'; status: OperatorStatus };

function withTx(state: RoundState, id: string, change: (t: TxState) => TxState): RoundState {
  const tx = state.txs.get(id);
  if (!tx) return state;
  const txs = new Map(state.txs);
  txs.set(id, change(tx));
  return { ...state, txs };
}

function evolve(state: RoundState, event: RoundEvent, _meta: EventMeta): RoundState {
  switch (event.type) {
    case 'TransactionRecorded': {
      const { request: r, recordedAt } = event.data;
      const txs = new Map(state.txs);
      txs.set(r.transactionId, {
        request: r,
        providerId: event.data.providerId,
        operatorId: event.data.operatorId,
        origin: event.data.origin,
        walletBody: event.data.walletBody,
        contentHash: event.data.contentHash,
        status: 'recorded',
        attempts: 0,
        recordedAt,
        reachedWallet: false,
      });
      if (r.type === 'ROLLBACK' && r.originalTransactionId) {
        const bet = txs.get(r.originalTransactionId);
        if (bet) txs.set(r.originalTransactionId, { ...bet, rolledBackBy: r.transactionId });
      }
      const completes = completesRound(r);
      if (state.status === 'new') {
        return { status: completes ? 'completed' : 'open', txs, playerRef: r.playerRef, currency: r.currency, gameId: r.gameId, lastActivityAt: recordedAt };
      }
      return { ...state, status: state.status === 'open' && completes ? 'completed' : state.status, txs, lastActivityAt: recordedAt };
    }
    case 'TransactionSettled':
      return withTx(state, event.data.transactionId, (t) => ({ ...t, status: event.data.outcome, attempts: event.data.attempt, reply: event.data.reply, reachedWallet: true }));
    case 'TransactionAttemptFailed':
      return withTx(state, event.data.transactionId, (t) => ({
        ...t,
        status: statusAfterFailure(event.data),
        attempts: event.data.attempt,
        lastError: event.data.detail,
        reachedWallet: t.reachedWallet || event.data.notSent !== true,
      }));
    case 'TransactionDeadLettered':
      return withTx(state, event.data.transactionId, (t) => ({ ...t, status: 'dead', lastError: event.data.lastError }));
    case 'TransactionVoided':
      return withTx(state, event.data.transactionId, (t) => ({ ...t, status: 'voided' }));
    case 'TransactionRedriven':
      return withTx(state, event.data.transactionId, (t) => ({ ...t, status: 'recorded', redrivenAt: event.data.redrivenAt }));
    case 'TransactionResent':
      // The call it announces is recorded as any attempt (TransactionSettled, TransactionAttemptFailed);
      // until then it may have reached the wallet (neverReachedWallet).
      return withTx(state, event.data.transactionId, (t) => ({ ...t, announced: event.data.attempt }));
    case 'RoundForceClosed':
      return state.status === 'new' ? state : { ...state, status: 'force-closed' };
    default: {
      const unknown: never = event;
      return unknown;
    }
  }
}

/**
 * Recording (API document 2.10, contract sections 5 and 8). Idempotency comes first: an identical
 * resubmission records nothing and is answered from what was recorded, even after a kick, an expiry
 * or the round's completion; the same id with other content is refused.
 */
function decideRecord(cmd: Extract<RoundCommand, { type: 'RecordTransaction' }>, state: RoundState): Decision<RoundEvent, RoundRefusal> {
  const r = cmd.request;
  const existing = state.txs.get(r.transactionId);
  if (existing) return existing.contentHash === cmd.contentHash ? [] : { kind: 'transaction-id-reused' };
  // A kicked session is refused as such, whatever else is wrong with the transaction.
  if (cmd.session === 'revoked') return { kind: 'session-invalid' };
  if (state.status !== 'new' && state.playerRef !== r.playerRef) return { kind: 'round-of-another-player' };
  let bet: TxState | undefined;
  if (r.type === 'ROLLBACK') {
    bet = state.txs.get(r.originalTransactionId ?? '');
    if (!bet || bet.request.type !== 'BET') return { kind: 'rollback-target-not-a-bet' };
    // The wallet refunds what it is sent: a ROLLBACK is its BET's mirror, so it can refund exactly the stake.
    if (r.amount !== bet.request.amount) return { kind: 'rollback-amount-mismatch', betAmount: bet.request.amount };
    if (r.currency !== bet.request.currency) return { kind: 'rollback-currency-mismatch', betCurrency: bet.request.currency };
    if (bet.rolledBackBy !== undefined) return { kind: 'bet-already-rolled-back' };
  }
  if (state.status !== 'new' && state.currency !== r.currency) return { kind: 'round-in-another-currency' };
  if ((r.type === 'BET' || r.type === 'WIN') && isClosed(state)) return { kind: 'round-completed' };
  if (cmd.session === 'expired') {
    // An expired session still settles the rounds it opened, but opens nothing new.
    const openedHere = [...state.txs.values()].some((t) => t.request.type === 'BET' && t.request.sessionToken === r.sessionToken);
    if (r.type === 'BET' || !openedHere) return { kind: 'session-invalid' };
  }
  const at = cmd.now.toISOString();
  const recorded: TransactionRecorded = {
    type: 'TransactionRecorded',
    data: {
      providerId: cmd.providerId,
      operatorId: cmd.operatorId,
      origin: cmd.origin,
      request: r,
      walletBody: JSON.stringify(r),
      contentHash: cmd.contentHash,
      recordedAt: at,
    },
  };
  // A BET the wallet has not answered is final once rolled back: it is never sent again, so it must not
  // wait for an answer that cannot come (contract section 8, rule 5). So is one whose every call failed
  // before reaching the wallet (neverReachedWallet).
  if (bet && (bet.status === 'recorded' || neverReachedWallet(bet))) {
    return [recorded, { type: 'TransactionVoided', data: { transactionId: bet.request.transactionId, rollbackTransactionId: r.transactionId, voidedAt: at } }];
  }
  return [recorded];
}

/**
 * A BET whose calls all failed or timed out before reaching the wallet (no connection was made), and none
 * announced since (a resubmission's call whose outcome is not recorded may have reached it): the wallet
 * never saw it, so rolled back it is voided, final (contract section 8, rule 5; section 9: "a BET rolled
 * back before it reached the wallet"), and not left failed among what the wallet has not acknowledged.
 * One whose call failed or timed out after a connection was made may have been applied: it stays failed
 * or timed out, and its ROLLBACK refunds whatever the wallet took.
 */
export const neverReachedWallet = (tx: TxState): boolean =>
  (tx.status === 'failed' || tx.status === 'timed_out') && tx.attempts > 0 && !tx.reachedWallet && (tx.announced === undefined || tx.announced <= tx.attempts);

/**
 * What a wallet reply makes of a transaction: applied (OK), declined (DECLINED to a BET: a valid answer,
 * say insufficient funds), invalid (DECLINED to anything else).
 */
export const replyStatus = (type: TransactionRequest['type'], reply: WalletReply): 'applied' | 'declined' | 'invalid' =>
  reply.status === 'OK' ? 'applied' : type === 'BET' ? 'declined' : 'invalid';

/** What a wallet attempt makes of a transaction: its reply's status, or an attempt that failed or timed out. */
export function attemptStatus(type: TransactionRequest['type'], outcome: WalletOutcome): 'applied' | 'declined' | 'invalid' | 'failed' | 'timed_out' {
  switch (outcome.kind) {
    case 'reply':
      return replyStatus(type, outcome.reply);
    case 'failed':
      return 'failed';
    case 'timed_out':
      return 'timed_out';
    default: {
      const unknown: never = outcome;
      return unknown;
    }
  }
}

/**
 * The outcome of one wallet attempt; nothing when the transaction was already settled for good. A
 * voided BET's call that was under way when its ROLLBACK was recorded is still recorded, once: the
 * wallet was called, so the call is the BET's attempt (contract section 9: `attempts`). Its reply
 * settles the BET (the wallet did answer it: applied or declined, and the ROLLBACK refunds it); its
 * failure leaves it voided.
 */
function decideOutcome(cmd: Extract<RoundCommand, { type: 'RecordOutcome' }>, state: RoundState): RoundEvent[] {
  const events = outcomeEvents(cmd, state);
  // A rolled-back BET not voided when its ROLLBACK came, because a resubmission's call was announced then
  // (it might have reached the wallet): that call's outcome says whether any did. None did: voided now,
  // final, as if the ROLLBACK had come after it (contract section 8, rule 5).
  const tx = state.txs.get(cmd.transactionId);
  const [failure] = events;
  if (tx?.rolledBackBy !== undefined && tx.status !== 'voided' && failure?.type === 'TransactionAttemptFailed') {
    const after = evolve(state, failure, { revision: 0 }).txs.get(cmd.transactionId);
    if (after && neverReachedWallet(after)) {
      return [...events, { type: 'TransactionVoided', data: { transactionId: cmd.transactionId, rollbackTransactionId: tx.rolledBackBy, voidedAt: cmd.now.toISOString() } }];
    }
  }
  return events;
}

function outcomeEvents(cmd: Extract<RoundCommand, { type: 'RecordOutcome' }>, state: RoundState): RoundEvent[] {
  const { transactionId, attempt, outcome } = cmd;
  const tx = state.txs.get(transactionId);
  if (!tx) return [];
  const inFlightWhenVoided = tx.status === 'voided' && attempt > tx.attempts;
  if (isFinal(tx.status) && !inFlightWhenVoided) return [];
  const at = cmd.now.toISOString();
  const duration = cmd.durationMs !== undefined ? { durationMs: cmd.durationMs } : {};
  const lost = inFlightWhenVoided ? { voided: true as const } : asksForLostReply(tx, cmd.by) ? { replyLost: true as const } : {};
  switch (outcome.kind) {
    case 'reply': {
      return [{ type: 'TransactionSettled', data: { transactionId, outcome: replyStatus(tx.request.type, outcome.reply), reply: outcome.reply, attempt, settledAt: at, ...duration } }];
    }
    case 'failed':
      return [
        {
          type: 'TransactionAttemptFailed',
          data: {
            transactionId,
            outcome: 'failed',
            detail: outcome.detail,
            ...(outcome.httpStatus !== undefined ? { httpStatus: outcome.httpStatus } : {}),
            ...(outcome.notSent ? { notSent: true as const } : {}),
            attempt,
            failedAt: at,
            ...duration,
            ...lost,
          },
        },
      ];
    case 'timed_out': {
      const detail = outcome.notSent ? 'no connection to the wallet within the wallet timeout' : 'no reply within the wallet timeout';
      const notSent = outcome.notSent ? { notSent: true as const } : {};
      return [{ type: 'TransactionAttemptFailed', data: { transactionId, outcome: 'timed_out', detail, ...notSent, attempt, failedAt: at, ...duration, ...lost } }];
    }
    default: {
      const unknown: never = outcome;
      return unknown;
    }
  }
}

/**
 * Retries stop once a transaction is as old as the retry window (24 h by default): it is dead-lettered,
 * kept for auditors. A re-driven one gets a window of its own, from its re-drive. Every transaction is
 * tried at least once first (an attempt is recorded: a try for an operator gone from the catalog fails
 * without a call): a credit whose process died before its call, found by a worker only after the window
 * (the workers were down that long), and a BET whose lost reply the worker asks for (workerAttempts),
 * whose round may have gone on a day after it was recorded. Dead-lettered untried, the credit would wait
 * for a re-drive that nothing showed it needed.
 */
export function retriesExhausted(tx: TxState, now: Date, retryWindowSeconds: number): boolean {
  if (tx.attempts === 0) return false;
  return (now.getTime() - Date.parse(tx.redrivenAt ?? tx.recordedAt)) / 1000 >= retryWindowSeconds;
}

/** Why a transaction of this type and status may not be re-driven (decideRedrive), or undefined when it may. */
function redriveRefusal(type: TransactionRequest['type'], status: TxStatus): RoundRefusal | undefined {
  if (!isCredit(type)) return { kind: 'bet-not-redriven' };
  const shown = operatorStatus(type, status);
  return shown === 'dead' ? undefined : { kind: 'not-dead', status: shown };
}

/** Whether an admin's re-drive of it would be taken (decideRedrive): what the console offers a button for. */
export const mayRedrive = (type: TransactionRequest['type'], status: TxStatus): boolean => redriveRefusal(type, status) === undefined;

/**
 * An admin's re-drive: a credit whose retries stopped (dead: retries ran out, or the wallet refused it)
 * is sent to the wallet again with the same transactionId and body, which the wallet deduplicates. A BET
 * never is: a BET the wallet never accepted is its provider's to resubmit or roll back.
 */
function decideRedrive(cmd: Extract<RoundCommand, { type: 'Redrive' }>, state: RoundState): Decision<RoundEvent, RoundRefusal> {
  const tx = state.txs.get(cmd.transactionId);
  if (!tx) return { kind: 'transaction-not-found' };
  const refusal = redriveRefusal(tx.request.type, tx.status);
  if (refusal) return refusal;
  return [{ type: 'TransactionRedriven', data: { transactionId: cmd.transactionId, by: cmd.by, reason: cmd.reason, redrivenAt: cmd.now.toISOString() } }];
}

function decideDeadLetter(cmd: Extract<RoundCommand, { type: 'DeadLetter' }>, state: RoundState): RoundEvent[] {
  const tx = state.txs.get(cmd.transactionId);
  if (!tx || isFinal(tx.status) || !retriesExhausted(tx, cmd.now, cmd.retryWindowSeconds)) return [];
  return [
    {
      type: 'TransactionDeadLettered',
      data: { transactionId: cmd.transactionId, attempts: tx.attempts, lastError: tx.lastError ?? 'never answered', deadLetteredAt: cmd.now.toISOString() },
    },
  ];
}

/**
 * Stale: open, with outstanding bets, and no transaction for staleAfterSeconds (API document 4.2), nor a
 * wallet call of one of its bets under way (`callsUnderWay`): closed under it, the round would refund a
 * bet its provider is then told stands.
 */
export function isStale(state: RoundState, now: Date, staleAfterSeconds: number, callsUnderWay: readonly string[] = []): boolean {
  if (state.status !== 'open') return false;
  const outstanding = outstandingBets(state);
  const calling = outstanding.some((b) => callsUnderWay.includes(b.request.transactionId));
  return now.getTime() - Date.parse(state.lastActivityAt) >= staleAfterSeconds * 1000 && outstanding.length > 0 && !calling;
}

/**
 * Closing comes before the rollbacks: decided at the revision read, so a BET or WIN arriving meanwhile
 * either lands first (the round is then not stale) or is refused after it (409): nothing can join the
 * round while its bets are refunded.
 */
function decideCloseStale(cmd: Extract<RoundCommand, { type: 'CloseStaleRound' }>, state: RoundState): RoundForceClosed[] {
  if (!isStale(state, cmd.now, cmd.staleAfterSeconds, cmd.callsUnderWay)) return [];
  return [{ type: 'RoundForceClosed', data: { closedAt: cmd.now.toISOString(), rolledBack: outstandingBets(state).map((b) => b.request.transactionId) } }];
}

/**
 * The ROLLBACKs that refund a force-closed round's outstanding bets: each with the deterministic id
 * `stale-rollback:<bet id>`, the BET's amount and currency, so a repeat is answered from what was recorded.
 */
export function staleRollbacks(state: RoundState): Array<{ bet: TxState; request: TransactionRequest }> {
  if (state.status !== 'force-closed') return [];
  return outstandingBets(state).map((bet) => {
    const b = bet.request;
    return {
      bet,
      request: {
        transactionId: `${STALE_ROLLBACK_PREFIX}${b.transactionId}`,
        sessionToken: RECONCILER_SESSION,
        type: 'ROLLBACK',
        roundId: b.roundId,
        roundComplete: false,
        originalTransactionId: b.transactionId,
        playerRef: b.playerRef,
        amount: b.amount,
        currency: b.currency,
        gameId: b.gameId,
      },
    };
  });
}

/**
 * Whether a transaction may be sent to the wallet (again). A BET that has been rolled back never is,
 * not even one that was never sent (its process died): a wallet that refunded nothing for it would
 * debit it for good, and nothing could refund it afterwards. Nor is a BET whose attempt failed tried
 * again once its round is closed, nor by a resubmission whose session has since been kicked or has
 * expired (`session`, the resubmission's): a kick is immediate (API document 3), so a new attempt could
 * only charge a player whose sessions are gone; the resubmission is answered from what was recorded,
 * the failure (contract 8.4). One still recorded still goes: its first attempt (a BET with
 * roundComplete completes its own round), and an ask for its lost reply (asksForLostReply).
 */
export function mayAttempt(state: RoundState, transactionId: string, session: SessionStanding = 'active'): boolean {
  const tx = state.txs.get(transactionId);
  if (!tx || isFinal(tx.status)) return false;
  const attemptedBet = tx.request.type === 'BET' && tx.status !== 'recorded';
  if (tx.request.type === 'BET' && (tx.rolledBackBy !== undefined || (attemptedBet && (isClosed(state) || session !== 'active')))) return false;
  return true;
}

/**
 * A BET whose call failed or timed out, resubmitted by its provider while its session stands, is sent
 * again (mayAttempt): announced first (TransactionResent), so that the announcement, appended under the
 * kick fence, orders the new call with any kick of its player (contract section 8, rule 4). Nothing for
 * anything else: a BET never attempted (its first call is no resend), answered, rolled back, or in a
 * closed round.
 */
function decideResend(cmd: Extract<RoundCommand, { type: 'Resend' }>, state: RoundState): RoundEvent[] {
  const tx = state.txs.get(cmd.transactionId);
  if (!tx || tx.request.type !== 'BET' || (tx.status !== 'failed' && tx.status !== 'timed_out') || !mayAttempt(state, cmd.transactionId, 'active')) return [];
  return [{ type: 'TransactionResent', data: { transactionId: cmd.transactionId, attempt: tx.attempts + 1, resentAt: cmd.now.toISOString() } }];
}

/**
 * A ROLLBACK must not reach the wallet before the BET it reverses: a wallet that has not seen the bet
 * refunds nothing, and the bet arriving afterwards would debit for good. The BET whose attempt in
 * flight a ROLLBACK waits for, if any.
 */
export function betToAwaitBefore(tx: TxState): string | undefined {
  return tx.request.type === 'ROLLBACK' ? tx.request.originalTransactionId : undefined;
}

export const roundDecider: Decider<RoundCommand, RoundState, RoundEvent, RoundRefusal> = {
  initialState: () => ({ status: 'new', txs: new Map() }),
  evolve,
  decide(command, state) {
    switch (command.type) {
      case 'RecordTransaction':
        return decideRecord(command, state);
      case 'RecordOutcome':
        return decideOutcome(command, state);
      case 'DeadLetter':
        return decideDeadLetter(command, state);
      case 'CloseStaleRound':
        return decideCloseStale(command, state);
      case 'Redrive':
        return decideRedrive(command, state);
      case 'Resend':
        return decideResend(command, state);
      default: {
        const unknown: never = command;
        return unknown;
      }
    }
  },
};
