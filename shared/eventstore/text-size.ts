import type { LogPage, RecordedEvent } from './port.ts';

/**
 * About how much text an event holds: its strings' lengths (in UTF-16 code units, a byte each for the
 * text of JSON, which is mostly ASCII), its keys', and 8 for any other value. Walked without recursion,
 * however deep a provider's metadata nests: 0.3-0.6 µs an event of the bench's history (about 350 bytes
 * of JSON), a sixth to a tenth of its JSON parse (2026-11-30).
 */
export function textBytes(event: Pick<RecordedEvent, 'data' | 'metadata'>): number {
  // Events are never changed once read, and the runners of a process share them: sized once each.
  const known = sized.get(event);
  if (known !== undefined) return known;
  let bytes = 0;
  const stack: unknown[] = [event.data, event.metadata];
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value === 'string') bytes += value.length;
    else if (Array.isArray(value)) {
      bytes += 8;
      for (const v of value) stack.push(v);
    } else if (value !== null && typeof value === 'object') {
      const object = value as Record<string, unknown>;
      // A parsed JSON object has no inherited keys: for...in is its own, without Object.entries' arrays.
      for (const k in object) {
        bytes += k.length;
        stack.push(object[k]);
      }
    } else bytes += 8;
  }
  sized.set(event, bytes);
  return bytes;
}
const sized = new WeakMap<object, number>();

/**
 * What one read of the log holds at most (EventStore.readPage's maxBytes) for every bulk reader of it (the
 * read models' runners, the rebuild, the audit route, the chain's catch-up, wholeLog), so that catching up
 * on a wallet's large replies (an outcome keeps its reply verbatim, up to 1 MiB) does not read 1,000 of
 * them, up to a gigabyte, at once. The bench's ordinary events hold about 300 bytes each: their pages
 * stop at 1,000 events long before this.
 */
export const BATCH_BYTES = 8 * 1024 * 1024;

/**
 * A page filled one event at a time, up to `maxCount` events and `maxBytes` of their text (textBytes), its
 * first event always taken however large: the rule of every page bounded in text (the EventStoreDB
 * adapter's readPage, the projector's shared reads). Postgres keeps the same rule in its query, by stored
 * size.
 */
export class PageFill {
  readonly events: RecordedEvent[] = [];
  private bytes = 0;
  /** Whether a bound stopped the page: no event is taken after this. */
  full = false;

  constructor(
    private readonly maxCount: number,
    private readonly maxBytes: number,
  ) {}

  /** Takes `event` unless the page is full or it would take the page past maxBytes (which fills it). */
  add(event: RecordedEvent): boolean {
    if (this.full) return false;
    const size = textBytes(event);
    if (this.events.length > 0 && this.bytes + size > this.maxBytes) {
      this.full = true;
      return false;
    }
    this.events.push(event);
    this.bytes += size;
    if (this.events.length >= this.maxCount) this.full = true;
    return true;
  }

  page(): LogPage {
    return { events: this.events, more: this.full };
  }
}
