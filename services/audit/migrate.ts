import { canonicalJson } from '../../shared/canonical.ts';
import { type EventStore, type ExpectedRevision, type RecordedEvent } from '../../shared/eventstore/port.ts';
import { wholeLog } from '../../shared/eventstore/whole-log.ts';

export interface CopyResult {
  events: number;
  streams: number;
}

/**
 * Copies the whole history of `source` into `target`, in the source's log order, each stream at the
 * revisions it holds, with its events' ids, types, data and metadata as they are. A run that was
 * interrupted is simply run again: appending events already there, at their place, is a no-op in both
 * stores (the port's idempotent append), and an event that would land anywhere else is refused by the
 * expected revision. Consecutive events of one stream go in one append.
 */
export async function copyEvents(source: EventStore, target: EventStore, progress?: (copied: number) => void): Promise<CopyResult> {
  let events = 0;
  const streams = new Set<string>();
  for await (const page of wholeLog(source)) {
    for (let i = 0; i < page.length; ) {
      const first = page[i]!;
      let j = i + 1;
      while (j < page.length && page[j]!.streamId === first.streamId && page[j]!.revision === page[j - 1]!.revision + 1) j++;
      const run = page.slice(i, j);
      const expected: ExpectedRevision = first.revision === 0 ? 'no_stream' : first.revision - 1;
      await target.append(
        first.streamId,
        run.map((e) => ({ id: e.id, type: e.type, data: e.data, metadata: e.metadata })),
        expected,
      );
      streams.add(first.streamId);
      events += run.length;
      i = j;
    }
    progress?.(events);
  }
  return { events, streams: streams.size };
}

export interface CopyDifference {
  /** Index in the source's log (0-based). */
  index: number;
  source: Pick<RecordedEvent, 'id' | 'streamId' | 'revision' | 'type'> | undefined;
  target: Pick<RecordedEvent, 'id' | 'streamId' | 'revision' | 'type'> | undefined;
  what: string;
}

const same = (a: RecordedEvent, b: RecordedEvent): string | undefined => {
  if (a.id !== b.id) return 'event id';
  if (a.streamId !== b.streamId) return 'stream';
  if (a.revision !== b.revision) return 'revision';
  if (a.type !== b.type) return 'type';
  // Compared as values: Postgres keeps JSON with its keys in its own order.
  if (canonicalJson(a.data) !== canonicalJson(b.data)) return 'data';
  if (canonicalJson(a.metadata) !== canonicalJson(b.metadata)) return 'metadata';
  return undefined;
};

const brief = (e: RecordedEvent | undefined) => e && { id: e.id, streamId: e.streamId, revision: e.revision, type: e.type };

/**
 * Reads both logs side by side from the start: the same events in the same order, each with the same
 * id, stream, revision, type, data and metadata. Returns how many events were compared and up to
 * `limit` differences (an event one log has and the other has not is a difference).
 */
export async function compareLogs(source: EventStore, target: EventStore, limit = 20): Promise<{ compared: number; differences: CopyDifference[] }> {
  const a = events(wholeLog(source));
  const b = events(wholeLog(target));
  const differences: CopyDifference[] = [];
  let compared = 0;
  try {
    for (let index = 0; differences.length < limit; index++) {
      const [x, y] = await Promise.all([a.next(), b.next()]);
      if (x.done && y.done) break;
      const what = x.done ? 'only in the target' : y.done ? 'missing from the target' : same(x.value, y.value);
      if (what) differences.push({ index, source: brief(x.done ? undefined : x.value), target: brief(y.done ? undefined : y.value), what });
      if (x.done || y.done) break;
      compared += 1;
    }
  } finally {
    await Promise.all([a.return(undefined), b.return(undefined)]);
  }
  return { compared, differences };
}

async function* events(pages: AsyncIterable<RecordedEvent[]>): AsyncGenerator<RecordedEvent> {
  for await (const page of pages) yield* page;
}
