import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allMigrations } from '../../services/migrations.ts';
import { SharedLogReads } from '../../projections/shared-reads.ts';
import { textBytes } from '../../shared/eventstore/text-size.ts';
import { createEventStore } from '../../shared/eventstore/index.ts';
import { START, type EventStore, type Position, type ReadPageOptions, type RecordedEvent } from '../../shared/eventstore/port.ts';
import { migratedDatabase, type MigratedDatabase } from '../helpers/db.ts';
import { prng } from '../helpers/prng.ts';

/**
 * The projector's runners share the log's newest events (projections/shared-reads.ts): whatever the
 * order they read in, each must get exactly what the store would have given it, a run of the log right
 * after its position, never an empty page while the store holds more, and the store must be read once
 * for the runners at the head, not once each.
 */
describe('the log read once for all of a process\'s projection runners', () => {
  let env: MigratedDatabase;
  let store: EventStore;
  beforeAll(async () => {
    env = await migratedDatabase('sharedreads', allMigrations);
    store = await createEventStore('postgres', env.pool, env.db.url);
  });
  afterAll(async () => {
    await store?.close();
    await env?.close();
  });

  /** The real store, its reads and the events they returned counted. */
  const counted = () => {
    const reads: Array<{ options: Required<ReadPageOptions>; events: number }> = [];
    return {
      reads,
      store: {
        readPage: async (options: Required<ReadPageOptions>) => {
          const page = await store.readPage(options);
          reads.push({ options, events: page.events.length });
          return page;
        },
      },
    };
  };
  const eventsRead = (reads: Array<{ events: number }>) => reads.reduce((n, r) => n + r.events, 0);
  /** Events this file appended (its database is its own). */
  let total = 0;
  const append = async (n: number) => {
    for (let i = 0; i < n; i++) await store.append(`shared-${i % 7}-${randomUUID()}`, [{ id: randomUUID(), type: 'Tick', data: { i } }], 'any');
    total += n;
  };
  /**
   * Appends, then waits until the log shows all of them: it holds back the newest events while any older
   * transaction is open on the server (another test file's, in a full run), and a test that takes "the
   * end of the log" must see its true end.
   */
  const appendShown = async (n: number) => {
    await append(n);
    await expect.poll(async () => (await after(START)).length, { timeout: 20_000 }).toBe(total);
  };
  /** Everything after `from`, straight from the store. */
  const after = async (from: Position): Promise<RecordedEvent[]> => {
    const out: RecordedEvent[] = [];
    for (let at = from; ; ) {
      const page = await store.readAll({ from: at, maxCount: 500 });
      out.push(...page);
      if (page.length < 500) return out;
      at = page[page.length - 1]!.position;
    }
  };
  const ids = (events: RecordedEvent[]) => events.map((e) => e.id);
  /** A runner's read, bounded in bytes as the runners' are (far above these events' text unless given). */
  const read = async (shared: SharedLogReads, o: { from: Position; maxCount: number; maxBytes?: number }) => (await shared.readPage({ maxBytes: 8 << 20, ...o })).events;

  it('six runners at the head: the new events read from the store once, and each runner gets all of them', async () => {
    await appendShown(5);
    const start = (await after(START)).at(-1)!.position;
    const { reads, store: spy } = counted();
    const shared = new SharedLogReads(spy);
    expect(await read(shared, { from: start, maxCount: 1000 })).toEqual([]);
    await appendShown(40);
    reads.length = 0;
    const pages = await Promise.all(Array.from({ length: 6 }, () => read(shared, { from: start, maxCount: 1000 })));
    const expected = await after(start);
    expect(expected).toHaveLength(40);
    for (const page of pages) expect(ids(page)).toEqual(ids(expected));
    expect(eventsRead(reads), 'events read from the store for six runners').toBe(40);
    // The runners that came while that read was under way read once more, together, for what it may have missed.
    expect(reads.length).toBeLessThanOrEqual(2);
    // Caught up, all six find nothing new: each such answer comes from the store, never from memory.
    reads.length = 0;
    const end = expected.at(-1)!.position;
    for (const page of await Promise.all(Array.from({ length: 6 }, () => read(shared, { from: end, maxCount: 1000 })))) expect(page).toEqual([]);
    expect(reads.length).toBeGreaterThanOrEqual(1);
  });

  it.each([
    ['25 events', { keep: 25 }],
    // The bench's Tick events hold 9 bytes of text (textBytes): about 6 kept, fewer than many a page.
    ['60 bytes of text', { keep: 4000, keepBytes: 60 }],
  ])('readers at any pace, appends between their reads, %s kept: each reads the log in order, nothing missed, nothing twice', async (_, bounds) => {
    const origin = (await after(START)).at(-1)?.position ?? START;
    // Few events kept, so readers fall behind the kept run and catch up into it again.
    const shared = new SharedLogReads(store, bounds);
    const rnd = prng(2026_11_27);
    const readers = Array.from({ length: 5 }, () => ({ at: origin, got: [] as RecordedEvent[] }));
    let appended = 0;
    for (let step = 0; step < 300; step++) {
      if (rnd() < 0.3) {
        const n = 1 + Math.floor(rnd() * 12);
        await append(n);
        appended += n;
      }
      // One reader, or several at once, and now and then an append while they read.
      const who = (rnd() < 0.3 ? readers : [readers[Math.floor(rnd() * readers.length)]!]).map((r) => ({ r, maxCount: 1 + Math.floor(rnd() * 30) }));
      const before = await Promise.all(who.map(({ r, maxCount }) => store.readAll({ from: r.at, maxCount })));
      const during = rnd() < 0.2 ? 1 + Math.floor(rnd() * 5) : 0;
      const [pages] = await Promise.all([Promise.all(who.map(({ r, maxCount }) => read(shared, { from: r.at, maxCount }))), append(during)]);
      appended += during;
      for (const [i, { r, maxCount }] of who.entries()) {
        const page = pages[i]!;
        const truth = await store.readAll({ from: r.at, maxCount });
        expect(page.length).toBeLessThanOrEqual(maxCount);
        expect(ids(page), 'a run of the log right after the position').toEqual(ids(truth.slice(0, page.length)));
        expect(page.length, 'at least what the store held when the read was asked for').toBeGreaterThanOrEqual(before[i]!.length);
        r.got.push(...page);
        if (page.length > 0) r.at = page[page.length - 1]!.position;
      }
    }
    await expect.poll(async () => (await after(origin)).length, { timeout: 20_000 }).toBe(appended);
    const whole = await after(origin);
    for (const r of readers) {
      // Each reads on to the end.
      for (let page; (page = await read(shared, { from: r.at, maxCount: 30 })).length > 0; ) {
        r.got.push(...page);
        r.at = page[page.length - 1]!.position;
      }
      expect(ids(r.got)).toEqual(ids(whole));
    }
    // How many events went to the store is not asserted here: while another test's transaction is open on the
    // server the log holds new events back, and the short pages it then gives are read again, so the count
    // depends on the other tests. The six runners above assert the sharing.
  });

  it('large events (a wallet padding its replies): what is kept stays within its bytes, and each runner still reads the log in order', async () => {
    await appendShown(1);
    const origin = (await after(START)).at(-1)!.position;
    const reply = 'r'.repeat(50_000);
    for (let i = 0; i < 24; i++) await store.append(`shared-large-${randomUUID()}`, [{ id: randomUUID(), type: 'TransactionSettled', data: { i, reply: { status: 'OK', balance: i, body: reply } } }], 'any');
    total += 24;
    await expect.poll(async () => (await after(START)).length, { timeout: 20_000 }).toBe(total);
    const whole = await after(origin);
    expect(textBytes(whole[0]!)).toBeGreaterThan(50_000);
    const budget = 120_000; // two of these events: less than the three a round reads
    const { reads, store: spy } = counted();
    const shared = new SharedLogReads(spy, { keep: 4000, keepBytes: budget });
    // Three runners in step, as at the head (their calls made together), and one at a pace of its own,
    // which falls behind the kept run. Each stops at the end of the log.
    const inStep = [0, 1, 2].map(() => ({ at: origin, got: [] as RecordedEvent[] }));
    const slow = { at: origin, got: [] as RecordedEvent[], calls: 0, done: false };
    let peak = 0;
    let rounds = 0;
    for (let done = false; !done || !slow.done; ) {
      if (!done) {
        rounds++;
        const pages = await Promise.all(inStep.map((r) => read(shared, { from: r.at, maxCount: 3 })));
        peak = Math.max(peak, shared.kept().bytes);
        for (const [i, page] of pages.entries()) {
          inStep[i]!.got.push(...page);
          if (page.length > 0) inStep[i]!.at = page[page.length - 1]!.position;
        }
        done = pages.every((p) => p.length === 0);
      }
      if (!slow.done) {
        const page = await read(shared, { from: slow.at, maxCount: 1 });
        slow.calls++;
        peak = Math.max(peak, shared.kept().bytes);
        slow.got.push(...page);
        if (page.length > 0) slow.at = page[page.length - 1]!.position;
        else slow.done = true;
      }
    }
    for (const [i, r] of [...inStep, slow].entries()) expect(ids(r.got), `reader ${i}`).toEqual(ids(whole));
    expect(peak, 'the text kept, at most').toBeLessThanOrEqual(budget);
    // The three in step share one store read a round, though each round's page is over the byte bound
    // (without sharing, 56 reads here), but the first: nothing is kept yet, so each of its calls reads.
    expect(reads.length, `store reads for ${rounds} rounds of three calls in step and ${slow.calls} calls alone`).toBeLessThanOrEqual(rounds + 2 + slow.calls);
  });

  it('a run of large events right after small ones: each page stops at the runners\' byte bound, says the log goes on, and the pages together are the log', async () => {
    await appendShown(1);
    const origin = (await after(START)).at(-1)!.position;
    // About 50 kB of text each, random so that Postgres does not compress it: the store's measure and textBytes agree.
    const large = () => ({ status: 'OK', body: randomBytes(37_500).toString('base64') });
    for (let i = 0; i < 5; i++) await append(1);
    for (let i = 0; i < 12; i++) await store.append(`shared-large-${randomUUID()}`, [{ id: randomUUID(), type: 'TransactionSettled', data: { i, reply: large() } }], 'any');
    total += 12;
    await appendShown(3);
    const whole = await after(origin);
    expect(whole).toHaveLength(20);
    const { reads, store: spy } = counted();
    const shared = new SharedLogReads(spy);
    const maxBytes = 120_000;
    // Three runners in step, as at the head, each reading on at once while its page says the log goes on.
    const runners = [0, 1, 2].map(() => ({ at: origin, pages: [] as Array<{ events: RecordedEvent[]; more: boolean }> }));
    for (let done = false; !done; ) {
      const pages = await Promise.all(runners.map((r) => shared.readPage({ from: r.at, maxCount: 1000, maxBytes })));
      for (const [i, page] of pages.entries()) {
        runners[i]!.pages.push(page);
        if (page.events.length > 0) runners[i]!.at = page.events.at(-1)!.position;
      }
      done = pages.every((p) => !p.more);
    }
    for (const r of runners) {
      expect(ids(r.pages.flatMap((p) => p.events))).toEqual(ids(whole));
      // The five small ones and two large, then two large a page, the last two with the three small ones;
      // every page but the last says more.
      expect(r.pages.map((p) => p.events.length)).toEqual([7, 2, 2, 2, 2, 5]);
      expect(r.pages.map((p) => p.more)).toEqual([true, true, true, true, true, false]);
      for (const p of r.pages) expect(p.events.reduce((n, e) => n + textBytes(e), 0)).toBeLessThanOrEqual(maxBytes);
    }
    // Read from the store once for the three (the first round's three calls each read: nothing was kept yet).
    expect(eventsRead(reads)).toBeLessThanOrEqual(whole.length + 2 * 7);
  });

  it('a runner that comes while a read is under way, after an append, gets the appended events', async () => {
    await appendShown(2);
    const start = (await after(START)).at(-1)!.position;
    // The store's answer held back after the store has read it: the read saw the log as it was then.
    let release: (() => void) | undefined;
    let hold = false;
    const shared = new SharedLogReads({
      readPage: async (o) => {
        const page = await store.readPage(o);
        if (hold) await new Promise<void>((r) => (release = r));
        return page;
      },
    });
    expect(await read(shared, { from: start, maxCount: 100 })).toEqual([]);
    hold = true;
    const first = read(shared, { from: start, maxCount: 100 });
    await expect.poll(() => release !== undefined).toBe(true); // the store has answered
    await appendShown(5);
    hold = false;
    const second = read(shared, { from: start, maxCount: 100 });
    release!();
    expect(await first).toEqual([]);
    expect(ids(await second), 'the events appended before it asked').toEqual(ids(await after(start)));
    expect(await after(start)).toHaveLength(5);
  });

  it('runners asking for different counts: one waiting on a smaller read still gets all it asked for', async () => {
    await appendShown(3);
    const origin = (await after(START)).at(-4)!.position;
    // Each store read answered only when the test lets it, after the store has read.
    const gates: Array<() => void> = [];
    let hold = false;
    const shared = new SharedLogReads({
      readPage: async (o) => {
        const page = await store.readPage(o);
        if (hold) await new Promise<void>((r) => gates.push(r));
        return page;
      },
    });
    const first = await read(shared, { from: origin, maxCount: 100 });
    expect(first).toHaveLength(3);
    await appendShown(17);
    hold = true;
    const at = first.at(-1)!.position;
    // The first asks for 1 and starts a read of 1; the others come while it is under way.
    const calls = [read(shared, { from: at, maxCount: 1 }), read(shared, { from: at, maxCount: 2 }), read(shared, { from: at, maxCount: 10 })];
    let settled = false;
    const all = Promise.all(calls).finally(() => (settled = true));
    while (!settled) {
      gates.shift()?.();
      await new Promise((r) => setTimeout(r, 5));
    }
    hold = false;
    const [one, two, ten] = await all;
    const truth = await after(at);
    expect(ids(one!)).toEqual(ids(truth.slice(0, 1)));
    expect(ids(two!)).toEqual(ids(truth.slice(0, 2)));
    expect(ids(ten!), 'the 10 it asked for: the store held 17 when it asked').toEqual(ids(truth.slice(0, 10)));
  });

  it('a failed store read fails every runner waiting on it, and the next read asks the store again', async () => {
    await appendShown(3);
    const start = (await after(START)).at(-1)!.position;
    let fail = false;
    const shared = new SharedLogReads({ readPage: (o) => (fail ? Promise.reject(new Error('connection reset')) : store.readPage(o)) });
    await read(shared, { from: start, maxCount: 100 });
    await appendShown(4);
    fail = true;
    const results = await Promise.allSettled(Array.from({ length: 3 }, () => read(shared, { from: start, maxCount: 100 })));
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    fail = false;
    expect(ids(await read(shared, { from: start, maxCount: 100 }))).toEqual(ids(await after(start)));
  });
});
