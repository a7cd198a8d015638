import { randomUUID } from 'node:crypto';
import { contentHash } from '../../shared/canonical.ts';
import type { Pool } from '../../shared/db/pool.ts';
import { decideRecord, isCredit, isFinal, roundDecider, type RecordDecision, type RoundState, type TxState } from './decider.ts';
import type { Origin, TransactionRequest } from './events.ts';
import { AppError, conflict } from '../../shared/errors.ts';
import { evolveAppended, handleCommand, type KnownState } from '../../shared/eventstore/command.ts';
import { guardBroken, type StreamGuard } from '../../shared/eventstore/port.ts';
import { attemptWallet, leaseToken, leaseTtl, readRound, walletTimeoutOf, type DispatchDeps, type HeldLease, type RoundSnapshot } from './dispatch.ts';
import { enqueueRetry, type DispatchQueues } from './queue.ts';
import { claimAndRecord, claimIsOwn, claimTransaction, releaseClaim, releaseLease, type Claim, type RegistryEntry } from './registry.ts';
import type { RoundCache } from './round-cache.ts';

export interface LedgerDeps extends DispatchDeps {
  pool: Pool;
  /** The per-operator retry queues (undefined: no retries from here). */
  queues: DispatchQueues | undefined;
  retryDelayMs: number;
  /** The rounds this process wrote last: the next transaction of a round is decided without reading it. */
  rounds: RoundCache;
  /**
   * The event store is kept in this database (the Postgres adapter): a new transaction is claimed,
   * checked and recorded in one statement (claimAndRecord) instead of a claim and then an append.
   */
  recordWithClaim: boolean;
}

export interface Submission {
  request: TransactionRequest;
  /** Registry namespace: the provider, or 'platform' for adjustments. */
  registryKey: string;
  providerId: string;
  operatorId: string;
  origin: Origin;
  roundStream: string;
  sessionExpired: boolean;
  /**
   * Broken when the session was kicked: then nothing new is recorded (401, the id stays free), while
   * what was recorded before is still answered. Checked in the claim's statement, or beside the claim.
   */
  revocation?: StreamGuard;
}

/**
 * Records a transaction (write-ahead), makes a wallet attempt, records its outcome, and hands an
 * unsettled credit to the retry queue. Everything happens under the transaction's dispatch lease (on
 * its registry row), so identical concurrent submissions queue behind the first and are answered from
 * what it recorded.
 * A resubmission of identical content is answered from the stored outcome without calling the wallet
 * again; only a transaction whose last attempt failed is attempted again. Different content under a
 * used transactionId (by this registrant, or by anyone for the same operator's player) is 409.
 */
export async function submitTransaction(deps: LedgerDeps, sub: Submission): Promise<TxState> {
  const txId = sub.request.transactionId;
  const hash = contentHash(sub.request);
  const mine = { contentHash: hash, roundStream: sub.roundStream };
  const wallet = { operatorId: sub.operatorId, playerRef: sub.request.playerRef };
  const walletTimeoutMs = walletTimeoutOf(deps, sub.operatorId);
  const token = leaseToken();
  const deadline = Date.now() + leaseTtl(walletTimeoutMs) + 1000;
  if (deps.recordWithClaim) {
    const fast = await recordInOneTrip(deps, sub, mine, token, leaseTtl(walletTimeoutMs));
    if (fast) return fast.tx;
  }
  // The revocation guard, read beside the claim (first time round only: a kick after that point comes
  // after the claim, like a kick after the record).
  let revocation = sub.revocation;
  let revoked = false;
  let pause = 5;
  for (;;) {
    // Claim and lease in one statement; the guard beside it.
    const takenAt = Date.now();
    const [claimed, checked] = await Promise.allSettled([
      claimTransaction(deps.pool, sub.registryKey, txId, mine, wallet, token, leaseTtl(walletTimeoutMs)),
      revocation ? guardBroken(deps.eventStore, revocation) : Promise.resolve(false),
    ]);
    revocation = undefined;
    if (claimed.status === 'rejected') throw claimed.reason;
    const claim = claimed.value;
    if (checked.status === 'rejected') {
      if (claim.leased) {
        if (claim.inserted) await releaseClaim(deps.pool, sub.registryKey, txId, token);
        else await releaseLease(deps.pool, sub.registryKey, txId, token);
      }
      throw checked.reason;
    }
    revoked ||= checked.value;
    if (!claimIsOwn(claim, mine)) throw conflict('transactionId already used with different content');
    if (claim.leased) return underLease(deps, sub, claim, { registryKey: sub.registryKey, token, takenAt }, { revoked });
    // Another submission (or the worker) is attempting it: its outcome is usually the answer.
    const held = (await readRound(deps.eventStore, sub.roundStream)).state.txs.get(txId);
    if (held && isFinal(held.status)) return held;
    if (Date.now() > deadline) {
      if (held) return held;
      throw new AppError(504, 'transaction still in progress; resubmit to get its outcome');
    }
    await new Promise((r) => setTimeout(r, pause));
    pause = Math.min(pause * 2, 100);
  }
}

