import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { stopChildren } from '../bench/interrupt.ts';

/**
 * The bench stops what it started with SIGTERM, so that the service writes the outcomes still behind
 * their answers before it exits. A process the bench paused (`--pause-read-models` sends the worker and
 * projector SIGSTOP) holds a SIGTERM pending until it runs again: it must still be stopped gracefully,
 * not killed once the grace has run out.
 */
describe('stopChildren', () => {
  it('stops a paused process gracefully, by its SIGTERM', async () => {
    // Exits 0 on SIGTERM, as the service does once its outcomes are written.
    const child = spawn(process.execPath, ['-e', "process.on('SIGTERM', () => process.exit(0)); console.log('ready'); setInterval(() => {}, 1000);"], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
    child.kill('SIGSTOP');
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));

    await stopChildren([child], 10_000);

    // Killed once the grace ran out, it would end by SIGKILL, not exit 0.
    expect(await exited).toEqual({ code: 0, signal: null });
  }, 20_000);
});
