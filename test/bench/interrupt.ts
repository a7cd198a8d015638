/**
 * What a bench run must undo when it ends: the processes it started, its database, its Redis database.
 * Its finally blocks do that when the run ends by itself. A signal (Ctrl-C, a kill) or a reader of its
 * output that went away (`npm run bench | head`: the next write fails with EPIPE) ends the process
 * without them, and left running those processes would eat CPU and skew every later measurement. So each
 * run hands its cleanup to cleaningUp, and an interruption runs every registered cleanup, newest first,
 * then exits (128 + the signal's number, or 1 when the output went away). A repeated signal changes
 * nothing: Ctrl-C under `npm run` arrives twice (from the terminal, and forwarded by npm).
 */
import type { ChildProcess } from 'node:child_process';

type Cleanup = () => unknown;

const cleanups = new Set<Cleanup>();
let interruptedWith: number | undefined;

/**
 * Runs `run`, then `cleanup`. An interruption meanwhile runs the same cleanup (once, whoever asks first,
 * so one that comes during the run's own cleanup waits for it) before the process exits.
 */
export async function cleaningUp<T>(cleanup: () => Promise<void>, run: () => Promise<T>): Promise<T> {
  let running: Promise<void> | undefined;
  const once = () => (running ??= cleanup());
  cleanups.add(once);
  try {
    return await run();
  } finally {
    await once();
    cleanups.delete(once);
  }
}

/** Whether an interruption is being handled (its own exit code is then the process's, not the run's). */
export const interrupted = (): boolean => interruptedWith !== undefined;

const CLEANUP_LIMIT_MS = 15_000;

async function interrupt(code: number): Promise<void> {
  if (interruptedWith !== undefined) return;
  interruptedWith = code;
  for (const cleanup of [...cleanups].reverse()) {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.resolve()
        .then(cleanup)
        .catch((err: unknown) => process.stderr.write(`bench: cleaning up after the interruption: ${String(err)}\n`)),
      new Promise((resolve) => (timer = setTimeout(resolve, CLEANUP_LIMIT_MS))),
    ]);
    clearTimeout(timer);
  }
  process.exit(code);
}

for (const [signal, number] of [
  ['SIGINT', 2],
  ['SIGTERM', 15],
  ['SIGHUP', 1],
] as const) {
  process.on(signal, () => void interrupt(128 + number));
}
// Without a listener, a failed write to stdout is an uncaught error that ends the process at once.
process.stdout.on('error', () => void interrupt(1));

/**
 * Stops child processes: SIGTERM, then SIGKILL for one still running after `graceMs`. SIGCONT follows
 * the SIGTERM, so that a process the run paused (`--pause-read-models`) takes it now, not once the grace
 * has run out; to a running process it is nothing.
 */
export async function stopChildren(children: ChildProcess[], graceMs = 5000): Promise<void> {
  await Promise.all(
    children.map(async (c) => {
      if (c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => c.once('exit', resolve));
      c.kill('SIGTERM');
      c.kill('SIGCONT');
      let timer: NodeJS.Timeout | undefined;
      const gone = await Promise.race([exited.then(() => true), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), graceMs)))]);
      clearTimeout(timer);
      if (!gone) {
        c.kill('SIGKILL');
        await exited;
      }
    }),
  );
}
