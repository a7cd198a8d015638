/**
 * Reads until `done` holds or the time is up, then returns the last read (the caller's assertion says
 * what was missing). readAll is eventually consistent: Postgres holds events back while an older
 * transaction anywhere on the server is open, and other test files run beside this one.
 */
export async function eventually<T>(read: () => Promise<T>, done: (v: T) => boolean, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (done(v) || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * What `p` settles to, or "still waiting after N s" if it has not within `ms`: a liveness bound for an
 * answer that must not wait on something (a lock, an offline server), asserted by the caller.
 */
export async function within<T>(p: Promise<T>, ms: number): Promise<T | string> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<string>((resolve) => (timer = setTimeout(() => resolve(`still waiting after ${ms / 1000} s`), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}
