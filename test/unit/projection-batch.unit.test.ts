import { describe, expect, it } from 'vitest';
import { nextBatchSize, readLogPage, textBytes } from '../../shared/eventstore/text-size.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';
import { wholeLog } from '../../shared/eventstore/whole-log.ts';

/**
 * A read model's runner reads the log in batches of up to 1,000 events, fewer when the events are large
 * (a wallet's replies are kept verbatim in its outcome events, up to 1 MiB each): the batch is meant to
 * hold about 8 MiB of text, and grows at most fourfold from one read to the next, so a process catching up
 * does not hold a thousand large replies at once.
 */
const event = (data: RecordedEvent['data'], metadata: RecordedEvent['metadata'] = {}): RecordedEvent => ({
  id: 'e',
  streamId: 's',
  revision: 0,
  type: 'TransactionSettled',
  data,
  metadata,
  position: '1.1',
  createdAt: new Date(0),
});
const settled = (replyBytes: number) => event({ transactionId: 't-1', outcome: 'applied', reply: { status: 'OK', balance: 5, body: 'x'.repeat(replyBytes) }, attempt: 1 });

describe('how much text an event holds (textBytes)', () => {
  it('counts its strings, keys and other values, however deep its metadata nests', () => {
    expect(textBytes(event({ a: 'xyz', n: 1, t: true, z: null }, { k: ['ab', 2] }))).toBe(1 + 3 + 1 + 8 + 1 + 8 + 1 + 8 + 1 + 8 + 2 + 8);
    let deep: unknown = 'leaf';
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(textBytes(event({ deep } as RecordedEvent['data']))).toBe(4 + 4 + 100_000 * 8);
    expect(textBytes(settled(1024 * 1024))).toBeGreaterThan(1024 * 1024);
  });
});

describe('the next batch of a runner (nextBatchSize)', () => {
  it('stays at the most after a full batch of ordinary events', () => {
    expect(nextBatchSize(Array.from({ length: 1000 }, () => settled(30)), 1000)).toBe(1000);
  });

  it('grows at most fourfold, from 64 after an empty or short read: a runner idle at the head does not ask for 1,000 large events at once', () => {
    expect(nextBatchSize([], 1000)).toBe(64);
    expect(nextBatchSize([settled(30)], 1000)).toBe(64);
    expect(nextBatchSize(Array.from({ length: 64 }, () => settled(30)), 1000)).toBe(256);
    expect(nextBatchSize(Array.from({ length: 256 }, () => settled(30)), 1000)).toBe(1000);
    expect(nextBatchSize([], 10)).toBe(10);
  });

  it('asks for about 8 MiB of text after large events, at least one', () => {
    expect(nextBatchSize([settled(256 * 1024)], 1000)).toBe(31);
    expect(nextBatchSize([settled(1024 * 1024)], 1000)).toBe(7);
    expect(nextBatchSize([settled(16 * 1024 * 1024)], 1000)).toBe(1);
  });

  it('goes by the mean of the batch: half large, half ordinary', () => {
    const mixed = Array.from({ length: 640 }, (_, i) => (i % 2 === 0 ? settled(256 * 1024) : settled(30)));
    expect(nextBatchSize(mixed, 1000)).toBeGreaterThanOrEqual(60);
    expect(nextBatchSize(mixed, 1000)).toBeLessThanOrEqual(66);
  });
});

describe('a page of the log bounded in text (readLogPage)', () => {
  /** A log of `sizes` (reply characters), read as the store reads it: after a position, up to maxCount. */
  const logOf = (sizes: number[]) => {
    const log = sizes.map((n, i) => ({ ...settled(n), id: `e${i}`, position: String(i + 1) }));
    const reads: number[] = [];
    return {
      reads,
      log,
      async readAll({ from, maxCount }: { from?: string; maxCount?: number }) {
        const after = from === undefined || from === '' ? 0 : Number(from);
        reads.push(maxCount!);
        return log.slice(after, after + maxCount!);
      },
    };
  };

  it('gives `limit` ordinary events, read 64 first and then in growing batches', async () => {
    const store = logOf(Array.from({ length: 2000 }, () => 30));
    const page = await readLogPage(store, '', 1000, 8 * 1024 * 1024);
    expect(page.map((e) => e.id)).toEqual(store.log.slice(0, 1000).map((e) => e.id));
    expect(store.reads).toEqual([64, 256, 680]);
  });

  it('asks a later batch for no more than the text left in the page would hold, and stops there', async () => {
    const store = logOf(Array.from({ length: 1000 }, () => 50_000));
    const page = await readLogPage(store, '', 1000, 10_000_000);
    // 64 of about 50 KB each, then what the 6.8 MB left would hold (135), not 167 (8 MiB's worth), then
    // one more, which does not fit.
    expect(store.reads).toEqual([64, 135, 1]);
    expect(page.reduce((n, e) => n + textBytes(e), 0)).toBeLessThanOrEqual(10_000_000);
    expect(page.map((e) => e.id)).toEqual(store.log.slice(0, page.length).map((e) => e.id));
    expect(page.length).toBeGreaterThan(190);
  });

  it('stops at the bound in text, always with one event however large, and the next page goes on from its last', async () => {
    const store = logOf([300_000, 300_000, 300_000, 2_000_000, 10]);
    const first = await readLogPage(store, '', 1000, 700_000);
    expect(first.map((e) => e.id)).toEqual(['e0', 'e1']);
    const second = await readLogPage(store, first.at(-1)!.position, 1000, 700_000);
    expect(second.map((e) => e.id)).toEqual(['e2']);
    const third = await readLogPage(store, second.at(-1)!.position, 1000, 700_000);
    expect(third.map((e) => e.id)).toEqual(['e3']); // larger than the bound alone
    const fourth = await readLogPage(store, third.at(-1)!.position, 1000, 700_000);
    expect(fourth.map((e) => e.id)).toEqual(['e4']);
    expect(await readLogPage(store, fourth.at(-1)!.position, 1000, 700_000)).toEqual([]);
  });
});

describe('the whole log, page by page (wholeLog: verify-chain, the move between stores)', () => {
  it('reads large events a few at a time, every one exactly once, to the end of the log', async () => {
    const body = 'x'.repeat(1024 * 1024);
    const log = Array.from({ length: 100 }, (_, i) => ({ ...event({ i, reply: { body } }), id: `e${i}`, position: String(i + 1) }));
    const reads: number[] = [];
    const store = {
      kind: 'postgres' as const,
      async readAll({ from, maxCount }: { from?: string; maxCount?: number }) {
        reads.push(maxCount!);
        const after = from === undefined || from === 'start' ? 0 : Number(from);
        return log.slice(after, after + maxCount!);
      },
      eventCount: async () => log.length,
    };
    const seen: string[] = [];
    for await (const page of wholeLog(store, 1000, 2000)) seen.push(...page.map((e) => e.id));
    expect(seen).toEqual(log.map((e) => e.id));
    // 64 first, then about 8 MiB a page: not 2,000 events, two gigabytes, a page.
    expect(reads[0]).toBe(64);
    expect(Math.max(...reads.slice(1))).toBeLessThanOrEqual(8);
  });
});
