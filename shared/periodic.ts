/**
 * A round run every `everyMs` (and once at the start with `now`), one at a time: a round held up (a lock,
 * a slow database) is not joined by others, each holding a connection, the last to end overwriting what a
 * newer one found. `when` skips a tick. The round handles its own errors; `stop()` waits for the one under way.
 */
export function everyInterval(everyMs: number, round: () => Promise<void>, options: { now?: boolean; when?: () => boolean } = {}): { stop(): Promise<void> } {
  let running: Promise<void> = Promise.resolve();
  let busy = false;
  const tick = () => {
    if (busy || (options.when !== undefined && !options.when())) return;
    busy = true;
    running = round().finally(() => (busy = false));
  };
  if (options.now) tick();
  const timer = setInterval(tick, everyMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
