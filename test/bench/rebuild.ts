/**
 * npm run bench -- --rebuild: the read models rebuilt from a large history. Appends a history of N
 * events (BET+WIN rounds, see history.ts) through the event-store port, then runs `npm run audit --
 * rebuild` as the command it is, in a process of its own, and prints its rate (events of the history a
 * second, every read model rebuilt) with that process's memory read from /proc every 200 ms: it must not
 * grow with the history.
 *   --events N        history size in events (default 1,000,000)
 *   --reply-bytes N   every outcome's wallet reply padded to N bytes of random text (a wallet of large replies)
 */
import { allMigrations } from '../../services/migrations.ts';
import { allProjections } from '../../services/read-models.ts';
import { migrate } from '../../shared/db/migrations.ts';
import { createPool } from '../../shared/db/pool.ts';
import { createEventStore } from '../../shared/eventstore/index.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { cleaningUp } from './interrupt.ts';
import { appendHistory } from './history.ts';
import { auditSampled, rssThirds } from './rss.ts';

export async function rebuildMain({ events: WANTED, replyBytes }: { events: number; replyBytes?: number }): Promise<void> {
  const db = await createTestDatabase('rebuildbench');
  const pool = createPool(db.url, 52);
  const cleanup = async () => {
    await pool.end();
    await db.drop();
  };
  await cleaningUp(cleanup, async () => {
    await migrate(pool, allMigrations);
    const store = await createEventStore('postgres', pool, db.url);
    // About two events a transaction (a record and its outcome).
    const history = await appendHistory(store, Math.ceil(WANTED / 2), 48, replyBytes);
    await store.close();
    console.log(`history: ${history.events.toLocaleString('en')} events (${history.roundCount.toLocaleString('en')} rounds) appended in ${history.seconds.toFixed(0)} s${replyBytes ? `, every outcome's reply ${replyBytes} bytes` : ''}`);
    // At rest, as a production history is by the time it is rebuilt: autovacuum has visited it (its rows'
    // commit status is recorded on their pages, which the first read of fresh rows would otherwise write).
    await pool.query('VACUUM ANALYZE');

    // The command itself, in a process of its own (as the platform team runs it), its memory read from /proc.
    const { code, out, rss, seconds, cpu } = await auditSampled(['rebuild'], db.url);
    if (code !== 0) throw new Error(`audit rebuild exited ${code}:\n${out}`);
    const rebuilt = out.split('\n').filter((l) => /: rebuilt from the history/.test(l));
    if (rebuilt.length === 0) throw new Error(`audit rebuild rebuilt nothing:\n${out}`);
    console.log(`npm run audit -- rebuild (${rebuilt.length} read models: ${rebuilt.map((l) => l.split(':')[0]).join(', ')}):`);
    console.log(`  ${history.events.toLocaleString('en')} events in ${seconds.toFixed(1)} s = ${Math.round(history.events / seconds).toLocaleString('en')} events/s (the whole command: start, replay, swap, analyze)`);
    console.log(`  its RSS: ${rssThirds(rss)}`);
    console.log(`  meanwhile ${cpu}`);
    const locked = /locked for (\d+\.\d) s/.exec(out);
    if (locked) console.log(`  the live read models locked for the swap: ${locked[1]} s`);
    const counts: string[] = [];
    for (const t of allProjections().flatMap((p) => p.tables)) {
      const n = Number((await pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${t.name}`)).rows[0]!.n);
      if (n > 0) counts.push(`${t.name} ${n.toLocaleString('en')}`);
    }
    console.log(`  read-model rows: ${counts.join(', ')}`);
    console.log('target: 50,000 events/s or faster on one million events, with memory that does not grow with the history');
  });
}
