import {
  ANY,
  BACKWARDS,
  END,
  EventStoreDBClient,
  FORWARDS,
  NO_STREAM,
  START as ESDB_START,
  StreamNotFoundError,
  WrongExpectedVersionError,
  excludeSystemEvents,
  jsonEvent,
  type AllStreamRecordedEvent,
  type AllStreamSubscription,
  type AppendResult as EsdbAppendResult,
  type AppendExpectedRevision,
  type Position as EsdbPosition,
  type ResolvedEvent,
  type StreamingRead,
} from '@eventstore/db-client';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '../logger.ts';
import type { Pool } from '../db/pool.ts';
import { claimThenAppend } from './claim-then-append.ts';
import { PageFill } from './text-size.ts';
import {
  START,
  WrongExpectedRevisionError,
  EventStoreUnavailableError,
  pollingSubscription,
  type AppendResult,
  type CountAllOptions,
  type EventStore,
  type ExpectedRevision,
  type JsonObject,
  type LogBacklog,
  type NewEvent,
  type Position,
  type LogPage,
  type ReadAllOptions,
  type ReadPageOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  type SubscribeOptions,
  type RecorderHooks,
  type TransactionRecorder,
} from './port.ts';

export interface EsdbEventStoreOptions {
  /** Where the live notification subscription reports its drops; they are retried either way. */
  logger?: Pick<Logger, 'warn'>;
  /** Longest a stream or $all read may take before it is cancelled and fails (default 10 s, the client's own default deadline). */
  readTimeoutMs?: number;
}

const DEFAULT_PAGE_SIZE = 500;
/** Raw events fetched per round trip when system events have to be filtered out client-side. */
const MIN_RAW_BATCH = 64;
const PING_TIMEOUT_MS = 2_000;
const READ_TIMEOUT_MS = 10_000;
const LIVE_RESTART_DELAY_MS = 1_000;

export function createEsdbEventStore(connectionString: string, options: EsdbEventStoreOptions = {}): EventStore {
  return new EsdbEventStore(EventStoreDBClient.connectionString(connectionString), options.logger, options.readTimeoutMs ?? READ_TIMEOUT_MS);
}

type AnyRecordedEvent = NonNullable<ResolvedEvent['event']> | AllStreamRecordedEvent;

class EsdbEventStore implements EventStore {
  readonly kind = 'esdb' as const;

  private seq = 0;
  private readonly waiters = new Set<{ afterSeq: number; wake(): void }>();
  private liveStarted = false;
  private live: AllStreamSubscription | undefined;
  private readonly closing = new AbortController();

  constructor(
    private readonly client: EventStoreDBClient,
    private readonly logger: Pick<Logger, 'warn'> | undefined,
    private readonly readTimeoutMs: number,
  ) {}

  /** The registry lives in Postgres, the events here: the claim (and the guard beside it), then the append. */
  transactionRecorder(registry: Pool, hooks?: RecorderHooks): TransactionRecorder {
    return claimThenAppend(registry, this, hooks);
  }

  async eventCount(): Promise<undefined> {
    return undefined;
  }

  async append(streamId: string, events: NewEvent[], expectedRevision: ExpectedRevision): Promise<AppendResult> {
    if (events.length === 0) throw new Error('append needs at least one event');
    let result: EsdbAppendResult;
    try {
      result = await this.client.appendToStream(
        streamId,
        events.map((e) => jsonEvent({ id: e.id, type: e.type, data: e.data, metadata: e.metadata ?? {} })),
        { expectedRevision: toEsdbExpected(expectedRevision) },
      );
    } catch (err) {
      if (err instanceof WrongExpectedVersionError) {
        const actual = err.actualVersion === NO_STREAM ? -1 : Number(err.actualVersion);
        throw new WrongExpectedRevisionError(streamId, expectedRevision, actual);
      }
      throw unavailableOr(err);
    }
    if (!result.success) {
      // Only with throwOnAppendFailure=false in the connection string; the revision it reports is not
      // reliable in this client's batch append, so ask the stream.
      const [lastEvent] = await this.readLast(streamId);
      throw new WrongExpectedRevisionError(streamId, expectedRevision, lastEvent ? lastEvent.revision : -1);
    }
    this.bump();
    const nextRevision = Number(result.nextExpectedRevision);
    // The server answers with the write's commit position as both commit and prepare, which is not the
    // last event's $all position when the batch holds several events, nor on an idempotent repeat
    // (EventStore's RequestManager/Managers/WriteEvents.cs). Reading the event back is exact.
    return { nextRevision, position: await this.positionOfRevision(streamId, nextRevision) };
  }

