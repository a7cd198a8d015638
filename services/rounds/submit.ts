import { randomUUID } from 'node:crypto';
import { contentHash } from '../../shared/canonical.ts';
import type { Pool } from '../../shared/db/pool.ts';
import { isRefusal, Refused } from '../../shared/decider.ts';
import type { BackgroundTasks } from '../../shared/background.ts';
import { AppError } from '../../shared/errors.ts';
import { evolveAppended, handleCommand, type KnownState } from '../../shared/eventstore/command.ts';
import { GuardBrokenError, type Claim, type RecordRequest, type RegistryEntry, type StreamGuard, type TransactionRecorder } from '../../shared/eventstore/port.ts';
import { claimIsOwn, isClaimed, releaseClaim, releaseLease } from '../../shared/eventstore/registry.ts';
import { isCredit, isFinal, replyLearnableAgain, roundDecider, type RoundCommand, type RoundRefusal, type RoundState, type SessionStanding, type TxState } from './decider.ts';
import { callWallet, leaseToken, leaseTtl, readRound, walletTimeoutOf, type DispatchDeps, type HeldLease } from './dispatch.ts';
import type { Origin, TransactionRequest } from './events.ts';
import { enqueueRetry, type DispatchQueues } from './queue.ts';
import type { RoundCache, RoundSnapshot } from './round-cache.ts';
import type { Admission, OutcomeWriter } from './outcome-writer.ts';

export interface LedgerDeps extends DispatchDeps {
  pool: Pool;
  /** The per-operator retry queues (undefined: no retries from here). */
  queues: DispatchQueues | undefined;
  retryDelayMs: number;
  /** The rounds this process wrote last: the next transaction of a round is decided without reading it. */
  rounds: RoundCache;
  /** The event store's recorder: claims an id and records it (in one statement with the Postgres store). */
  recorder: TransactionRecorder;
  /**
   * Set: the submitter is answered as soon as the wallet replies (200), and that outcome is recorded
   * behind the answer (the provider's transaction route). Unset, and for a failed or timed-out attempt:
   * the outcome is recorded before the answer.
   */
  outcomes?: OutcomeWriter;
  /**
   * Submissions under way, which a stop waits for before it closes the stores: one whose caller's
   * connection is gone (dropped, or closed by the stop after 20 s) still has its wallet call and outcome
   * to finish.
   */
  inflight?: BackgroundTasks;
}

export interface Submission {
  request: TransactionRequest;
  /** Registry namespace: the provider, or 'platform' for adjustments. */
  registryKey: string;
  providerId: string;
  operatorId: string;
  origin: Origin;
  roundStream: string;
  /** Whether the submitter's session has expired (only settlement of its own rounds is then allowed). */
  sessionExpired: boolean;
  /**
   * Broken when the session was kicked: then nothing new is recorded (401, the id stays free), while
   * what was recorded before is still answered. Checked by the recorder, with the claim.
   */
  revocation?: StreamGuard;
}

const transactionIdReused = () => new Refused<RoundRefusal>({ kind: 'transaction-id-reused' });

/**
 * Records a transaction (write-ahead), makes a wallet attempt, records its outcome, and hands an
 * unsettled credit to the retry queue. Everything happens under the transaction's dispatch lease (on
 * its registry row), so identical concurrent submissions queue behind the first and are answered from
 * what it recorded.
 * A resubmission of identical content is answered from the stored outcome without calling the wallet
 * again; only a transaction whose last attempt failed is attempted again. Different content under a
 * used transactionId (by this registrant, or by anyone for the same operator's player) is 409.
 */
export function submitTransaction(deps: LedgerDeps, sub: Submission): Promise<TxState> {
  const submitted = submit(deps, sub);
  deps.inflight?.track(submitted);
  return submitted;
}

async function submit(deps: LedgerDeps, sub: Submission): Promise<TxState> {
  const mine: RegistryEntry = { contentHash: contentHash(sub.request), roundStream: sub.roundStream };
  const ttlMs = leaseTtl(walletTimeoutOf(deps, sub.operatorId));
  const token = leaseToken();
  // This process's outcome write on the round goes first: the round is then decided with it (waited for
  // a while at most: a store that cannot take it cannot take this one either, and the lease and a fresh
  // read keep a decision made without it safe).
  await deps.outcomes?.idle(sub.roundStream, 1000);
  const admission = await admit(deps, sub);
  try {
    return await recordAndAttempt(deps, sub, mine, token, ttlMs);
  } finally {
    admission?.release();
  }
}

