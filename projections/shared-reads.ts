import { comparePositions, type EventStore, type LogPage, type Position, type ReadPageOptions, type RecordedEvent } from '../shared/eventstore/port.ts';
import { PageFill, textBytes } from '../shared/eventstore/text-size.ts';

/**
 * The log's newest events, read once for the read models' runners of a process.
 *
 * Each runner reads the log from its own checkpoint, and they all follow the same head: without this,
 * every event was read by each of them, each read a statement and a JSON parse of every event. Here the
 * events a runner reads are kept, in log order, and a runner reading from a position among them is given
 * the events that follow it from memory; only what nobody has read yet is read from the store, once, by
 * the first runner that asks for it (the others wait on that read). `npm run bench -- --ledger-only
 * --repeat 2 --rates 500` (2026-11-27, about 55,600 events appended): the projector role's six runners
 * read 341,872 rows of the log in 1.14 s of Postgres's statements; with the five read models sharing
 * (the hash chain reads its own, see services/service.ts) 116,368 rows in 0.47 s.
 *
 * Why this is the same answer the store would give: the log only grows at its end, and the events kept
 * are a run of it with nothing left out (each read continues the run from its last event). A runner
 * the kept events give less than it asked for has the store read on from their end (one read, shared by
 * whoever asks meanwhile, and begun after its call), so each answer holds everything the store showed at
 * some moment during the call, as a read of its own would.
 *
 * The events are the same objects for every runner: apply() reads events and never changes them, as in
 * a rebuild, where every read model's queue applies the same pages.
 *
 * What is kept is bounded in events and in the text they hold (textBytes): an outcome event keeps its
 * wallet's reply verbatim, up to 1 MiB, so 4,000 events of a wallet that sends large replies held
 * gigabytes, for good (`npm run bench -- --soak --reply-bytes 262144` at 30 tx/s: the process grew to
 * 907 MB in 90 s). Past either bound the oldest go; a runner behind them reads its own page from the store.
 */
export class SharedLogReads {
  /** The position the first kept event follows (undefined: nothing kept yet). */
  private from: Position | undefined;
  private events: RecordedEvent[] = [];
  /** The kept events' textBytes, summed. */
  private bytes = 0;
  /** Where each kept event is, as `base` + its index in `events`. */
  private readonly at = new Map<Position, number>();
  private base = 0;
  /** The read continuing the kept events, shared by whoever needs it meanwhile (see extend). */
  private extending: Promise<Extension> | undefined;
  /** readPage calls so far: tells whether a shared read began before or after a given call. */
  private calls = 0;

  constructor(
    private readonly store: Pick<EventStore, 'readPage'>,
    private readonly options: { keep: number; keepBytes?: number } = { keep: KEEP },
  ) {}

  /** How many events are kept, and the text they hold (textBytes). */
  kept(): { events: number; bytes: number } {
    return { events: this.events.length, bytes: this.bytes };
  }

  async readPage(options: Required<ReadPageOptions>): Promise<LogPage> {
    const { from, maxCount, maxBytes } = options;
    const call = ++this.calls;
    /** The last store read this call waited on. */
    let read: Extension = NO_EXTENSION;
    /** Whether `read` began during this call and asked for at least as much: what it found is the store's answer to this call too. */
    const answers = () => read.began >= call && read.maxCount >= maxCount && read.maxBytes >= maxBytes;
    for (;;) {
      const page = this.keptAfter(from, maxCount, maxBytes);
      if (page === undefined) {
        // A shared read from this very position whose page the byte bound has already let go of: that page
        // is the answer, by the same rule as below, not a read of its own.
        if (read.from === from && (read.page.length >= maxCount || answers())) {
          const answer = within(read.page, 0, maxCount, maxBytes);
          return answer.more ? answer : { events: answer.events, more: read.more };
        }
        return this.readOwn(options);
      }
      if (page.more) return page;
      // Short of what was asked, the page is the answer only if a store read that began during this call,
      // and asked for as much, came back: a read already under way when the call came may have missed the
      // newest events, and a smaller one may have stopped short of them. The log goes on after the page
      // if that read stopped at a bound (the store's measure of bytes is not textBytes).
      if (answers()) return { events: page.events, more: read.more };
      read = await this.extend(maxCount, maxBytes);
    }
  }

