import type { Pool } from '../db/pool.ts';
import { kickFence } from './kick-fence.ts';
import { claimTransaction, releaseClaim, releaseLease } from './registry.ts';
import { GuardBrokenError, guardBroken, WrongExpectedRevisionError, type EventStore, type RecordOutcome, type RecordRequest, type TransactionRecorder } from './port.ts';

/**
 * The recorder for a store kept apart from the registry (EventStoreDB): the claim, with the guard read
 * beside it, then the append. A claim refused by the guard is released again, so the id stays free.
 *
 * The guard check and the append are two calls to the event store, so a kick could land between them.
 * A guarded record holds the kick fence shared (kickFence) from before its check to after its append, and
 * a kick (exclusive) appends under it exclusive: the kick waits for the records already checked, and the
 * records after it wait for the kick and then see it.
 */
export function claimThenAppend(pool: Pool, store: EventStore): TransactionRecorder {
  const fence = kickFence(pool);
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
    record: (r) => (r.guard ? fence.hold(r.guard.stream, 'shared', () => record(r)) : record(r)),
    // The fence is held on a connection of its own across calls to EventStoreDB, which takes no Postgres
    // lock: nothing held in Postgres waits on what the fence's holders do.
    exclusive: (guardStream, fn) => fence.hold(guardStream, 'exclusive', () => fn(store)),
    guarded: (guard) => ({
      readStream: (streamId, options) => store.readStream(streamId, options),
      append: (streamId, events, expected) =>
        fence.hold(guard.stream, 'shared', async () => {
          if (await guardBroken(store, guard)) throw new GuardBrokenError(guard);
          return store.append(streamId, events, expected);
        }),
    }),
    close: () => fence.close(),
  };
}