/**
 * Room for a new transaction's wallet reply in the outcomes' write-behind (OutcomeWriter.admit), held
 * until the transaction ends. The wallet replies faster than the store records them: a new transaction
 * is refused before anything is recorded (503, the id stays free), rather than another reply held in
 * memory behind its answer. One already claimed, before its wait or during it, goes on without room: its
 * resubmission is answered from what was recorded (section 8.4).
 */
async function admit(deps: LedgerDeps, sub: Submission): Promise<Admission | undefined> {
  const outcomes = deps.outcomes;
  if (!outcomes) return undefined;
  const now = outcomes.tryAdmit(sub.operatorId);
  if (now) return now;
  const txId = sub.request.transactionId;
  const claimed = () => isClaimed(deps.pool, sub.registryKey, txId);
  if (await claimed()) return undefined;
  const later = await outcomes.admit(sub.operatorId, 5000);
  if (later || (await claimed())) return later;
  const backlog = { backlog: outcomes.size, backlogBytes: outcomes.bytes, operatorBytes: outcomes.bytesOf(sub.operatorId) };
  deps.logger.warn({ transactionId: txId, operatorId: sub.operatorId, ...backlog }, 'outcome backlog full: transaction refused (503), nothing recorded');
  deps.metrics?.outcomeBacklogRefused(sub.operatorId);
  throw new AppError(503, 'service unavailable', { 'Retry-After': '1' });
}

async function recordAndAttempt(deps: LedgerDeps, sub: Submission, mine: RegistryEntry, token: string, ttlMs: number): Promise<TxState> {
  const txId = sub.request.transactionId;
  const deadline = Date.now() + ttlMs + 1000;
  const fast = await recordInOneTrip(deps, sub, mine, token, ttlMs);
  if (fast) return fast.tx;
  // The kick is checked with the first claim only: one after that point comes after the claim, as a
  // kick after the record does.
  let guard = sub.revocation;
  let revoked = false;
  for (let pause = 5; ; pause = Math.min(pause * 2, 100)) {
    // The claim alone (and its lease); the record is decided under the lease.
    const takenAt = Date.now();
    const outcome = await deps.recorder.record(request(sub, mine, token, ttlMs, guard, -1, []));
    if (outcome.kind === 'refused') throw new Refused<RoundRefusal>({ kind: 'session-invalid' });
    if (outcome.kind === 'claimed') {
      // Checked with this claim; a row that vanished before its read claimed nothing, so the next try checks again.
      guard = undefined;
      const { claim } = outcome;
      revoked ||= outcome.revoked;
      if (!claimIsOwn(claim, mine)) throw transactionIdReused();
      if (claim.leased) return underLease(deps, sub, claim, { registryKey: sub.registryKey, token, takenAt, ttlMs }, { revoked });
      // Another submission (or the worker) is attempting it: its outcome is usually the answer. Not yet for
      // a BET voided while that call is under way: the call's reply may still settle it (applied or
      // declined), so it is waited for like any other, and 409 is answered only once it cannot.
      const held = (await readRound(deps.eventStore, sub.roundStream)).state.txs.get(txId);
      // (A voided one is waited for while the call under way may still answer: a holder's call lasts at
      // most the wallet timeout, so up to this lease's term less 1 s, within contract section 8.5's bound.)
      if (held && isFinal(held.status) && (held.status !== 'voided' || Date.now() > deadline - 2000)) return held;
      if (Date.now() > deadline) {
        if (held) return held;
        throw new AppError(504, 'transaction still in progress; resubmit to get its outcome');
      }
    }
    // (vanished: the row went away between the claim and its read; ask again.)
    await new Promise((r) => setTimeout(r, pause));
  }
}

function request(sub: Submission, mine: RegistryEntry, token: string, ttlMs: number, guard: StreamGuard | undefined, expectedRevision: number, events: RecordRequest['events']): RecordRequest {
  return {
    registryKey: sub.registryKey,
    transactionId: sub.request.transactionId,
    entry: mine,
    wallet: { operatorId: sub.operatorId, playerRef: sub.request.playerRef },
    token,
    ttlMs,
    guard,
    expectedRevision,
    events,
  };
}

