import { createPool, type Pool } from '../db/pool.ts';

/** The advisory lock class of the kick fence: (KICK_FENCE, hashtext(guard stream)). */
export const KICK_FENCE = 7281005;
/** The fence's connections per process (EventStoreDB: every guarded record holds one): 16, or fewer with a smaller query pool. */
export const fenceConnections = (poolSize: number): number => Math.min(16, poolSize);

export interface KickFence {
  /** Runs `fn` holding the fence of `guardStream` in `mode`, until `fn` has settled. */
  hold<T>(guardStream: string, mode: 'shared' | 'exclusive', fn: () => Promise<T>): Promise<T>;
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
 */
export function kickFence(pool: Pool): KickFence {
  let fences: Pool | undefined;
  return {
    async hold(stream, mode, fn) {
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
    },
    async close() {
      await fences?.end();
    },
  };
}
