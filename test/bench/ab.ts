/**
 * npm run bench -- --ab DIR: this checkout (A) against another checkout of the project (B), each deployed
 * as the bench deploys the ledger (its api in one process, its worker and projector in another, each from
 * its own tree's bundle, with its own database and Redis database), against one fake wallet.
 *
 * Two kinds of noise are cancelled by design, not left to the reader:
 * - The machine's speed drifts over minutes more than most changes move a figure: A and B are measured
 *   right after each other, and the ratio is taken within each pair.
 * - Two deployments of one tree differ by themselves, and keep that difference for as long as they run: in
 *   A/A runs the deployment started first carried 5 to 10 % less in most of the pairs (2026-11-29). So each
 *   pair is measured on fresh deployments, A deployed (and measured) first in odd pairs, B in even ones,
 *   and the median pair is the headline.
 */
import { execFileSync, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { CpuMeter } from './cpu.ts';
import { cleaningUp, stopChildren } from './interrupt.ts';
import { testCatalog, OP1 } from '../helpers/catalog.ts';
import { entryArgs, NODE_FLAGS } from '../helpers/bundle.ts';
import {
  PLAYERS, ROOT, SATURATION_CONCURRENCY, SATURATION_SECONDS, checkHistory, fixedRate, fmt, launchSessions, median, percent, saturate, start, startLedger,
  type PhaseResult, type Target,
} from './load.ts';


export interface AbOptions {
  /** The other checkout (B), as given. */
  other: string;
  repeat: number;
  rates: number[];
  seconds: number;
  /** Seconds of warm-up per deployment (0: none). */
  warmUp: number;
  oneProcess: boolean;
}

/**
 * Why `dir` cannot be the other tree of an A/B run, or undefined when it can: it must be a checkout of
 * this project with its dependencies installed and `npm run build` (scripts/build.mjs, which every
 * process is started from since it exists).
 */
export function otherTreeProblem(dir: string): string | undefined {
  const pkg = path.join(dir, 'package.json');
  if (!existsSync(pkg)) return `--ab ${dir}: no package.json there (give another checkout of this project)`;
  let name: unknown;
  try {
    name = (JSON.parse(readFileSync(pkg, 'utf8')) as { name?: unknown }).name;
  } catch {
    return `--ab ${dir}: its package.json is not JSON`;
  }
  const ours = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { name: string }).name;
  if (name !== ours) return `--ab ${dir}: its package.json names ${JSON.stringify(name)}, not ${ours}`;
  if (!existsSync(path.join(dir, 'scripts/build.mjs'))) return `--ab ${dir}: it has no scripts/build.mjs (a tree from before npm run build cannot be started as the bench starts the service)`;
  if (!existsSync(path.join(dir, 'node_modules'))) return `--ab ${dir}: its dependencies are not installed (run npm ci there)`;
  return undefined;
}

