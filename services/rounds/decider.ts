import { AppError, badRequest, conflict } from '../../shared/errors.ts';
import type { Decider } from '../../shared/eventstore/command.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';
import type { Origin, RoundEvent, TransactionRecorded, TransactionRequest, TransactionVoided, WalletReply } from './events.ts';

/** voided: a BET rolled back before the wallet answered it; never sent again. */
export type TxStatus = 'recorded' | 'applied' | 'declined' | 'invalid' | 'failed' | 'timed_out' | 'dead' | 'voided';

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
}

export interface RoundState {
  txs: Map<string, TxState>;
  completed: boolean;
  /** Closed by the stale-round reconciler (its rollbacks follow the close). */
  forceClosed: boolean;
  /** The round's player and currency: those of its first transaction (contract: one of each per round). */
  playerRef: string | undefined;
  currency: string | undefined;
  gameId: string | undefined;
  lastActivityAt: string | undefined;
}

/** Settled for good: the wallet answered, retries stopped, or (a BET) rolled back before the wallet answered it. */
export const isFinal = (s: TxStatus): boolean => s === 'applied' || s === 'declined' || s === 'invalid' || s === 'dead' || s === 'voided';

export const isCredit = (t: TransactionRequest['type']): boolean => t !== 'BET';

function withTx(state: RoundState, id: string, change: (t: TxState) => TxState): RoundState {
  const tx = state.txs.get(id);
  if (!tx) return state;
  const txs = new Map(state.txs);
  txs.set(id, change(tx));
  return { ...state, txs };
}

export const roundDecider: Decider<RoundState, RoundEvent> = {
  initialState: () => ({ txs: new Map(), completed: false, forceClosed: false, playerRef: undefined, currency: undefined, gameId: undefined, lastActivityAt: undefined }),
  evolve(state, event, _recorded: RecordedEvent) {
    switch (event.type) {
      case 'TransactionRecorded': {
        const { request: r } = event.data;
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
          recordedAt: event.data.recordedAt,
        });
        if (r.type === 'ROLLBACK' && r.originalTransactionId) {
          const bet = txs.get(r.originalTransactionId);
          if (bet) txs.set(r.originalTransactionId, { ...bet, rolledBackBy: r.transactionId });
        }
        return {
          ...state,
          txs,
          completed: state.completed || ((r.type === 'BET' || r.type === 'WIN') && r.roundComplete),
          playerRef: state.playerRef ?? r.playerRef,
          currency: state.currency ?? r.currency,
          gameId: state.gameId ?? r.gameId,
          lastActivityAt: event.data.recordedAt,
        };
      }
      case 'TransactionSettled':
        return withTx(state, event.data.transactionId, (t) => ({ ...t, status: event.data.outcome, attempts: event.data.attempt, reply: event.data.reply }));
      case 'TransactionAttemptFailed':
        return withTx(state, event.data.transactionId, (t) => ({ ...t, status: event.data.outcome, attempts: event.data.attempt, lastError: event.data.detail }));
      case 'TransactionDeadLettered':
        return withTx(state, event.data.transactionId, (t) => ({ ...t, status: 'dead', lastError: event.data.lastError }));
      case 'TransactionVoided':
        return withTx(state, event.data.transactionId, (t) => ({ ...t, status: 'voided' }));
      case 'RoundForceClosed':
        return { ...state, completed: true, forceClosed: true };
      default: {
        const unknown: never = event;
        return unknown;
      }
    }
  },
};

export interface RecordTransaction {
  request: TransactionRequest;
  providerId: string;
  operatorId: string;
  origin: Origin;
  contentHash: string;
  now: Date;
  /** For provider submissions: whether the session has expired (only settlement of its own rounds is then allowed). */
  sessionExpired: boolean;
  /** For provider submissions: whether a kick ended the session (nothing new is recorded; what was recorded is answered). */
  sessionRevoked: boolean;
}

export type RecordDecision = { kind: 'record'; events: [TransactionRecorded] | [TransactionRecorded, TransactionVoided] } | { kind: 'existing'; tx: TxState };

/**
 * The round's rules, decided against its own history (API document 2.10, contract sections 5 and 8).
 * Throws an AppError for a refusal; returns 'existing' when this transactionId is already in the round:
 * idempotency comes first, so an identical resubmission is answered from what was recorded even after a
 * kick, an expiry or the round's completion.
 */