  /**
   * The kept events after `from`, up to `maxCount` of them and `maxBytes` of their text (textBytes; the
   * first always), `more` if a bound stopped it; undefined if `from` is not among them (nor where they start).
   */
  private keptAfter(from: Position, maxCount: number, maxBytes: number): LogPage | undefined {
    if (this.from === undefined) return undefined;
    if (from === this.from) return within(this.events, 0, maxCount, maxBytes);
    const at = this.at.get(from);
    return at === undefined ? undefined : within(this.events, at - this.base + 1, maxCount, maxBytes);
  }

  /** A read from a position the kept events do not cover (a runner behind them, or the first read). */
  private async readOwn(options: Required<ReadPageOptions>): Promise<LogPage> {
    const page = await this.store.readPage(options);
    // It becomes the kept run if it reaches further than that one: the runners at the head read on from it.
    const last = page.events[page.events.length - 1];
    const keptLast = this.events[this.events.length - 1];
    if (this.from === undefined || (last && (!keptLast || comparePositions(last.position, keptLast.position) > 0))) {
      this.from = options.from;
      this.events = [];
      this.bytes = 0;
      this.at.clear();
      this.base = 0;
      this.append(page.events);
    }
    return page;
  }

  /**
   * Reads the events after the kept ones (one read at a time, shared by whoever waits for it). Resolves
   * to `calls` as the read began, what it asked for, its position and its page, or to NO_EXTENSION if the
   * kept run was replaced meanwhile (readOwn) and the page, which no longer continues it, was dropped: the
   * caller then reads on from the new run's end.
   */
  private extend(maxCount: number, maxBytes: number): Promise<Extension> {
    this.extending ??= (async () => {
      const began = this.calls;
      try {
        const end = this.events[this.events.length - 1]?.position ?? this.from!;
        const { events: page, more } = await this.store.readPage({ from: end, maxCount, maxBytes });
        if ((this.events[this.events.length - 1]?.position ?? this.from) !== end) return NO_EXTENSION;
        this.append(page);
        return { began, maxCount, maxBytes, from: end, page, more };
      } finally {
        this.extending = undefined;
      }
    })();
    return this.extending;
  }

  private append(page: RecordedEvent[]): void {
    for (const e of page) {
      this.at.set(e.position, this.base + this.events.push(e) - 1);
      this.bytes += textBytes(e);
    }
    // The oldest go while either bound is passed: the run then starts after the last of them. (textBytes
    // remembers each event's size: asking again costs a lookup.)
    let over = Math.max(0, this.events.length - this.options.keep);
    let dropped = 0;
    for (let i = 0; i < over; i++) dropped += textBytes(this.events[i]!);
    const keepBytes = this.options.keepBytes ?? KEEP_BYTES;
    while (over < this.events.length && this.bytes - dropped > keepBytes) dropped += textBytes(this.events[over++]!);
    if (over > 0) {
      for (const e of this.events.slice(0, over)) this.at.delete(e.position);
      this.from = this.events[over - 1]!.position;
      this.events = this.events.slice(over);
      this.bytes -= dropped;
      this.base += over;
    }
  }
}

/** `events` from index `start`, as a page of at most `maxCount` of them and `maxBytes` of their text (PageFill). */
function within(events: RecordedEvent[], start: number, maxCount: number, maxBytes: number): LogPage {
  const fill = new PageFill(maxCount, maxBytes);
  for (let i = start; i < events.length && !fill.full; i++) fill.add(events[i]!);
  return fill.page();
}

/** A store read continuing the kept events: `calls` as it began, what it asked for, from where, what it found, and whether it stopped at a bound. */
interface Extension {
  began: number;
  maxCount: number;
  maxBytes: number;
  from: Position | undefined;
  page: RecordedEvent[];
  more: boolean;
}
const NO_EXTENSION: Extension = { began: 0, maxCount: 0, maxBytes: 0, from: undefined, page: [], more: false };

/** Events kept at most: a few of the runners' batches (1,000 events), so memory does not follow the log. */
const KEEP = 4000;
/**
 * The text kept at most (textBytes): 4,000 of the bench's events hold about 3 MB; 32 MiB is 32 of the
 * largest events, an outcome with a 1 MiB reply, and as much as the api's round cache keeps.
 */
const KEEP_BYTES = 32 * 1024 * 1024;
