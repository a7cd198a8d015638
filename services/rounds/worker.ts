import type { Job, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Pool } from '../../shared/db/pool.ts';
import { isFinal, retriesExhausted, workerAttempts } from './decider.ts';
import type { Logger } from '../../shared/logger.ts';
import { unansweredBets, unsettledCredits } from './queries.ts';
import { deadLetter, dispatch, readRound, type DispatchDeps } from './dispatch.ts';
import { bullConnection, createDispatchWorker, enqueueRetry, type DispatchJob, type DispatchQueues } from './queue.ts';

export interface WorkerRoleDeps extends DispatchDeps {
  pool: Pool;
  queues: DispatchQueues;
  redisUrl: string;
  retryWindowSeconds: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  sweepSeconds: number;
  /** Wallet calls in flight at once per operator (each operator's queue has a Worker of its own). */
  concurrencyPerOperator: number;
}

export interface RunningWorker {
  /** One recovery sweep now; resolves with how many transactions it (re-)enqueued. */
  sweep(): Promise<number>;
  /** The operators whose queues this process works now. */
  operators(): string[];
  close(): Promise<void>;
}

/**
 * The worker role: retries WIN, ROLLBACK and ADJUSTMENT (and reconciler rollbacks) until the wallet
 * answers, asks the wallet for a BET whose outcome was lost after its provider was answered until it
 * replies (workerAttempts), and every sweep finds
 * unsettled credits and unanswered BETs again from Postgres, because Redis is not the record
 * of truth: after Redis lost its data, or a process died between recording and enqueueing, the sweep
 * puts them back on the queue.
 */
export function startWorkerRole(deps: WorkerRoleDeps, logger: Logger): RunningWorker {
  const connection: Redis = bullConnection(deps.redisUrl, true);
  const process = async (job: Job<DispatchJob>) => {
    const round = await readRound(deps.eventStore, job.data.roundStream);
    const tx = round.state.txs.get(job.data.transactionId);
    // A credit until it is settled for good; a BET whose reply was lost, until the wallet replies.
    if (!tx || !workerAttempts(round.state, job.data.transactionId)) return;
    if (retriesExhausted(tx, deps.now(), deps.retryWindowSeconds)) {
      if (!(await deadLetter(deps, job.data, tx, deps.retryWindowSeconds))) throw new Error('an attempt is in flight; dead-letter after it');
      logger.error({ transactionId: job.data.transactionId, attempts: tx.attempts }, 'transaction dead-lettered');
      return;
    }
    const after = await dispatch(deps, job.data, tx);
    if (!after) throw new Error('another process is attempting it right now');
    // Tried again after the backoff; one the worker no longer attempts (re-read under the lease) is done.
    if (after.attempted && !isFinal(after.tx.status)) throw new Error(`attempt ${after.tx.attempts} did not settle: ${after.tx.lastError ?? after.tx.status}`);
  };
  // One Worker per operator's queue, each with its own slots: one operator's hung wallet fills only
  // its own (contract section 8, rule 8). Worked: every operator in the catalog, and any operator the
  // last sweep found unsettled credits of (one gone from the catalog still gets its retries, which
  // fail and end dead-lettered, as before). Followed as the catalog changes.
  const workers = new Map<string, Worker<DispatchJob>>();
  const retiring = new Set<Promise<void>>();
  let swept = new Set<string>();
  let closed = false;
  const follow = () => {
    if (closed) return;
    const wanted = new Set([...deps.catalog.snapshot().operators.keys(), ...swept]);
    for (const operatorId of wanted) {
      if (workers.has(operatorId)) continue;
      const worker = createDispatchWorker(connection, operatorId, process, { baseMs: deps.backoffBaseMs, maxMs: deps.backoffMaxMs, concurrency: deps.concurrencyPerOperator });
      worker.on('error', (err) => logger.error({ err, operatorId }, 'dispatch worker error'));
      worker.on('failed', (job, err) => logger.warn({ operatorId, transactionId: job?.data.transactionId, attemptsMade: job?.attemptsMade, err: err.message }, 'wallet retry scheduled'));
      workers.set(operatorId, worker);
    }
    for (const [operatorId, worker] of workers) {
      if (wanted.has(operatorId)) continue;
      workers.delete(operatorId);
      const done: Promise<void> = worker.close().catch((err: unknown) => logger.warn({ err, operatorId }, 'closing a dispatch worker failed'));
      retiring.add(done);
      void done.then(() => retiring.delete(done));
    }
  };
  const unfollow = deps.catalog.onChange(follow);
  try {
    follow();
  } catch (err) {
    // A Worker that could not be made (a setting BullMQ refuses): what was opened is closed, not left
    // to a caller that never got anything to close.
    closed = true;
    unfollow();
    for (const worker of workers.values()) void worker.close().catch(() => undefined);
    connection.disconnect();
    throw err;
  }

  const sweep = async (): Promise<number> => {
    // Credits recorded and not settled for good; a few seconds old, so the attempt in flight is left to finish.
    const rows = [...(await unsettledCredits(deps.pool, 2)), ...(await unansweredBets(deps.pool, 2))];
    swept = new Set(rows.map((r) => r.operatorId));
    follow();
    for (const r of rows) await enqueueRetry(deps.queues, r.operatorId, { roundStream: r.roundStream, transactionId: r.transactionId }, 0);
    return rows.length;
  };
  let sweeping = Promise.resolve(0);
  const timer = setInterval(() => {
    sweeping = sweep().catch((err: unknown) => {
      logger.warn({ err }, 'recovery sweep failed');
      return 0;
    });
  }, deps.sweepSeconds * 1000);
  void (sweeping = sweep().catch(() => 0));

  return {
    sweep,
    operators: () => [...workers.keys()],
    async close() {
      closed = true;
      unfollow();
      clearInterval(timer);
      await sweeping;
      // Worker.close() waits for the jobs in flight.
      await Promise.all([...[...workers.values()].map((w) => w.close()), ...retiring]);
      workers.clear();
      connection.disconnect();
    },
  };
}