export function decideRecord(state: RoundState, cmd: RecordTransaction): RecordDecision {
  const r = cmd.request;
  const existing = state.txs.get(r.transactionId);
  if (existing) {
    if (existing.contentHash !== cmd.contentHash) throw conflict('transactionId already used with different content');
    return { kind: 'existing', tx: existing };
  }
  // A kicked session is refused as such, whatever else is wrong with the transaction.
  if (cmd.sessionRevoked) throw new AppError(401, 'invalid session');
  if (state.playerRef !== undefined && state.playerRef !== r.playerRef) throw conflict('round belongs to another player');
  let bet: TxState | undefined;
  if (r.type === 'ROLLBACK') {
    bet = state.txs.get(r.originalTransactionId ?? '');
    if (!bet || bet.request.type !== 'BET') throw badRequest('originalTransactionId is not a BET of this round');
    // The wallet refunds what it is sent: a ROLLBACK is its BET's mirror, so it can refund exactly the stake.
    if (r.amount !== bet.request.amount) throw badRequest(`amount: a ROLLBACK must carry its BET's amount (${bet.request.amount})`);
    if (r.currency !== bet.request.currency) throw badRequest(`currency: a ROLLBACK must carry its BET's currency (${bet.request.currency})`);
    if (bet.rolledBackBy !== undefined) throw conflict('bet already rolled back');
  }
  if (state.currency !== undefined && state.currency !== r.currency) throw conflict('round is in another currency');
  if ((r.type === 'BET' || r.type === 'WIN') && state.completed) throw conflict('round already completed');
  if (cmd.sessionExpired) {
    // Decided here: an expired session still settles the rounds it opened, but opens nothing new.
    const openedHere = [...state.txs.values()].some((t) => t.request.type === 'BET' && t.request.sessionToken === r.sessionToken);
    if (r.type === 'BET' || !openedHere) throw new AppError(401, 'invalid session');
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
  // wait for an answer that cannot come (contract section 8, rule 5).
  if (bet && bet.status === 'recorded') {
    return { kind: 'record', events: [recorded, { type: 'TransactionVoided', data: { transactionId: bet.request.transactionId, rollbackTransactionId: r.transactionId, voidedAt: at } }] };
  }
  return { kind: 'record', events: [recorded] };
}

export type WalletOutcome =
  | { kind: 'reply'; reply: WalletReply }
  | { kind: 'failed'; detail: string; httpStatus?: number }
  | { kind: 'timed_out' };

/**
 * The outcome of one wallet attempt, as events; nothing when the transaction was already settled for good.
 * A voided BET's attempt that was in flight when its ROLLBACK was recorded still records the wallet's reply
 * (the wallet did answer it), but not a failure: the BET stays voided.
 */
export function decideOutcome(state: RoundState, transactionId: string, attempt: number, outcome: WalletOutcome, now: Date): RoundEvent[] {
  const tx = state.txs.get(transactionId);
  if (!tx) return [];
  if (isFinal(tx.status) && !(tx.status === 'voided' && outcome.kind === 'reply')) return [];
  const at = now.toISOString();
  switch (outcome.kind) {
    case 'reply': {
      const settled = outcome.reply.status === 'OK' ? 'applied' : tx.request.type === 'BET' ? 'declined' : 'invalid';
      return [{ type: 'TransactionSettled', data: { transactionId, outcome: settled, reply: outcome.reply, attempt, settledAt: at } }];
    }
    case 'failed':
      return [
        {
          type: 'TransactionAttemptFailed',
          data: { transactionId, outcome: 'failed', detail: outcome.detail, ...(outcome.httpStatus !== undefined ? { httpStatus: outcome.httpStatus } : {}), attempt, failedAt: at },
        },
      ];
    case 'timed_out':
      return [{ type: 'TransactionAttemptFailed', data: { transactionId, outcome: 'timed_out', detail: 'no reply within the wallet timeout', attempt, failedAt: at } }];
    default: {
      const unknown: never = outcome;
      return unknown;
    }
  }
}

export function decideDeadLetter(state: RoundState, transactionId: string, now: Date): RoundEvent[] {
  const tx = state.txs.get(transactionId);
  if (!tx || isFinal(tx.status)) return [];
  return [
    {
      type: 'TransactionDeadLettered',
      data: { transactionId, attempts: tx.attempts, lastError: tx.lastError ?? 'never answered', deadLetteredAt: now.toISOString() },
    },
  ];
}

/** BETs that may still hold the player's money: not declined, not rolled back. */
export function outstandingBets(state: RoundState): TxState[] {
  return [...state.txs.values()].filter((t) => t.request.type === 'BET' && t.status !== 'declined' && t.rolledBackBy === undefined);
}
