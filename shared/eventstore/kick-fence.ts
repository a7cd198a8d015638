import type { QueryConfig } from 'pg';
import { createPool, type Pool } from '../db/pool.ts';

/** The advisory lock class of the kick fence: (KICK_FENCE, hashtext(guard stream)). */
export const KICK_FENCE = 7281005;
/** The fence's connections per process (EventStoreDB: every guarded record holds one): 16, or fewer with a smaller query pool. */
export const fenceConnections = (poolSize: number): number => Math.min(16, poolSize);

/** What a holder can ask of the fence while it holds it. */
export interface FenceHold {
  /**
   * Confirms the fence is still held, or throws the error that ended (or stalled) its connection: a
   * statement the fence's session answers proves the session, and so its lock, alive. A connection that
   * has ended fails at once; one that went silent (a partition, a failover that left the socket open)
   * fails after CONFIRM_TIMEOUT_MS and is dropped.
   */
  confirm(): Promise<void>;
}

/** The name the fence's connections give themselves (pg_stat_activity's application_name). */
export const KICK_FENCE_APPLICATION = 'ledger kick fence';
/** How long a statement confirming the fence, or releasing it, may take before its connection counts as lost. */
export const CONFIRM_TIMEOUT_MS = 5000;
/** How long a kick that lost its fence keeps trying to take it again (a failover's new primary may take seconds to answer). */
export const RETAKE_FOR_MS = 30_000;

/** A statement bounded by CONFIRM_TIMEOUT_MS (node-postgres's per-query query_timeout, which its types leave out). */
function confirming(text: string, values: unknown[]): QueryConfig {
  const config = { text, values, query_timeout: CONFIRM_TIMEOUT_MS };
  return config;
}

export interface FenceHooks {
  /** The fence of `guardStream` may have been lost while held in `mode` (its connection ended or went silent). */
  fenceLost?(guardStream: string, mode: 'shared' | 'exclusive', err: Error | undefined): void;
}

export interface KickFence {
  /**
   * Runs `fn` holding the fence of `guardStream` in `mode`, until `fn` has settled. If the fence may
   * have been lost meanwhile (its connection ended, or its unlock found no lock to release), a holder
   * who appended under it learns of it after `fn`: an exclusive holder (a kick) takes the fence again
   * (trying for RETAKE_FOR_MS), so that it returns only once every shared holder that could have missed
   * its append has finished; a shared holder's `afterLoss` is called once `fn` has settled, whether it
   * returned or threw (an append whose answer was lost may have landed). Then `fn`'s value is returned,
   * or its error thrown.
   */
  hold<T>(guardStream: string, mode: 'shared' | 'exclusive', fn: (held: FenceHold) => Promise<T>, afterLoss?: () => Promise<void>): Promise<T>;
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
 * lets go of it while its holder goes on. So a record confirms its fence just before its append
 * (FenceHold.confirm), and every holder confirms it afterwards by its unlock's answer (true only for a
 * session that held it throughout); see `hold` for what a holder does when it cannot.
 */
export function kickFence(pool: Pool, hooks: FenceHooks = {}): KickFence {
  let fences: Pool | undefined;
  const holdOnce = async <T>(stream: string, mode: 'shared' | 'exclusive', fn: (held: FenceHold) => Promise<T>): Promise<{ settled: PromiseSettledResult<T>; kept: boolean }> => {
    fences ??= createPool(pool.options.connectionString!, fenceConnections(pool.options.max ?? 10), { applicationName: KICK_FENCE_APPLICATION, keepAlive: true });
    const client = await fences.connect();
    const suffix = mode === 'shared' ? '_shared' : '';
    let lost: Error | undefined;
    const onError = (err: Error) => (lost ??= err);
    const onEnd = () => (lost ??= Object.assign(new Error('Connection terminated: the kick fence connection ended'), { code: '57P01' }));
    client.on('error', onError);
    client.on('end', onEnd);
    const held: FenceHold = {
      async confirm() {
        if (!lost) await client.query(confirming('SELECT 1', [])).catch((err: unknown) => (lost ??= err instanceof Error ? err : new Error(String(err))));
        if (lost) throw lost;
      },
    };
    let broken: unknown;
    let kept = false;
    let settled: PromiseSettledResult<T>;
    try {
      await client.query(`SELECT pg_advisory_lock${suffix}($1, hashtext($2))`, [KICK_FENCE, stream]);
      try {
        settled = await fn(held).then(
          (value): PromiseSettledResult<T> => ({ status: 'fulfilled', value }),
          (reason: unknown): PromiseSettledResult<T> => ({ status: 'rejected', reason }),
        );
      } finally {
        const unlocked = lost
          ? undefined
          : await client
              .query<{ ok: boolean }>(confirming(`SELECT pg_advisory_unlock${suffix}($1, hashtext($2)) AS ok`, [KICK_FENCE, stream]))
              .catch((err: unknown) => ((broken = err), undefined));
        kept = lost === undefined && unlocked?.rows[0]?.ok === true;
      }
    } finally {
      client.off('error', onError);
      client.off('end', onEnd);
      // A connection that could not unlock (or whose fence was lost) is dropped: its session, and so its lock, ends with it.
      const drop = broken ?? lost;
      client.release(drop instanceof Error ? drop : undefined);
    }
    if (!kept) hooks.fenceLost?.(stream, mode, lost ?? (broken instanceof Error ? broken : undefined));
    return { settled, kept };
  };
  /** Takes the fence exclusive and lets it go, trying again while its connections fail (RETAKE_FOR_MS). */
  const retake = async (stream: string) => {
    const until = Date.now() + RETAKE_FOR_MS;
    for (let pause = 100; ; pause = Math.min(pause * 2, 2000)) {
      try {
        if ((await holdOnce(stream, 'exclusive', async () => undefined)).kept) return;
      } catch (err) {
        if (Date.now() + pause > until) throw err;
      }
      if (Date.now() + pause > until) throw new Error(`kick fence of ${stream} could not be confirmed for ${RETAKE_FOR_MS / 1000} s`);
      await new Promise((r) => setTimeout(r, pause));
    }
  };
  return {
    async hold(stream, mode, fn, afterLoss) {
      const { settled, kept } = await holdOnce(stream, mode, fn);
      if (!kept) {
        if (mode === 'exclusive') await retake(stream);
        else await afterLoss?.();
      }
      if (settled.status === 'rejected') throw settled.reason;
      return settled.value;
    },
    async close() {
      await fences?.end();
    },
  };
}
