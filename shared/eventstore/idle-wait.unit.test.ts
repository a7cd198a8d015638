import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { IDLE_WAIT_MAX_MS, IDLE_WAIT_MIN_MS, IdleWait } from './port.ts';

/**
 * The signal side of an event store (appendSeq, waitForAppend) as the adapters give it: a counter of
 * appends heard of, and a wait that ends at the next one or at its timeout. Records how long each wait
 * was allowed to last.
 */
function signals() {
  let seq = 0;
  const waiters = new Set<() => void>();
  const allowed: number[] = [];
  return {
    allowed,
    appendSeq: () => seq,
    waitForAppend(afterSeq: number, timeoutMs: number): Promise<void> {
      allowed.push(timeoutMs);
      if (seq > afterSeq) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          waiters.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, timeoutMs);
        waiters.add(wake);
      });
    },
    append() {
      seq += 1;
      for (const wake of [...waiters]) wake();
    },
  };
}

describe('IdleWait: how a caught-up reader waits for more', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  /** One empty read and its wait, to the end of the wait. */
  async function quiet(idle: IdleWait, store: ReturnType<typeof signals>) {
    const waited = idle.wait(store.appendSeq(), true);
    await vi.runOnlyPendingTimersAsync();
    await waited;
  }

  it('waits longer after each quiet read, from 100 ms up to a second, and no longer', async () => {
    const store = signals();
    const idle = new IdleWait(store);
    for (let i = 0; i < 7; i++) await quiet(idle, store);
    expect(store.allowed).toEqual([100, 200, 400, 800, 1000, 1000, 1000]);
    expect([IDLE_WAIT_MIN_MS, IDLE_WAIT_MAX_MS]).toEqual([100, 1000]);
  });

  it('starts over at 100 ms once an append is signalled, even when the read after it finds nothing yet (an event held back)', async () => {
    const store = signals();
    const idle = new IdleWait(store);
    for (let i = 0; i < 5; i++) await quiet(idle, store);
    // An append signalled during a long wait ends it at once.
    const seq = store.appendSeq();
    const waited = idle.wait(seq, true);
    store.append();
    await waited;
    expect(store.allowed.at(-1)).toBe(1000);
    // The read after it found nothing: the next wait is short again.
    await quiet(idle, store);
    expect(store.allowed.at(-1)).toBe(100);
  });

  it('waits 10 ms at most after a read that found events, and the next quiet wait is 100 ms', async () => {
    const store = signals();
    const idle = new IdleWait(store);
    for (let i = 0; i < 4; i++) await quiet(idle, store);
    const busy = idle.wait(store.appendSeq(), false);
    await vi.runOnlyPendingTimersAsync();
    await busy;
    await quiet(idle, store);
    expect(store.allowed.slice(-2)).toEqual([10, 100]);
  });
});
