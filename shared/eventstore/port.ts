import type { Pool } from '../db/pool.ts';
import { BATCH_BYTES } from './text-size.ts';
import type { FenceHooks } from './kick-fence.ts';

/**
 * The event store port. Two adapters implement it (Postgres, EventStoreDB) and both must pass
 * test/eventstore/contract.ts. Everything the rest of the system knows about event storage is here.
 */

export type JsonObject = { [key: string]: unknown };

/**
 * What a caller appends. `id` makes a repeated append idempotent: the same events appended again to the
 * same stream at the revision they were first appended at (or with 'any' soon after) are a no-op. Not
 * more: EventStoreDB writes events again under other expectations, or to another stream, so callers
 * never rely on ids for that.
 */
export interface NewEvent<T extends string = string, D extends JsonObject = JsonObject> {
  id: string; // UUID
  type: T;
  data: D;
  metadata?: JsonObject;
}

/**
 * An opaque, totally ordered cursor into the global log, as a string. Adapters define its form
 * (Postgres: "<xid>.<global position>", EventStoreDB: "<commit>.<prepare>"); callers only store it and
 * hand it back. START means "before the first event".
 */
export type Position = string;
export const START: Position = 'start';

/** Orders two positions of one log (both adapters write them as "<number>.<number>"). */
export function comparePositions(a: Position, b: Position): number {
  if (a === b) return 0;
  if (a === START) return -1;
  if (b === START) return 1;
  const [a1, a2] = a.split('.').map(BigInt) as [bigint, bigint];
  const [b1, b2] = b.split('.').map(BigInt) as [bigint, bigint];
  return a1 !== b1 ? (a1 < b1 ? -1 : 1) : a2 === b2 ? 0 : a2 < b2 ? -1 : 1;
}

/** Neither number of a position of either adapter's log passes 2^63 − 1 (Postgres's bigint, EventStoreDB's). */
const POSITION_PART_MAX = 2n ** 63n - 1n;

/**
 * Whether `p` can name a place in a log, START included: two numbers as both adapters write them, neither
 * past what a log holds. A caller's text checked before it reaches a store, whose own refusal of a number
 * out of its range would be an internal error, not the caller's.
 */
export function isPosition(p: string): boolean {
  if (p === START) return true;
  try {
    return positionParts(p).every((n) => n <= POSITION_PART_MAX);
  } catch {
    return false;
  }
}

/** A position's two numbers (both adapters write "<number>.<number>"), in the order the log sorts them. */
export function positionParts(p: Position): [bigint, bigint] {
  const match = /^(\d+)\.(\d+)$/.exec(p);
  if (!match) throw new Error(`not a log position: "${p}"`);
  return [BigInt(match[1]!), BigInt(match[2]!)];
}

export interface RecordedEvent<T extends string = string, D extends JsonObject = JsonObject> {
  id: string;
  streamId: string;
  /** 0-based revision of the event in its stream. */
  revision: number;
  type: T;
  data: D;
  metadata: JsonObject;
  /** Cursor in the global log; reading from it returns the events strictly after this one. */
  position: Position;
  createdAt: Date;
}

/** 'no_stream': the stream must not exist; 'any': no check; a number: the stream's last revision must equal it (-1: none, as no_stream). */
export type ExpectedRevision = 'no_stream' | 'any' | number;

export interface AppendResult {
  /** Revision of the last event now in the stream (the one appended, or the one already there on an idempotent repeat). */
  nextRevision: number;
  /** Global position of the last event appended. */
  position: Position;
}

export class WrongExpectedRevisionError extends Error {
  override name = 'WrongExpectedRevisionError';
  constructor(
    readonly streamId: string,
    readonly expected: ExpectedRevision,
    /** -1 when the stream does not exist. */
    readonly actual: number,
  ) {
    super(`stream ${streamId}: expected revision ${String(expected)}, actual ${actual}`);
  }
}

/**
 * The event store did not answer (a node down or restarting, a timeout, a leader change): nothing about
 * the request was wrong, and what it recorded before is answered on resubmission (the http layer answers
 * 503). An append that fails so may have been written: its answer is what was lost.
 */
export class EventStoreUnavailableError extends Error {
  override name = 'EventStoreUnavailableError';
  constructor(message: string, options?: { cause: unknown }) {
    super(`event store unavailable: ${message}`, options);
  }
}

export interface ReadStreamOptions {
  fromRevision?: number;
  maxCount?: number;
}

