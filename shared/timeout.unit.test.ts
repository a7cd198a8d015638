import { describe, expect, it } from 'vitest';
import { within } from './timeout.ts';

const after = <T>(ms: number, value: T) => new Promise<T>((resolve) => setTimeout(() => resolve(value), ms));

describe('within', () => {
  it("gives the promise's value when it comes first, and late()'s once the time is up", async () => {
    expect(await within(after(5, 'on time'), 200, () => 'late')).toBe('on time');
    expect(await within(after(200, 'on time'), 5, () => 'late')).toBe('late');
  });

  it("passes on the promise's rejection, and what late() throws", async () => {
    await expect(within(Promise.reject(new Error('refused')), 200, () => 'late')).rejects.toThrow('refused');
    await expect(within(after(200, 'on time'), 5, () => { throw new Error('too slow'); })).rejects.toThrow('too slow');
  });

  it('leaves no timer behind and no unhandled rejection when the promise fails after the time was up', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (err: unknown) => unhandled.push(err);
    process.on('unhandledRejection', onUnhandled);
    try {
      const failsLate = new Promise<string>((_, reject) => setTimeout(() => reject(new Error('too late to matter')), 30));
      expect(await within(failsLate, 5, () => 'late')).toBe('late');
      await after(60, undefined);
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
    // The timer of a promise that came first is cleared: nothing is pending for it.
    const before = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    await within(Promise.resolve(1), 60_000, () => 0);
    expect(process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length).toBe(before);
  });
});
