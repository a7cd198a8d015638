/**
 * npm run bench -- --chain: the hash chain on a large history (contract section 10). Appends a history
 * of N events (BET+WIN rounds, see history.ts) through the event-store port, links it as the projector
 * role's chain runner does (batches of 1,000 events, each with its links in one transaction), signs its
 * checkpoints, then runs what `npm run audit -- verify-chain` runs and prints its rate, with the memory
 * of the process sampled along the way (it must not grow with the history).
 *   --events N   history size in events (default 1,000,000)
 */
import { signingKey, signNewCheckpoints } from '../../services/chain/checkpoints.ts';
import { chainProjection } from '../../services/chain/projection.ts';
import { catchUpChain } from '../../services/chain/archive.ts';
import { allMigrations } from '../../services/migrations.ts';
import { migrate } from '../../shared/db/migrations.ts';
import { createPool } from '../../shared/db/pool.ts';
import { createEventStore } from '../../shared/eventstore/index.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { cleaningUp } from './interrupt.ts';
import { appendHistory } from './history.ts';
import { auditSampled, rssThirds } from './rss.ts';


export async function chainMain({ events: WANTED }: { events: number }): Promise<void> {
  const db = await createTestDatabase('chainbench');
  const pool = createPool(db.url, 52);
  const cleanup = async () => {
    await pool.end();
    await db.drop();
  };
  await cleaningUp(cleanup, async () => {
    await migrate(pool, allMigrations);
    const store = await createEventStore('postgres', pool, db.url);
    // About two events a transaction (a record and its outcome).
    const history = await appendHistory(store, Math.ceil(WANTED / 2), 48);
    console.log(`history: ${history.events.toLocaleString('en')} events appended in ${history.seconds.toFixed(0)} s`);

    let t = performance.now();
    const chain = chainProjection(store);
    await catchUpChain(pool, store, chain);
    const linkS = (performance.now() - t) / 1000;
    console.log(`linking: ${history.events.toLocaleString('en')} events in ${linkS.toFixed(1)} s = ${Math.round(history.events / linkS).toLocaleString('en')} events/s`);
    const { signed } = await signNewCheckpoints(pool, await signingKey(pool, undefined), chain.heads.linked());
    await pool.query('ANALYZE');

    // The command itself, in a process of its own (as an auditor runs it), its memory read from /proc.
    const { code, out, rss } = await auditSampled(['verify-chain'], db.url);
    if (code !== 0) throw new Error(`verify-chain exited ${code} on an untouched history:\n${out}`);
    console.log(`verify-chain (${signed} checkpoints signed): ${/^chain intact: .*$/m.exec(out)?.[0] ?? out.trim()}`);
    console.log(`  its RSS: ${rssThirds(rss)}`);
    console.log('target: verify-chain at 50,000 events/s or faster on one million events');
    await store.close();
  });
}
