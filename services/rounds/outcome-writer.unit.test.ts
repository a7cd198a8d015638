import { describe, expect, it } from 'vitest';
import { createLogger } from '../../shared/logger.ts';
import { OutcomeWriter } from './outcome-writer.ts';

const logger = createLogger('silent');

/** A write that lands when told to. */
function gate(): { write: () => Promise<void>; land: () => void } {
  let land = () => undefined as void;
  const landed = new Promise<void>((r) => (land = r));
  return { write: () => landed, land };
}

describe('OutcomeWriter', () => {
  it('keeps one round’s writes in order, and idle() waits for them (a while at most)', async () => {
    const writer = new OutcomeWriter(logger);
    const order: string[] = [];
    const first = gate();
    writer.write('round-a', 'bet', 0, async () => { await first.write(); order.push('bet'); }, async () => undefined);
    writer.write('round-a', 'win', 0, async () => { order.push('win'); }, async () => undefined);
    let idle = false;
    const waiting = writer.idle('round-a', 5000).then(() => (idle = true));
    await new Promise((r) => setTimeout(r, 20));
    expect(idle).toBe(false);
    expect(order).toEqual([]);
    first.land();
    await waiting;
    expect(order).toEqual(['bet', 'win']);
    // A write that never lands holds idle() back only as long as asked.
    writer.write('round-b', 'stuck', 0, () => new Promise(() => undefined), async () => undefined);
    const started = Date.now();
    await writer.idle('round-b', 50);
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('tries a failing write again until it lands, then runs what comes after it once', async () => {
    const writer = new OutcomeWriter(logger, { retryMaxMs: 5 });
    let tries = 0;
    let after = 0;
    writer.write('round-c', 'win', 0, async () => { if (++tries < 4) throw new Error('store unreachable'); }, async () => { after++; });
    await writer.idle('round-c', 5000);
    expect(tries).toBe(4);
    expect(after).toBe(1);
  });

  it('makes new transactions wait while too many writes are queued (back-pressure), and lets them go as writes land', async () => {
    const writer = new OutcomeWriter(logger, { retryMaxMs: 5, maxQueued: 2 });
    const gates = [gate(), gate()];
    writer.write('r1', 't1', 0, gates[0]!.write, async () => undefined);
    writer.write('r2', 't2', 0, gates[1]!.write, async () => undefined);
    expect(writer.size).toBe(2);
    let roomy = false;
    const waiting = writer.room(5000).then(() => (roomy = true));
    await new Promise((r) => setTimeout(r, 20));
    expect(roomy).toBe(false);
    gates[0]!.land();
    expect(await waiting).toBe(true);
    expect(writer.size).toBe(1);
    gates[1]!.land();
    await writer.drain();
    expect(writer.size).toBe(0);
  });

  it('makes new transactions wait while the replies queued hold too many characters, and says so when no room came in time', async () => {
    const writer = new OutcomeWriter(logger, { retryMaxMs: 5, maxQueuedBytes: 1000 });
    const small = gate();
    writer.write('r1', 't1', 600, small.write, async () => undefined);
    expect(await writer.room(0)).toBe(true); // 600 of 1,000: room for more
    const large = gate();
    writer.write('r2', 't2', 500, large.write, async () => undefined);
    expect(writer.bytes).toBe(1100);
    // Two writes of 2,000 allowed, but over the characters: no room within the wait.
    const started = Date.now();
    expect(await writer.room(30)).toBe(false);
    expect(Date.now() - started).toBeGreaterThanOrEqual(25);
    expect(writer.waiting).toBe(0); // a wait that ended leaves nothing behind
    let roomy: boolean | undefined;
    const waiting = writer.room(5000).then((r) => (roomy = r));
    await new Promise((r) => setTimeout(r, 20));
    expect(roomy).toBeUndefined();
    expect(writer.waiting).toBe(1);
    small.land(); // 500 left: under the bound again
    expect(await waiting).toBe(true);
    expect([writer.bytes, writer.waiting]).toEqual([500, 0]);
    large.land();
    await writer.drain();
    expect([writer.size, writer.bytes]).toEqual([0, 0]);
  });

  it('gives up a write that still fails a while after the process began to stop, instead of hanging the stop', async () => {
    const writer = new OutcomeWriter(logger, { retryMaxMs: 5 });
    let after = 0;
    writer.write('round-d', 'win', 0, async () => { throw new Error('store unreachable'); }, async () => { after++; });
    await writer.drain(50);
    expect(after).toBe(1);
    expect(writer.size).toBe(0);
  });
});
