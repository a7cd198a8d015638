import type { Pool } from '../db/pool.ts';
import { kickFence, type FenceHold } from './kick-fence.ts';
import { claimTransaction, releaseClaim, releaseLease } from './registry.ts';
import {
  comparePositions,
  GuardBrokenError,
  guardBroken,
  guardEvent,
  WrongExpectedRevisionError,
  type AppendResult,
  type EventStore,
  type ExpectedRevision,
  type NewEvent,
  type Position,
  type RecorderHooks,
  type RecordOutcome,
  type RecordRequest,
  type StreamGuard,
  type TransactionRecorder,
} from './port.ts';

/**
 * The recorder for a store kept apart from the registry (EventStoreDB): the claim, with the guard read
 * beside it, then the append. A claim refused by the guard is released again, so the id stays free.
 *
 * The guard check and the append are two calls to the event store, so a kick could land between them.
 * A guarded record holds the kick fence shared (kickFence) from before its check to after its append, and
 * a kick (exclusive) appends under it exclusive: the kick waits for the records already checked, and the
 * records after it wait for the kick and then see it.
 *
 * The fence is a lock of a Postgres session, which a dying connection lets go of unseen. A record whose
 * fence connection has ended by the time of its append appends nothing: it gives back what its claim took
 * and fails with the connection's error (503 to its provider, whose resubmission takes the fence afresh
 * and sees any kick that came meanwhile). A kick that lost its fence takes it again before it is
 * acknowledged (kickFence). What is left, a connection dying during the append itself with a kick in
 * that moment, cannot be undone once the append has landed: it is reported (`hooks.kickMissed`) when the
 * kick's event precedes the append in the log. An append whose answer was lost (its error thrown) is
 * looked for in its stream, since it may have landed; when the stream cannot be read to tell, a kick of
 * the player is reported as one that may have been missed.
 */
/** What one fence holder's append did: whether it was sent (from then on it may land, whatever its answer), and where it landed, once answered. */
interface FencedAppend {
  sent: boolean;
  landed: Position | undefined;
}

export function claimThenAppend(pool: Pool, store: EventStore, hooks: RecorderHooks = {}): TransactionRecorder {
  const fence = kickFence(pool, hooks);
  /**
   * After a fence lost while `guard` was held over an append: was a kick before it? `landing`: where the
   * append landed, 'none' (nothing was appended), or 'unknown' (its answer was lost, and its stream could
   * not be read to tell). The append stands either way; a log that cannot be read now is reported as a
   * kick that may have been missed.
   */
  const reportMissedKick = async (guard: StreamGuard, streamId: string, landing: Position | 'none' | 'unknown') => {
    if (landing === 'none' || !hooks.kickMissed) return;
    const position = landing === 'unknown' ? undefined : landing;
    const missed = { guardStream: guard.stream, streamId, position };
    const kick = await guardEvent(store, guard).then(
      (e) => ({ e }),
      () => undefined,
    );
    if (!kick) return hooks.kickMissed({ ...missed, kickPosition: undefined });
    if (kick.e && (position === undefined || comparePositions(kick.e.position, position) < 0)) hooks.kickMissed({ ...missed, kickPosition: kick.e.position });
  };
  /** The append of one holder of the fence, made through `append` below, which keeps what became of it. */
  const fencedAppend = (): FencedAppend => ({ sent: false, landed: undefined });
  const append = async (streamId: string, events: NewEvent[], expected: ExpectedRevision, made: FencedAppend): Promise<AppendResult> => {
    made.sent = true;
    try {
      const result = await store.append(streamId, events, expected);
      made.landed = result.position;
      return result;
    } catch (err) {
      // Refused at its revision: nothing was written. Any other failure may have written it (its answer lost).
      if (err instanceof WrongExpectedRevisionError) made.sent = false;
      throw err;
    }
  };
  /**
   * Where an append made under a fence since lost landed: its answer's position; or, for one sent and not
   * answered (its answer lost with a connection, so it may have landed), where its stream holds its first
   * event ('none' when it is not there, 'unknown' when the stream cannot be read now). 'none' when nothing
   * was sent (the claim, the guard's check or the fence's confirmation failed first) or it was refused.
   */
  const landing = async (streamId: string, first: NewEvent | undefined, made: FencedAppend): Promise<Position | 'none' | 'unknown'> => {
    if (made.landed !== undefined) return made.landed;
    if (!made.sent || first === undefined) return 'none';
    return store.readStream(streamId).then(
      (events) => events.find((e) => e.id === first.id)?.position ?? 'none',
      () => 'unknown' as const,
    );
  };
  const record = async (r: RecordRequest, held?: FenceHold, made: FencedAppend = fencedAppend()): Promise<RecordOutcome> => {
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
      // A fence whose connection has ended (or gone silent) holds nothing: no append under it.
      await held?.confirm();
    } catch (err) {
      await giveBack();
      throw err;
    }
    try {
      const result = await append(r.entry.roundStream, r.events, r.expectedRevision === -1 ? 'no_stream' : r.expectedRevision, made);
      return { kind: 'claimed', claim, revoked, append: { kind: 'appended', result } };
    } catch (err) {
      if (err instanceof WrongExpectedRevisionError) return { kind: 'claimed', claim, revoked, append: { kind: 'conflict' } };
      // The append may have been stored (its answer lost), so the claim stays; the lease is freed for a resubmission.
      await releaseLease(pool, r.registryKey, r.transactionId, r.token);
      throw err;
    }
  };
  return {
    record: (r) => {
      const guard = r.guard;
      if (!guard) return record(r);
      const made = fencedAppend();
      return fence.hold(guard.stream, 'shared', (held) => record(r, held, made), async () =>
        reportMissedKick(guard, r.entry.roundStream, await landing(r.entry.roundStream, r.events[0], made)),
      );
    },
    // The fence is held on a connection of its own across calls to EventStoreDB, which takes no Postgres
    // lock: nothing held in Postgres waits on what the fence's holders do.
    exclusive: (guardStream, fn) => fence.hold(guardStream, 'exclusive', () => fn(store)),
    guarded: (guard) => ({
      readStream: (streamId, options) => store.readStream(streamId, options),
      append: (streamId, events, expected) => {
        const made = fencedAppend();
        return fence.hold(
          guard.stream,
          'shared',
          async (held) => {
            if (await guardBroken(store, guard)) throw new GuardBrokenError(guard);
            await held.confirm();
            return append(streamId, events, expected, made);
          },
          async () => reportMissedKick(guard, streamId, await landing(streamId, events[0], made)),
        );
      },
    }),
    close: () => fence.close(),
  };
}