const recordCommand = (sub: Submission, hash: string, now: Date, session: SessionStanding): RoundCommand => ({
  type: 'RecordTransaction',
  request: sub.request,
  providerId: sub.providerId,
  operatorId: sub.operatorId,
  origin: sub.origin,
  contentHash: hash,
  session,
  now,
});

/**
 * The usual way in, for a new transaction: decided on the round as this process knows it, then
 * claimed, checked against the guard and recorded by the store's recorder (one statement with the
 * Postgres store). The decision stands
 * only if that append succeeds (the cached round may be behind); otherwise, as for a resubmission, the
 * claim goes on under its lease with the round read afresh. Returns the outcome, or undefined when the
 * usual way (claim, then record) must answer.
 */
async function recordInOneTrip(deps: LedgerDeps, sub: Submission, mine: RegistryEntry, token: string, ttlMs: number): Promise<{ tx: TxState } | undefined> {
  const known = knownRound(deps, sub);
  if (!known) return undefined;
  // Active: a kick is the guard's to find, in the recorder's statement.
  const decision = roundDecider.decide(recordCommand(sub, mine.contentHash, deps.now(), sub.sessionExpired ? 'expired' : 'active'), known.state);
  // A refusal, or nothing to record, on a cached round is decided again on a fresh read.
  if (isRefusal(decision) || decision.length === 0) return undefined;
  const events = decision.map((e) => ({ id: randomUUID(), type: e.type, data: e.data }));
  const takenAt = Date.now();
  const outcome = await deps.recorder.record(request(sub, mine, token, ttlMs, sub.revocation, known.revision, events));
  // Refused means new to this registrant under a kicked session: the decider's refusal, from its statement.
  if (outcome.kind === 'refused') throw new Refused<RoundRefusal>({ kind: 'session-invalid' });
  if (outcome.kind === 'vanished') return undefined;
  const { claim, append, revoked } = outcome;
  if (!claimIsOwn(claim, mine)) throw transactionIdReused();
  if (!claim.leased) return undefined;
  const lease = { registryKey: sub.registryKey, token, takenAt, ttlMs };
  if (append?.kind === 'appended') {
    const round = { state: evolveAppended(roundDecider, known.state, decision, append.result), revision: append.result.nextRevision };
    deps.rounds.put(sub.roundStream, round);
    return { tx: await underLease(deps, sub, claim, lease, { recorded: round, revoked }) };
  }
  // Registered, but the round had moved on (the cache was behind); or a resubmission that took the lease.
  return { tx: await underLease(deps, sub, claim, lease, { fresh: true, revoked }) };
}

/**
 * The round as this process last knew it, unverified. A BET of a round it has never seen assumes a
 * new round (the usual case), which its append checks; anything else of an unseen round reads it.
 */
function knownRound(deps: LedgerDeps, sub: Submission): KnownState<RoundState> | undefined {
  const cached = deps.rounds.get(sub.roundStream);
  if (cached) return cached;
  return sub.request.type === 'BET' ? { state: roundDecider.initialState(), revision: -1, unverified: true } : undefined;
}

/**
 * Records the transaction (unless `recorded`: already done, this is the round after it), attempts the
 * wallet and hands an unsettled credit to the retry queue, under the lease. `fresh`: decide on the round
 * read afresh, not on what this process last knew of it. `revoked`: the session was kicked (only what
 * was recorded before is answered).
 */
