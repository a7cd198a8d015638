import { describe, expect, it } from 'vitest';
import { PageFill, textBytes } from '../../shared/eventstore/text-size.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';
import { wholeLog } from '../../shared/eventstore/whole-log.ts';

/**
 * The bulk readers of the log read it in pages of up to 1,000 events and at most 8 MiB (a wallet's replies
 * are kept verbatim in its outcome events, up to 1 MiB each), bounded by the store (EventStore.readPage,
 * held to it by the event stores' contract, test/eventstore/contract.ts), so a process catching up does not
 * hold a thousand large replies at once. Here: how an event's text is sized, and the whole log's pages.
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

describe('a page bounded in text (PageFill: the EventStoreDB adapter, the shared reads)', () => {
  it('takes the first event however large, stops before the one that would pass the bound, and takes none after', () => {
    const big = settled(300_000);
    const fill = new PageFill(1000, 500_000);
    expect(fill.add(big)).toBe(true);
    expect(fill.full).toBe(false);
    expect(fill.add(settled(300_000))).toBe(false);
    expect(fill.full).toBe(true);
    expect(fill.add(settled(10)), 'nothing after the page is full, however small').toBe(false);
    expect(fill.page()).toEqual({ events: [big], more: true });
    const alone = new PageFill(1000, 10);
    expect(alone.add(big)).toBe(true);
    expect(alone.page()).toEqual({ events: [big], more: false });
  });

  it('is full at maxCount, and says more only when a bound stopped it', () => {
    const fill = new PageFill(2, 1_000_000);
    expect([fill.add(settled(10)), fill.add(settled(10)), fill.add(settled(10))]).toEqual([true, true, false]);
    expect(fill.page().events).toHaveLength(2);
    expect(fill.page().more).toBe(true);
    const short = new PageFill(5, 1_000_000);
    short.add(settled(10));
    expect(short.page().more, 'the log ended before either bound').toBe(false);
  });
});

describe('the whole log, page by page (wholeLog: verify-chain, the move between stores)', () => {
  it('reads large events a few at a time, every one exactly once, going on at once after a page cut by its bytes, to the end of the log', async () => {
    const body = 'x'.repeat(1024 * 1024);
    const log = Array.from({ length: 100 }, (_, i) => ({ ...event({ i, reply: { body } }), id: `e${i}`, position: String(i + 1) }));
    const asked: Array<{ maxCount?: number; maxBytes: number }> = [];
    let counts = 0;
    const store = {
      kind: 'postgres' as const,
      /** As the stores bound a page: at most maxCount events and maxBytes of them, the first always. */
      async readPage({ from, maxCount, maxBytes }: { from?: string; maxCount?: number; maxBytes: number }) {
        asked.push({ maxCount, maxBytes });
        const after = from === undefined || from === 'start' ? 0 : Number(from);
        const fill = new PageFill(maxCount!, maxBytes);
        for (const e of log.slice(after)) if (!fill.add(e)) break;
        return fill.page();
      },
      eventCount: async () => {
        counts++;
        return log.length;
      },
    };
    const seen: string[] = [];
    const sizes: number[] = [];
    for await (const page of wholeLog(store, 1000, 2000)) {
      seen.push(...page.map((e) => e.id));
      sizes.push(page.length);
    }
    expect(seen).toEqual(log.map((e) => e.id));
    // About 8 MiB a page: not 2,000 events, two gigabytes, a page.
    expect(asked.every((a) => a.maxCount === 2000 && a.maxBytes === 8 * 1024 * 1024)).toBe(true);
    expect(Math.max(...sizes)).toBe(7);
    // A page cut by its bytes is read on from at once; only the end of the log is checked against the count.
    expect(counts).toBe(1);
  });
});
