import { canonicalJson } from '../../shared/canonical.ts';
import { type EventStore, type ExpectedRevision, type RecordedEvent } from '../../shared/eventstore/port.ts';
import { wholeLog } from '../../shared/eventstore/whole-log.ts';
import { recordedAtText } from '../chain/link.ts';

/**
 * Where a moved event was first appended, as migrate-events keeps it in the event's metadata (`movedFrom`):
 * the store, its position there (which the archived chain of that store links) and the time that store
 * recorded (ISO 8601 UTC with milliseconds). The new store stamps the event with the time of the move, so
 * time travel reads this one (firstRecordedAt). An event moved again keeps its first `movedFrom`.
 */
export interface MovedFrom {
  store: string;
  position: string;
  createdAt: string;
}

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

export function movedFrom(metadata: RecordedEvent['metadata']): MovedFrom | undefined {
  const m = metadata.movedFrom;
  if (typeof m !== 'object' || m === null || Array.isArray(m)) return undefined;
  const { store, position, createdAt } = m as Record<string, unknown>;
  return typeof store === 'string' && typeof position === 'string' && typeof createdAt === 'string' && ISO_MS.test(createdAt) ? { store, position, createdAt } : undefined;
}

/** When the event was first appended: its first store's time for a moved event, else its store's own. */
export const firstRecordedAt = (e: Pick<RecordedEvent, 'metadata' | 'createdAt'>): Date => {
  const moved = movedFrom(e.metadata);
  return moved ? new Date(moved.createdAt) : e.createdAt;
};

/** The metadata an event is copied with: its own, plus where it came from unless it was moved before. */
const copiedMetadata = (e: RecordedEvent, store: string): RecordedEvent['metadata'] =>
  movedFrom(e.metadata) ? e.metadata : { ...e.metadata, movedFrom: { store, position: e.position, createdAt: recordedAtText(e.createdAt) } };

export interface CopyResult {
  events: number;
  streams: number;
}

/**
 * Copies the whole history of `source` into `target`, in the source's log order, each stream at the
 * revisions it holds, with its events' ids, types, data and metadata as they are, the metadata gaining
 * `movedFrom` (where and when each was first appended: MovedFrom). A run that was
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
        run.map((e) => ({ id: e.id, type: e.type, data: e.data, metadata: copiedMetadata(e, source.kind) })),
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

/** Metadata as the application wrote it: `movedFrom` is the move's (a target that held the event already, the store it was first appended to, keeps it without). */
const withoutMovedFrom = ({ movedFrom: _, ...rest }: RecordedEvent['metadata']): RecordedEvent['metadata'] => rest;

const same = (a: RecordedEvent, b: RecordedEvent): string | undefined => {
  if (a.id !== b.id) return 'event id';
  if (a.streamId !== b.streamId) return 'stream';
  if (a.revision !== b.revision) return 'revision';
  if (a.type !== b.type) return 'type';
  // Compared as values: Postgres keeps JSON with its keys in its own order.
  if (canonicalJson(a.data) !== canonicalJson(b.data)) return 'data';
  if (canonicalJson(withoutMovedFrom(a.metadata)) !== canonicalJson(withoutMovedFrom(b.metadata))) return 'metadata';
  return undefined;
};

const brief = (e: RecordedEvent | undefined) => e && { id: e.id, streamId: e.streamId, revision: e.revision, type: e.type };

/**
 * Reads both logs side by side from the start: the same events in the same order, each with the same
 * id, stream, revision, type, data and metadata (`movedFrom` aside). Returns how many events were compared and up to
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
