import { START, type EventStore, type Position, type RecordedEvent } from './port.ts';
import { BATCH_BYTES } from './text-size.ts';

/** How long a log may hold back its committed tail before the move gives up (see wholeLog). */
export const SETTLE_TIMEOUT_MS = 60_000;

/**
 * The store's whole log, page by page, to its last committed event. Postgres's log shows an event only
 * once every transaction older than it has ended (the reader's rule that no event is ever passed over),
 * so a transaction held open anywhere on the server, even in another database, holds its tail back. A
 * move must not stop at that tail: when the log ends short of the events the store holds, it waits for
 * the tail and goes on from where it was, and gives up (throws) after `SETTLE_TIMEOUT_MS`.
 */
export async function* wholeLog(store: Pick<EventStore, 'readPage' | 'eventCount' | 'kind'>, settleTimeoutMs = SETTLE_TIMEOUT_MS, pageSize = 500): AsyncGenerator<RecordedEvent[]> {
  let from: Position = START;
  let read = 0;
  let waitingSince: number | undefined;
  for (;;) {
    // Pages of up to `pageSize` events and BATCH_BYTES: an outcome keeps its wallet's reply, up to 1 MiB.
    const { events: page, more } = await store.readPage({ from, maxCount: pageSize, maxBytes: BATCH_BYTES });
    if (page.length > 0) {
      waitingSince = undefined;
      read += page.length;
      from = page[page.length - 1]!.position;
      yield page;
      if (more) continue;
    }
    const held = await store.eventCount();
    if (held === undefined || read >= held) return;
    waitingSince ??= Date.now();
    if (Date.now() - waitingSince > settleTimeoutMs) {
      throw new Error(
        `the ${store.kind} store's log still shows ${read} of its ${held} events after ${Math.round(settleTimeoutMs / 1000)} s: a transaction held open on its server holds the rest back; end it and run again`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

