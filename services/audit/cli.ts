/**
 * npm run audit -- verify [--projection NAME]   rebuild read models from the whole history into scratch
 *                                                tables and compare them row by row with the live ones
 * npm run audit -- rebuild [--projection NAME]  replace the live read models with a fresh rebuild, safely
 *                                                while the service runs
 * Exit code: 0 when everything matches (or was rebuilt), 1 when verify found a difference, 2 on bad usage.
 */
import { allProjections } from '../../projections/index.ts';
import { ConfigError, loadConfig } from '../../shared/config.ts';
import { migrate } from '../../shared/db/migrations.ts';
import { createPool, ensureDatabase } from '../../shared/db/pool.ts';
import { createEventStore } from '../../shared/eventstore/index.ts';
import { allMigrations } from '../service.ts';
import { rebuildProjection, verifyProjection, type Difference } from './rebuild.ts';

function progressBar(label: string, total: number | undefined): { update(n: number): void; done(): void } {
  const tty = process.stderr.isTTY;
  let lastShown = -1;
  let last = 0;
  const render = (n: number) => {
    if (total && total > 0) {
      const ratio = Math.min(1, n / total);
      const width = 30;
      const filled = Math.round(ratio * width);
      return `  ${label.padEnd(10)} [${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${n}/${total} events`;
    }
    return `  ${label.padEnd(10)} ${n} events`;
  };
  return {
    update(n) {
      last = n;
      if (tty) process.stderr.write(`\r${render(n)}`);
      else {
        // Without a terminal: a line every tenth of the way.
        const tenth = total ? Math.floor((n / total) * 10) : Math.floor(n / 10_000);
        if (tenth !== lastShown) {
          lastShown = tenth;
          process.stderr.write(`${render(n)}\n`);
        }
      }
    },
    done() {
      if (tty) process.stderr.write(`\r${render(last)}\n`);
    },
  };
}

function describe(d: Difference): string {
  const key = Object.entries(d.key)
    .map(([k, v]) => `${k}=${String(v)}`)
    .join(' ');
  if (!d.live) return `  ${d.table} ${key}: missing from the live read model; rebuilt row ${JSON.stringify(d.rebuilt)}`;
  if (!d.rebuilt) return `  ${d.table} ${key}: in the live read model but not in the history; live row ${JSON.stringify(d.live)}`;
  const fields = Object.keys({ ...d.live, ...d.rebuilt }).filter((f) => JSON.stringify(d.live![f]) !== JSON.stringify(d.rebuilt![f]));
  return `  ${d.table} ${key}: ${fields.map((f) => `${f} live=${JSON.stringify(d.live![f])} rebuilt=${JSON.stringify(d.rebuilt![f])}`).join(', ')}`;
}

async function main(): Promise<number> {
  const [command, ...rest] = process.argv.slice(2);
  const only = rest.includes('--projection') ? rest[rest.indexOf('--projection') + 1] : undefined;
  if (command !== 'verify' && command !== 'rebuild') {
    process.stderr.write('usage: npm run audit -- verify|rebuild [--projection NAME]\n');
    return 2;
  }
  const projections = allProjections().filter((p) => only === undefined || p.name === only);
  if (projections.length === 0) {
    process.stderr.write(`no projection named ${only}; known: ${allProjections().map((p) => p.name).join(', ')}\n`);
    return 2;
  }
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      return 2;
    }
    throw err;
  }
  await ensureDatabase(config.databaseUrl);
  const pool = createPool(config.databaseUrl, 4);
  await migrate(pool, allMigrations);
  const store = await createEventStore(config.eventStore, pool, config.databaseUrl);
  const total = store.kind === 'postgres' ? Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM es_events')).rows[0]!.n) : undefined;
  let failed = false;
  try {
    for (const p of projections) {
      const bar = progressBar(p.name, total);
      if (command === 'verify') {
        const result = await verifyProjection(pool, store, p, bar.update);
        bar.done();
        if (result.differences.length === 0) {
          process.stdout.write(`${p.name}: matches a rebuild from the history (at ${result.position})\n`);
        } else {
          failed = true;
          process.stdout.write(`${p.name}: ${result.differences.length} row(s) differ from a rebuild from the history (at ${result.position}):\n`);
          for (const d of result.differences) process.stdout.write(`${describe(d)}\n`);
        }
      } else {
        const position = await rebuildProjection(pool, store, p, bar.update);
        bar.done();
        process.stdout.write(`${p.name}: rebuilt from the history, live from ${position}\n`);
      }
    }
  } finally {
    await store.close();
    await pool.end();
  }
  return failed ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`audit failed: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(2);
  },
);
