import { AppError, badRequest, conflict } from '../../errors.ts';
import type { Decider } from '../../eventstore/command.ts';
import type { RecordedEvent } from '../../eventstore/port.ts';
import type { Origin, RoundEvent, TransactionRecorded, TransactionRequest, WalletReply } from './events.ts';

export type TxStatus = 'recorded' | 'applied' | 'declined' | 'invalid' | 'failed' | 'timed_out' | 'dead';

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
  playerRef: string | undefined;
  gameId: string | undefined;
  lastActivityAt: string | undefined;
}

/** Settled for good: the wallet answered, or retries stopped. */
export const isFinal = (s: TxStatus): boolean => s === 'applied' || s === 'declined' || s === 'invalid' || s === 'dead';

export const isCredit = (t: TransactionRequest['type']): boolean => t !== 'BET';

function withTx(state: RoundState, id: string, change: (t: TxState) => TxState): RoundState {
  const tx = state.txs.get(id);
  if (!tx) return state;
  const txs = new Map(state.txs);
  txs.set(id, change(tx));
  return { ...state, txs };
}

export const roundDecider: Decider<RoundState, RoundEvent> = {
  initialState: () => ({ txs: new Map(), completed: false, forceClosed: false, playerRef: undefined, gameId: undefined, lastActivityAt: undefined }),
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
}

export type RecordDecision = { kind: 'record'; events: [TransactionRecorded] } | { kind: 'existing'; tx: TxState };

/**
 * The round's rules, decided against its own history (API document 2.10 and contract section 5).
 * Throws an AppError for a refusal; returns 'existing' when this transactionId is already in the round.
 */
export function decideRecord(state: RoundState, cmd: RecordTransaction): RecordDecision {
  const r = cmd.request;
  const existing = state.txs.get(r.transactionId);
  if (existing) {
    if (existing.contentHash !== cmd.contentHash) throw conflict('transactionId already used with different content');
    return { kind: 'existing', tx: existing };
  }
  if (state.playerRef !== undefined && state.playerRef !== r.playerRef) throw conflict('round belongs to another player');
  if ((r.type === 'BET' || r.type === 'WIN') && state.completed) throw conflict('round already completed');
  if (r.type === 'ROLLBACK') {
    const bet = state.txs.get(r.originalTransactionId ?? '');
    if (!bet || bet.request.type !== 'BET') throw badRequest('originalTransactionId is not a BET of this round');
    if (bet.rolledBackBy !== undefined && bet.rolledBackBy !== r.transactionId) throw conflict('bet already rolled back');
  }
  if (cmd.sessionExpired) {
    // Decided here: an expired session still settles the rounds it opened, but opens nothing new.
    const openedHere = [...state.txs.values()].some((t) => t.request.type === 'BET' && t.request.sessionToken === r.sessionToken);
    if (r.type === 'BET' || !openedHere) throw new AppError(401, 'invalid session');
  }
  return {
    kind: 'record',
    events: [
      {
        type: 'TransactionRecorded',
        data: {
          providerId: cmd.providerId,
          operatorId: cmd.operatorId,
          origin: cmd.origin,
          request: r,
          walletBody: JSON.stringify(r),
          contentHash: cmd.contentHash,
          recordedAt: cmd.now.toISOString(),
        },
      },
    ],
  };
}

export type WalletOutcome =
  | { kind: 'reply'; reply: WalletReply }
  | { kind: 'failed'; detail: string; httpStatus?: number }
  | { kind: 'timed_out' };

/** The outcome of one wallet attempt, as events; nothing when the transaction was already settled for good. */
export function decideOutcome(state: RoundState, transactionId: string, attempt: number, outcome: WalletOutcome, now: Date): RoundEvent[] {
  const tx = state.txs.get(transactionId);
  if (!tx || isFinal(tx.status)) return [];
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