async function underLease(
  deps: LedgerDeps,
  sub: Submission,
  claim: Claim,
  lease: HeldLease,
  options: { recorded?: RoundSnapshot; fresh?: boolean; revoked: boolean },
): Promise<TxState> {
  const { token } = lease;
  const txId = sub.request.transactionId;
  let settled = false;
  try {
    let round: RoundSnapshot;
    let session: SessionStanding = options.revoked ? 'revoked' : sub.sessionExpired ? 'expired' : 'active';
    if (options.recorded) {
      round = options.recorded;
    } else {
      // Recorded now, after its claim: a kick may have come since the claim's check, so the record's
      // append checks it again, under the fence (contract section 8, rule 4). A session already found
      // kicked records nothing new (the decider refuses it).
      const store = sub.revocation && !options.revoked ? deps.recorder.guarded(sub.revocation) : deps.eventStore;
      try {
        const recorded = await handleCommand(store, sub.roundStream, roundDecider, recordCommand(sub, claim.entry.contentHash, deps.now(), session), {
          known: options.fresh ? undefined : knownRound(deps, sub),
        }).catch((err: unknown) => {
          if (err instanceof GuardBrokenError) throw new Refused<RoundRefusal>({ kind: 'session-invalid' });
          throw err;
        });
        round = { state: recorded.next, revision: recorded.revision };
        deps.rounds.put(sub.roundStream, round);
      } catch (err) {
        // A refusal recorded nothing: free the id for a valid submission. Any other failure may have
        // recorded it (the append committed, the answer was lost), so the claim stays.
        if (claim.inserted && err instanceof Refused) {
          await releaseClaim(deps.pool, sub.registryKey, txId, token);
          settled = true;
        }
        throw err;
      }
    }
    const resend: RoundCommand = { type: 'Resend', transactionId: txId, now: deps.now() };
    // Decided in memory first: a new transaction (the usual case) announces nothing, and goes on at once.
    const toAnnounce = roundDecider.decide(resend, round.state);
    if (sub.revocation && session === 'active' && !isRefusal(toAnnounce) && toAnnounce.length > 0) {
      // A BET sent again (its call failed or timed out) is announced under the kick fence first: a kick
      // acknowledged since this claim's check stops it, as it stops a new transaction (contract section
      // 8, rule 4); the call is then made for a session found standing at the announcement.
      try {
        const resent = await handleCommand(deps.recorder.guarded(sub.revocation), sub.roundStream, roundDecider, resend, { known: round });
        // The round as decided on: after a conflict it was read again, and a ROLLBACK or a close that
        // landed meanwhile (the decision then empty) must stop the call too.
        round = { state: resent.next, revision: resent.revision };
        if (resent.events.length > 0) deps.rounds.put(sub.roundStream, round);
      } catch (err) {
        if (!(err instanceof GuardBrokenError)) throw err;
        session = 'revoked';
      }
    }
    const before = round.state.txs.get(txId);
    const attempt = await callWallet(deps, { roundStream: sub.roundStream, transactionId: txId }, round, lease, 'submission', session);
    if (!('record' in attempt)) return attempt.tx;
    if (deps.outcomes && attempt.replied && before && replyLearnableAgain(before)) {
      // The wallet replied, so it stored its reply: answered now, the outcome appended behind the answer,
      // under the lease, which is the write's from here (see OutcomeWriter). A failed or timed-out attempt
      // is recorded before it is answered: the wallet kept nothing of it, so asking again would not learn
      // it but make a new attempt, which a BET never gets (contract section 5). So is the reply to a BET's
      // later call (a resubmission's after a failed one), which nothing would ask for (replyLearnableAgain).
      let recorded: TxState | undefined;
      settled = true;
      deps.outcomes.write(
        { roundStream: sub.roundStream, transactionId: txId, operatorId: sub.operatorId, bytes: attempt.tx.reply?.body.length ?? 0 },
        async () => {
          recorded = await attempt.record();
        },
        () => afterOutcome(deps, sub, token, recorded),
      );
      return attempt.tx;
    }
    const tx = await attempt.record();
    settled = true;
    await afterOutcome(deps, sub, token, tx);
    return tx;
  } finally {
    if (!settled) await releaseLease(deps.pool, sub.registryKey, txId, token);
  }
}

/**
 * Once an attempt's outcome is recorded (undefined: it could not be): an unsettled credit goes to the
 * retry queue, and the lease is released. Settled for good, nobody needs the lease again (waiters read
 * the outcome), so it is left to lapse; not a voided BET's: the ROLLBACK behind it waits while its lease
 * is held (see callWallet).
 */
async function afterOutcome(deps: LedgerDeps, sub: Submission, token: string, tx: TxState | undefined): Promise<void> {
  const txId = sub.request.transactionId;
  if (tx && isCredit(tx.request.type) && !isFinal(tx.status)) {
    await enqueueRetry(deps.queues, sub.operatorId, { roundStream: sub.roundStream, transactionId: txId }, deps.retryDelayMs).catch((err: unknown) =>
      // The recovery sweep finds it from Postgres; nothing is lost.
      deps.logger.warn({ err, transactionId: txId }, 'could not enqueue wallet retry'),
    );
  }
  if (!tx || !isFinal(tx.status) || tx.status === 'voided') await releaseLease(deps.pool, sub.registryKey, txId, token);
}

