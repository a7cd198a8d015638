import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  START,
  WrongExpectedRevisionError,
  type EventStore,
  type ExpectedRevision,
  type NewEvent,
  type RecordedEvent,
} from '../../shared/eventstore/port.ts';
import { eventually } from '../helpers/eventually.ts';

export interface ContractFixture {
  store: EventStore;
  cleanup(): Promise<void>;
  /** What the adapter can tell about a subscriber that stopped short (printed with the failure). */
  diagnose?(): Promise<string>;
}

const ev = (type: string, data: Record<string, unknown> = {}, metadata?: Record<string, unknown>): NewEvent => ({
  id: randomUUID(),
  type,
  data,
  ...(metadata ? { metadata } : {}),
});

async function readAllEvents(store: EventStore, pageSize = 100): Promise<RecordedEvent[]> {
  const out: RecordedEvent[] = [];
  let from = START;
  for (;;) {
    const page = await store.readAll({ from, maxCount: pageSize });
    out.push(...page);
    if (page.length < pageSize) return out;
    from = page[page.length - 1]!.position;
  }
}

/** The behaviour every event store adapter must show. Each `it` uses its own stream names. */
export function eventStoreContract(name: string, factory: () => Promise<ContractFixture>): void {
  describe(`event store contract: ${name}`, () => {
    let fx: ContractFixture;
    let store: EventStore;
    const s = (label: string) => `${label}-${randomUUID()}`;

    beforeAll(async () => {
      fx = await factory();
      store = fx.store;
    });
    afterAll(async () => {
      await fx?.cleanup();
    });

    it('appends to a new stream and reads it back in order with data and metadata intact', async () => {
      const stream = s('round');
      const events = [ev('BetPlaced', { amount: 100, nested: { a: [1, 2] } }, { reqId: 'r1' }), ev('WinPlaced', { amount: 0 })];
      const result = await store.append(stream, events, 'no_stream');
      expect(result.nextRevision).toBe(1);
      const read = await store.readStream(stream);
      expect(read.map((e) => [e.id, e.type, e.revision, e.streamId])).toEqual([
        [events[0]!.id, 'BetPlaced', 0, stream],
        [events[1]!.id, 'WinPlaced', 1, stream],
      ]);
      expect(read[0]!.data).toEqual({ amount: 100, nested: { a: [1, 2] } });
      expect(read[0]!.metadata).toEqual({ reqId: 'r1' });
      expect(read[1]!.metadata).toEqual({});
      expect(read[0]!.createdAt).toBeInstanceOf(Date);
      expect(read[1]!.position).toBe(result.position);
    });

    it('gives the events of one append one recorded time: a fold up to an instant never shows half an append', async () => {
      // Large events, so that writing one append's rows takes longer than a millisecond.
      const stream = s('one-time');
      for (let i = 0; i < 8; i++) await store.append(stream, Array.from({ length: 12 }, () => ev('Big', { pad: randomBytes(12_000).toString('base64') })), 'any');
      const byAppend = new Map<number, Set<number>>();
      for (const e of await store.readStream(stream)) {
        const append = Math.floor(e.revision / 12);
        byAppend.set(append, (byAppend.get(append) ?? new Set()).add(e.createdAt.getTime()));
      }
      expect([...byAppend.values()].map((times) => times.size)).toEqual(Array.from({ length: 8 }, () => 1));
    });

    it('reads a missing stream as empty, and honours fromRevision and maxCount', async () => {
      expect(await store.readStream(s('missing'))).toEqual([]);
      const stream = s('paged');
      await store.append(stream, [ev('A'), ev('B'), ev('C'), ev('D')], 'no_stream');
      const page = await store.readStream(stream, { fromRevision: 1, maxCount: 2 });
      expect(page.map((e) => e.type)).toEqual(['B', 'C']);
    });

    it('refuses no_stream on an existing stream and writes nothing', async () => {
      const stream = s('exists');
      await store.append(stream, [ev('A')], 'no_stream');
      const rejected = ev('B');
      const err = await store.append(stream, [rejected], 'no_stream').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(WrongExpectedRevisionError);
      expect((err as WrongExpectedRevisionError).actual).toBe(0);
      expect((await store.readStream(stream)).map((e) => e.id)).not.toContain(rejected.id);
    });

    it('takes -1, the revision a missing stream reports, as no_stream: appends to a new stream, refuses an existing one', async () => {
      const stream = s('minus-one');
      expect((await store.append(stream, [ev('A')], -1)).nextRevision).toBe(0);
      const err = await store.append(stream, [ev('B')], -1).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(WrongExpectedRevisionError);
      expect((err as WrongExpectedRevisionError).actual).toBe(0);
      expect((await store.readStream(stream)).map((e) => e.type)).toEqual(['A']);
    });

    it('appends at the exact expected revision and refuses a stale one, all-or-nothing', async () => {
      const stream = s('exact');
      await store.append(stream, [ev('A')], 'no_stream');
      await store.append(stream, [ev('B'), ev('C')], 0);
      const stale = [ev('X'), ev('Y')];
      const err = await store.append(stream, stale, 0).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(WrongExpectedRevisionError);
      expect((err as WrongExpectedRevisionError).actual).toBe(2);
      const ahead = await store.append(stream, [ev('Z')], 7).catch((e: unknown) => e);
      expect(ahead).toBeInstanceOf(WrongExpectedRevisionError);
      const missing = await store.append(s('nope'), [ev('Q')], 3).catch((e: unknown) => e);
      expect(missing).toBeInstanceOf(WrongExpectedRevisionError);
      expect((missing as WrongExpectedRevisionError).actual).toBe(-1);
      expect((await store.readStream(stream)).map((e) => e.type)).toEqual(['A', 'B', 'C']);
    });

    it("appends with 'any' to new and existing streams", async () => {
      const stream = s('any');
      await store.append(stream, [ev('A')], 'any');
      const r = await store.append(stream, [ev('B')], 'any');
      expect(r.nextRevision).toBe(1);
      // A one-event append reports the position its event is read back at, as a longer one does.
      expect((await store.readStream(stream))[1]!.position).toBe(r.position);
    });

    it('refuses an append of no events, and writes nothing', async () => {
      const stream = s('empty');
      await expect(store.append(stream, [], 'any')).rejects.toThrow('append needs at least one event');
      await expect(store.append(stream, [], 'no_stream')).rejects.toThrow('append needs at least one event');
      expect(await store.readStream(stream)).toEqual([]);
    });

    it('treats the same event ids appended again as already done', async () => {
      const stream = s('idem');
      const batch = [ev('A'), ev('B')];
      const first = await store.append(stream, batch, 'no_stream');
      const again = await store.append(stream, batch, 'no_stream');
      expect(again.nextRevision).toBe(first.nextRevision);
      const anyAgain = await store.append(stream, batch, 'any');
      expect(anyAgain.nextRevision).toBe(first.nextRevision);
      expect(await store.readStream(stream)).toHaveLength(2);
    });

    it('answers appends made at the same moment one by one: a conflict or a repeat among them fails none of the others', async () => {
      const [p, q, n, fresh] = [s('p'), s('q'), s('n'), s('fresh')];
      await store.append(p, [ev('P0')], 'no_stream');
      const stored = [ev('Q0'), ev('Q1')];
      await store.append(q, stored, 'no_stream');
      const many = Array.from({ length: 20 }, (_, i) => s(`many${i}`));

      // All issued in one tick, so a batching adapter puts them in the same round trip.
      const settle = <T>(promise: Promise<T>) => promise.then((value) => ({ value }), (error: unknown) => ({ error }));
      const [a, b, repeat, ahead, first, second, ...rest] = await Promise.all([
        settle(store.append(p, [ev('A')], 0)),
        settle(store.append(p, [ev('B')], 0)),
        settle(store.append(q, stored, 'no_stream')),
        settle(store.append(n, [ev('N')], 3)),
        settle(store.append(fresh, [ev('F1')], 'no_stream')),
        settle(store.append(fresh, [ev('F2')], 'no_stream')),
        ...many.map((m, i) => settle(store.append(m, [ev('M', { i }), ev('M2', { i })], 'any'))),
      ]);

      // Two appends at revision 0 of one stream: exactly one is written, the other told the revision it lost to.
      const pWinners = [a, b].filter((x) => 'value' in x);
      expect(pWinners).toHaveLength(1);
      const pLoser = [a, b].find((x) => 'error' in x) as { error: unknown };
      expect(pLoser.error).toBeInstanceOf(WrongExpectedRevisionError);
      expect((pLoser.error as WrongExpectedRevisionError).actual).toBe(1);
      expect((await store.readStream(p)).map((e) => e.type)).toEqual(['P0', pWinners[0] === a ? 'A' : 'B']);

      expect(repeat).toEqual({ value: expect.objectContaining({ nextRevision: 1 }) }); // already done
      expect('error' in ahead && ahead.error).toBeInstanceOf(WrongExpectedRevisionError);
      expect((ahead as { error: WrongExpectedRevisionError }).error.actual).toBe(-1);
      expect((await store.append(n, [ev('N')], 'no_stream')).nextRevision).toBe(0); // the refusal left nothing behind

      expect([first, second].filter((x) => 'value' in x)).toHaveLength(1);
      expect(await store.readStream(fresh)).toHaveLength(1);

      for (const x of rest) expect(x).toEqual({ value: expect.objectContaining({ nextRevision: 1 }) });
      // Reads made at the same moment each get their own stream, from their own revision.
      const reads = await Promise.all(many.map((m, i) => store.readStream(m, { fromRevision: i % 2 })));
      reads.forEach((events, i) => {
        const expected = [{ type: 'M', revision: 0 }, { type: 'M2', revision: 1 }].slice(i % 2);
        expect(events.map((e) => ({ streamId: e.streamId, type: e.type, revision: e.revision, data: e.data }))).toEqual(
          expected.map((x) => ({ streamId: many[i], ...x, data: { i } })),
        );
      });
    });

    it('reads the global log after an exclusive position, in commit order, page by page', async () => {
      const before = await store.headPosition();
      const a = s('log-a');
      const b = s('log-b');
      const written = [ev('1'), ev('2'), ev('3'), ev('4'), ev('5')];
      await store.append(a, [written[0]!, written[1]!], 'no_stream');
      await store.append(b, [written[2]!], 'no_stream');
      await store.append(a, [written[3]!], 1);
      await store.append(b, [written[4]!], 0);
      const readPaged = async () => {
        const ids: string[] = [];
        let from = before;
        for (;;) {
          const page = await store.readAll({ from, maxCount: 2 });
          ids.push(...page.filter((e) => e.streamId === a || e.streamId === b).map((e) => e.id));
          if (page.length < 2) return ids;
          from = page[page.length - 1]!.position;
        }
      };
      const ids = await eventually(readPaged, (v) => v.length >= written.length);
      expect(ids).toEqual(written.map((e) => e.id));
      const head = await store.headPosition();
      const after = await store.readAll({ from: head, maxCount: 10 });
      expect(after.filter((e) => e.streamId === a || e.streamId === b)).toEqual([]);
    });

    it('reads pages bounded in bytes: a run of large events right after small ones stops at the bound, never short of one event, and says whether the log goes on', async () => {
      const before = await store.headPosition();
      const stream = s('large');
      // About 100 kB of text each: random, and repetitive (which Postgres would compress by default; a page
      // holds what the reader will hold, whatever the store makes of it).
      let n = 0;
      const large = () => ev('Large', { pad: n++ % 2 === 0 ? randomBytes(75_000).toString('base64') : 'x'.repeat(100_000) });
      const written = [ev('1'), ev('2'), ev('3'), large(), large(), large(), large(), large()];
      await store.append(stream, written.slice(0, 3), 'no_stream');
      for (let i = 3; i < written.length; i++) await store.append(stream, [written[i]!], i - 1);
      const all = await eventually(
        () => store.readAll({ from: before, maxCount: 100 }),
        (page) => page.filter((e) => e.streamId === stream).length === written.length,
      );
      const pages: Array<{ ids: string[]; more: boolean }> = [];
      let from = before;
      for (let i = 0; i < 10; i++) {
        const page = await store.readPage({ from, maxCount: 1000, maxBytes: 250_000 });
        pages.push({ ids: page.events.map((e) => e.id), more: page.more });
        if (!page.more) break;
        from = page.events[page.events.length - 1]!.position;
      }
      const ids = written.map((e) => e.id);
      // The three small ones and two large ones, then two large a page, then the last alone: the log ends.
      expect(pages).toEqual([
        { ids: ids.slice(0, 5), more: true },
        { ids: ids.slice(5, 7), more: true },
        { ids: ids.slice(7), more: false },
      ]);
      // At least one event, however large; the count bound still holds; nothing after the head.
      expect(all.map((e) => e.id)).toEqual(ids);
      expect(await store.readPage({ from: all[3]!.position, maxCount: 1000, maxBytes: 10 })).toMatchObject({ events: [{ id: ids[4] }], more: true });
      expect(await store.readPage({ from: all[2]!.position, maxCount: 1000, maxBytes: 10 })).toMatchObject({ events: [{ id: ids[3] }], more: true });
      expect(await store.readPage({ from: before, maxCount: 2, maxBytes: 100_000_000 })).toMatchObject({ events: [{ id: ids[0] }, { id: ids[1] }], more: true });
      expect(await store.readPage({ from: all.at(-1)!.position, maxCount: 1000, maxBytes: 250_000 })).toEqual({ events: [], more: false });
      // What a page holds is what readAll holds, data and metadata included.
      expect((await store.readPage({ from: before, maxCount: 4, maxBytes: 100_000_000 })).events).toEqual(all.slice(0, 4));
    });

    it('counts what readAll would return after a position, up to a limit, with the first one\'s time', async () => {
      const before = await store.headPosition();
      expect(await store.countAll({ from: before, limit: 10 })).toEqual({ count: 0 });
      const stream = s('count');
      await store.append(stream, [ev('1'), ev('2'), ev('3')], 'no_stream');
      await store.append(stream, [ev('4'), ev('5')], 2);
      const written = await eventually(
        () => store.readAll({ from: before, maxCount: 100 }),
        (page) => page.filter((e) => e.streamId === stream).length === 5,
      );
      expect(await store.countAll({ from: before, limit: 100 })).toEqual({ count: written.length, firstCreatedAt: written[0]!.createdAt });
      expect(await store.countAll({ from: before, limit: 3 })).toEqual({ count: 3, firstCreatedAt: written[0]!.createdAt });
      expect(await store.countAll({ from: written[1]!.position, limit: 100 })).toEqual({ count: written.length - 2, firstCreatedAt: written[2]!.createdAt });
      expect(await store.countAll({ from: written[written.length - 1]!.position, limit: 100 })).toEqual({ count: 0 });
      expect((await store.countAll({ limit: 1 })).count).toBe(1);
    });

    it('subscribes from a position: history first, then live events, one at a time; abort ends it', async () => {
      const stream = s('sub');
      await store.append(stream, [ev('old')], 'no_stream');
      const from = START;
      const controller = new AbortController();
      const seen: string[] = [];
      const done = (async () => {
        for await (const e of store.subscribeAll({ from, signal: controller.signal })) {
          if (e.streamId !== stream) continue;
          seen.push(e.type);
          if (seen.length === 3) controller.abort();
        }
      })();
      await new Promise((r) => setTimeout(r, 50));
      await store.append(stream, [ev('live1')], 0);
      await store.append(stream, [ev('live2')], 1);
      await done;
      expect(seen).toEqual(['old', 'live1', 'live2']);
    });

    it('under 8 concurrent writers with conflicting expectations, a subscriber sees every committed event exactly once and in stream order', async () => {
      const WRITERS = 8;
      const APPENDS = 500;
      const streams = Array.from({ length: 5 }, (_, i) => s(`hot${i}`));
      const streamSet = new Set(streams);
      const start = await store.headPosition();

      const seen: RecordedEvent[] = [];
      const controller = new AbortController();
      let expectedTotal = Number.POSITIVE_INFINITY;
      let notifyCaughtUp: () => void = () => undefined;
      const caughtUp = new Promise<void>((r) => (notifyCaughtUp = r));
      const subscriber = (async () => {
        for await (const e of store.subscribeAll({ from: start, signal: controller.signal })) {
          if (!streamSet.has(e.streamId)) continue;
          seen.push(e);
          if (seen.length >= expectedTotal) notifyCaughtUp();
        }
      })();

      const committed = new Set<string>();
      const rejected = new Set<string>();
      let conflicts = 0;
      const writer = async (w: number) => {
        // Each writer keeps its own (often stale) idea of every stream's revision.
        const known = new Map<string, ExpectedRevision>();
        for (let i = 0; i < APPENDS; i++) {
          const stream = streams[(w + i * (w + 1)) % streams.length]!;
          const batch = i % 7 === 0 ? [ev('E', { w, i }), ev('E', { w, i, second: true })] : [ev('E', { w, i })];
          const expected = i % 11 === 0 ? 'any' : (known.get(stream) ?? 'no_stream');
          try {
            const r = await store.append(stream, batch, expected);
            known.set(stream, r.nextRevision);
            batch.forEach((e) => committed.add(e.id));
          } catch (err) {
            if (!(err instanceof WrongExpectedRevisionError)) throw err;
            conflicts++;
            known.set(stream, err.actual === -1 ? 'no_stream' : err.actual);
            batch.forEach((e) => rejected.add(e.id));
          }
        }
      };
      await Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(w)));
      expectedTotal = committed.size;
      if (seen.length >= expectedTotal) notifyCaughtUp();
      await Promise.race([
        caughtUp,
        new Promise((_, rej) =>
          setTimeout(() => {
            void (async () => {
              // Which committed events the subscriber has not seen, where they sit, and what the store says.
              const seenIds = new Set(seen.map((e) => e.id));
              const missing: string[] = [];
              for (const stream of streams) {
                for (const e of await store.readStream(stream)) if (!seenIds.has(e.id)) missing.push(`${stream}@${e.revision} ${e.position}`);
              }
              const last = seen.at(-1)?.position;
              rej(new Error(`subscriber saw ${seen.length} of ${expectedTotal}; last seen ${last}; missing ${missing.slice(0, 5).join(', ')}; ${(await fx.diagnose?.()) ?? ''}`));
            })().catch(rej);
          }, 60_000),
        ),
      ]);
      await new Promise((r) => setTimeout(r, 200)); // anything extra (a duplicate) would arrive now
      controller.abort();
      await subscriber;

      expect(conflicts).toBeGreaterThan(0);
      const ids = seen.map((e) => e.id);
      if (new Set(ids).size !== ids.length) {
        const pos = seen.map((e) => e.position);
        const dupIdx = ids.findIndex((id, i) => ids.indexOf(id) !== i);
        const first = ids.indexOf(ids[dupIdx]!);
        console.log('DUP', dupIdx, first, pos.slice(Math.max(0, first - 3), first + 4), pos.slice(dupIdx - 4, dupIdx + 3));
      }
      expect(new Set(ids).size).toBe(ids.length); // exactly once
      expect(new Set(ids)).toEqual(committed);
      for (const id of rejected) expect(committed.has(id)).toBe(false);
      for (const stream of streams) {
        const revisions = seen.filter((e) => e.streamId === stream).map((e) => e.revision);
        expect(revisions).toEqual(revisions.map((_, i) => i)); // per-stream order, no gaps
        const stored = await store.readStream(stream);
        expect(stored.map((e) => e.id)).toEqual(seen.filter((e) => e.streamId === stream).map((e) => e.id));
      }
      // The global log reads back identically to what the live subscriber saw.
      const replay = (await readAllEvents(store, 1000)).filter((e) => streamSet.has(e.streamId)).map((e) => e.id);
      expect(replay).toEqual(ids);
    }, 120_000);
  });
}
