/**
 * npm run bench -- --reconciliation: the operator reconciliation routes (contract section 9) on a large
 * history. Appends N transactions (BET+WIN rounds over 31 days, two operators, three games, a few
 * declined, pending and dead) through the event-store port, builds the rounds read model (which keeps
 * the operators' reconciliation view) from that history as `npm run audit -- rebuild` does (its rate and
 * memory), then times, over signed HTTP
 * against an api process: a page of 1,000 transactions (first, deep in the range, one player's), a
 * round's details, and settlement statements (31 days on odd bounds, one day, CSV).
 *   --transactions N   history size (default 1,000,000)
 *   --samples N        requests per measured kind (default 200)
 */
import { allMigrations } from '../../services/migrations.ts';
import { roundsProjection } from '../../services/rounds/projection.ts';
import { rebuildProjection } from '../../services/audit/rebuild.ts';
import { migrate } from '../../shared/db/migrations.ts';
import { createPool } from '../../shared/db/pool.ts';
import { createEventStore } from '../../shared/eventstore/index.ts';
import { OP1, testCatalog } from '../helpers/catalog.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { claimTestRedis } from '../helpers/redis.ts';
import { cleaningUp } from './interrupt.ts';
import { spawnService, type SpawnedService } from '../helpers/service.ts';
import { signedRequest } from '../helpers/signing.ts';
import { appendHistory, DAY, SPAN, START } from './history.ts';
import { mib, rssThirds } from './rss.ts';

const ADMIN = 'bench-reconciliation';
const APPEND_CONCURRENCY = 48;

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length - 1) * p))]!;
const ms = (x: number) => x.toFixed(1);

