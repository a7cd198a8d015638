import pg from 'pg';
import type { Pool } from '../../shared/db/pool.ts';
import { Refused } from '../../shared/decider.ts';
import { handleCommand } from '../../shared/eventstore/command.ts';
import { WrongExpectedRevisionError } from '../../shared/eventstore/port.ts';
import { signedCall, walletTarget } from '../../shared/http/outbound.ts';
import type { Logger } from '../../shared/logger.ts';
import { isFinal, outstandingBets, roundDecider, staleRollbacks } from './decider.ts';
import { callUnderWay, readRound } from './dispatch.ts';
import { staleRoundCandidates } from './queries.ts';
import { submitTransaction, type LedgerDeps } from './submit.ts';

export interface ReconcilerDeps extends LedgerDeps {
  pool: Pool;
  staleAfterSeconds: number;
  intervalSeconds: number;
}

export interface SweepResult {
  roundsClosed: number;
  rollbacks: number;
}

/**
 * The class of the operators' sweep locks: a class of their own. They shared 7281004 with the event
 * store's stream locks, so a sweep held back every append to a stream whose id hashed as its operator's.
 */
const SWEEP_LOCK = 7281006;

/** The operators a process is sweeping now, with their sweeps: a tick starts only the others. */
export type SweepsInFlight = Map<string, Promise<SweepResult>>;

/** The name the sweep locks' connection gives itself (pg_stat_activity's application_name). */
export const SWEEP_LOCKS_APPLICATION = 'ledger reconciler sweep locks';

/**
 * A reconciler's per-operator sweep locks, all on one connection of their own: Postgres holds any number
 * of advisory locks for one session. Held on connections of the query pool, each operator's sweep kept
 * one for its whole length and queried on others, so as many operators going stale at once as the pool
 * holds took every connection and waited for one more, with every request of the process beside them.
 * Its statements go one at a time, each given 10 s (connecting, 5 s), and TCP keeps the connection
 * alive: one that stops answering is dropped. A lost connection loses the locks: the sweeps under way go
 * on (a second sweep of the same operator by another reconciler is harmless, see sweepStaleRounds), and
 * the next lock connects again.
 */
export class SweepLocks {
  private client: Promise<pg.Client> | undefined;
  /** The operators this process sweeps under a lock now (a session's advisory locks are re-entrant). */
  private readonly held = new Set<string>();
  /** The statements on the connection, one after another. */
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(private readonly connectionString: string) {}

  async tryLock(operatorId: string): Promise<boolean> {
    if (this.closed || this.held.has(operatorId)) return false;
    this.held.add(operatorId);
    let locked = false;
    try {
      locked = (await this.statement('SELECT pg_try_advisory_lock($1, hashtext($2)) AS ok', operatorId, true)) === true;
      return locked;
    } finally {
      if (!locked) this.held.delete(operatorId);
    }
  }

  async unlock(operatorId: string): Promise<void> {
    this.held.delete(operatorId);
    // A connection lost meanwhile took the lock with it.
    await this.statement('SELECT pg_advisory_unlock($1, hashtext($2)) AS ok', operatorId, false).catch(() => undefined);
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.queue.catch(() => undefined);
    const client = await this.client?.catch(() => undefined);
    if (!client) return;
    await this.drop(client);
  }

