import { defaultOperatorShare } from '../../shared/config.ts';
import type { Logger } from '../../shared/logger.ts';
import { within } from '../../shared/timeout.ts';

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
 * Its back-pressure (admit()) counts the replies waiting to be written and those expected from the
 * transactions it let in after a wait, at their operator's usual size, and is shared between
 * operators: a reply is its wallet's, so one operator's wallet of large replies holds back that
 * operator's new transactions once it fills its share of the bytes, while the other operators' go on.
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
  /** Characters expected from the wallet calls of the transactions let in after a wait, not yet ended. */
  private reservedBytes = 0;
  /** Writes expected from them. */
  private reservedWrites = 0;
  /** The same by operator, with its replies' usual size (an operator seen once stays: as many entries as the catalog's operators). */
  private readonly operators = new Map<string, OperatorShare>();
  /** The admit() calls waiting for room, in the order they came (each removed when let in or when its wait ends). */
  private readonly waiters = new Set<Waiter>();
  /** Set by drain(): from then on a write that fails is tried again only until this time. */
  private giveUpAt: number | undefined;

  private readonly retryMaxMs: number;
  private readonly maxQueued: number;
  private readonly maxQueuedBytes: number;
  private readonly maxOperatorBytes: number;

  constructor(
    private readonly logger: Logger,
    limits: {
      /** Longest pause between two tries of a failing write. */
      retryMaxMs?: number;
      /** Writes queued at most before new transactions wait (admit()): the answer no longer waits for the store, so this is its back-pressure. */
      maxQueued?: number;
      /**
       * Characters of wallet replies queued and expected at most before new transactions wait (admit()). A reply is
       * kept verbatim, up to 1 MiB (contract section 8 rule 7): 2,000 replies of 256 KiB would hold half
       * a gigabyte (docs/benchmarks.md, Memory).
       */
      maxQueuedBytes?: number;
      /**
       * Characters of one operator's wallet replies queued and expected at most before that operator's new
       * transactions wait (admit()), the others' going on; a quarter of maxQueuedBytes unless given.
       */
      maxOperatorBytes?: number;
    } = {},
  ) {
    this.retryMaxMs = limits.retryMaxMs ?? 2000;
    this.maxQueued = limits.maxQueued ?? 2000;
    this.maxQueuedBytes = limits.maxQueuedBytes ?? 16 * 1024 * 1024;
    this.maxOperatorBytes = limits.maxOperatorBytes ?? defaultOperatorShare(this.maxQueuedBytes);
  }

  private share(operatorId: string): OperatorShare {
    let share = this.operators.get(operatorId);
    if (!share) this.operators.set(operatorId, (share = { queued: 0, reserved: 0, usual: undefined }));
    return share;
  }

  /** Full for the whole process: no operator's transaction is admitted. */
  private fullForAll(): boolean {
    return this.queued + this.reservedWrites >= this.maxQueued || this.queuedBytes + this.reservedBytes >= this.maxQueuedBytes;
  }

  private full(operatorId: string): boolean {
    const share = this.operators.get(operatorId);
    return this.fullForAll() || (share !== undefined && share.queued + share.reserved >= this.maxOperatorBytes);
  }

  /** admit() without waiting: admitted at once (reserving nothing) if there is room, else undefined. */
  tryAdmit(operatorId: string): Admission | undefined {
    return this.full(operatorId) ? undefined : NOTHING_RESERVED;
  }

  /**
   * Admits a new transaction of `operatorId` once fewer than maxQueued writes are queued or expected and
   * the replies queued or expected hold fewer than maxQueuedBytes characters, fewer than maxOperatorBytes
   * of them that operator's. Undefined if that did not happen within `timeoutMs`, and the caller must not
   * record the transaction (the provider is answered 503, nothing recorded). A store slower than the
   * answers would otherwise let outcomes pile up in memory without bound while every new transaction's
   * own small record still gets through; new transactions wait here instead, as they did when every
   * answer waited, and past the wait they are refused rather than let through.
   *
   * A transaction that had to wait is expected to bring a write and a reply of its operator's usual size:
   * both are reserved as it is let in, until the returned release() (the transaction ended, its reply
   * queued or not; idempotent), and the waiters are let in in the order they came, each measured with
   * the room taken by those before it. So a write that lands lets in only as many waiters as there is
   * room for, not all of them. One let in at once, while there is room, reserves nothing: counting
   * every call under way would cap an operator's calls in flight whatever the store's speed (a slow
   * wallet of large replies at a few dozen a second), and it is the waiters that come in a crowd.
   */
  admit(operatorId: string, timeoutMs: number): Promise<Admission | undefined> {
    const now = this.tryAdmit(operatorId);
    if (now) return Promise.resolve(now);
    return new Promise<Admission | undefined>((resolve) => {
      const waiter: Waiter = {
        operatorId,
        admit: (admission) => {
          clearTimeout(timer);
          resolve(admission);
        },
      };
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        resolve(undefined);
      }, timeoutMs);
      this.waiters.add(waiter);
    });
  }

  /**
   * Room for a waiter's write and its operator's usual reply, held until release(). An operator with no
   * reply written yet in this process is taken to reply as large as the largest usual size here: its
   * waiters, let in together with nothing reserved, would bring replies of any size.
   */
  private reserve(operatorId: string): Admission {
    const share = this.share(operatorId);
    const bytes = share.usual ?? Math.max(0, ...[...this.operators.values()].map((other) => other.usual ?? 0));
    share.reserved += bytes;
    this.reservedBytes += bytes;
    this.reservedWrites += 1;
    let held = true;
    return {
      release: () => {
        if (!held) return;
        held = false;
        share.reserved -= bytes;
        this.reservedBytes -= bytes;
        this.reservedWrites -= 1;
        this.admitWaiters();
      },
    };
  }

  /**
   * Lets in the waiters, in the order they came, while there is room for them: each one's room taken
   * as it is let in, so the next is measured with it. A waiter whose operator's share is full is passed
   * over, keeping its place.
   */
  private admitWaiters(): void {
    for (const waiter of this.waiters) {
      if (this.fullForAll()) return;
      if (this.full(waiter.operatorId)) continue;
      this.waiters.delete(waiter);
      waiter.admit(this.reserve(waiter.operatorId));
    }
  }

  /** Resolves once no outcome write of this process is pending on the round, or after `timeoutMs`. */
  async idle(roundStream: string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (let p = this.pending.get(roundStream); p; p = this.pending.get(roundStream)) {
      const left = deadline - Date.now();
      if (left <= 0) return;
      await within(p, left, () => undefined);
    }
  }

  /**
   * Queues `write` (the outcome's append, of `operatorId`'s wallet reply of `bytes` characters) after
   * the round's pending writes, retried until it succeeds; then `after` (releasing the lease, handing a
   * credit to the retry queue) runs, whether it succeeded or the process stopped first. The reply's size
   * counts from here (a transaction let in after a wait also holds its reservation until it ends), and
   * updates its operator's usual size.
   */
  write(
    outcome: { roundStream: string; transactionId: string; operatorId: string; bytes: number },
    write: () => Promise<void>,
    after: () => Promise<void>,
  ): void {
    const { roundStream, transactionId, operatorId, bytes } = outcome;
    const before = this.pending.get(roundStream);
    const share = this.share(operatorId);
    this.queued += 1;
    this.queuedBytes += bytes;
    share.queued += bytes;
    // A mean weighted towards the newest replies (a quarter each), rounded up: what the next call expects.
    share.usual = share.usual === undefined ? bytes : Math.ceil(share.usual + (bytes - share.usual) / 4);
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
        share.queued -= bytes;
        this.admitWaiters();
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

  /** Characters of the wallet replies those writes hold, and expected from the transactions let in after a wait. */
  get bytes(): number {
    return this.queuedBytes + this.reservedBytes;
  }

  /** The same for one operator's: what its share (maxOperatorBytes) is compared with. */
  bytesOf(operatorId: string): number {
    const share = this.operators.get(operatorId);
    return share ? share.queued + share.reserved : 0;
  }

  /** The same for every operator this process has queued or reserved replies of (0 once none is held). */
  get byOperator(): ReadonlyMap<string, number> {
    return new Map([...this.operators.keys()].map((operatorId) => [operatorId, this.bytesOf(operatorId)]));
  }

  /** New transactions waiting in admit(). */
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

/** A transaction admitted by OutcomeWriter.admit(), holding room for its wallet's reply until released. */
export interface Admission {
  release(): void;
}

const NOTHING_RESERVED: Admission = { release: () => undefined };

interface Waiter {
  operatorId: string;
  /** Lets it in, with the room reserved for it. */
  admit(admission: Admission): void;
}

interface OperatorShare {
  /** Characters of this operator's replies queued. */
  queued: number;
  /** Characters expected from its transactions let in after a wait, not yet ended. */
  reserved: number;
  /** Its replies' usual size, in characters; undefined until its first reply is written (an empty reply counts: 0). */
  usual: number | undefined;
}