export async function reconciliationMain({ transactions: WANTED, samples: SAMPLES }: { transactions: number; samples: number }): Promise<void> {
  const db = await createTestDatabase('reconbench');
  const redis = await claimTestRedis();
  const pool = createPool(db.url, APPEND_CONCURRENCY + 4);
  let api: SpawnedService | undefined;
  const cleanup = async () => {
    await api?.stop();
    await pool.end();
    await redis.release();
    await db.drop();
  };
  await cleaningUp(cleanup, async () => {
    await migrate(pool, allMigrations);
    const store = await createEventStore('postgres', pool, db.url);
    const history = await appendHistory(store, WANTED, APPEND_CONCURRENCY);
    const { rounds, made, events } = history;
    console.log(`history: ${made.toLocaleString('en')} transactions in ${history.roundCount.toLocaleString('en')} rounds, ${events.toLocaleString('en')} events, appended in ${history.seconds.toFixed(0)} s`);

    // The read model from the history, as `npm run audit -- rebuild --projection rounds` builds it.
    const rss: number[] = [];
    const meter = setInterval(() => rss.push(process.memoryUsage().rss), 250);
    const rssBefore = process.memoryUsage().rss;
    const t1 = performance.now();
    await rebuildProjection(pool, store, roundsProjection);
    const rebuildS = (performance.now() - t1) / 1000;
    clearInterval(meter);
    console.log(
      `rebuild: ${events.toLocaleString('en')} events in ${rebuildS.toFixed(1)} s = ${Math.round(events / rebuildS).toLocaleString('en')} events/s; ` +
        `RSS ${mib(rssBefore)} MiB before; ${rssThirds(rss)}`,
    );
    const { rows: sizes } = await pool.query<{ t: string; n: string }>(
      `SELECT 'rm_transactions' AS t, count(*)::text AS n FROM rm_transactions UNION ALL SELECT 'rm_settlement_quarters', count(*)::text FROM rm_settlement_quarters`,
    );
    console.log(`read model: ${sizes.map((s) => `${s.t} ${Number(s.n).toLocaleString('en')} rows`).join(', ')}`);

    api = await spawnService({ DATABASE_URL: db.url, REDIS_URL: redis.url, PORT: '0', ADMIN_TOKEN: ADMIN, ROLES: 'api' });
    const catalog = testCatalog({ rateLimit: { limit: 1_000_000, windowSeconds: 1 } });
    const put = await fetch(`${api.url}/v1/admin/catalog`, { method: 'PUT', headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }, body: JSON.stringify(catalog) });
    if (!put.ok) throw new Error(`catalog: ${put.status} ${await put.text()}`);
    const url = api.url;
    const get = async (path: string, headers: Record<string, string> = {}) => {
      const t = performance.now();
      const res = await signedRequest<{ transactions?: unknown[]; nextCursor?: string | null }>(url, { path, as: OP1, headers });
      const took = performance.now() - t;
      if (res.status !== 200) throw new Error(`${path}: ${res.status} ${res.text.slice(0, 300)}`);
      return { took, res };
    };
    const iso = (t: number) => new Date(t).toISOString();
    const whole = `from=${iso(START)}&to=${iso(START + SPAN)}`;

    // Warm-up (first requests load plans and pages), not measured.
    for (let k = 0; k < 5; k++) await get(`/v1/operator/transactions?${whole}&limit=1000`);

    const kinds: Array<[string, () => string, ((r: Awaited<ReturnType<typeof get>>) => void)?]> = [];
    const results = new Map<string, number[]>();
    const measure = async (name: string, path: () => string, check?: (r: Awaited<ReturnType<typeof get>>) => void) => {
      const times: number[] = [];
      for (let k = 0; k < SAMPLES; k++) {
        const r = await get(path());
        check?.(r);
        times.push(r.took);
      }
      results.set(name, times);
      kinds.push([name, path]);
    };
    const full = (r: Awaited<ReturnType<typeof get>>) => {
      if (r.res.json.transactions?.length !== 1000) throw new Error(`a page of 1,000 expected, got ${r.res.json.transactions?.length}`);
    };

    await measure('transactions, first page of 31 days (1,000)', () => `/v1/operator/transactions?${whole}&limit=1000`, full);
    // Deep pages: cursors collected by walking the range, then each page asked for again.
    const cursors: string[] = [];
    let cursor: string | null | undefined = null;
    while (cursors.length < SAMPLES) {
      const r: Awaited<ReturnType<typeof get>> = await get(`/v1/operator/transactions?${whole}&limit=1000${cursor ? `&cursor=${cursor}` : ''}`);
      cursor = r.res.json.nextCursor;
      if (!cursor) break;
      // Spread over the whole range: keep every k-th cursor.
      cursors.push(cursor);
      for (let skip = 0; skip < Math.floor(made / 0.9 / 1000 / SAMPLES) - 1 && cursor; skip++) {
        cursor = (await get(`/v1/operator/transactions?${whole}&limit=1000&cursor=${cursor}`)).res.json.nextCursor;
      }
    }
    let c = 0;
    await measure('transactions, a page deep in 31 days (1,000)', () => `/v1/operator/transactions?${whole}&limit=1000&cursor=${cursors[c++ % cursors.length]}`);
    const op1Rounds = rounds.filter((r) => r.operatorId === OP1.id);
    const pick = () => op1Rounds[Math.floor(Math.random() * op1Rounds.length)]!;
    await measure("transactions, one player's 31 days (first page)", () => `/v1/operator/transactions?${whole}&playerRef=${pick().playerRef}&limit=1000`);
    await measure("a round's details", () => {
      const r = pick();
      return `/v1/operator/rounds/${r.roundId}?gameId=${r.gameId}`;
    });
    const odd = () => {
      const from = START + Math.floor(Math.random() * DAY);
      return `from=${iso(from)}&to=${iso(from + SPAN - Math.floor(Math.random() * DAY) - 1)}`;
    };
    await measure('statement, 31 days on odd bounds', () => `/v1/operator/reports/settlement?${odd()}`);
    await measure('statement, one whole day', () => {
      const day = START + Math.floor(Math.random() * 30) * DAY;
      return `/v1/operator/reports/settlement?from=${iso(day)}&to=${iso(day + DAY)}`;
    });
    const csvTimes: number[] = [];
    for (let k = 0; k < SAMPLES; k++) csvTimes.push((await get(`/v1/operator/reports/settlement?${odd()}`, { accept: 'text/csv' })).took);
    results.set('statement, 31 days on odd bounds, CSV', csvTimes);

    console.log(`\nrequests over signed HTTP, one at a time, ${SAMPLES} each (ms):`);
    console.log(`  ${'kind'.padEnd(52)} ${'p50'.padStart(7)} ${'p99'.padStart(7)} ${'max'.padStart(7)}`);
    for (const [name, times] of results) console.log(`  ${name.padEnd(52)} ${ms(pct(times, 0.5)).padStart(7)} ${ms(pct(times, 0.99)).padStart(7)} ${ms(Math.max(...times)).padStart(7)}`);
    console.log(`\ntarget: each p99 under 200 ms on ${WANTED.toLocaleString('en')} transactions; rebuild at 50,000 events/s or faster`);
  });
}
