/** Resident memory of the bench's processes, read from /proc, and a command run with its memory sampled. */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { cleaningUp, stopChildren } from './interrupt.ts';
import { entryArgs } from '../helpers/bundle.ts';
import { CpuMeter } from './cpu.ts';
import { median, profiled } from './load.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** A process's resident memory (VmRSS) in bytes; undefined once it has exited. */
export function rssOf(pid: number): number | undefined {
  try {
    const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb ? Number(kb) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

export const mib = (b: number): string => (b / 1024 / 1024).toFixed(0);

/**
 * Runs `npm run audit -- <args>` as the command it is, in a process of its own, its RSS read every
 * 200 ms: its exit code, output, the samples, how long it took, and where the cores went meanwhile (the
 * command, Postgres, the rest: CpuMeter's line, with BENCH_PG_SPLIT=1 Postgres's by statement too). With
 * BENCH_PROFILE set the command writes a V8 CPU profile there.
 */
export async function auditSampled(args: string[], databaseUrl: string): Promise<{ code: number | null; out: string; rss: number[]; seconds: number; cpu: string }> {
  const rss: number[] = [];
  // The bundle built (if it was not) before the clock starts: the command's time is its own.
  const command = [...profiled(), ...entryArgs('audit'), ...args];
  const cpu = new CpuMeter({});
  cpu.start();
  const started = performance.now();
  const child = spawn(process.execPath, command, {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: databaseUrl, EVENT_STORE: 'postgres', LOG_LEVEL: 'silent' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  cpu.name('the command', child.pid);
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const meter = setInterval(() => {
    const bytes = rssOf(child.pid!);
    if (bytes !== undefined) rss.push(bytes);
    cpu.tick(); // the command and its Postgres backends exit before the end is read
  }, 200);
  // Interrupted while it runs: stopped with the rest.
  const code = await cleaningUp(
    () => stopChildren([child]),
    () => new Promise<number | null>((resolve) => child.once('exit', resolve)),
  );
  clearInterval(meter);
  return { code, out, rss, seconds: (performance.now() - started) / 1000, cpu: cpu.stop() };
}

/** "median X MiB in the first third of the run, Y MiB in the last, peak Z MiB". */
export function rssThirds(rss: number[]): string {
  if (rss.length === 0) return 'no memory sample (the run ended before the first)';
  const third = Math.max(1, Math.floor(rss.length / 3));
  return `median ${mib(median(rss.slice(0, third)))} MiB in the first third of the run, ${mib(median(rss.slice(-third)))} MiB in the last, peak ${mib(Math.max(...rss))} MiB`;
}
