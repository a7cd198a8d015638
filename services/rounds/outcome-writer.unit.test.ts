import { describe, expect, it } from 'vitest';
import { createLogger } from '../../shared/logger.ts';
import { OutcomeWriter } from './outcome-writer.ts';

const logger = createLogger('silent');

/** An outcome of `bytes` characters of reply, of operator op-1 unless said. */
const out = (roundStream: string, transactionId: string, bytes: number, operatorId = 'op-1') => ({ roundStream, transactionId, operatorId, bytes });

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
    writer.write(out('round-a', 'bet', 0), async () => { await first.write(); order.push('bet'); }, async () => undefined);
    writer.write(out('round-a', 'win', 0), async () => { order.push('win'); }, async () => undefined);
    let idle = false;
    const waiting = writer.idle('round-a', 5000).then(() => (idle = true));
    await new Promise((r) => setTimeout(r, 20));
    expect(idle).toBe(false);
    expect(order).toEqual([]);
    first.land();
    await waiting;
    expect(order).toEqual(['bet', 'win']);
    // A write that never lands holds idle() back only as long as asked.
    writer.write(out('round-b', 'stuck', 0), () => new Promise(() => undefined), async () => undefined);
    const started = Date.now();
    await writer.idle('round-b', 50);
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('tries a failing write again until it lands, then runs what comes after it once', async () => {
    const writer = new OutcomeWriter(logger, { retryMaxMs: 5 });
    let tries = 0;
    let after = 0;
    writer.write(out('round-c', 'win', 0), async () => { if (++tries < 4) throw new Error('store unreachable'); }, async () => { after++; });
    await writer.idle('round-c', 5000);
    expect(tries).toBe(4);
    expect(after).toBe(1);
  });

  // A wait that must end by a wake-up is given a minute: a lost wake-up fails the test by its timeout.
  const MINUTE = 60_000;
  const tick = () => new Promise((r) => setTimeout(r, 20));

  it('makes new transactions wait while too many writes are queued (back-pressure), and lets them go as writes land', async () => {
    const writer = new OutcomeWriter(logger, { retryMaxMs: 5, maxQueued: 2 });
    const gates = [gate(), gate()];
    writer.write(out('r1', 't1', 0), gates[0]!.write, async () => undefined);
    writer.write(out('r2', 't2', 0), gates[1]!.write, async () => undefined);
    expect(writer.size).toBe(2);
    let admitted = false;
    const waiting = writer.admit('op-1', MINUTE).then((a) => (admitted = a !== undefined));
    await tick();
    expect(admitted).toBe(false);
    gates[0]!.land();
    expect(await waiting).toBe(true);
    expect(writer.size).toBe(1);
    gates[1]!.land();
    await writer.drain();
    expect(writer.size).toBe(0);
  });

  it('makes new transactions wait while the replies queued hold too many characters, and says so when no room came in time', async () => {
    const writer = new OutcomeWriter(logger, { retryMaxMs: 5, maxQueuedBytes: 1000, maxOperatorBytes: 1000 });
    const small = gate();
    writer.write(out('r1', 't1', 600), small.write, async () => undefined);
    const first = await writer.admit('op-1', 0); // 600 of 1,000: room for more
    expect(first).toBeDefined();
    // Admitted, it holds room for a reply of its operator's usual size until it ends.
    expect(writer.bytes).toBe(1200);
    first!.release();
    first!.release(); // released once, however often it is called
    expect(writer.bytes).toBe(600);
    const large = gate();
    writer.write(out('r2', 't2', 500), large.write, async () => undefined);
    expect(writer.bytes).toBe(1100);
    // Two writes of 2,000 allowed, but over the characters: no room within the wait.
    const started = Date.now();
    expect(await writer.admit('op-1', 30)).toBeUndefined();
    expect(Date.now() - started).toBeGreaterThanOrEqual(25);
    expect(writer.waiting).toBe(0); // a wait that ended leaves nothing behind
    let admitted: boolean | undefined;
    const waiting = writer.admit('op-1', MINUTE).then((a) => (admitted = a !== undefined));
    await tick();
    expect(admitted).toBeUndefined();
    expect(writer.waiting).toBe(1);
    small.land(); // 500 left: under the bound again
    expect(await waiting).toBe(true);
    expect(writer.waiting).toBe(0);
    large.land();
    await writer.drain();
    expect(writer.size).toBe(0);
  });

  it('lets in no more waiters than the replies they expect leave room for, and the next as each one ends', async () => {
    const writer = new OutcomeWriter(logger, { retryMaxMs: 5, maxQueuedBytes: 10_000, maxOperatorBytes: 1000 });
    // op-1's replies are 300 characters; one waits to be written and fills 300 of its 1,000.
    const written = gate();
    writer.write(out('r1', 't1', 300), written.write, async () => undefined);
    // Three are let in (each while under the share), so three replies of 300 are expected.
    const inFlight = [(await writer.admit('op-1', 0))!, (await writer.admit('op-1', 0))!, (await writer.admit('op-1', 0))!];
    expect(writer.bytesOf('op-1')).toBe(1200);
    expect(await writer.admit('op-1', 0)).toBeUndefined();
    // Ten more wait; the write landing makes room for one of them, not all ten.
    const admissions: Array<{ release(): void }> = [];
    const waits = Array.from({ length: 10 }, () => writer.admit('op-1', MINUTE).then((a) => admissions.push(a!)));
    await tick();
    expect(writer.waiting).toBe(10);
    written.land();
    await writer.idle('r1', MINUTE);
    await tick();
    expect([admissions.length, writer.waiting, writer.bytesOf('op-1')]).toEqual([1, 9, 1200]);
    // Each transaction that ends lets the next in.
    inFlight[0]!.release();
    await tick();
    expect([admissions.length, writer.waiting]).toEqual([2, 8]);
    inFlight[1]!.release();
    inFlight[2]!.release();
    for (let ended = 0; admissions.length < 10; ended++) {
      await tick();
      admissions[ended]!.release();
    }
    await Promise.all(waits);
    for (const a of admissions) a.release();
    expect([writer.bytesOf('op-1'), writer.bytes, writer.waiting]).toEqual([0, 0, 0]);
  });

  it('shares the characters between operators: one operator’s large replies hold back its own new transactions, not another’s, until the whole backlog is full', async () => {
    const writer = new OutcomeWriter(logger, { retryMaxMs: 5, maxQueuedBytes: 1000, maxOperatorBytes: 400 });
    const large = gate();
    writer.write(out('r1', 't1', 450, 'op-1'), large.write, async () => undefined);
    expect([writer.bytesOf('op-1'), writer.bytesOf('op-2'), writer.bytes]).toEqual([450, 0, 450]);
    // op-1 is over its share: its new transactions wait; op-2's go on.
    expect(await writer.admit('op-1', 0)).toBeUndefined();
    (await writer.admit('op-2', 0))!.release();
    let op1: boolean | undefined;
    const op1Waits = writer.admit('op-1', MINUTE).then((a) => (op1 = a !== undefined));
    // Other operators' replies fill the whole backlog: now everyone waits.
    const others = [gate(), gate()];
    writer.write(out('r2', 't2', 300, 'op-2'), others[0]!.write, async () => undefined);
    writer.write(out('r3', 't3', 300, 'op-3'), others[1]!.write, async () => undefined);
    expect(writer.bytes).toBe(1050);
    expect(await writer.admit('op-4', 0)).toBeUndefined();
    let op4: boolean | undefined;
    const op4Waits = writer.admit('op-4', MINUTE).then((a) => (op4 = a !== undefined));
    await tick();
    expect([op1, op4, writer.waiting]).toEqual([undefined, undefined, 2]);
    // op-2's reply written: room in the whole for op-4, none yet in op-1's share.
    others[0]!.land();
    expect(await op4Waits).toBe(true);
    await tick();
    expect([op1, writer.waiting]).toEqual([undefined, 1]);
    large.land();
    expect(await op1Waits).toBe(true);
    others[1]!.land();
    await writer.drain();
    // What the admitted ones still hold: op-1's usual 450 (op-4 has no reply yet, so expects none).
    expect(Object.fromEntries(writer.byOperator)).toEqual({ 'op-1': 450, 'op-2': 0, 'op-3': 0, 'op-4': 0 });
  });

  it('gives up a write that still fails a while after the process began to stop, instead of hanging the stop', async () => {
    const writer = new OutcomeWriter(logger, { retryMaxMs: 5 });
    let after = 0;
    writer.write(out('round-d', 'win', 0), async () => { throw new Error('store unreachable'); }, async () => { after++; });
    await writer.drain(50);
    expect(after).toBe(1);
    expect(writer.size).toBe(0);
  });
});
