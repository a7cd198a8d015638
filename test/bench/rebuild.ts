/**
 * npm run bench -- --rebuild: the read models rebuilt from a large history. Appends a history of N
 * events (BET+WIN rounds, see history.ts) through the event-store port, then runs `npm run audit --
 * rebuild` as the command it is, in a process of its own, and prints its rate (events of the history a
 * second, every read model rebuilt) with that process's memory read from /proc every 200 ms: it must not
 * grow with the history.
 *   --events N   history size in events (default 1,000,000)
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { allMigrations } from '../../services/migrations.ts';
import { migrate } from '../../shared/db/migrations.ts';
import { createPool } from '../../shared/db/pool.ts';
import { createEventStore } from '../../shared/eventstore/index.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { appendHistory } from './history.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const mib = (b: number) => (b / 1024 / 1024).toFixed(0);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

export async function rebuildMain({ events: WANTED }: { events: number }): Promise<void> {
  const db = await createTestDatabase('rebuildbench');
  const pool = createPool(db.url, 52);
  try {
    await migrate(pool, allMigrations);
    const store = await createEventStore('postgres', pool, db.url);
    // About two events a transaction (a record and its outcome).
    const history = await appendHistory(store, Math.ceil(WANTED / 2), 48);
    await store.close();
    console.log(`history: ${history.events.toLocaleString('en')} events (${history.roundCount.toLocaleString('en')} rounds) appended in ${history.seconds.toFixed(0)} s`);
    await pool.query('ANALYZE');

    // The command itself, in a process of its own (as the platform team runs it), its memory read from /proc.
    const rss: number[] = [];
    const started = performance.now();
    const child = spawn(process.execPath, ['--import', 'tsx', 'services/audit/cli.ts', 'rebuild'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: db.url, EVENT_STORE: 'postgres', LOG_LEVEL: 'silent' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const meter = setInterval(() => {
      try {
        const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1];
        if (kb) rss.push(Number(kb) * 1024);
      } catch {
        // exited
      }
    }, 200);
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    clearInterval(meter);
    const seconds = (performance.now() - started) / 1000;
    if (code !== 0) throw new Error(`audit rebuild exited ${code}:\n${out}`);
    const rebuilt = out.split('\n').filter((l) => /: rebuilt from the history/.test(l));
    if (rebuilt.length === 0) throw new Error(`audit rebuild rebuilt nothing:\n${out}`);
    const third = Math.max(1, Math.floor(rss.length / 3));
    console.log(`npm run audit -- rebuild (${rebuilt.length} read models: ${rebuilt.map((l) => l.split(':')[0]).join(', ')}):`);
    console.log(`  ${history.events.toLocaleString('en')} events in ${seconds.toFixed(1)} s = ${Math.round(history.events / seconds).toLocaleString('en')} events/s (the whole command: start, replay, swap, analyze)`);
    console.log(`  its RSS: median ${mib(median(rss.slice(0, third)))} MiB in the first third of the run, ${mib(median(rss.slice(-third)))} MiB in the last, peak ${mib(Math.max(...rss))} MiB`);
    const sizes = await pool.query<{ name: string; rows: string }>(
      `SELECT relname AS name, n_live_tup::text AS rows FROM pg_stat_user_tables WHERE relname LIKE 'rm\\_%' AND n_live_tup > 0 ORDER BY relname`,
    );
    console.log(`  read-model rows: ${sizes.rows.map((r) => `${r.name} ${Number(r.rows).toLocaleString('en')}`).join(', ')}`);
    console.log('target: 50,000 events/s or faster on one million events, with memory that does not grow with the history');
  } finally {
    await pool.end();
    await db.drop();
  }
}
