import type { EventStore, Position, RecordedEvent } from './port.ts';

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
 * The text (textBytes) a batch is meant to hold: every bulk reader of the log (the read models' runners,
 * the rebuild, the audit route, the chain's catch-up, wholeLog) that read large events (an outcome keeps
 * its wallet's reply verbatim, up to 1 MiB) asks for fewer next time, so that catching up on a wallet's
 * large replies does not read 1,000 of them, up to a gigabyte, at once: at most FIRST_BATCH of them before
 * it knows their size (64 MiB of the largest), then about 8 MiB a batch. The bench's ordinary events hold
 * about 300 bytes each: their batches reach 1,000 in three reads.
 */
export const BATCH_BYTES = 8 * 1024 * 1024;
/** A reader's first read, before it has seen how large the events are (then nextBatchSize). */
const FIRST_BATCH = 64;

/**
 * How many events to ask for after reading `events`: `budget` (BATCH_BYTES) over their mean size, between
 * 1 and `most`, and at most four times as many as were read (FIRST_BATCH after a short or empty read), so that
 * a runner idling at the head on a few small events does not ask for 1,000 when a backlog of large ones
 * comes. Every event is sized (a sample would alias with the log's own alternation of small records and
 * large outcomes): under a microsecond each, against about 16 µs an event for reading and applying it in
 * the fastest way the read models are built (the rebuild, 61,000 events a second).
 */
export function nextBatchSize(events: RecordedEvent[], most: number, budget = BATCH_BYTES): number {
  const growth = Math.max(FIRST_BATCH, 4 * events.length);
  if (events.length === 0) return Math.min(most, growth);
  let bytes = 0;
  for (const e of events) bytes += textBytes(e);
  return Math.max(1, Math.min(most, growth, Math.floor(budget / Math.max(1, bytes / events.length))));
}

/**
 * A page of the log after `from`: at most `limit` events and about `maxBytes` of their text (textBytes;
 * always at least one event, however large), read in batches sized by nextBatchSize so that a page of
 * events holding large wallet replies is not read 1,000 at a time. Fewer events than `limit` do not mean
 * the log ends there: read on from the last one. Events read past the bound are read again by the next
 * page.
 */
export async function readLogPage(store: Pick<EventStore, 'readAll'>, from: Position, limit: number, maxBytes: number): Promise<RecordedEvent[]> {
  const events: RecordedEvent[] = [];
  let bytes = 0;
  let at = from;
  let ask = nextBatchSize([], limit);
  for (;;) {
    const batch = await store.readAll({ from: at, maxCount: ask });
    for (const e of batch) {
      const size = textBytes(e);
      if (events.length > 0 && bytes + size > maxBytes) return events;
      events.push(e);
      bytes += size;
    }
    if (batch.length < ask || events.length >= limit) return events;
    at = batch[batch.length - 1]!.position;
    // No more than the text left in the page would hold at the last batch's mean size.
    ask = nextBatchSize(batch, limit - events.length, Math.min(BATCH_BYTES, maxBytes - bytes));
  }
}
