import type { Job, Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Pool } from '../../shared/db/pool.ts';
import { isFinal } from '../../shared/domain/rounds/decider.ts';
import type { Logger } from '../../shared/logger.ts';
import { deadLetter, dispatch, readTx, type DispatchDeps } from '../ledger/dispatch.ts';
import { bullConnection, createDispatchWorker, enqueueRetry, type DispatchJob } from '../ledger/queue.ts';

export interface WorkerRoleDeps extends DispatchDeps {
  pool: Pool;
  queue: Queue<DispatchJob>;
  redisUrl: string;
  retryWindowSeconds: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  sweepSeconds: number;
}

export interface RunningWorker {
  /** One recovery sweep now; resolves with how many transactions it (re-)enqueued. */
  sweep(): Promise<number>;
  close(): Promise<void>;
}

/**
 * The worker role: retries WIN, ROLLBACK and ADJUSTMENT (and reconciler rollbacks) until the wallet
 * answers, and every sweep finds unsettled credits again from Postgres, because Redis is not the record
 * of truth: after Redis lost its data, or a process died between recording and enqueueing, the sweep
 * puts them back on the queue.
 */
export function startWorkerRole(deps: WorkerRoleDeps, logger: Logger): RunningWorker {
  const connection: Redis = bullConnection(deps.redisUrl, true);
  const process = async (job: Job<DispatchJob>) => {
    const tx = await readTx(deps.eventStore, job.data);
    if (!tx || isFinal(tx.status)) return;
    const ageSeconds = (deps.now().getTime() - Date.parse(tx.recordedAt)) / 1000;
    if (ageSeconds >= deps.retryWindowSeconds) {
      if (!(await deadLetter(deps, job.data, tx))) throw new Error('an attempt is in flight; dead-letter after it');
      logger.error({ transactionId: job.data.transactionId, attempts: tx.attempts }, 'transaction dead-lettered');
      return;
    }
    const after = await dispatch(deps, job.data, tx);
    if (!after) throw new Error('another process is attempting it right now');
    if (!isFinal(after.status)) throw new Error(`attempt ${after.attempts} did not settle: ${after.lastError ?? after.status}`);
  };
  const worker: Worker<DispatchJob> = createDispatchWorker(connection, process, { baseMs: deps.backoffBaseMs, maxMs: deps.backoffMaxMs });
  worker.on('error', (err) => logger.error({ err }, 'dispatch worker error'));
  worker.on('failed', (job, err) => logger.warn({ transactionId: job?.data.transactionId, attemptsMade: job?.attemptsMade, err: err.message }, 'wallet retry scheduled'));

  const sweep = async (): Promise<number> => {
    // Credits recorded and not settled for good; a few seconds old, so the attempt in flight is left to finish.
    const { rows } = await deps.pool.query<{ round_stream: string; transaction_id: string }>(
      `SELECT round_stream, transaction_id FROM rm_transactions
       WHERE type <> 'BET' AND status IN ('recorded', 'failed', 'timed_out') AND updated_at < now() - interval '2 seconds'`,
    );
    for (const r of rows) await enqueueRetry(deps.queue, { roundStream: r.round_stream, transactionId: r.transaction_id }, 0);
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
    async close() {
      clearInterval(timer);
      await sweeping;
      await worker.close(); // waits for jobs in flight
      connection.disconnect();
    },
  };
}
