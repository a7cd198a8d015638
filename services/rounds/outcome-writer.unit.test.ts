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

  it('makes new transactions wait while too many writes are queued (back-pressure), and lets them go as writes land, one for each', async () => {
    const writer = new OutcomeWriter(logger, { retryMaxMs: 5, maxQueued: 2 });
    const gates = [gate(), gate()];
    writer.write(out('r1', 't1', 0), gates[0]!.write, async () => undefined);
    writer.write(out('r2', 't2', 0), gates[1]!.write, async () => undefined);
    expect(writer.size).toBe(2);
    const admitted: number[] = [];
    const waits = [0, 1, 2].map((n) => writer.admit('op-1', MINUTE).then((a) => (admitted.push(n), a!)));
    await tick();
    expect(admitted).toEqual([]);
    gates[0]!.land();
    await tick();
    // One write landed: room for one more write, taken by the first waiter, who expects one.
    expect([admitted, writer.size, writer.waiting]).toEqual([[0], 1, 2]);
    gates[1]!.land();
    await tick();
    expect([admitted, writer.waiting]).toEqual([[0, 1], 1]);
    (await waits[0]!).release();
    expect(await waits[2]).toBeDefined();
    expect(admitted).toEqual([0, 1, 2]);
    await writer.drain();
    expect(writer.size).toBe(0);
  });

  it('makes new transactions wait while the replies queued hold too many characters, and says so when no room came in time', async () => {
    const writer = new OutcomeWriter(logger, { retryMaxMs: 5, maxQueuedBytes: 1000, maxOperatorBytes: 1000 });
    const small = gate();
    writer.write(out('r1', 't1', 600), small.write, async () => undefined);
    // 600 of 1,000: room for more. Let in at once, it holds no room of its own.
    writer.tryAdmit('op-1')!.release();
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
    const waiting = writer.admit('op-1', MINUTE).then((a) => ((admitted = a !== undefined), a!));
    await tick();
    expect(admitted).toBeUndefined();
    expect(writer.waiting).toBe(1);
    small.land(); // 500 left: under the bound again
    const admission = await waiting;
    // Let in after a wait, it expects a reply of its operator's usual size (a mean of 600 and 500), until it ends.
    expect([writer.bytes, writer.waiting]).toEqual([500 + 575, 0]);
    admission.release();
    admission.release(); // released once, however often it is called
    expect(writer.bytes).toBe(500);
    large.land();
    await writer.drain();
    expect([writer.size, writer.bytes]).toEqual([0, 0]);
  });

  it('lets in, of the waiters, only as many as the replies they expect leave room for, in the order they came, and the next as each one ends', async () => {
    const writer = new OutcomeWriter(logger, { retryMaxMs: 5, maxQueuedBytes: 10_000, maxOperatorBytes: 1000 });
    // op-1's replies are 300 characters; four wait to be written, over its 1,000.
    const writes = [gate(), gate(), gate(), gate()];
    writes.forEach((g, n) => writer.write(out(`r${n}`, `t${n}`, 300), g.write, async () => undefined));
    expect(writer.bytesOf('op-1')).toBe(1200);
    const admitted: number[] = [];
    const waits = Array.from({ length: 10 }, (_, n) => writer.admit('op-1', MINUTE).then((a) => (admitted.push(n), a!)));
    await tick();
    expect(writer.waiting).toBe(10);
    // A write lands (900): one waiter is let in, expecting 300, and the share is full again.
    writes[0]!.land();
    await tick();
    expect([admitted, writer.waiting, writer.bytesOf('op-1')]).toEqual([[0], 9, 1200]);
    writes[1]!.land();
    await tick();
    expect([admitted, writer.waiting]).toEqual([[0, 1], 8]);
    // One let in ends without a reply (refused, or its wallet failed): the next goes in its place.
    (await waits[0]!).release();
    await tick();
    expect(admitted).toEqual([0, 1, 2]);
    writes[2]!.land();
    writes[3]!.land();
    for (let ended = 1; admitted.length < 10; ended++) {
      await tick();
      (await waits[ended]!).release();
    }
    for (const w of waits) (await w).release();
    expect(admitted).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect([writer.bytesOf('op-1'), writer.bytes, writer.waiting]).toEqual([0, 0, 0]);
  });

  it('counts what the waiters let in expect against the whole backlog too, whichever operator they are of', async () => {
    const writer = new OutcomeWriter(logger, { retryMaxMs: 5, maxQueuedBytes: 1000, maxOperatorBytes: 1000 });
    const writes = [gate(), gate(), gate()];
    writer.write(out('r1', 't1', 400, 'op-1'), writes[0]!.write, async () => undefined);
    writer.write(out('r2', 't2', 400, 'op-2'), writes[1]!.write, async () => undefined);
    writer.write(out('r3', 't3', 300, 'op-3'), writes[2]!.write, async () => undefined);
    const admitted: string[] = [];
    const op1 = writer.admit('op-1', MINUTE).then((a) => (admitted.push('op-1'), a!));
    const op2 = writer.admit('op-2', MINUTE).then((a) => (admitted.push('op-2'), a!));
    await tick();
    // op-3's write lands (800 of 1,000): op-1's waiter expects 400 more, so op-2's waits on.
    writes[2]!.land();
    await tick();
    expect([admitted, writer.bytes, writer.waiting]).toEqual([['op-1'], 1200, 1]);
    (await op1).release();
    (await op2).release();
    expect(admitted).toEqual(['op-1', 'op-2']);
    writes[0]!.land();
    writes[1]!.land();
    await writer.drain();
    expect(writer.bytes).toBe(0);
  });

  it('takes an operator with no reply written yet to reply as large as the largest usual reply here, so its waiters too go in only as room comes', async () => {
    const writer = new OutcomeWriter(logger, { retryMaxMs: 5, maxQueuedBytes: 1000, maxOperatorBytes: 1000 });
    // op-1's replies of 300 fill the whole backlog; op-2 has sent none yet.
    const writes = [gate(), gate(), gate(), gate()];
    writes.forEach((g, n) => writer.write(out(`r${n}`, `t${n}`, 300, 'op-1'), g.write, async () => undefined));
    const admitted: number[] = [];
    const waits = Array.from({ length: 5 }, (_, n) => writer.admit('op-2', MINUTE).then((a) => (admitted.push(n), a!)));
    await tick();
    writes[0]!.land();
    await tick();
    // 900 queued: one of op-2's is let in, taken to bring 300.
    expect([admitted, writer.bytesOf('op-2'), writer.waiting]).toEqual([[0], 300, 4]);
    for (const g of writes.slice(1)) g.land();
    for (let ended = 0; admitted.length < 5; ended++) {
      await tick();
      (await waits[ended]!).release();
    }
    for (const w of waits) (await w).release();
    await writer.drain();
    expect([writer.bytes, writer.waiting]).toEqual([0, 0]);
  });

  it('takes an operator whose replies are empty to reply empty, not as one with no reply yet', async () => {
    const writer = new OutcomeWriter(logger, { retryMaxMs: 5, maxQueuedBytes: 1000, maxOperatorBytes: 1000 });
    // op-2's replies of 300 fill the whole backlog; op-1's one reply so far was empty.
    const writes = [gate(), gate(), gate(), gate()];
    writes.forEach((g, n) => writer.write(out(`r${n}`, `t${n}`, 300, 'op-2'), g.write, async () => undefined));
    const empty = gate();
    writer.write(out('e', 'te', 0, 'op-1'), empty.write, async () => undefined);
    const admitted: number[] = [];
    const waits = Array.from({ length: 3 }, (_, n) => writer.admit('op-1', MINUTE).then((a) => (admitted.push(n), a!)));
    await tick();
    writes[0]!.land();
    await tick();
    // 900 queued: op-1's waiters expect empty replies, so all three go in (taken as op-2's 300, one would).
    expect([admitted, writer.bytesOf('op-1'), writer.waiting]).toEqual([[0, 1, 2], 0, 0]);
    for (const w of waits) (await w).release();
    for (const g of [...writes.slice(1), empty]) g.land();
    await writer.drain();
    expect([writer.bytes, writer.waiting]).toEqual([0, 0]);
  });

  it('shares the characters between operators: one operator’s large replies hold back its own new transactions, not another’s, until the whole backlog is full', async () => {
    const writer = new OutcomeWriter(logger, { retryMaxMs: 5, maxQueuedBytes: 1000, maxOperatorBytes: 400 });
    const large = gate();
    writer.write(out('r1', 't1', 450, 'op-1'), large.write, async () => undefined);
    expect([writer.bytesOf('op-1'), writer.bytesOf('op-2'), writer.bytes]).toEqual([450, 0, 450]);
    // op-1 is over its share: its new transactions wait; op-2's go on.
    expect(writer.tryAdmit('op-1')).toBeUndefined();
    writer.tryAdmit('op-2')!.release();
    let op1: boolean | undefined;
    const op1Waits = writer.admit('op-1', MINUTE).then((a) => (op1 = a !== undefined));
    // Other operators' replies fill the whole backlog: now everyone waits.
    const others = [gate(), gate()];
    writer.write(out('r2', 't2', 300, 'op-2'), others[0]!.write, async () => undefined);
    writer.write(out('r3', 't3', 300, 'op-3'), others[1]!.write, async () => undefined);
    expect(writer.bytes).toBe(1050);
    expect(writer.tryAdmit('op-4')).toBeUndefined();
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
    // What the two let in after waiting still hold: op-1's usual 450, and as much for op-4, which has no
    // reply yet and is taken to reply as large as the largest usual here.
    expect(Object.fromEntries(writer.byOperator)).toEqual({ 'op-1': 450, 'op-2': 0, 'op-3': 0, 'op-4': 450 });
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
