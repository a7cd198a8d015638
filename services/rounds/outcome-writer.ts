import type { Logger } from '../../shared/logger.ts';

/**
 * Write-behind of wallet replies (ADR 4, docs/architecture.md): the provider is answered as soon as the
 * wallet has replied, and the outcome is appended right after, off the answer's path, where concurrent
 * appends share one round trip and one commit (the event store's group commit). Only a reply: a failed
 * or timed-out attempt is recorded before it is answered.
 *
 * Safe because the write-ahead record is durable before the wallet is called, and a wallet that replied
 * stored its reply (API document 4.2 rule 2: a repeat gets it verbatim and moves no money). A reply lost
 * with its process is learned again by asking the wallet with the same body: the worker's recovery sweep
 * does so for a credit (`unsettledCredits`) and for a BET whose provider went on with the round
 * (`unansweredBets`, workerAttempts), and an identical resubmission does so once the lease has lapsed.
 *
 * The writer keeps the order of one round's writes in this process: a transaction of a round waits
 * (`idle`) until this process's outcome write on that round is done, so it is decided on a round that
 * holds it and appends after it. A write that fails (Postgres unreachable, connections killed) is tried
 * again until it succeeds or the process stops.
 */
export class OutcomeWriter {
  /** The last write queued per round stream (each waits for the one before it). */
  private readonly pending = new Map<string, Promise<void>>();
  /** Writes queued and not done, every round's. */
  private queued = 0;
  /** What the replies of those writes hold, in characters of their bodies. */
  private queuedBytes = 0;
  /** Called when a write is done, for room() to look again (each removes itself when its wait ends). */
  private readonly waiters = new Set<() => void>();
  /** Set by drain(): from then on a write that fails is tried again only until this time. */
  private giveUpAt: number | undefined;

  private readonly retryMaxMs: number;
  private readonly maxQueued: number;
  private readonly maxQueuedBytes: number;

  constructor(
    private readonly logger: Logger,
    limits: {
      /** Longest pause between two tries of a failing write. */
      retryMaxMs?: number;
      /** Writes queued at most before new transactions wait (room()): the answer no longer waits for the store, so this is its back-pressure. */
      maxQueued?: number;
      /**
       * Characters of wallet replies queued at most before new transactions wait (room()). A reply is
       * kept verbatim, up to 1 MiB (contract section 8 rule 7): 2,000 replies of 256 KiB would hold half
       * a gigabyte (docs/benchmarks.md, Memory).
       */
      maxQueuedBytes?: number;
    } = {},
  ) {
    this.retryMaxMs = limits.retryMaxMs ?? 2000;
    this.maxQueued = limits.maxQueued ?? 2000;
    this.maxQueuedBytes = limits.maxQueuedBytes ?? 16 * 1024 * 1024;
  }

  private full(): boolean {
    return this.queued >= this.maxQueued || this.queuedBytes >= this.maxQueuedBytes;
  }

  /**
   * True once fewer than maxQueued writes, holding fewer than maxQueuedBytes of replies, are queued;
   * false if that did not happen within `timeoutMs`, and the caller must not record a new transaction
   * (the provider is answered 503, nothing recorded). A store slower than the answers would otherwise
   * let outcomes pile up in memory without bound while every new transaction's own small record still
   * gets through; new transactions wait here instead, as they did when every answer waited, and past
   * the wait they are refused rather than let through.
   */
  async room(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (this.full()) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      let timer: NodeJS.Timeout | undefined;
      let wake: (() => void) | undefined;
      await new Promise<void>((r) => {
        wake = r;
        this.waiters.add(r);
        timer = setTimeout(r, left);
      });
      clearTimeout(timer);
      this.waiters.delete(wake!);
    }
    return true;
  }

  /** Resolves once no outcome write of this process is pending on the round, or after `timeoutMs`. */
  async idle(roundStream: string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (let p = this.pending.get(roundStream); p; p = this.pending.get(roundStream)) {
      const left = deadline - Date.now();
      if (left <= 0) return;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([p, new Promise<void>((r) => (timer = setTimeout(r, left)))]);
      clearTimeout(timer);
    }
  }

  /**
   * Queues `write` (the outcome's append, of a reply of `bytes` characters) after the round's pending
   * writes, retried until it succeeds; then `after` (releasing the lease, handing a credit to the retry
   * queue) runs, whether it succeeded or the process stopped first.
   */
  write(roundStream: string, transactionId: string, bytes: number, write: () => Promise<void>, after: () => Promise<void>): void {
    const before = this.pending.get(roundStream);
    this.queued += 1;
    this.queuedBytes += bytes;
    // Assigned before the body below first resumes (it always awaits before its finally).
    let done: Promise<void> | undefined;
    done = (async () => {
      // (The write before settles, never rejects: its failures end in its own finally.)
      if (before) await before.catch(() => undefined);
      try {
        await this.untilWritten(transactionId, write);
      } finally {
        await after().catch((err: unknown) => this.logger.warn({ err, transactionId }, 'after an outcome write'));
        if (this.pending.get(roundStream) === done) this.pending.delete(roundStream);
        this.queued -= 1;
        this.queuedBytes -= bytes;
        if (!this.full()) for (const wake of this.waiters) wake();
      }
    })();
    this.pending.set(roundStream, done);
  }

  private async untilWritten(transactionId: string, write: () => Promise<void>): Promise<void> {
    for (let pause = 25; ; pause = Math.min(pause * 2, this.retryMaxMs)) {
      try {
        await write();
        return;
      } catch (err) {
        if (this.giveUpAt !== undefined && Date.now() >= this.giveUpAt) {
          // The recovery sweep asks the wallet again with the same body: nothing is lost.
          this.logger.error({ err, transactionId }, 'stopping with a wallet outcome unrecorded; the recovery sweep learns it again from the wallet');
          return;
        }
        this.logger.warn({ err, transactionId, retryInMs: pause }, 'could not record a wallet outcome; trying again');
        await new Promise((r) => setTimeout(r, pause));
      }
    }
  }

  /** Outcome writes still pending in this process. */
  get size(): number {
    return this.queued;
  }

  /** Characters of the wallet replies those writes hold. */
  get bytes(): number {
    return this.queuedBytes;
  }

  /** New transactions waiting in room(). */
  get waiting(): number {
    return this.waiters.size;
  }

  /**
   * On shutdown, after the last request: waits for the pending writes. One that still fails after
   * `giveUpAfterMs` is then given up (logged) instead of tried again, so a stop never hangs on an
   * unreachable store.
   */
  async drain(giveUpAfterMs = 10_000): Promise<void> {
    this.giveUpAt ??= Date.now() + giveUpAfterMs;
    while (this.pending.size > 0) await Promise.all([...this.pending.values()]);
  }
}