  async readStream(streamId: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    const out: RecordedEvent[] = [];
    // EventStoreDB refuses a read of 0 events (an unexpected-result error); there is nothing to ask for.
    if (options.maxCount !== undefined && options.maxCount <= 0) return out;
    try {
      const read = this.client.readStream(streamId, {
        direction: FORWARDS,
        fromRevision: options.fromRevision === undefined ? ESDB_START : BigInt(options.fromRevision),
        ...(options.maxCount === undefined ? {} : { maxCount: options.maxCount }),
      });
      await drain(read, this.readTimeoutMs, `read of stream ${streamId}`, (resolved) => {
        if (resolved.event) out.push(toRecorded(resolved.event));
      });
    } catch (err) {
      if (err instanceof StreamNotFoundError) return [];
      throw err;
    }
    return out;
  }

  /** Up to `maxCount` events of $all after `from`, system events left out (see forwardsAfter). */
  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    const out: RecordedEvent[] = [];
    await this.forwardsAfter(options.from, options.maxCount ?? DEFAULT_PAGE_SIZE, (event) => void out.push(toRecorded(event)));
    return out;
  }

  /**
   * readAll that also stops before the event that would take the page's text (textBytes) past maxBytes,
   * the first event excepted: that event is read and let go (read again by the next page), and the read is
   * cancelled. What the server sent past it is only what gRPC's flow control let it send ahead of the
   * adapter's reading, dropped with the read.
   */
  async readPage(options: ReadPageOptions): Promise<LogPage> {
    const maxCount = options.maxCount ?? DEFAULT_PAGE_SIZE;
    const fill = new PageFill(maxCount, options.maxBytes);
    await this.forwardsAfter(options.from, maxCount, (event) => (fill.add(toRecorded(event)) ? undefined : 'stop'));
    return fill.page();
  }

  /** Counted as the events stream in, none kept but the first's time. */
  async countAll(options: CountAllOptions): Promise<LogBacklog> {
    let count = 0;
    let firstCreatedAt: Date | undefined;
    await this.forwardsAfter(options.from, options.limit, (event) => {
      if (count++ === 0) firstCreatedAt = event.created;
    });
    return firstCreatedAt ? { count, firstCreatedAt } : { count: 0 };
  }

  /**
   * Hands `take` the events of $all after `from`, one at a time, until it has had `limit` of them or the
   * log ends. $all is read forwards from `from`, which ESDB treats as inclusive, so anything at or before
   * it is dropped. readAll of this client version takes no server-side filter, so system events are
   * dropped here and the read goes on until `limit` events are found or the end of the log is reached:
   * returning a short page that is not the end would let the caller park on a run of system events.
   * `take` may say 'stop' instead of taking an event: the read then ends there.
   */
  private async forwardsAfter(from: Position | undefined, limit: number, take: (event: AnyRecordedEvent) => 'stop' | void): Promise<void> {
    if (limit <= 0) return;
    let taken = 0;
    let stopped = false;
    let last = parsePosition(from ?? START);
    for (;;) {
      const batch = Math.max(limit - taken + 1, MIN_RAW_BATCH);
      const before = last;
      let raw = 0;
      const read = this.client.readAll({ direction: FORWARDS, fromPosition: last ?? ESDB_START, maxCount: batch });
      await drain(read, this.readTimeoutMs, 'read of $all', (resolved) => {
        raw++;
        const event = resolved.event;
        if (!event) return;
        if (last && comparePositions(event.position, last) <= 0) return;
        last = event.position;
        if (taken < limit && !isSystemEvent(event)) {
          if (take(event) === 'stop') {
            stopped = true;
            return 'stop';
          }
          taken++;
        }
        // The read asks for at least MIN_RAW_BATCH: the rest is not needed (and may be large events).
        if (taken >= limit) return 'stop';
      });
      if (stopped || taken >= limit || raw < batch || last === before) return;
    }
  }

  subscribeAll(options: SubscribeOptions = {}): AsyncIterable<RecordedEvent> {
    return pollingSubscription(this, options);
  }

  appendSeq(): number {
    this.startLive();
    return this.seq;
  }

  waitForAppend(afterSeq: number, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    this.startLive();
    if (this.seq > afterSeq || signal?.aborted || this.closing.signal.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const waiter = {
        afterSeq,
        wake: () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', waiter.wake);
          this.waiters.delete(waiter);
          resolve();
        },
      };
      const timer = setTimeout(waiter.wake, timeoutMs);
      signal?.addEventListener('abort', waiter.wake, { once: true });
      this.waiters.add(waiter);
    });
  }

  async headPosition(): Promise<Position> {
    let last: EsdbPosition | undefined;
    for (;;) {
      const before = last;
      let raw = 0;
      const read = this.client.readAll({ direction: BACKWARDS, fromPosition: last ?? END, maxCount: MIN_RAW_BATCH });
      let head: EsdbPosition | undefined;
      await drain(read, this.readTimeoutMs, 'backwards read of $all', (resolved) => {
        raw++;
        const event = resolved.event;
        if (!event) return;
        if (last && comparePositions(event.position, last) >= 0) return;
        last = event.position;
        if (isSystemEvent(event)) return;
        head = event.position;
        return 'stop';
      });
      if (head) return formatPosition(head);
      if (raw < MIN_RAW_BATCH || last === before) return START;
    }
  }

  async ping(): Promise<void> {
    // One event at most; only the round trip matters.
    const read = this.client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1 });
    await drain(read, PING_TIMEOUT_MS, 'ping', () => undefined);
  }

  async close(): Promise<void> {
    if (this.closing.signal.aborted) return;
    this.closing.abort();
    for (const waiter of [...this.waiters]) waiter.wake();
    const live = this.live;
    this.live = undefined;
    if (live) {
      await live.unsubscribe().catch(() => undefined);
      // A cancelled gRPC call does not end the subscription stream; destroying it ends the for-await.
      live.destroy();
    }
    await this.client.dispose();
  }

  /** The empty append still checks the expected revision, like the Postgres adapter's. */
  private async readLast(streamId: string): Promise<RecordedEvent[]> {
    try {
      const out: RecordedEvent[] = [];
      const read = this.client.readStream(streamId, { direction: BACKWARDS, fromRevision: END, maxCount: 1 });
      await drain(read, this.readTimeoutMs, `backwards read of stream ${streamId}`, (resolved) => {
        if (resolved.event) out.push(toRecorded(resolved.event));
      });
      return out;
    } catch (err) {
      if (err instanceof StreamNotFoundError) return [];
      throw err;
    }
  }

  private async positionOfRevision(streamId: string, revision: number): Promise<Position> {
    const [event] = await this.readStream(streamId, { fromRevision: revision, maxCount: 1 });
    return event ? event.position : this.headPosition();
  }

  private bump(): void {
    this.seq++;
    for (const waiter of [...this.waiters]) if (this.seq > waiter.afterSeq) waiter.wake();
  }

  private startLive(): void {
    if (this.liveStarted || this.closing.signal.aborted) return;
    this.liveStarted = true;
    void this.runLive();
  }

  /** One live subscription per store, only to count appends; readers re-read with readAll or readPage. */
  private async runLive(): Promise<void> {
    const closed = this.closing.signal;
    while (!closed.aborted) {
      const sub = this.client.subscribeToAll({ fromPosition: END, filter: excludeSystemEvents() });
      this.live = sub;
      try {
        for await (const _ of sub) this.bump();
        if (!closed.aborted) this.logger?.warn('EventStoreDB live subscription ended; restarting');
      } catch (err) {
        if (closed.aborted) break;
        this.logger?.warn({ err }, 'EventStoreDB live subscription dropped; restarting');
      } finally {
        if (this.live === sub) this.live = undefined;
      }
      if (closed.aborted) break;
      await sleep(LIVE_RESTART_DELAY_MS, undefined, { signal: closed }).catch(() => undefined);
      // Appends may have landed while no subscription was listening: let waiters re-read.
      this.bump();
    }
  }
}

