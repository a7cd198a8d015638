import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { IDLE_GRACE_MS, IDLE_WAIT_MAX_MS, IDLE_WAIT_MIN_MS, IdleWait } from './port.ts';

/**
 * The signal side of an event store (appendSeq, waitForAppend) as the adapters give it: a counter of
 * appends heard of, and a wait that ends at the next one, at its timeout or on abort. Records how long
 * each wait was allowed to last.
 */
function signals() {
  let seq = 0;
  const waiters = new Set<() => void>();
  const allowed: number[] = [];
  return {
    allowed,
    appendSeq: () => seq,
    waitForAppend(afterSeq: number, timeoutMs: number, signal?: AbortSignal): Promise<void> {
      allowed.push(timeoutMs);
      if (seq > afterSeq || signal?.aborted) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          waiters.delete(wake);
          signal?.removeEventListener('abort', wake);
          resolve();
        };
        const timer = setTimeout(wake, timeoutMs);
        signal?.addEventListener('abort', wake, { once: true });
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
  async function quiet(idle: IdleWait, store: ReturnType<typeof signals>, seq = store.appendSeq()) {
    const waited = idle.wait(seq, true);
    await vi.runOnlyPendingTimersAsync();
    await waited;
  }
  /** Quiet reads until the grace after the last activity has passed and the waits have grown to a second. */
  async function settle(idle: IdleWait, store: ReturnType<typeof signals>) {
    while (store.allowed.at(-1) !== IDLE_WAIT_MAX_MS) await quiet(idle, store);
  }
  const inGrace = IDLE_GRACE_MS / IDLE_WAIT_MIN_MS;

  it('reads again every 100 ms for two seconds after anything happened, then waits twice as long each time, up to a second', async () => {
    const store = signals();
    const idle = new IdleWait(store);
    for (let i = 0; i < inGrace + 7; i++) await quiet(idle, store);
    expect(store.allowed).toEqual([...Array<number>(inGrace).fill(100), 100, 200, 400, 800, 1000, 1000, 1000]);
  });

  it('starts over once an append is signalled during a wait, even when the reads after it find nothing yet (an event held back)', async () => {
    const store = signals();
    const idle = new IdleWait(store);
    await settle(idle, store);
    // An append signalled during a long wait ends it at once.
    const waited = idle.wait(store.appendSeq(), true);
    store.append();
    await waited;
    expect(store.allowed.at(-1)).toBe(1000);
    // The reads after it find nothing (held back): every 100 ms for two seconds, then longer again.
    const before = store.allowed.length;
    for (let i = 0; i < inGrace + 2; i++) await quiet(idle, store);
    expect(store.allowed.slice(before)).toEqual([...Array<number>(inGrace).fill(100), 100, 200]);
  });

  it('starts over once an append is signalled between two waits (while the runner gathers), the read after it finding nothing yet', async () => {
    const store = signals();
    const idle = new IdleWait(store);
    await settle(idle, store);
    store.append();
    await quiet(idle, store);
    expect(store.allowed.at(-1)).toBe(100);
  });

  it('waits 10 ms at most after a read that found events, and 100 ms after the quiet reads that follow', async () => {
    const store = signals();
    const idle = new IdleWait(store);
    await settle(idle, store);
    const busy = idle.wait(store.appendSeq(), false);
    await vi.runOnlyPendingTimersAsync();
    await busy;
    await quiet(idle, store);
    expect(store.allowed.slice(-2)).toEqual([10, 100]);
  });

  it('ends a wait at once when its reader stops', async () => {
    const store = signals();
    const idle = new IdleWait(store);
    await settle(idle, store);
    const stop = new AbortController();
    let ended = false;
    const waited = idle.wait(store.appendSeq(), true, stop.signal).then(() => (ended = true));
    stop.abort();
    await vi.advanceTimersByTimeAsync(0);
    expect(ended).toBe(true);
    await waited;
  });
});
