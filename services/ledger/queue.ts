import { Queue, Worker, type ConnectionOptions, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { txKey, type TxRef } from './dispatch.ts';

export const DISPATCH_QUEUE = 'wallet-dispatch';

export type DispatchJob = TxRef;

/** A connection for BullMQ: a Worker needs maxRetriesPerRequest null (it blocks on Redis). */
export function bullConnection(url: string, forWorker: boolean): Redis {
  const redis = new Redis(url, forWorker ? { maxRetriesPerRequest: null } : { maxRetriesPerRequest: 1, enableOfflineQueue: false });
  redis.on('error', () => undefined); // reported through readiness and the callers' own errors
  return redis;
}

export function createDispatchQueue(connection: ConnectionOptions): Queue<DispatchJob> {
  return new Queue<DispatchJob>(DISPATCH_QUEUE, { connection });
}

/**
 * One job per transaction (jobId from the transaction), so a retry already waiting absorbs duplicates.
 * Every attempt re-reads the round, so a job that runs twice (BullMQ delivers at least once) is harmless.
 */
export async function enqueueRetry(queue: Queue<DispatchJob> | undefined, ref: TxRef, delayMs: number): Promise<void> {
  if (!queue) return;
  await queue.add('dispatch', ref, {
    jobId: `tx-${txKey(ref)}`,
    delay: delayMs,
    attempts: 1_000_000, // bounded by the retry window, not a count (see the worker)
    backoff: { type: 'capped-exponential' },
    removeOnComplete: true,
    removeOnFail: 1000,
  });
}

/** Exponential from the base delay, capped, so retries go on until the retry window closes. */
export function backoffDelay(attemptsMade: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.max(0, attemptsMade - 1));
}

export function createDispatchWorker(
  connection: ConnectionOptions,
  process: (job: Job<DispatchJob>) => Promise<void>,
  backoff: { baseMs: number; maxMs: number },
): Worker<DispatchJob> {
  return new Worker<DispatchJob>(DISPATCH_QUEUE, process, {
    connection,
    concurrency: 32,
    // A killed worker's job comes back within seconds; jobs are idempotent, so stalls never fail them.
    lockDuration: 10_000,
    stalledInterval: 5_000,
    maxStalledCount: 1_000_000,
    settings: { backoffStrategy: (attemptsMade: number) => backoffDelay(attemptsMade, backoff.baseMs, backoff.maxMs) },
  });
}
