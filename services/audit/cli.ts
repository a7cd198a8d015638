/**
 * npm run audit -- verify|rebuild [--projection NAME] | migrate-events --to STORE: see USAGE. It audits
 * the database DATABASE_URL names and never creates one.
 */
import pg from 'pg';
import { allProjections } from '../read-models.ts';
import { Cli } from '../../shared/cli.ts';
import { ConfigError, databaseName, loadConfig } from '../../shared/config.ts';
import { migrate } from '../../shared/db/migrations.ts';
import { createPool } from '../../shared/db/pool.ts';
import { createEventStore } from '../../shared/eventstore/index.ts';
import { START } from '../../shared/eventstore/port.ts';
import { allMigrations } from '../migrations.ts';
import { checkCheckpointStore, CheckpointStoreMismatch, setCheckpointStore } from '../../projections/runner.ts';
import type { Pool } from '../../shared/db/pool.ts';
import type { EventStore } from '../../shared/eventstore/port.ts';
import { compareLogs, copyEvents } from './migrate.ts';
import { verifyChain } from '../chain/verify.ts';
import { archiveChain, catchUpChain } from '../chain/archive.ts';
import { dropLeftScratch, NothingSwapped, rebuildProjections, replayPoolSize, SWAP_LOCK, verifyProjection, VerifyInterrupted, type Difference, type Rebuilt } from './rebuild.ts';

const PROJECTIONS = allProjections().map((p) => p.name);
/** Read models that were folded into another: their name still selects the one that keeps their tables. */
const KEPT_BY: Readonly<Record<string, string>> = { reconciliation: 'rounds' };
const USAGE = `usage: npm run audit -- verify|rebuild [--projection NAME]
       npm run audit -- verify-chain
       npm run audit -- migrate-events --to STORE

Audits the read models of the ledger whose database DATABASE_URL names (default postgres://127.0.0.1:5432/ledger)
and whose event store EVENT_STORE names (default postgres).

  verify             rebuild the read models from the whole history into scratch tables and compare them
                     row by row with the live ones
  rebuild            replace the live read models with a fresh rebuild, safely while the service runs
  --projection NAME  only this read model: ${PROJECTIONS.join(', ')} (default: every one); reconciliation,
                     whose tables the rounds read model keeps, selects rounds
  verify-chain       recompute the hash chain from the stored events and check every link, every
                     operator's link and every signed checkpoint (its link and its signature)
  migrate-events     verify the hash chain of EVENT_STORE, copy the whole history to the store --to names
                     (every stream, in order, with its event ids and metadata), check that both hold the
                     same events, rebuild the read models from the new store, and archive the old chain
                     (the new store's chain starts at its first event). Stop every process of the service first;
                     then start it with EVENT_STORE set to the new store. Run again after an interruption.
  --to STORE         the new event store: postgres (the database DATABASE_URL names) or an EventStoreDB
                     connection string (esdb://host:2113?tls=false)
  --help             this text

Exit status: 0 everything matches (or was rebuilt, or moved, or the chain holds), 1 verify or the copy check
found a difference, rebuild found the live tables changed while it ran, could not lock them, or lost the
session that held its tables (the server restarted: nothing swapped in), or verify-chain a break (it names the first position that breaks), 2 nothing was done: bad usage, a database that does not exist or holds no ledger (audit never creates one),
an empty history, a target that is the store already in use, a verify whose tables' session was lost (the server restarted),
or a verify that found a read model which has applied no event yet (it names it; the others are verified and reported).
verify names the newer events after the position it verified, which it did not verify.`;

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

/** How long the swap held the live read models: their reads (operators' lists and statements, the console) waited meanwhile. */
const lockedLines = ({ lockedMs, swap, attached, tries }: Rebuilt): string =>
  (swap === 'copied'
    ? `the rebuilt rows were copied into the live tables under the lock, as something is attached to the tables themselves that a swap by name would lose:\n${attached.map((a) => `  ${a}\n`).join('')}`
    : '') +
  (tries > 1 ? `others held the live read models: their lock was taken at try ${tries} (each try waited ${SWAP_LOCK.waitMs / 1000} s at most)\n` : '') +
  `the live read models were locked for ${(lockedMs / 1000).toFixed(1)} s while the rebuild was swapped in (their reads waited meanwhile)\n`;

/**
 * A rebuild, its progress bar ended; undefined when it swapped nothing in (NothingSwapped: the live read
 * models are as they were), once its reason and `then` are said.
 */
