import {
  START,
  WrongExpectedRevisionError,
  pollingSubscription,
  type AppendResult,
  type CountAllOptions,
  type EventStore,
  type ExpectedRevision,
  type LogBacklog,
  type LogPage,
  type NewEvent,
  type Position,
  type ReadAllOptions,
  type ReadPageOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  type SubscribeOptions,
  type TransactionRecorder,
} from '../../shared/eventstore/port.ts';
import type { Pool } from '../../shared/db/pool.ts';
import { claimThenAppend } from '../../shared/eventstore/claim-then-append.ts';
import { PageFill } from '../../shared/eventstore/text-size.ts';

const INNER_PAGE = 500;

/**
 * EventStoreDB has one global log per server, shared by every test file and every earlier run. This view
 * gives a test what a fresh database would: stream ids are prefixed on the way in and stripped on the way
 * out, and the global log shows only this namespace's events. `baseline` is the server's head when the
 * namespace was created; nothing of the namespace can sit before it, so global reads start there.
 */
export class NamespacedEventStore implements EventStore {
  get kind(): EventStore['kind'] {
    return this.inner.kind;
  }

  private constructor(
    private readonly inner: EventStore,
    readonly prefix: string,
    private readonly baseline: Position,
  ) {}

  transactionRecorder(registry: Pool): TransactionRecorder {
    return claimThenAppend(registry, this);
  }

  async eventCount(): Promise<undefined> {
    return undefined;
  }

  static async create(inner: EventStore, prefix: string): Promise<NamespacedEventStore> {
    return new NamespacedEventStore(inner, prefix, await inner.headPosition());
  }

  async append(streamId: string, events: NewEvent[], expectedRevision: ExpectedRevision): Promise<AppendResult> {
    try {
      return await this.inner.append(this.prefix + streamId, events, expectedRevision);
    } catch (err) {
      if (err instanceof WrongExpectedRevisionError) {
        throw new WrongExpectedRevisionError(streamId, err.expected, err.actual);
      }
      throw err;
    }
  }

  async readStream(streamId: string, options?: ReadStreamOptions): Promise<RecordedEvent[]> {
    return (await this.inner.readStream(this.prefix + streamId, options)).map((e) => this.strip(e));
  }

  /** Pages through the shared log until `maxCount` events of this namespace are found or the log ends. */
  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    return (await this.readPage({ ...options, maxBytes: Infinity })).events;
  }

  /** readAll bounded in text as the EventStoreDB adapter bounds it (PageFill over this namespace's events). */
  async readPage(options: ReadPageOptions): Promise<LogPage> {
    const maxCount = options.maxCount ?? INNER_PAGE;
    const fill = new PageFill(maxCount, options.maxBytes);
    if (maxCount <= 0) return fill.page();
    let cursor = !options.from || options.from === START ? this.baseline : options.from;
    const pageSize = Math.max(maxCount, INNER_PAGE);
    for (;;) {
      const page = await this.inner.readAll({ from: cursor, maxCount: pageSize });
      for (const event of page) {
        if (!event.streamId.startsWith(this.prefix)) continue;
        fill.add(this.strip(event));
        if (fill.full) return fill.page();
      }
      const last = page[page.length - 1];
      if (page.length < pageSize || !last) return fill.page();
      cursor = last.position;
    }
  }

  /** Pages through the namespace's events, keeping none. */
  async countAll(options: CountAllOptions): Promise<LogBacklog> {
    let count = 0;
    let firstCreatedAt: Date | undefined;
    let from = options.from;
    while (count < options.limit) {
      const page = await this.readAll({ ...(from ? { from } : {}), maxCount: Math.min(INNER_PAGE, options.limit - count) });
      firstCreatedAt ??= page[0]?.createdAt;
      count += page.length;
      const last = page[page.length - 1];
      if (!last) break;
      from = last.position;
    }
    return firstCreatedAt ? { count, firstCreatedAt } : { count: 0 };
  }

  subscribeAll(options: SubscribeOptions = {}): AsyncIterable<RecordedEvent> {
    return pollingSubscription(this, options);
  }

  appendSeq(): number {
    return this.inner.appendSeq();
  }

  waitForAppend(afterSeq: number, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    return this.inner.waitForAppend(afterSeq, timeoutMs, signal);
  }

  async headPosition(): Promise<Position> {
    let head = START;
    let cursor = this.baseline;
    for (;;) {
      const page = await this.inner.readAll({ from: cursor, maxCount: INNER_PAGE });
      for (const event of page) if (event.streamId.startsWith(this.prefix)) head = event.position;
      const last = page[page.length - 1];
      if (page.length < INNER_PAGE || !last) return head;
      cursor = last.position;
    }
  }

  ping(): Promise<void> {
    return this.inner.ping();
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  private strip(event: RecordedEvent): RecordedEvent {
    return { ...event, streamId: event.streamId.slice(this.prefix.length) };
  }
}
