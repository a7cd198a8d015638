import { Queue, Worker, type ConnectionOptions, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { txKey, type TxRef } from './dispatch.ts';
import { within } from '../../shared/timeout.ts';

/**
 * Wallet retries go on one BullMQ queue per operator, `wallet-dispatch.<operatorId>` (the id
 * URI-encoded: BullMQ refuses ':' in a queue name), each worked by a Worker of its own with its own
 * concurrency: one operator's hung wallet fills only its own slots, so another operator's retries run
 * on their own schedule (contract section 8, rule 8).
 */
export const dispatchQueueName = (operatorId: string): string => `wallet-dispatch.${encodeURIComponent(operatorId)}`;

export type DispatchJob = TxRef;

/** A connection for BullMQ: a Worker needs maxRetriesPerRequest null (it blocks on Redis). */
export function bullConnection(url: string, forWorker: boolean): Redis {
  const redis = new Redis(url, forWorker ? { maxRetriesPerRequest: null } : { maxRetriesPerRequest: 1, enableOfflineQueue: false });
  redis.on('error', () => undefined); // reported through readiness and the callers' own errors
  return redis;
}

/** The per-operator dispatch queues of a process, made on first use, all on one Redis connection. */
export class DispatchQueues {
  private readonly queues = new Map<string, Queue<DispatchJob>>();

  constructor(
    private readonly connection: Redis,
    private readonly onError: (err: Error, operatorId: string) => void = () => undefined,
  ) {}

  of(operatorId: string): Queue<DispatchJob> {
    let queue = this.queues.get(operatorId);
    if (!queue) {
      queue = new Queue<DispatchJob>(dispatchQueueName(operatorId), { connection: this.connection });
      queue.on('error', (err: Error) => this.onError(err, operatorId));
      this.queues.set(operatorId, queue);
    }
    return queue;
  }

  /** Closes every queue; the shared connection is the owner's to close. */
  async close(): Promise<void> {
    const all = [...this.queues.values()];
    this.queues.clear();
    await Promise.all(all.map((q) => q.close()));
  }
}

/**
 * One job per transaction (jobId from the transaction), so a retry already waiting absorbs duplicates.
 * Every attempt re-reads the round, so a job that runs twice (BullMQ delivers at least once) is harmless.
 * It goes on its operator's queue.
 */
export async function enqueueRetry(queues: DispatchQueues | undefined, operatorId: string, ref: TxRef, delayMs: number): Promise<void> {
  if (!queues) return;
  const added = queues.of(operatorId).add('dispatch', ref, {
    jobId: `tx-${txKey(ref)}`,
    delay: delayMs,
    attempts: 1_000_000, // bounded by the retry window, not a count (see the worker)
    backoff: { type: 'capped-exponential' },
    removeOnComplete: true,
    removeOnFail: 1000,
  });
  // A queue made while Redis is unreachable waits for its connection without end; its callers (a provider
  // waiting for its answer, a sweep, a shutdown) must not. Failing here loses nothing: the recovery sweep
  // finds the credit in Postgres. An add that completes later is harmless (one job per transaction).
  await within(added, ENQUEUE_TIMEOUT_MS, () => {
    throw new Error(`retry queue of ${operatorId} unavailable (Redis)`);
  });
}

const ENQUEUE_TIMEOUT_MS = 2000;

/** Exponential from the base delay, capped, so retries go on until the retry window closes. */
export function backoffDelay(attemptsMade: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.max(0, attemptsMade - 1));
}

/** The Worker of one operator's queue: at most `concurrency` of its wallet calls at once. */
export function createDispatchWorker(
  connection: ConnectionOptions,
  operatorId: string,
  process: (job: Job<DispatchJob>) => Promise<void>,
  options: { baseMs: number; maxMs: number; concurrency: number },
): Worker<DispatchJob> {
  // BullMQ's Worker opens its own blocking connection before it checks its settings, and a constructor
  // that throws hands back nothing to close it by: so a setting it would refuse is refused here first.
  if (!Number.isInteger(options.concurrency) || options.concurrency < 1) throw new RangeError(`dispatch concurrency must be a whole number above 0, not ${options.concurrency}`);
  return new Worker<DispatchJob>(dispatchQueueName(operatorId), process, {
    connection,
    concurrency: options.concurrency,
    // A killed worker's job comes back within seconds; jobs are idempotent, so stalls never fail them.
    lockDuration: 10_000,
    stalledInterval: 5_000,
    maxStalledCount: 1_000_000,
    settings: { backoffStrategy: (attemptsMade: number) => backoffDelay(attemptsMade, options.baseMs, options.maxMs) },
  });
}
