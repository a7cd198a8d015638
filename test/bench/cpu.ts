/**
 * CPU time by process class over a benchmark phase, read from /proc (Linux): where the cores went
 * (the service, Postgres, Redis, the fake wallet, the load generator), so a figure can be explained.
 */
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { PostgresSplit } from './pg-split.ts';

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

function cpuTicks(pid: string): { comm: string; ticks: number; sys: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = stat.lastIndexOf(')');
    const comm = stat.slice(stat.indexOf('(') + 1, close);
    const fields = stat.slice(close + 2).split(' ');
    return { comm, ticks: Number(fields[11]) + Number(fields[12]), sys: Number(fields[12]) }; // utime + stime
  } catch {
    return undefined; // the process ended meanwhile
  }
}

type Sample = Map<string, { comm: string; ticks: number; sys: number }>;

function sample(): Sample {
  const out: Sample = new Map();
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const t = cpuTicks(pid);
    if (t) out.set(pid, t);
  }
  return out;
}

export class CpuMeter {
  private before: Sample = new Map();
  /** Each process's time as last read by tick(): a process that exits before the phase ends still counts. */
  private seen: Sample = new Map();
  private startedAt = 0;
  private readonly named: Record<string, number | undefined>;
  /** BENCH_PG_SPLIT=1: Postgres's share split by statement too (pg-split.ts). */
  private readonly split = PostgresSplit.enabled() ? new PostgresSplit() : undefined;

  constructor(named: Record<string, number | undefined>) {
    this.named = { ...named };
  }

  /** Counts `pid` (one started after the meter, say) under `name`. */
  name(name: string, pid: number | undefined): void {
    this.named[name] = pid;
  }

  start(): void {
    this.before = sample();
    this.seen = new Map();
    this.startedAt = performance.now();
    this.split?.start();
  }

  /** Reads every process's time now, for processes that may exit before the phase ends (call it every few hundred ms). */
  tick(): void {
    for (const [pid, t] of sample()) this.seen.set(pid, t);
  }

  /**
   * Cores used per class over the phase (1.00 = one core busy the whole time); given the phase's
   * transactions a second, also the CPU one transaction took in all, every process of the machine counted.
   */
  stop(txPerSecond?: number): string {
    return this.measure(txPerSecond).text;
  }

  /** As stop, with the CPU a transaction took (ms, every process counted) as a number too. */
  measure(txPerSecond?: number): { text: string; msPerTransaction: number | undefined } {
    const after = new Map([...this.seen, ...sample()]);
    const seconds = (performance.now() - this.startedAt) / 1000;
    const byPid = new Map(Object.entries(this.named).filter(([, pid]) => pid !== undefined).map(([name, pid]) => [String(pid), name]));
    const used = new Map<string, number>();
    const sys = new Map<string, number>();
    for (const [pid, a] of after) {
      // A process that started during the phase counts from zero (a new Postgres backend).
      const delta = a.ticks - (this.before.get(pid)?.ticks ?? 0);
      if (delta <= 0) continue;
      const name = byPid.get(pid) ?? (a.comm === 'postgres' ? 'postgres' : a.comm.startsWith('redis') ? 'redis' : 'other');
      used.set(name, (used.get(name) ?? 0) + delta / TICKS_PER_SECOND / seconds);
      sys.set(name, (sys.get(name) ?? 0) + (a.sys - (this.before.get(pid)?.sys ?? 0)) / TICKS_PER_SECOND / seconds);
    }
    const total = [...used.values()].reduce((s, v) => s + v, 0);
    const parts = [...used].sort((a, b) => b[1] - a[1]).map(([name, cores]) => `${name} ${cores.toFixed(2)} (${((100 * (sys.get(name) ?? 0)) / cores).toFixed(0)}% sys)`);
    const msPerTransaction = txPerSecond && txPerSecond > 0 ? (1000 * total) / txPerSecond : undefined;
    const perTx = msPerTransaction !== undefined ? ` (${msPerTransaction.toFixed(2)} ms of CPU a transaction)` : '';
    const split = this.split ? `\n${' '.repeat(13)}${this.split.stop()}` : '';
    return { text: `cores busy ${total.toFixed(2)} of ${os.cpus().length}${perTx}: ${parts.join(', ')}${split}`, msPerTransaction };
  }
}