/**
 * The usual way in, for a new transaction with the Postgres store: decided on the round as this process
 * knows it, then claimed, checked against the guard and recorded in one statement. The decision stands
 * only if that append succeeds (the cached round may be behind); otherwise, as for a resubmission, the
 * claim goes on under its lease with the round read afresh. Returns the outcome, or undefined when the
 * usual way (claim, then record) must answer.
 */
async function recordInOneTrip(deps: LedgerDeps, sub: Submission, mine: RegistryEntry, token: string, ttlMs: number): Promise<{ tx: TxState } | undefined> {
  const txId = sub.request.transactionId;
  const known = knownRound(deps, sub);
  if (!known) return undefined;
  let decision: RecordDecision;
  try {
    decision = decideRecord(known.state, { ...sub, contentHash: mine.contentHash, now: deps.now(), sessionRevoked: false });
  } catch {
    return undefined; // a refusal on a cached round is decided again on a fresh read
  }
  if (decision.kind !== 'record') return undefined;
  const events = decision.events.map((e) => ({ id: randomUUID(), type: e.type, data: e.data }));
  const takenAt = Date.now();
  const outcome = await claimAndRecord(deps.pool, {
    registryKey: sub.registryKey,
    transactionId: txId,
    entry: mine,
    wallet: { operatorId: sub.operatorId, playerRef: sub.request.playerRef },
    token,
    ttlMs,
    guard: sub.revocation,
    expectedRevision: known.revision,
    events,
  });
  // Refused means new to this registrant under a kicked session: the decider's refusal, from its statement.
  if (outcome.kind === 'refused') throw new AppError(401, 'invalid session');
  if (outcome.kind === 'vanished') return undefined;
  const { claim, append, revoked } = outcome;
  if (!claimIsOwn(claim, mine)) throw conflict('transactionId already used with different content');
  if (!claim.leased) return undefined;
  const lease = { registryKey: sub.registryKey, token, takenAt };
  if (append?.kind === 'appended') {
    const round = { state: evolveAppended(roundDecider, known.state, sub.roundStream, decision.events, append.result), revision: append.result.nextRevision };
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
    if (options.recorded) {
      round = options.recorded;
    } else {
      try {
        const recorded = await handleCommand(
          deps.eventStore,
          sub.roundStream,
          roundDecider,
          (state) => {
            const d = decideRecord(state, { ...sub, contentHash: claim.entry.contentHash, now: deps.now(), sessionRevoked: options.revoked });
            return { events: d.kind === 'record' ? d.events : [], result: d };
          },
          { known: options.fresh ? undefined : knownRound(deps, sub) },
        );
        round = { state: recorded.next, revision: recorded.revision };
        deps.rounds.put(sub.roundStream, round);
      } catch (err) {
        // A refusal recorded nothing: free the id for a valid submission. Any other failure may have
        // recorded it (the append committed, the answer was lost), so the claim stays.
        if (claim.inserted && err instanceof AppError && err.status < 500) {
          await releaseClaim(deps.pool, sub.registryKey, txId, token);
          settled = true;
        }
        throw err;
      }
    }
    const tx = await attemptWallet(deps, { roundStream: sub.roundStream, transactionId: txId }, round, lease);
    if (isCredit(tx.request.type) && !isFinal(tx.status)) {
      await enqueueRetry(deps.queues, sub.operatorId, { roundStream: sub.roundStream, transactionId: txId }, deps.retryDelayMs).catch((err: unknown) =>
        // The recovery sweep finds it from Postgres; nothing is lost.
        deps.logger.warn({ err, transactionId: txId }, 'could not enqueue wallet retry'),
      );
    }
    // Settled for good: nobody needs the lease again (waiters read the outcome), so it is left to lapse.
    // Not a voided BET's: the ROLLBACK behind it waits while its lease is held (see attemptWallet).
    settled = isFinal(tx.status) && tx.status !== 'voided';
    return tx;
  } finally {
    if (!settled) await releaseLease(deps.pool, sub.registryKey, txId, token);
  }
}

/** How a transaction's state is answered to whoever submitted it (contract section 5). */
export function replyFor(tx: TxState): { status: number; body: string } {
  switch (tx.status) {
    case 'applied':
    case 'declined':
      return { status: 200, body: tx.reply!.body };
    case 'invalid':
      return { status: 502, body: JSON.stringify({ error: `wallet answered DECLINED to a ${tx.request.type}` }) };
    case 'failed':
      return { status: 502, body: JSON.stringify({ error: 'wallet call failed' }) };
    case 'timed_out':
      return { status: 504, body: JSON.stringify({ error: 'wallet timeout' }) };
    case 'dead':
      return { status: 502, body: JSON.stringify({ error: 'wallet never accepted the transaction; retries stopped' }) };
    case 'voided':
      return { status: 409, body: JSON.stringify({ error: 'bet was rolled back' }) };
    case 'recorded':
      return { status: 504, body: JSON.stringify({ error: 'transaction still in progress; resubmit to get its outcome' }) };
    default: {
      const unknown: never = tx.status;
      return unknown;
    }
  }
}
