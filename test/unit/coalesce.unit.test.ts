import { describe, expect, it } from 'vitest';
import { Coalescer, type Settled } from '../../shared/coalesce.ts';

/** A batch runner that records each batch and answers when released. */
function recorder() {
  const batches: number[][] = [];
  const pending: Array<() => void> = [];
  const run = (inputs: number[]): Promise<Array<Settled<number>>> => {
    batches.push(inputs);
    return new Promise((resolve) =>
      pending.push(() => resolve(inputs.map((n) => (n < 0 ? { ok: false, error: new Error(`bad ${n}`) } : { ok: true, value: n * 10 })))),
    );
  };
  const releaseAll = () => pending.splice(0).forEach((f) => f());
  return { batches, run, releaseAll };
}

const endOfTurn = () => new Promise((resolve) => setImmediate(resolve));

describe('Coalescer', () => {
  it('sends a call alone at the end of its turn while a slot is free', async () => {
    const r = recorder();
    const c = new Coalescer(r.run, { maxInFlight: 2, maxBatch: 100 });
    const one = c.submit(1);
    await endOfTurn();
    expect(r.batches).toEqual([[1]]);
    r.releaseAll();
    expect(await one).toBe(10);
  });

  it('sends the calls made in one turn as one batch, even with a slot free', async () => {
    const r = recorder();
    const c = new Coalescer(r.run, { maxInFlight: 2, maxBatch: 100 });
    const first = [1, 2, 3].map((n) => c.submit(n));
    await endOfTurn();
    const second = [4, 5].map((n) => c.submit(n));
    await endOfTurn();
    expect(r.batches).toEqual([[1, 2, 3], [4, 5]]);
    r.releaseAll();
    expect(await Promise.all([...first, ...second])).toEqual([10, 20, 30, 40, 50]);
  });

  it('gathers the calls made while every slot is busy into the next batch, capped at maxBatch', async () => {
    const r = recorder();
    const c = new Coalescer(r.run, { maxInFlight: 1, maxBatch: 3 });
    const first = c.submit(1);
    await endOfTurn();
    const all = [first, ...[2, 3, 4, 5, 6].map((n) => c.submit(n))];
    await endOfTurn();
    expect(r.batches).toEqual([[1]]);
    for (let i = 0; i < 3; i++) {
      r.releaseAll();
      await endOfTurn();
    }
    expect(r.batches).toEqual([[1], [2, 3, 4], [5, 6]]);
    r.releaseAll();
    expect(await Promise.all(all)).toEqual([10, 20, 30, 40, 50, 60]);
  });

  it("fails only the item that failed, and every item of a batch that threw", async () => {
    const r = recorder();
    const c = new Coalescer(r.run, { maxInFlight: 1, maxBatch: 10 });
    const first = c.submit(1);
    await endOfTurn();
    const mixed = [c.submit(2), c.submit(-3), c.submit(4)].map((p) => p.then((v) => v, (e: Error) => e.message));
    r.releaseAll();
    await first;
    await endOfTurn();
    r.releaseAll();
    expect(await Promise.all(mixed)).toEqual([20, 'bad -3', 40]);

    let calls = 0;
    const flaky = new Coalescer<number, number>(
      (inputs) => (++calls === 1 ? Promise.reject(new Error('connection lost')) : Promise.resolve(inputs.map((n) => ({ ok: true, value: n })))),
      { maxInFlight: 1, maxBatch: 10 },
    );
    const one = flaky.submit(1).then(String, (e: Error) => e.message);
    await endOfTurn();
    const two = flaky.submit(2).then(String, (e: Error) => e.message);
    expect(await Promise.all([one, two])).toEqual(['connection lost', '2']); // 1 went alone and its batch threw; 2 went in the next
    expect(await flaky.submit(3)).toBe(3); // and the slot was freed
  });
});
