import { createHash, randomUUID } from 'node:crypto';
import type { CatalogStore } from '../../shared/catalog/store.ts';
import { attemptStatus, betToAwaitBefore, isFinal, mayAttempt, roundDecider, workerAttempts, type AttemptBy, type RoundCommand, type RoundState, type SessionStanding, type TxState } from './decider.ts';
import { isRefusal } from '../../shared/decider.ts';
import { handleCommand, readState } from '../../shared/eventstore/command.ts';
import type { EventStore } from '../../shared/eventstore/port.ts';
import { signedCall, walletTarget, type OutboundResult } from '../../shared/http/outbound.ts';
import { classify } from './wallet-reply.ts';
import type { Logger } from '../../shared/logger.ts';
import type { Metrics } from '../../shared/metrics.ts';
import type { Pool } from '../../shared/db/pool.ts';
import { leaseHeld, releaseLease, renewLease, takeLease } from '../../shared/eventstore/registry.ts';
import type { RoundCache, RoundSnapshot } from './round-cache.ts';

export interface DispatchDeps {
  pool: Pool;
  eventStore: EventStore;
  catalog: CatalogStore;
  logger: Logger;
  now: () => Date;
  metrics?: Metrics;
  /** Where this process keeps the rounds it writes (see RoundCache); the outcome of an attempt goes there too. */
  rounds?: RoundCache;
}

/** Where a transaction lives: its round stream and its id. */
export interface TxRef {
  roundStream: string;
  transactionId: string;
}

/** BullMQ job id of a transaction: a hash, because ids may hold ':' (stale-rollback:…), which BullMQ refuses. */
export const txKey = (ref: TxRef): string => createHash('sha256').update(`${ref.roundStream}\n${ref.transactionId}`).digest('hex').slice(0, 40);

export const readRound = (store: EventStore, roundStream: string): Promise<RoundSnapshot> => readState(store, roundStream, roundDecider);

export async function readTx(store: EventStore, ref: TxRef): Promise<TxState | undefined> {
  return (await readRound(store, ref.roundStream)).state.txs.get(ref.transactionId);
}

/** A lease outlives the wallet call it covers by this much; a holder that died frees it after that. */
export const leaseTtl = (walletTimeoutMs: number): number => walletTimeoutMs + 5000;
// randomUUID is served from a cache Node fills 128 ids at a time; randomBytes goes into OpenSSL on
// every call (about 2 µs here, twice a transaction with the outbound nonce).
export const leaseToken = (): string => randomUUID();

export const walletTimeoutOf = (deps: DispatchDeps, operatorId: string): number => deps.catalog.snapshot().operators.get(operatorId)?.walletTimeoutMs ?? 5000;

/**
 * The dispatch lease a caller holds: its key, token, when it was taken (Date.now()) and for how long
 * (`ttlMs`, leaseTtl of the wallet timeout the catalog had then: a catalog change since does not change it).
 */
export interface HeldLease {
  registryKey: string;
  token: string;
  takenAt: number;
  ttlMs: number;
}

/**
 * One wallet attempt made: the transaction as its outcome makes it (decided on the round the attempt
 * was made on), whether the wallet replied (200 with a valid reply, which it stored: asked again, it
 * gives the same), and `record`, which appends the outcome and returns the transaction as recorded.
 */
export interface WalletAttempt {
  tx: TxState;
  replied: boolean;
  record: () => Promise<TxState>;
}

/**
 * Calls the wallet once with the stored body and records the outcome. The caller holds the lease and
 * passes the round as it just read it. Returns the transaction unchanged when it may not be attempted,
 * or when the lease was lost meanwhile (another holder is attempting it).
 */
export async function attemptWallet(deps: DispatchDeps, ref: TxRef, round: RoundSnapshot, lease: HeldLease, by: AttemptBy): Promise<TxState> {
  const attempt = await callWallet(deps, ref, round, lease, by);
  return 'record' in attempt ? attempt.record() : attempt.tx;
}

/**
 * attemptWallet's call, without waiting for the outcome's append: the transaction as the wallet's
 * reply makes it, and the append to make (see OutcomeWriter). `{ tx }` alone: nothing was attempted.
 * `session`: the standing of a resubmission's session (mayAttempt).
 */