/** The client's errors of a server that did not answer (ErrorType of @eventstore/db-client): the request was not wrong. */
const UNANSWERED = new Set<string>(['timeout', 'deadline-exceeded', 'unavailable', 'not-leader', 'cancelled']);

/** `err` as EventStoreUnavailableError when the server did not answer; otherwise `err` itself. */
function unavailableOr(err: unknown): unknown {
  const type = typeof err === 'object' && err !== null ? (err as { type?: unknown }).type : undefined;
  return typeof type === 'string' && UNANSWERED.has(type) ? new EventStoreUnavailableError(err instanceof Error ? err.message : String(err), { cause: err }) : err;
}

/**
 * Consumes a read within `timeoutMs`. Reads run with an infinite gRPC deadline in this client (readStream and
 * readAll pass `deadline: Infinity`, which overrides the `deadline` option), so the bound is ours: when it
 * passes, the call is cancelled and the read fails. `each` returning 'stop' ends the read early. A server
 * that did not answer fails every read alike (unavailableOr).
 */
async function drain<E>(read: StreamingRead<E>, timeoutMs: number, what: string, each: (event: E) => 'stop' | void): Promise<void> {
  const timer = setTimeout(() => {
    void read.cancel().catch(() => undefined);
    read.destroy(new EventStoreUnavailableError(`EventStoreDB ${what} did not finish within ${timeoutMs} ms`));
  }, timeoutMs);
  try {
    for await (const event of read as AsyncIterable<E>) {
      if (each(event) === 'stop') {
        await read.cancel();
        return;
      }
    }
  } catch (err) {
    throw unavailableOr(err);
  } finally {
    clearTimeout(timer);
  }
}

