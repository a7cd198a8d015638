import { createPool, type Pool } from '../db/pool.ts';

/** The advisory lock class of the kick fence: (KICK_FENCE, hashtext(guard stream)). */
export const KICK_FENCE = 7281005;
/** The fence's connections per process (EventStoreDB: every guarded record holds one): 16, or fewer with a smaller query pool. */
export const fenceConnections = (poolSize: number): number => Math.min(16, poolSize);

/** What a holder can ask of the fence while it holds it. */
export interface FenceHold {
  /**
   * The error that ended the fence's connection, if it has ended: Postgres let go of the lock with the
   * session, so the fence may no longer be held. (A connection that dies unseen, as in a network
   * partition, is found by the unlock afterwards instead.)
   */
  lost(): Error | undefined;
}

/** The name the fence's connections give themselves (pg_stat_activity's application_name). */
export const KICK_FENCE_APPLICATION = 'ledger kick fence';

export interface KickFence {
  /**
   * Runs `fn` holding the fence of `guardStream` in `mode`, until `fn` has settled. If the fence may
   * have been lost meanwhile (its connection ended, or its unlock found no lock to release), a holder
   * who appended under it learns of it after `fn`: an exclusive holder (a kick) takes the fence again,
   * so that it returns only once every shared holder that could have missed its append has finished; a
   * shared holder's `afterLoss` is called with what `fn` returned.
   */
  hold<T>(guardStream: string, mode: 'shared' | 'exclusive', fn: (held: FenceHold) => Promise<T>, afterLoss?: (value: T) => Promise<void>): Promise<T>;
  close(): Promise<void>;
}

/**
 * The kick fence (contract section 8, rule 4): a Postgres advisory lock per guard stream (a player's
 * sessions), which a kick holds exclusive around its append and a transaction's record holds shared
 * from before its guard check to after its append, so that a kick acknowledged before a transaction is
 * recorded stops it, on either store. With EventStoreDB, held on connections of a small pool of its own
 * (opened at first use), so waiting holders never starve the queries they wait for: what they do while
 * holding it is calls to EventStoreDB, which take no Postgres lock. The Postgres store takes the same
 * locks inside the statements that append under them instead (ledger_claim_and_record, es_append_fenced):
 * held across other Postgres statements, they could close a circle of waits no database sees.
 *
 * A session lock goes with its session: a fence connection that dies (a failover, a killed backend)
 * lets go of it while its holder goes on. So the holder watches its connection (FenceHold.lost, checked
 * by a record just before its append) and confirms the lock by its unlock's answer (true only for a
 * session that held it throughout); see `hold` for what a holder does when it cannot.
 */
export function kickFence(pool: Pool): KickFence {
  let fences: Pool | undefined;
  const fence: KickFence = {
    async hold<T>(stream: string, mode: 'shared' | 'exclusive', fn: (held: FenceHold) => Promise<T>, afterLoss?: (value: T) => Promise<void>): Promise<T> {
      fences ??= createPool(pool.options.connectionString!, fenceConnections(pool.options.max ?? 10), { applicationName: KICK_FENCE_APPLICATION });
      const client = await fences.connect();
      const suffix = mode === 'shared' ? '_shared' : '';
      let lost: Error | undefined;
      const onError = (err: Error) => (lost ??= err);
      const onEnd = () => (lost ??= Object.assign(new Error('Connection terminated: the kick fence connection ended'), { code: '57P01' }));
      client.on('error', onError);
      client.on('end', onEnd);
      let broken: unknown;
      let kept = false;
      let value: T;
      try {
        await client.query(`SELECT pg_advisory_lock${suffix}($1, hashtext($2))`, [KICK_FENCE, stream]);
        try {
          value = await fn({ lost: () => lost });
        } finally {
          const unlocked = await client
            .query<{ ok: boolean }>(`SELECT pg_advisory_unlock${suffix}($1, hashtext($2)) AS ok`, [KICK_FENCE, stream])
            .catch((err: unknown) => ((broken = err), undefined));
          kept = lost === undefined && unlocked?.rows[0]?.ok === true;
        }
      } finally {
        client.off('error', onError);
        client.off('end', onEnd);
        // A connection that could not unlock is dropped: its session, and so its lock, ends with it.
        const drop = broken ?? lost;
        client.release(drop instanceof Error ? drop : undefined);
      }
      if (!kept) {
        if (mode === 'exclusive') await fence.hold(stream, 'exclusive', async () => undefined);
        else await afterLoss?.(value);
      }
      return value;
    },
    async close() {
      await fences?.end();
    },
  };
  return fence;
}
