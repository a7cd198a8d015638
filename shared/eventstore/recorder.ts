import type { Pool } from '../db/pool.ts';
import { claimTransaction, releaseClaim, releaseLease } from './registry.ts';
import { WrongExpectedRevisionError, type AppendResult, type EventStore, type NewEvent } from './port.ts';

/**
 * The transaction recorder port: claims a transaction id in the registry (provider key and wallet key,
 * with its dispatch lease) and, when the claim registers it, appends its write-ahead record to the
 * round, unless a guard stream says no (a kick). Each event store adapter implements it: the Postgres
 * one in one statement (the registry and the events share a database), the EventStoreDB one as a claim
 * and then an append. Callers never know which.
 */
export interface TransactionRecorder {
  record(request: RecordRequest): Promise<RecordOutcome>;
}

/** A condition on another stream: it holds no event of this type from this revision on (say, no kick of a session). */
export interface StreamGuard {
  stream: string;
  fromRevision: number;
  eventType: string;
}

/** Whether the guard is broken: the stream holds such an event. */
export async function guardBroken(store: EventStore, guard: StreamGuard): Promise<boolean> {
  const later = await store.readStream(guard.stream, { fromRevision: guard.fromRevision });
  return later.some((e) => e.type === guard.eventType);
}

export interface RegistryEntry {
  contentHash: string;
  roundStream: string;
}

/** The wallet's own identity of a transaction: the operator's wallet deduplicates on (playerRef, transactionId). */
export interface WalletKey {
  operatorId: string;
  playerRef: string;
}

export interface Claim {
  /** True when this call registered the id; false when it was registered before. */
  inserted: boolean;
  /** True when this call holds the dispatch lease (until released or ttl). */
  leased: boolean;
  /** The registrant of the id: this submission's (or the same content's) entry, or whoever holds it. */
  entry: RegistryEntry;
  /** The id is held for this wallet key by another registrant (another provider, an adjustment, the reconciler). */
  taken: boolean;
}

/** A claim of a transaction id in the registry, with its dispatch lease for ttlMs. */
export interface ClaimRequest {
  registryKey: string;
  transactionId: string;
  entry: RegistryEntry;
  wallet: WalletKey;
  token: string;
  ttlMs: number;
}

export interface RecordRequest extends ClaimRequest {
  /** When broken (say, the session was kicked), nothing new is claimed or recorded. */
  guard: StreamGuard | undefined;
  /** The record, appended to entry.roundStream at this revision (-1: a new stream) if the claim registers the id. */
  expectedRevision: number;
  /** Nothing to append: the claim alone (a resubmission, or a record decided after the claim). */
  events: NewEvent[];
}

export type RecordOutcome =
  /** The guard is broken and the id is new to this registrant: nothing was claimed or recorded. */
  | { kind: 'refused' }
  /** The id's row went away between the claim and its read (a refused submission released it): ask again. */
  | { kind: 'vanished' }
  /**
   * Claimed; when the claim registered the id and events were given, what their append did.
   * `revoked`: the guard is broken (the id was registered before: the caller answers it, records nothing).
   */
  | { kind: 'claimed'; claim: Claim; revoked: boolean; append: { kind: 'appended'; result: AppendResult } | { kind: 'conflict' } | undefined };

/**
 * The recorder for a store kept apart from the registry (EventStoreDB): the claim, with the guard read
 * beside it, then the append. A claim refused by the guard is released again, so the id stays free.
 */
export function claimThenAppend(pool: Pool, store: EventStore): TransactionRecorder {
  return {
    async record(r) {
      const [claimed, checked] = await Promise.allSettled([
        claimTransaction(pool, r.registryKey, r.transactionId, r.entry, r.wallet, r.token, r.ttlMs),
        r.guard ? guardBroken(store, r.guard) : Promise.resolve(false),
      ]);
      if (claimed.status === 'rejected') throw claimed.reason;
      const claim = claimed.value;
      // What this call took is given back when it cannot go on: the claim it inserted, or the lease.
      const giveBack = () =>
        claim.inserted ? releaseClaim(pool, r.registryKey, r.transactionId, r.token) : claim.leased ? releaseLease(pool, r.registryKey, r.transactionId, r.token) : undefined;
      if (checked.status === 'rejected') {
        await giveBack();
        throw checked.reason;
      }
      const revoked = checked.value;
      if (revoked && (claim.inserted || claim.taken)) {
        await giveBack();
        return { kind: 'refused' };
      }
      if (!claim.inserted || r.events.length === 0 || revoked) return { kind: 'claimed', claim, revoked, append: undefined };
      try {
        const result = await store.append(r.entry.roundStream, r.events, r.expectedRevision === -1 ? 'no_stream' : r.expectedRevision);
        return { kind: 'claimed', claim, revoked, append: { kind: 'appended', result } };
      } catch (err) {
        if (err instanceof WrongExpectedRevisionError) return { kind: 'claimed', claim, revoked, append: { kind: 'conflict' } };
        // The append may have been stored (its answer lost), so the claim stays; the lease is freed for a resubmission.
        await releaseLease(pool, r.registryKey, r.transactionId, r.token);
        throw err;
      }
    },
  };
}