export async function callWallet(deps: DispatchDeps, ref: TxRef, round: RoundSnapshot, lease: HeldLease, by: AttemptBy, session: SessionStanding = 'active'): Promise<WalletAttempt | { tx: TxState }> {
  let tx = round.state.txs.get(ref.transactionId);
  if (!tx) throw new Error(`transaction ${ref.transactionId} is not recorded in ${ref.roundStream}`);
  if (!mayAttempt(round.state, ref.transactionId, session)) return { tx };
  const operator = deps.catalog.snapshot().operators.get(tx.operatorId);
  const timeoutMs = operator?.walletTimeoutMs ?? 5000;
  const bet = betToAwaitBefore(tx);
  if (bet !== undefined) {
    // The call must end within the lease's first term, so that no transaction waits on an attempt (or
    // answers "still in progress") for longer than the wallet timeout plus 5 s (contract section 8.5):
    // the BET is waited for until then at most. Still under way at that point, the ROLLBACK is not sent
    // in this attempt: recorded as failed, it is retried (it waits again), answered meanwhile as failed.
    const waited = await untilBetAttemptDone(deps, { roundStream: ref.roundStream, transactionId: bet }, timeoutMs, lease.takenAt + lease.ttlMs - timeoutMs - 1000);
    if (waited.cutShort) return notSent(deps, ref, round, tx, by, `not sent: the BET it reverses (${bet}) was still being attempted at the wallet; retried after it`);
    if (waited.waited) {
      round = await readRound(deps.eventStore, ref.roundStream);
      tx = round.state.txs.get(ref.transactionId)!;
      if (!mayAttempt(round.state, ref.transactionId, session)) return { tx };
    }
  }
  // The lease must outlast the whole call. Taken just now (the usual case) it does; after a wait (a
  // ROLLBACK behind its BET, a slow record), or taken under a shorter wallet timeout than the catalog's
  // now, it is renewed, and a holder that lost it does not call.
  const remaining = lease.takenAt + lease.ttlMs - Date.now();
  if (remaining < timeoutMs + 1000 && !(await renewLease(deps.pool, lease.registryKey, ref.transactionId, lease.token, leaseTtl(timeoutMs)))) return { tx };
  const number = tx.attempts + 1;
  const startedAt = performance.now();
  const result: OutboundResult = operator
    ? await signedCall({
        ...walletTarget(operator),
        pathAndQuery: '/v1/wallet/transaction',
        method: 'POST',
        rawBody: tx.walletBody,
      })
    : { kind: 'unreachable', error: `operator ${tx.operatorId} is not in the catalog`, notSent: true };
  const outcome = classify(result);
  const durationMs = Math.round(performance.now() - startedAt);
  if (operator) deps.metrics?.walletTransaction(tx.operatorId, number, attemptStatus(tx.request.type, outcome), startedAt);
  return attemptMade(deps, ref, round, tx, { type: 'RecordOutcome', transactionId: ref.transactionId, attempt: number, outcome, by, now: deps.now(), durationMs });
}

/** An attempt's outcome (`command`) on the round it was made on: the transaction as it makes it, and its append. */
function attemptMade(deps: DispatchDeps, ref: TxRef, known: RoundSnapshot, before: TxState, command: Extract<RoundCommand, { type: 'RecordOutcome' }>): WalletAttempt {
  const { outcome } = command;
  return {
    tx: decidedOn(known, command).txs.get(ref.transactionId) ?? before,
    replied: outcome.kind === 'reply',
    record: async () => {
      const { next, revision } = await handleCommand(deps.eventStore, ref.roundStream, roundDecider, command, { known });
      deps.rounds?.put(ref.roundStream, { state: next, revision });
      deps.logger.debug({ transactionId: ref.transactionId, attempt: command.attempt, outcome: outcome.kind === 'reply' ? outcome.reply.status : outcome.kind }, 'wallet attempt');
      return next.txs.get(ref.transactionId) ?? before;
    },
  };
}

/** The round after the decider's answer to a command that never refuses, made on it (nothing stored). */
function decidedOn(round: RoundSnapshot, command: RoundCommand): RoundState {
  const decision = roundDecider.decide(command, round.state);
  if (isRefusal(decision)) return round.state;
  return decision.reduce((s, e, i) => roundDecider.evolve(s, e, { revision: round.revision + 1 + i }), round.state);
}

/**
 * Whether a wallet call of `tx` is under way now: one its answer may still settle (not answered for good;
 * a voided BET's too, whose first call may be under way when its ROLLBACK voided it), and its dispatch
 * lease held (an answered transaction's lease is left to lapse). What a ROLLBACK waits for before its
 * BET's refund, and what the reconciler does not close a round under.
 */