async function rebuildOrSayWhyNot(rebuild: () => Promise<Rebuilt>, bar: { done(): void }, then = ''): Promise<Rebuilt | undefined> {
  let rebuilt: Rebuilt;
  try {
    rebuilt = await rebuild();
  } catch (err) {
    bar.done();
    if (!(err instanceof NothingSwapped)) throw err;
    process.stdout.write(`${err.message}\n${then}`);
    return undefined;
  }
  bar.done();
  return rebuilt;
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

const fail = (message: string): number => {
  process.stderr.write(`audit: ${message}\n`);
  return 2;
};

/**
 * The database as it is: 'missing' when it does not exist, 'no ledger' when the service never ran on it
 * (no schema_migrations table, or one, such as another tool's, that records none of the service's
 * migrations). Creates nothing.
 */
async function probe(databaseUrl: string): Promise<'ok' | 'missing' | 'no ledger' | { unreachable: string }> {
  const client = new pg.Client({ connectionString: databaseUrl });
  try {
    await client.connect();
  } catch (err) {
    await client.end().catch(() => undefined);
    if ((err as { code?: string }).code === '3D000') return 'missing';
    return { unreachable: (err as Error).message };
  }
  try {
    const { rows } = await client.query<{ t: string | null }>(`SELECT to_regclass('schema_migrations')::text AS t`);
    if (rows[0]!.t === null) return 'no ledger';
    const ours = allMigrations.flatMap((m) => [m.id, ...(m.replaces ?? [])]);
    // Another tool's table of that name may have no id column: no ledger either.
    const { rows: recorded } = await client
      .query<{ ours: boolean }>('SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE id::text = ANY($1)) AS ours', [ours])
      .catch(() => ({ rows: [{ ours: false }] }));
    return recorded[0]?.ours === true ? 'ok' : 'no ledger';
  } finally {
    await client.end();
  }
}

/**
 * migrate-events: copy, compare, rebuild the read models from the target, and record that the
 * checkpoints are now the target's. The source is left as it was.
 */
async function migrateEvents(pool: Pool, source: EventStore, setting: string, databaseUrl: string, total: number | undefined): Promise<number> {
  if ((await source.readAll({ from: START, maxCount: 1 })).length === 0) return fail('the history is empty: nothing to move');
  const target = await createEventStore(setting, pool, databaseUrl);
  try {
    if (target.kind === source.kind) return fail(`--to is a ${target.kind} store like EVENT_STORE's: migrate-events moves between Postgres and EventStoreDB`);
    // The chain stays with the store it was computed on: it must hold before the move, or the move
    // would carry a tampered history into the new store's fresh chain.
    const linked = await catchUpChain(pool, source);
    if (linked > 0) process.stdout.write(`chain: linked the ${linked} event(s) the projector had not\n`);
    const chain = await verifyChain(pool, source);
    if (chain.broken) {
      const b = chain.broken;
      process.stdout.write(`the ${source.kind} store's chain is broken at event #${b.count}${b.position !== undefined ? ` (position ${b.position})` : ''}: ${b.what}\n`);
      process.stdout.write('nothing moved: find out what changed the history (npm run audit -- verify-chain) before moving it\n');
      return 1;
    }
    process.stdout.write(`chain: ${chain.events} events and ${chain.checkpoints} checkpoint(s) of the ${source.kind} store verified\n`);
    const copyBar = progressBar('copy', total);
    const copied = await copyEvents(source, target, copyBar.update);
    copyBar.done();
    process.stdout.write(`copied ${copied.events} events of ${copied.streams} streams to the ${target.kind} store\n`);
    const { compared, differences } = await compareLogs(source, target);
    if (differences.length > 0) {
      process.stdout.write(`the ${target.kind} store does not hold the same history (${differences.length} difference(s) shown; read models left as they were):\n`);
      for (const d of differences) process.stdout.write(`  event ${d.index}: ${d.what}: source ${JSON.stringify(d.source)} target ${JSON.stringify(d.target)}\n`);
      return 1;
    }
    process.stdout.write(`both stores hold the same ${compared} events, in the same order\n`);
    const bar = progressBar('read models', copied.events);
    const rebuilt = await rebuildOrSayWhyNot(() => rebuildProjections(pool, target, allProjections(), bar.update), bar, 'the events are copied; the read models were not rebuilt from them: run migrate-events again\n');
    if (!rebuilt) return 1;
    for (const p of allProjections()) process.stdout.write(`${p.name}: rebuilt from the ${target.kind} store, live from ${rebuilt.position}\n`);
    process.stdout.write(lockedLines(rebuilt));
    const archived = await archiveChain(pool, source.kind, (tx) => setCheckpointStore(tx, target.kind));
    process.stdout.write(`chain: the ${source.kind} store's chain (${archived.events} events) archived as epoch ${archived.epoch}; the ${target.kind} store's starts at its first event\n`);
    process.stdout.write(`done: start every process with EVENT_STORE=${setting}\n`);
    return 0;
  } finally {
    await target.close();
  }
}

/** verify-chain: 0 intact, 1 the first break named, 2 nothing to verify. */
async function verifyChainCommand(pool: Pool, store: EventStore, where: string, total: number | undefined): Promise<number> {
  if ((await store.readAll({ from: START, maxCount: 1 })).length === 0) return fail(`the history is empty: nothing to verify in ${where}`);
  const bar = progressBar('chain', total);
  const report = await verifyChain(pool, store, bar.update);
  bar.done();
  const rate = Math.round(report.events / Math.max(report.seconds, 0.001));
  if (report.broken) {
    const b = report.broken;
    process.stdout.write(`chain broken at event #${b.count}${b.position !== undefined ? ` (position ${b.position}${b.stream !== undefined ? `, stream ${b.stream}` : ''})` : ''}: ${b.what}\n`);
    process.stdout.write(
      b.inCheckpoint
        ? `  all ${report.events} event(s) link as recorded; the break is in checkpoint ${report.checkpoints} of those read (${rate} events/s)\n`
        : `  ${report.events} event(s) read before the break, ${rate} events/s\n`,
    );
    return 1;
  }
  if (report.events === 0) return fail('the chain links nothing yet: it is written by the projector role, which has not run on this history');
  process.stdout.write(`chain intact: ${report.events} events linked and verified, ${report.checkpoints} signed checkpoint(s) valid, in ${report.seconds.toFixed(1)} s (${rate} events/s)\n`);
  if (report.unlinked > 0) process.stdout.write(`  ${report.unlinked} newer event(s) not linked yet (the projector role links them as they come): not verified\n`);
  return 0;
}

async function main(): Promise<number> {
  const cli: Cli = new Cli('audit', USAGE);
  const { values, positionals } = cli.parse({ options: { projection: { type: 'string' }, to: { type: 'string' }, help: { type: 'boolean' } }, allowPositionals: true });
  const [command, ...extra] = positionals;
  if (command === undefined) cli.fail('a command is needed: verify, rebuild, verify-chain or migrate-events');
  if (command !== 'verify' && command !== 'rebuild' && command !== 'verify-chain' && command !== 'migrate-events') {
    cli.fail(`unknown command "${command}": verify, rebuild, verify-chain or migrate-events`);
  }
  if (command === 'verify-chain' && values.projection !== undefined) cli.fail('--projection does not apply to verify-chain: the chain is not a read model');
  if (extra.length > 0) cli.fail(`Unexpected argument '${extra[0]}': one command only`);
  let only = values.projection;
  const keeper = only === undefined ? undefined : KEPT_BY[only];
  if (only !== undefined && keeper !== undefined) {
    process.stderr.write(`the ${only} read model is kept by the ${keeper} read model now: ${command} --projection ${keeper}\n`);
    only = keeper;
  }
  if (only !== undefined && !PROJECTIONS.includes(only)) cli.fail(`no projection named "${only}"; known: ${PROJECTIONS.join(', ')}`);
  if (command === 'migrate-events' && only !== undefined) cli.fail('--projection does not apply to migrate-events: every read model is rebuilt from the new store');
  if (command !== 'migrate-events' && values.to !== undefined) cli.fail('--to applies only to migrate-events');
  let target: string | undefined;
  if (command === 'migrate-events') {
    if (values.to === undefined) cli.fail('migrate-events needs --to STORE: postgres or an EventStoreDB connection string');
    try {
      target = loadConfig({ ...process.env, EVENT_STORE: values.to }).eventStore;
    } catch (err) {
      if (err instanceof ConfigError) cli.fail(`--to: ${err.message.replace(/^EVENT_STORE: /, '')}`);
      throw err;
    }
  }
  const projections = allProjections().filter((p) => only === undefined || p.name === only);
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) return fail(err.message);
    throw err;
  }
  if (target !== undefined && target === config.eventStore) return fail(`--to names the store EVENT_STORE already selects (${target}): nothing to move`);
  const db = new URL(config.databaseUrl);
  const name = `"${databaseName(config.databaseUrl) ?? ''}"`;
  const where = `database ${name} on ${db.host}`;
  const state = await probe(config.databaseUrl);
  if (state === 'missing') return fail(`database ${name} does not exist on ${db.host}: nothing to audit (audit never creates a database; set DATABASE_URL to the ledger's)`);
  if (typeof state === 'object') return fail(`cannot connect to ${where}: ${state.unreachable}`);
  if (state === 'no ledger') return fail(`${where} holds no ledger (the service never ran on it): nothing to audit; set DATABASE_URL to the ledger's`);
  // A rebuild applies each read model on a connection of its own, beside the store's reads.
  const pool = createPool(config.databaseUrl, replayPoolSize(allProjections()));
  await migrate(pool, allMigrations);
  const store = await createEventStore(config.eventStore, pool, config.databaseUrl);
  const total = await store.eventCount();
  let failed = false;
  /** Read models verify found at the start of the history: nothing of it compared. */
  const unverified: string[] = [];
  try {
    try {
      await checkCheckpointStore(pool, store.kind);
    } catch (err) {
      if (err instanceof CheckpointStoreMismatch) return fail(err.message);
      throw err;
    }
    if (target !== undefined) return await migrateEvents(pool, store, target, config.databaseUrl, total);
    if (command === 'verify-chain') return await verifyChainCommand(pool, store, where, total);
    if ((command === 'verify' || command === 'rebuild') && (await store.readAll({ from: START, maxCount: 1 })).length === 0) {
      // Empty read models "match" an empty history, and rebuilding it gives them again: nothing would be done.
      return fail(`the history is empty: nothing to ${command} in ${where}`);
    }
    if (command === 'verify' || command === 'rebuild') {
      // A rebuild's scratch tables are logged: one that was killed leaves them, full size, until dropped.
      const { dropped, inUse, failed } = await dropLeftScratch(pool);
      for (const f of failed) process.stderr.write(`note: could not drop the scratch schema ${f}\n`);
      for (const { schema, bytes } of dropped) {
        process.stderr.write(`dropped scratch schema ${schema} (${Math.round(bytes / 1048576)} MB), left by a rebuild or verify that was interrupted\n`);
      }
      for (const schema of inUse) process.stderr.write(`note: scratch schema ${schema} belongs to a rebuild or verify running now\n`);
    }
    if (command === 'rebuild') {
      // One replay of the history for every read model asked for.
      const bar = progressBar(projections.length === 1 ? projections[0]!.name : 'read models', total);
      const rebuilt = await rebuildOrSayWhyNot(() => rebuildProjections(pool, store, projections, bar.update), bar);
      if (!rebuilt) return 1;
      for (const p of projections) process.stdout.write(`${p.name}: rebuilt from the history, live from ${rebuilt.position}\n`);
      process.stdout.write(lockedLines(rebuilt));
    }
    for (const p of command === 'verify' ? projections : []) {
      const bar = progressBar(p.name, total);
      let result: Awaited<ReturnType<typeof verifyProjection>>;
      try {
        result = await verifyProjection(pool, store, p, bar.update);
      } catch (err) {
        bar.done();
        if (!(err instanceof VerifyInterrupted)) throw err;
        const rest = projections.slice(projections.indexOf(p) + 1).map((q) => q.name);
        process.stderr.write(`audit: ${p.name}: ${err.message}${rest.length > 0 ? ` (not verified either: ${rest.join(', ')})` : ''}\n`);
        // A difference found before is still a difference (1); else nothing was audited to the end (2).
        return failed ? 1 : 2;
      }
      bar.done();
      if (result.position === START && result.differences.length === 0) {
        // Empty tables match an empty replay: that proves nothing about the history there is. (Rows in
        // tables no projector has written are differences, and reported as such below.)
        unverified.push(p.name);
        process.stdout.write(`${p.name}: nothing verified: the read model has applied no event of the history yet (the projector role applies them)\n`);
        continue;
      }
      if (result.differences.length === 0) {
        process.stdout.write(`${p.name}: matches a rebuild from the history (at ${result.position})\n`);
      } else {
        failed = true;
        process.stdout.write(`${p.name}: ${result.differences.length} row(s) differ from a rebuild from the history (at ${result.position}):\n`);
        for (const d of result.differences) process.stdout.write(`${describe(d)}\n`);
      }
      const { count: newer } = await store.countAll({ from: result.position, limit: NEWER_COUNTED });
      if (newer > 0) {
        process.stdout.write(`  ${newer >= NEWER_COUNTED ? `${NEWER_COUNTED.toLocaleString('en')} or more` : newer} newer event(s) after the position verified (the projector role applies them as they come): not verified\n`);
      }
    }
  } finally {
    await store.close();
    await pool.end();
  }
  if (failed) return 1;
  if (unverified.length > 0) {
    process.stderr.write(`audit: nothing verified for ${unverified.join(', ')}: run verify again once the projector has applied the history\n`);
    return 2;
  }
  return 0;
}

/**
 * How far verify counts the events after the position it verified: as far as a projection's lag is
 * counted (EventStoreDB has no count: its store reads them, within one read's time limit).
 */
const NEWER_COUNTED = 10_000;

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`audit failed: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(2);
  },
);