function toEsdbExpected(expected: ExpectedRevision): AppendExpectedRevision {
  // -1 is the revision a missing stream reports (WrongExpectedRevisionError.actual): expecting it is no_stream.
  if (expected === 'no_stream' || expected === -1) return NO_STREAM;
  if (expected === 'any') return ANY;
  return BigInt(expected);
}

function isSystemEvent(event: AnyRecordedEvent): boolean {
  return event.type.startsWith('$') || event.streamId.startsWith('$');
}

function toRecorded(event: AnyRecordedEvent): RecordedEvent {
  if (!event.position) {
    throw new Error(`EventStoreDB returned event ${event.id} without a log position (server older than 22.6?)`);
  }
  return {
    id: event.id,
    streamId: event.streamId,
    revision: Number(event.revision),
    type: event.type,
    data: toJsonObject(event.data) ?? {},
    metadata: toJsonObject(event.metadata) ?? {},
    position: formatPosition(event.position),
    createdAt: event.created,
  };
}

/** JSON events arrive parsed by the client; binary ones are parsed here. Non-objects are wrapped, not dropped. */
function toJsonObject(value: unknown): JsonObject | undefined {
  if (value === undefined || value === null) return undefined;
  if (value instanceof Uint8Array) {
    if (value.length === 0) return undefined;
    try {
      return toJsonObject(JSON.parse(Buffer.from(value).toString('utf8')) as unknown);
    } catch {
      return { value: Buffer.from(value).toString('base64') };
    }
  }
  if (typeof value === 'object' && !Array.isArray(value)) return value as JsonObject;
  return { value };
}

function formatPosition(position: EsdbPosition): Position {
  return `${position.commit.toString(10)}.${position.prepare.toString(10)}`;
}

function parsePosition(position: Position): EsdbPosition | undefined {
  if (position === START) return undefined;
  const match = /^(\d+)\.(\d+)$/.exec(position);
  if (!match?.[1] || !match[2]) throw new Error(`not an EventStoreDB position: "${position}"`);
  return { commit: BigInt(match[1]), prepare: BigInt(match[2]) };
}

function comparePositions(a: EsdbPosition, b: EsdbPosition): number {
  if (a.commit !== b.commit) return a.commit < b.commit ? -1 : 1;
  if (a.prepare !== b.prepare) return a.prepare < b.prepare ? -1 : 1;
  return 0;
}