export interface ReadAllOptions {
  /** Exclusive: events strictly after this position. Defaults to START. */
  from?: Position;
  maxCount?: number;
}

export interface ReadPageOptions extends ReadAllOptions {
  /**
   * At most this much of the events, measured as the store holds them (Postgres: the stored size of their
   * data and metadata, which the log keeps uncompressed, about their text; EventStoreDB: their text,
   * textBytes), and always the first event however large: an outcome keeps its wallet's reply verbatim, up to 1 MiB, so a
   * page of 1,000 events may otherwise hold a gigabyte.
   */
  maxBytes: number;
}

/** A page of the global log (EventStore.readPage). */
export interface LogPage {
  events: RecordedEvent[];
  /**
   * True when the page stopped at maxCount or maxBytes, so the log may go on right after its last event
   * (read on from there at once); false when the log, as readable now, ends after it.
   */
  more: boolean;
}

export interface CountAllOptions {
  /** Exclusive, like ReadAllOptions.from. */
  from?: Position;
  /** Counted up to this many. */
  limit: number;
}

/** What readAll after a position would return, counted (see EventStore.countAll). */
export interface LogBacklog {
  /** The events after the position, up to the limit asked for. */
  count: number;
  /** When the first of them was appended; undefined when there is none. */
  firstCreatedAt?: Date;
}

export interface SubscribeOptions {
  /** Exclusive, like ReadAllOptions.from. */
  from?: Position;
  /** Ends the iteration when aborted. */
  signal?: AbortSignal;
}

export interface EventStore {
  /** For logs only: which adapter this is. */
  readonly kind: 'postgres' | 'esdb';
  /**
   * This store's way to claim a transaction id in the registry (Postgres, `registry`) and record it
   * (see recorder.ts): in one statement where the events share the registry's database.
   */
  transactionRecorder(registry: Pool, hooks?: RecorderHooks): TransactionRecorder;
  /** How many events the log holds, when the store can tell cheaply (for progress reports); else undefined. */
  eventCount(): Promise<number | undefined>;
  /**
   * Appends atomically: all events or none (at least one: an empty append is refused on both stores).
   * Throws WrongExpectedRevisionError on a revision conflict. The same events appended again at the
   * expectation they were first appended with succeed without writing (see NewEvent).
   */
  append(streamId: string, events: NewEvent[], expectedRevision: ExpectedRevision): Promise<AppendResult>;
  /** The stream's events in revision order; [] when it does not exist. */
  readStream(streamId: string, options?: ReadStreamOptions): Promise<RecordedEvent[]>;
  /**
   * The global log after `from`, in commit order. Never skips an event that commits later than one
   * already returned: an event is returned only once every event that could sort before it is visible.
   */
  readAll(options?: ReadAllOptions): Promise<RecordedEvent[]>;
  /**
   * readAll bounded in bytes as well as in events, saying whether it stopped at a bound or at the log's
   * end: the bulk readers of the log (the read models' runners, the rebuild, the audit route, the chain's
   * catch-up, the move between stores) read with it, so the store, not an estimate of the events to come,
   * keeps what one read holds.
   */
  readPage(options: ReadPageOptions): Promise<LogPage>;
  /**
   * How many events readAll would return after `from` (up to `limit`), and when the first of them was
   * appended, without handing them over: a lag report must not hold thousands of events (each may carry a
   * wallet reply of up to 1 MiB) to count them.
   */
  countAll(options: CountAllOptions): Promise<LogBacklog>;
  /** Every event after `from`, one at a time, in readAll order, then live ones as they commit. */
  subscribeAll(options?: SubscribeOptions): AsyncIterable<RecordedEvent>;
  /**
   * A counter of append notifications this process has seen. Take it before a read, then
   * waitForAppend(seq) cannot miss an append that lands between the read and the wait.
   */
  appendSeq(): number;
  /**
   * Resolves once appendSeq() > afterSeq, after timeoutMs, or on abort. A wake-up hint only:
   * callers re-read with readAll or readPage.
   */
  waitForAppend(afterSeq: number, timeoutMs: number, signal?: AbortSignal): Promise<void>;
  /** Position of the newest event readAll (or readPage) can return now, or START when the log is empty. */
  headPosition(): Promise<Position>;
  /** Throws if the store cannot be reached (used by /readyz). */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/**
 * subscribeAll built from readPage + waitForAppend, shared by the adapters: pages through the log
 * (pages of at most BATCH_BYTES), yielding one event at a time (the consumer's await is the
 * back-pressure), and sleeps on the adapter's wake-up when caught up.
 */
export async function* pollingSubscription(
  store: Pick<EventStore, 'readPage' | 'appendSeq' | 'waitForAppend'>,
  options: SubscribeOptions = {},
  pageSize = 500,
): AsyncGenerator<RecordedEvent> {
  let from = options.from ?? START;
  const signal = options.signal;
  const idle = new IdleWait(store);
  while (!signal?.aborted) {
    const seq = store.appendSeq();
    const { events, more } = await store.readPage({ from, maxCount: pageSize, maxBytes: BATCH_BYTES });
    for (const event of events) {
      if (signal?.aborted) return;
      yield event;
      from = event.position;
    }
    if (!more) await idle.wait(seq, events.length === 0, signal);
  }
}

/** A caught-up reader's wait for an append while anything happened lately, and its longest (IdleWait). */
export const IDLE_WAIT_MIN_MS = 100;
export const IDLE_WAIT_MAX_MS = 1000;
/** How long after anything happened a caught-up reader still reads again every IDLE_WAIT_MIN_MS (IdleWait). */
export const IDLE_GRACE_MS = 2000;

/**
 * How a reader that has read the log to its end waits for more: until the store signals an append
 * (appendSeq, taken before the read), or at most a while, then it reads again. That fallback read is what
 * catches an append whose notification was lost (a dropped LISTEN connection) or not sent (a connection
 * notifies at most one append in 50 ms), or that was not yet readable when signalled (Postgres holds
 * events back while an older transaction is open anywhere on the server, and nothing signals its end).
 *
 * For IDLE_GRACE_MS after anything happened (events read, an append signalled: during a wait, or
 * between two, such as while the runner gathers), it reads again every IDLE_WAIT_MIN_MS, as it always
 * did; after that each quiet read waits twice as long, up to IDLE_WAIT_MAX_MS. So what comes within two
 * seconds of the last activity is read within ~100 ms as before, and an idle service's read models read
 * the log about once a second each instead of ten times (an idle `npm start`: 12 queries a second
 * against 60, 2026-12-02). Only an append whose reading waits longer than that (an open transaction
 * holding it back for seconds, a lost notification) is read up to a second late. After a read that found
 * events, it waits 10 ms at most.
 */
export class IdleWait {
  private ms = IDLE_WAIT_MIN_MS;
  /** appendSeq() as the last wait ended: a different one at the next wait is an append signalled between the two. */
  private seen: number | undefined;
  private activeAt = 0;

