import { createPool, type Pool } from '../db/pool.ts';
import { claimTransaction, releaseClaim, releaseLease } from './registry.ts';
import { guardBroken, WrongExpectedRevisionError, type EventStore, type RecordOutcome, type RecordRequest, type TransactionRecorder } from './port.ts';

const KICK_FENCE = 7281005;
/** Records under a guard that may be between their guard check and their append at once, per process: 16, or fewer with a smaller query pool. */
export const fenceConnections = (poolSize: number): number => Math.min(16, poolSize);

/**
 * The recorder for a store kept apart from the registry (EventStoreDB): the claim, with the guard read
 * beside it, then the append. A claim refused by the guard is released again, so the id stays free.
 *
 * The guard check and the append are two calls to the event store, so a kick could land between them.
 * A guarded record holds a shared Postgres advisory lock on the guard stream from before its check to
 * after its append, and a kick (exclusive) appends under the exclusive lock: the kick waits for the
 * records already checked, and the records after it wait for the kick and then see it. The locks are
 * held on connections of a small pool of their own, so waiting holders never starve the claims.
 */
export function claimThenAppend(pool: Pool, store: EventStore): TransactionRecorder {
  let fences: Pool | undefined;
  const fenced = async <T>(stream: string, mode: 'shared' | 'exclusive', fn: () => Promise<T>): Promise<T> => {
    fences ??= createPool(pool.options.connectionString!, fenceConnections(pool.options.max ?? 10));
    const client = await fences.connect();
    const suffix = mode === 'shared' ? '_shared' : '';
    let broken: unknown;
    try {
      await client.query(`SELECT pg_advisory_lock${suffix}($1, hashtext($2))`, [KICK_FENCE, stream]);
      try {
        return await fn();
      } finally {
        await client.query(`SELECT pg_advisory_unlock${suffix}($1, hashtext($2))`, [KICK_FENCE, stream]).catch((err: unknown) => (broken = err));
      }
    } finally {
      // A connection that could not unlock is dropped: its session, and so its lock, ends with it.
      client.release(broken instanceof Error ? broken : undefined);
    }
  };
  const record = async (r: RecordRequest): Promise<RecordOutcome> => {
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
  };
  return {
    record: (r) => (r.guard ? fenced(r.guard.stream, 'shared', () => record(r)) : record(r)),
    exclusive: (guardStream, fn) => fenced(guardStream, 'exclusive', fn),
    async close() {
      await fences?.end();
    },
  };
}