export async function callUnderWay(pool: Pool, tx: TxState): Promise<boolean> {
  return (tx.status === 'voided' || !isFinal(tx.status)) && (await leaseHeld(pool, tx.providerId, tx.request.transactionId));
}

/**
 * A ROLLBACK waits for its BET (betToAwaitBefore), bounded by their operator's wallet timeout
 * (`timeoutMs`), while an attempt of the bet is under way: its first one, or a resubmission's holding the bet's lease. Returns whether it
 * waited, and whether the wait was cut short by `until` with the bet still under way (a wait that ran
 * its whole bound goes on to the call, as before `until` existed: the bet's own call has timed out).
 */
async function untilBetAttemptDone(deps: DispatchDeps, bet: TxRef, timeoutMs: number, until: number): Promise<{ waited: boolean; cutShort: boolean }> {
  let tx = await readTx(deps.eventStore, bet);
  if (!tx) return { waited: false, cutShort: false };
  // (A BET voided by this very ROLLBACK may still have its first attempt under way: callUnderWay counts it.)
  const bound = Date.now() + timeoutMs + 1000;
  const deadline = Math.min(bound, until);
  let waited = false;
  while (tx && (await callUnderWay(deps.pool, tx))) {
    if (Date.now() >= deadline) return { waited, cutShort: deadline < bound };
    waited = true;
    await new Promise((r) => setTimeout(r, 5));
    tx = await readTx(deps.eventStore, bet);
  }
  return { waited, cutShort: false };
}

/**
 * An attempt that does not reach the wallet (see callWallet): recorded as a failed attempt of `by`, with
 * why. No call was made: its `attempt` is the calls made so far (a transaction's attempts count its wallet
 * calls, contract section 9) and it has no duration (the console counts no call).
 */
const notSent = (deps: DispatchDeps, ref: TxRef, round: RoundSnapshot, tx: TxState, by: AttemptBy, detail: string): WalletAttempt =>
  attemptMade(deps, ref, round, tx, { type: 'RecordOutcome', transactionId: ref.transactionId, attempt: tx.attempts, outcome: { kind: 'failed', detail, notSent: true }, by, now: deps.now() });

/**
 * The worker's attempt: under the transaction's dispatch lease (one wallet call at a time per
 * transaction, across every process), re-read, and call the wallet if the worker still attempts it
 * (workerAttempts: a BET's own attempt may have been made meanwhile). Returns undefined when another
 * process holds the lease (it is attempting right now); `attempted: false` when the worker no longer
 * attempts it (settled meanwhile, or a BET whose own attempt failed), with the transaction as re-read.
 */
export async function dispatch(deps: DispatchDeps, ref: TxRef, known: TxState): Promise<{ tx: TxState; attempted: boolean } | undefined> {
  const token = leaseToken();
  const takenAt = Date.now();
  const ttlMs = leaseTtl(walletTimeoutOf(deps, known.operatorId));
  if (!(await takeLease(deps.pool, known.providerId, ref.transactionId, token, ttlMs))) return undefined;
  try {
    const round = await readRound(deps.eventStore, ref.roundStream);
    if (!workerAttempts(round.state, ref.transactionId)) return { tx: round.state.txs.get(ref.transactionId) ?? known, attempted: false };
    return { tx: await attemptWallet(deps, ref, round, { registryKey: known.providerId, token, takenAt, ttlMs }, 'worker'), attempted: true };
  } finally {
    await releaseLease(deps.pool, known.providerId, ref.transactionId, token);
  }
}

/**
 * Stops retrying once the decider says the retries ran out: records the dead letter (kept, visible to
 * auditors), under the lease so that no attempt is in flight whose reply would then go unrecorded.
 * False when an attempt holds the lease.
 */
export async function deadLetter(deps: DispatchDeps, ref: TxRef, known: TxState, retryWindowSeconds: number): Promise<boolean> {
  const token = leaseToken();
  if (!(await takeLease(deps.pool, known.providerId, ref.transactionId, token, leaseTtl(walletTimeoutOf(deps, known.operatorId))))) return false;
  try {
    const { events } = await handleCommand(deps.eventStore, ref.roundStream, roundDecider, {
      type: 'DeadLetter',
      transactionId: ref.transactionId,
      retryWindowSeconds,
      now: deps.now(),
    });
    if (events.length > 0) deps.metrics?.deadLettered(known.operatorId);
    return true;
  } finally {
    await releaseLease(deps.pool, known.providerId, ref.transactionId, token);
  }
}