  constructor(private readonly store: Pick<EventStore, 'appendSeq' | 'waitForAppend'>) {}

  async wait(seq: number, emptyRead: boolean, signal?: AbortSignal): Promise<void> {
    if (!emptyRead || seq !== this.seen) this.active();
    if (!emptyRead) {
      await this.store.waitForAppend(seq, 10, signal);
      this.seen = this.store.appendSeq();
      return;
    }
    const settled = Date.now() - this.activeAt >= IDLE_GRACE_MS;
    const ms = settled ? this.ms : IDLE_WAIT_MIN_MS;
    await this.store.waitForAppend(seq, ms, signal);
    this.seen = this.store.appendSeq();
    if (this.seen !== seq) this.active();
    else if (settled) this.ms = Math.min(ms * 2, IDLE_WAIT_MAX_MS);
  }

  private active(): void {
    this.activeAt = Date.now();
    this.ms = IDLE_WAIT_MIN_MS;
  }
}

/**
 * The transaction recorder port: claims a transaction id in the registry (provider key and wallet key,
 * with its dispatch lease) and, when the claim registers it, appends its write-ahead record to the
 * round, unless a guard stream says no (a kick). Each event store adapter implements it: the Postgres
 * one in one statement (the registry and the events share a database), the EventStoreDB one as a claim
 * and then an append. Callers never know which.
 */
export interface TransactionRecorder {
  record(request: RecordRequest): Promise<RecordOutcome>;
  /**
   * Runs `fn` (a kick: the append of the guard event) with a store whose appends are made while no
   * record guarded by `guardStream` is between its guard check and its append, and that holds back the
   * records that come meanwhile until the append is done: a kick acknowledged before a transaction is
   * recorded stops it, on either store. `fn` appends through the store it is given.
   */
  exclusive<T>(guardStream: string, fn: (store: StreamStore) => Promise<T>): Promise<T>;
  /**
   * A store whose appends check `guard` as `record` does, ordered with `exclusive` the same way: an append
   * the guard forbids throws GuardBrokenError and appends nothing. For a transaction recorded after its
   * claim (the claim's own check came before; a kick may have come since).
   */
  guarded(guard: StreamGuard): StreamStore;
  close(): Promise<void>;
}

/**
 * A transaction appended under a kick fence that was lost while it was held (its connection died: a
 * failover, a killed backend), after the kick event at `kickPosition`: the kick may have been
 * acknowledged before this append landed, which the fence is there to prevent. Nothing can undo an append
 * that has landed; the recorder reports it (EventStoreDB only: the Postgres store's fence is taken inside
 * the appending statement, and a lost connection aborts that statement with it).
 */
export interface KickMissed {
  guardStream: string;
  streamId: string;
  /** Undefined: an append whose answer was lost, and whose stream could not be read to tell whether it landed. */
  position: Position | undefined;
  /** Undefined: the guard stream could not be read to tell, so a kick may have been missed. */
  kickPosition: Position | undefined;
}

export interface RecorderHooks extends FenceHooks {
  kickMissed?(missed: KickMissed): void;
}

/** What deciding on a stream needs of a store (handleCommand): its reads and its appends. */
export type StreamStore = Pick<EventStore, 'readStream' | 'append'>;

/** An append refused by its guard (TransactionRecorder.guarded): the guard stream holds the guard event. */
export class GuardBrokenError extends Error {
  constructor(readonly guard: StreamGuard) {
    super(`${guard.stream} holds ${guard.eventType} from revision ${guard.fromRevision}`);
    this.name = 'GuardBrokenError';
  }
}

/** A condition on another stream: it holds no event of this type from this revision on (say, no kick of a session). */
export interface StreamGuard {
  stream: string;
  fromRevision: number;
  eventType: string;
}

/** Whether the guard is broken: the stream holds such an event. */
export async function guardBroken(store: EventStore, guard: StreamGuard): Promise<boolean> {
  return (await guardEvent(store, guard)) !== undefined;
}

/** The first event that breaks `guard` (of its type, from its revision on), if any. */
export async function guardEvent(store: EventStore, guard: StreamGuard): Promise<RecordedEvent | undefined> {
  const later = await store.readStream(guard.stream, { fromRevision: guard.fromRevision });
  return later.find((e) => e.type === guard.eventType);
}

export interface RegistryEntry {
  contentHash: string;
  roundStream: string;
}

/** The wallet's own identity of a transaction: the operator's wallet deduplicates on (playerRef, transactionId). */
export interface WalletKey {
  operatorId: string;
  playerRef: string;
}

export interface Claim {
  /** True when this call registered the id; false when it was registered before. */
  inserted: boolean;
  /** True when this call holds the dispatch lease (until released or ttl). */
  leased: boolean;
  /** The registrant of the id: this submission's (or the same content's) entry, or whoever holds it. */
  entry: RegistryEntry;
  /** The id is held for this wallet key by another registrant (another provider, an adjustment, the reconciler). */
  taken: boolean;
}

/** A claim of a transaction id in the registry, with its dispatch lease for ttlMs. */
export interface ClaimRequest {
  registryKey: string;
  transactionId: string;
  entry: RegistryEntry;
  wallet: WalletKey;
  token: string;
  ttlMs: number;
}

export interface RecordRequest extends ClaimRequest {
  /** When broken (say, the session was kicked), nothing new is claimed or recorded. */
  guard: StreamGuard | undefined;
  /** The record, appended to entry.roundStream at this revision (-1: a new stream) if the claim registers the id. */
  expectedRevision: number;
  /** Nothing to append: the claim alone (a resubmission, or a record decided after the claim). */
  events: NewEvent[];
}

export type RecordOutcome =
  /** The guard is broken and the id is new to this registrant: nothing was claimed or recorded. */
  | { kind: 'refused' }
  /** The id's row went away between the claim and its read (a refused submission released it): ask again. */
  | { kind: 'vanished' }
  /**
   * Claimed; when the claim registered the id and events were given, what their append did.
   * `revoked`: the guard is broken (the id was registered before: the caller answers it, records nothing).
   */
  | { kind: 'claimed'; claim: Claim; revoked: boolean; append: { kind: 'appended'; result: AppendResult } | { kind: 'conflict' } | undefined };
