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