/** The tree's commit, and whether its work tree differs from it (git's view; "unknown" outside git). */
function describeTree(dir: string): string {
  try {
    const commit = execFileSync('git', ['-C', dir, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty = execFileSync('git', ['-C', dir, 'status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    return `commit ${commit}${dirty ? ' with uncommitted changes' : ''}`;
  } catch {
    return 'not a git checkout';
  }
}

interface Deployment {
  label: 'A' | 'B';
  target: Target<'A' | 'B'>;
  /** Transactions answered 200 by the end of the warm-up. */
  warmedUp: number;
  databaseUrl: string;
}

type Label = 'A' | 'B';

/** What one round (fresh deployments, one pair) measured, for the run's summary. */
interface Round {
  rates: Record<Label, number[]>;
  cpuPerTx: Record<Label, number[]>;
  ratios: number[];
  /** Per offered rate, twice (mirrored phases): B's p50 and p99 minus A's, ms. */
  latency: Array<{ rate: number; p50: number; p99: number }>;
  failed: boolean;
}

export async function abMain(o: AbOptions): Promise<number> {
  const other = path.resolve(o.other);
  // B's bundle, built by B's own script from B's sources (skipped when it is up to date); ours by ours.
  const built = spawnSync(process.execPath, [path.join(other, 'scripts/build.mjs'), '--quiet'], { cwd: other, encoding: 'utf8' });
  if (built.status !== 0) {
    console.error(`building ${other} failed (exit ${built.status ?? built.signal}):\n${built.stdout}${built.stderr}`);
    return 1;
  }
  // BENCH_B_NODE_OPTIONS and BENCH_B_NODE: Node's options, and another Node, for B's processes alone (with
  // `--ab .`, one tree under two settings or two runtimes). Both trees run with this tree's launcher flags
  // (NODE_FLAGS); B's options come after them on its command line, so that they win over the same flag.
  const bNode = process.env.BENCH_B_NODE || undefined;
  const bOptions = (process.env.BENCH_B_NODE_OPTIONS ?? '').split(/\s+/).filter(Boolean);
  const bNodeVersion = bNode === undefined ? undefined : spawnSync(bNode, ['--version'], { encoding: 'utf8' });
  if (bNodeVersion && bNodeVersion.status !== 0) {
    console.error(`BENCH_B_NODE=${bNode}: not a Node it can run (${bNodeVersion.error?.message ?? `exit ${bNodeVersion.status ?? bNodeVersion.signal}`})`);
    return 2;
  }
  const mains = { A: { main: entryArgs('main'), cwd: ROOT }, B: { main: [...NODE_FLAGS.main, ...bOptions, path.join(other, 'dist/main.mjs')], cwd: other, node: bNode } };

  // Printed once the first round's processes are up, before any load.
  const header = () => {
    console.log(`A/B of two trees: the ledger, ${o.oneProcess ? 'roles api,worker,projector in one process' : 'api in one process, worker and projector in another'}, BET+WIN rounds, ${PLAYERS} players`);
    console.log(`  A: ${ROOT} (${describeTree(ROOT)})`);
    console.log(`  A: node ${process.version}`);
    console.log(`  B: ${other} (${describeTree(other)})${bOptions.length ? `, with the Node options ${bOptions.join(' ')}` : ''}`);
    console.log(`  B: node ${bNodeVersion ? `${bNodeVersion.stdout.trim()} (${bNode})` : process.version}`);
  };
  const rounds: Round[] = [];
  for (let i = 0; i < o.repeat; i++) rounds.push(await round(o, mains, i % 2 === 0 ? 'A' : 'B', i + 1, i === 0 ? header : () => undefined));

  console.log('\nthe whole run');
  const all = <T>(pick: (h: Round) => T[]) => rounds.flatMap(pick);
  const ms = (xs: number[]) => (xs.length ? `${median(xs).toFixed(2)} ms` : '?');
  console.log(`  saturation medians: A ${median(all((h) => h.rates.A)).toFixed(0)} tx/s at ${ms(all((h) => h.cpuPerTx.A))} of CPU a transaction, B ${median(all((h) => h.rates.B)).toFixed(0)} tx/s at ${ms(all((h) => h.cpuPerTx.B))}`);
  const ratios = all((h) => h.ratios);
  console.log(`  B / A throughput, median pair: ${percent(median(ratios))} (pairs ${ratios.map(percent).join(', ')})`);
  const signed = (x: number) => `${x >= 0 ? '+' : ''}${x.toFixed(2)} ms`;
  for (const rate of o.rates) {
    const rows = all((h) => h.latency.filter((l) => l.rate === rate));
    const mean = (k: 'p50' | 'p99') => rows.reduce((sum, r) => sum + r[k], 0) / rows.length;
    console.log(`  ${rate} tx/s, B - A (the mean of ${rows.length} mirrored comparisons): p50 ${signed(mean('p50'))}, p99 ${signed(mean('p99'))}`);
  }
  return rounds.some((h) => h.failed) ? 1 : 0;
}

/** One round of the run: fresh deployments, `first`'s started and measured first, one saturation pair, then the offered rates. */
async function round(o: AbOptions, mains: Record<Label, { main: string[]; cwd: string; node?: string }>, first: Label, n: number, ready: () => void): Promise<Round> {
  const [{ createTestDatabase }, { claimTestRedis }, { Pool: HttpPool }] = await Promise.all([import('../helpers/db.ts'), import('../helpers/redis.ts'), import('undici')]);
  const order: Label[] = first === 'A' ? ['A', 'B'] : ['B', 'A'];
  const children: ChildProcess[] = [];
  const dbs: Partial<Record<Label, Awaited<ReturnType<typeof createTestDatabase>>>> = {};
  const redises: Partial<Record<Label, Awaited<ReturnType<typeof claimTestRedis>>>> = {};
  const cleanup = async () => {
    await stopChildren(children, 30_000);
    // Each step whatever became of another: one failed drop must not leave the rest behind.
    const steps = await Promise.allSettled(order.flatMap((label) => [dbs[label]?.drop(), redises[label]?.release()]));
    for (const step of steps) if (step.status === 'rejected') process.stderr.write(`bench: cleaning up: ${String(step.reason)}\n`);
  };
  return cleaningUp(cleanup, async () => {
    for (const label of order) {
      dbs[label] = await createTestDatabase('bench');
      redises[label] = await claimTestRedis();
    }
    const wallet = await start(children, 'test/bench/wallet-server.ts', { WALLET_SECRET: OP1.secret }, /(http:\/\/[\d.:]+)/);
    const catalog = testCatalog({ walletUrl: wallet.line, walletTimeoutMs: 5000, rateLimit: { limit: 1_000_000, windowSeconds: 1 } });
    const pids: Record<string, number | undefined> = { wallet: wallet.child.pid, 'load generator': process.pid };
    const deployments: Deployment[] = [];
    for (const label of order) {
      const ledger = await startLedger(children, { ...mains[label], databaseUrl: dbs[label]!.url, redisUrl: redises[label]!.url, oneProcess: o.oneProcess, catalog });
      pids[o.oneProcess ? label : `${label} api`] = ledger.api.pid;
      if (ledger.background) pids[`${label} worker+projector`] = ledger.background.pid;
      const pool = new HttpPool(ledger.url, { connections: 128, pipelining: 1 });
      const sessions = await launchSessions(pool, PLAYERS, OP1);
      deployments.push({ label, target: { name: label, pool, sessions, ok: 0 }, warmedUp: 0, databaseUrl: dbs[label]!.url });
    }
    const cpu = new CpuMeter(pids);
    ready();

    console.log(`\nround ${n} of ${o.repeat}: fresh deployments, ${first} deployed first`);
    if (o.warmUp > 0) console.log(`warm-up (${o.warmUp} s each at the saturation concurrency) ...`);
    for (const d of deployments) {
      if (o.warmUp > 0) await saturate(d.target, o.warmUp, SATURATION_CONCURRENCY);
      d.warmedUp = d.target.ok;
    }
    const result: Round = { rates: { A: [], B: [] }, cpuPerTx: { A: [], B: [] }, ratios: [], latency: [], failed: false };

    console.log(`saturation (closed loop, ${SATURATION_CONCURRENCY} concurrent rounds, ${SATURATION_SECONDS} s each)`);
    const pair: Partial<Record<Label, PhaseResult>> = {};
    for (const d of deployments) {
      cpu.start();
      const r = (pair[d.label] = await saturate(d.target, SATURATION_SECONDS, SATURATION_CONCURRENCY));
      const used = cpu.measure(r.throughput);
      result.rates[d.label].push(r.throughput);
      if (used.msPerTransaction !== undefined) result.cpuPerTx[d.label].push(used.msPerTransaction);
      console.log(`  ${d.label} ${fmt(r)}`);
      console.log(`    ${used.text}`);
    }
    result.ratios.push(pair.B!.throughput / pair.A!.throughput);
    console.log(`  B / A throughput ${percent(result.ratios.at(-1)!)}`);

    for (const rate of o.rates) {
      // Mirrored (first, second, second, first), so a drift over the four phases falls on both trees alike.
      console.log(`offered ${rate} tx/s (open loop, ${o.seconds} s each, mirrored)`);
      const row: Record<Label, PhaseResult[]> = { A: [], B: [] };
      for (const d of [...deployments, ...[...deployments].reverse()]) {
        cpu.start();
        const r = await fixedRate(d.target, rate, o.seconds);
        row[d.label].push(r);
        console.log(`  ${d.label} ${fmt(r)}`);
        console.log(`    ${cpu.stop(r.throughput)}`);
      }
      const diff = (x: number, y: number) => `${x - y >= 0 ? '+' : ''}${(x - y).toFixed(2)} ms`;
      for (const i of [0, 1]) {
        const [a, b] = [row.A[i]!, row.B[i]!];
        result.latency.push({ rate, p50: b.p50 - a.p50, p99: b.p99 - a.p99 });
        console.log(`  B - A: p50 ${diff(b.p50, a.p50)} (BET ${diff(b.p50Bet, a.p50Bet)}, WIN ${diff(b.p50Win, a.p50Win)}), p99 ${diff(b.p99, a.p99)}`);
      }
    }
    await Promise.all(deployments.map((d) => d.target.pool.close()));
    // Stopped first: a service's stop writes the outcomes still behind their answers (it allows itself 30 s).
    await stopChildren(children, 30_000);

    // Nothing lost: what each tree answered is in its history, settled; and each measured something.
    for (const dep of deployments) {
      if ((await checkHistory(`${dep.label}'s`, dep.databaseUrl, dep.target.ok)).lost) result.failed = true;
      if (dep.target.ok === dep.warmedUp) {
        console.log(`measured nothing: every transaction through ${dep.label} failed after the warm-up`);
        result.failed = true;
      }
    }
    return result;
  });
}