  /** One lock statement, after those before it; `connect`: open the connection if there is none. */
  private statement(sql: string, operatorId: string, connect: boolean): Promise<boolean | undefined> {
    const run = this.queue.then(async () => {
      const client = connect ? await this.connection() : await this.client?.catch(() => undefined);
      if (!client) return undefined;
      try {
        const { rows } = await client.query<{ ok: boolean }>(sql, [SWEEP_LOCK, operatorId]);
        return rows[0]?.ok;
      } catch (err) {
        // No answer in time: the connection is not to be trusted with the locks any more.
        await this.drop(client);
        throw err;
      }
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  /**
   * Forgets this connection (unless another has taken its place already) and ends it, not waiting for
   * the end: a connection that stopped answering may never say goodbye.
   */
  private async drop(client: pg.Client): Promise<void> {
    if ((await this.client?.catch(() => undefined)) === client) this.client = undefined;
    void client.end().catch(() => undefined);
  }

  private connection(): Promise<pg.Client> {
    if (this.client) return this.client;
    const opened: Promise<pg.Client> = (async () => {
      const client = new pg.Client({ connectionString: this.connectionString, keepAlive: true, connectionTimeoutMillis: 5000, query_timeout: 10_000, application_name: SWEEP_LOCKS_APPLICATION });
      client.on('error', () => undefined);
      client.on('end', () => {
        if (this.client === opened) this.client = undefined;
      });
      await client.connect();
      return client;
    })();
    this.client = opened;
    // A connection that could not be made is tried again by the next lock.
    opened.catch(() => {
      if (this.client === opened) this.client = undefined;
    });
    return opened;
  }
}

/**
 * One sweep: rounds with outstanding bets and no transaction for staleAfterSeconds are force-closed.
 * Candidates come from the rounds read model; each is confirmed against its own stream before anything
 * is sent. Each outstanding bet gets a best-effort balance call, then a ROLLBACK with the deterministic
 * id `stale-rollback:<bet id>`, submitted like any credit (recorded, dispatched, retried until the wallet
 * accepts it).
 *
 * Operators are swept apart (contract section 8, rule 8): each operator's rounds one after the other,
 * under a lock of that operator's alone, so one operator's hung wallet (a balance check and a rollback per
 * round, each up to its timeout) holds back only its own rounds. A tick starts the operators not being
 * swept already, so another operator's round that goes stale meanwhile is refunded on the next tick. The
 * advisory lock keeps an operator's sweep single across reconciler processes; the deterministic id makes
 * a repeat harmless anyway (it is answered from what was recorded).
 */
export async function sweepStaleRounds(deps: ReconcilerDeps, locks: SweepLocks, inFlight: SweepsInFlight = new Map()): Promise<SweepResult> {
  // Stale open rounds, and rounds this reconciler closed whose rollbacks are not all recorded yet (a
  // process that died between closing and rolling back). Up to 500 per operator, oldest first.
  const rows = await staleRoundCandidates(deps.pool, deps.staleAfterSeconds, 500);
  const byOperator = new Map<string, string[]>();
  for (const r of rows) {
    const streams = byOperator.get(r.operatorId);
    if (streams) streams.push(r.roundStream);
    else byOperator.set(r.operatorId, [r.roundStream]);
  }
  const started: Array<Promise<SweepResult>> = [];
  for (const [operatorId, streams] of byOperator) {
    if (inFlight.has(operatorId)) continue;
    const sweep = sweepOperator(deps, locks, operatorId, streams).finally(() => inFlight.delete(operatorId));
    inFlight.set(operatorId, sweep);
    started.push(sweep);
  }
  const result: SweepResult = { roundsClosed: 0, rollbacks: 0 };
  for (const r of await Promise.all(started)) {
    result.roundsClosed += r.roundsClosed;
    result.rollbacks += r.rollbacks;
  }
  return result;
}

/** One operator's stale rounds, under that operator's advisory lock (see SweepLocks). */
async function sweepOperator(deps: ReconcilerDeps, locks: SweepLocks, operatorId: string, streams: readonly string[]): Promise<SweepResult> {
  const result: SweepResult = { roundsClosed: 0, rollbacks: 0 };
  try {
    if (!(await locks.tryLock(operatorId))) return result;
  } catch (err) {
    deps.logger.error({ err, operatorId }, 'could not take the sweep lock of an operator; next sweep retries');
    return result;
  }
  try {
    for (const roundStream of streams) {
      try {
        const n = await closeRound(deps, roundStream);
        if (n !== undefined) {
          result.roundsClosed += 1;
          result.rollbacks += n;
        }
      } catch (err) {
        deps.logger.error({ err, roundStream }, 'could not close stale round; next sweep retries');
      }
    }
  } finally {
    await locks.unlock(operatorId);
  }
  return result;
}

/**
 * The decider's CloseStaleRound on the round as it is, with its bets whose wallet call is under way
 * (callUnderWay), which it is not closed under. A conflict (the round moved: a resubmission's
 * TransactionResent, say) reads both again, the leases too: a call may have started since.
 */
async function closeIfStale(deps: ReconcilerDeps, roundStream: string) {
  for (let attempt = 1; ; attempt++) {
    const round = await readRound(deps.eventStore, roundStream);
    const outstanding = outstandingBets(round.state);
    const calling = await Promise.all(outstanding.map((b) => callUnderWay(deps.pool, b)));
    const callsUnderWay = outstanding.filter((_, i) => calling[i]).map((b) => b.request.transactionId);
    try {
      return await handleCommand(deps.eventStore, roundStream, roundDecider, { type: 'CloseStaleRound', staleAfterSeconds: deps.staleAfterSeconds, callsUnderWay, now: deps.now() }, {
        known: round,
        maxAttempts: 1,
      });
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError) || attempt >= 20) throw err;
    }
  }
}

/**
 * Closes a stale round (the decider's CloseStaleRound: confirmed on the round's own stream), then rolls
 * back its outstanding bets; undefined when it is not stale after all.
 */
async function closeRound(deps: ReconcilerDeps, roundStream: string): Promise<number | undefined> {
  const closed = await closeIfStale(deps, roundStream);
  // Closed now, or closed by an earlier sweep that did not finish its rollbacks.
  if (closed.next.status !== 'force-closed') return undefined;
  const rollbacks = staleRollbacks(closed.next);
  for (const { bet, request } of rollbacks) {
    await balanceCheck(deps, bet.operatorId, request.playerRef);
    try {
      const tx = await submitTransaction(deps, {
        request,
        registryKey: bet.providerId,
        providerId: bet.providerId,
        operatorId: bet.operatorId,
        origin: 'reconciler',
        roundStream,
        sessionExpired: false,
      });
      deps.logger.info({ roundStream, bet: bet.request.transactionId, status: tx.status, settled: isFinal(tx.status) }, 'stale bet rolled back');
    } catch (err) {
      if (!(err instanceof Refused)) throw err;
      // Only fine if the bet was in fact rolled back meanwhile (by the provider); anything else is a fault to surface.
      const after = (await readRound(deps.eventStore, roundStream)).state.txs.get(bet.request.transactionId);
      if (after?.rolledBackBy === undefined) throw err;
    }
  }
  return rollbacks.length;
}

/** Best effort (API document 4.2 rule 5b): failure, timeout or an odd reply changes nothing. */
async function balanceCheck(deps: ReconcilerDeps, operatorId: string, playerRef: string): Promise<void> {
  const operator = deps.catalog.snapshot().operators.get(operatorId);
  if (!operator) return;
  const startedAt = performance.now();
  const r = await signedCall({
    ...walletTarget(operator),
    pathAndQuery: `/v1/wallet/balance?playerRef=${encodeURIComponent(playerRef)}`,
    method: 'GET',
  });
  deps.metrics?.walletBalance(operatorId, r, startedAt);
  deps.logger.info({ operatorId, playerRef, outcome: r.kind === 'response' ? r.status : r.kind }, 'stale round: balance before rollback');
}

export interface RunningReconciler {
  sweep(): Promise<SweepResult>;
  close(): Promise<void>;
}

export function startReconcilerRole(deps: ReconcilerDeps, logger: Logger): RunningReconciler {
  const inFlight: SweepsInFlight = new Map();
  const locks = new SweepLocks(deps.pool.options.connectionString!);
  const sweep = () => sweepStaleRounds(deps, locks, inFlight);
  let running: Promise<unknown> = Promise.resolve();
  const tick = () => {
    running = sweep()
      .then((r) => {
        if (r.roundsClosed > 0) logger.info(r, 'stale rounds closed');
      })
      .catch((err: unknown) => logger.error({ err }, 'reconciler sweep failed'));
  };
  const timer = setInterval(tick, deps.intervalSeconds * 1000);
  return {
    sweep,
    async close() {
      clearInterval(timer);
      await running;
      await Promise.allSettled([...inFlight.values()]);
      await locks.close();
    },
  };
}
