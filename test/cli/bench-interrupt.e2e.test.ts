import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { TEST_PG_ADMIN_URL } from '../helpers/db.ts';
import { TEST_POOL_SIZE } from '../helpers/service.ts';
import { childEnv } from '../helpers/bundle.ts';

/**
 * `npm run bench` starts a wallet, the service's processes and a forwarder, and makes a database of its
 * own. A run that is interrupted (Ctrl-C, a kill, or its output piped into `head`, which goes away) must
 * stop them and drop that database: left running, they eat CPU and skew every later measurement. A run
 * that paused the worker and projector (`--pause-read-models`) must resume them to stop them.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');

async function benchDatabases(): Promise<string[]> {
  const c = new pg.Client({ connectionString: TEST_PG_ADMIN_URL });
  await c.connect();
  try {
    const { rows } = await c.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE datname LIKE 't\\_bench\\_%'`);
    return rows.map((r) => r.datname);
  } finally {
    await c.end();
  }
}

/** The processes whose parent is `pid`. */
function childrenOf(pid: number): number[] {
  try {
    return execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .map((l) => Number(l.trim()))
      .filter((n) => n > 0);
  } catch {
    return []; // ps exits 1 when there are none
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/**
 * Starts the bench (its own process group, so a signal reaches it alone) and waits for its first line,
 * printed once its processes and database are up and before any load (the suite runs beside it).
 */
async function startedBench(args = ['--ledger-only', '--repeat', '0', '--warm-up', '0', '--rates', '100', '--seconds', '1'], firstLine = 'seamless-wallet ledger benchmark') {
  const before = new Set(await benchDatabases());
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/bench/bench.ts', ...args], {
    cwd: ROOT,
    detached: true,
    env: childEnv({ DATABASE_POOL_SIZE: TEST_POOL_SIZE, ...(process.env.TEST_PG_URL ? { TEST_PG_URL: process.env.TEST_PG_URL } : {}), ...(process.env.TEST_REDIS_URL ? { TEST_REDIS_URL: process.env.TEST_REDIS_URL } : {}) }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  let out = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes(firstLine)) resolve();
    });
    child.on('exit', () => reject(new Error(`the bench ended before its first line:\n${out}`)));
  });
  const database = (await benchDatabases()).filter((d) => !before.has(d));
  const started = childrenOf(child.pid!);
  return { child, exited, database, started, output: () => out };
}

async function expectCleanedUp(run: Awaited<ReturnType<typeof startedBench>>, expected = { processes: 3, databases: 1 }) {
  // By default (--ledger-only, no forwarder) the wallet and the two service processes, and the bench's one database.
  expect(run.started.length).toBeGreaterThanOrEqual(expected.processes);
  expect(run.database).toHaveLength(expected.databases);
  await expect.poll(() => run.started.filter(alive), { timeout: 20_000 }).toEqual([]);
  await expect.poll(async () => (await benchDatabases()).filter((d) => run.database.includes(d)), { timeout: 20_000 }).toEqual([]);
}

describe('npm run bench, interrupted', () => {
  it('when the reader of its output goes away (piped into head): the same, exit 1', async () => {
    const run = await startedBench();
    // Its next lines fail to be written.
    run.child.stdout.destroy();
    expect(await run.exited).toBe(1);
    await expectCleanedUp(run);
  }, 90_000);

  it('an A/B run (--ab) on SIGTERM: stops both trees\' processes, drops both databases and exits 143', async () => {
    // This checkout against itself: two deployments of the ledger, each with its own database.
    const run = await startedBench(['--ab', '.', '--repeat', '2', '--rates', '100', '--seconds', '1'], 'A/B of two trees');
    run.child.kill('SIGTERM');
    expect(await run.exited).toBe(143);
    // The wallet, and each tree's api and worker+projector processes.
    await expectCleanedUp(run, { processes: 5, databases: 2 });
  }, 90_000);
});

/** A process's state letter (R running, S sleeping, T stopped, ...), from /proc. */
const stateOf = (pid: number) => readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '')[0];
const rolesOf = (pid: number) => /(?:^|\0)ROLES=([^\0]*)/.exec(readFileSync(`/proc/${pid}/environ`, 'utf8'))?.[1];

describe('npm run bench --pause-read-models', () => {
  it('pauses the worker and projector for the fixed rates, and still ends cleanly with nothing lost', async () => {
    // --repeat 0: no saturation pairs, the fixed rates right after the warm-up.
    const run = await startedBench(['--ledger-only', '--repeat', '0', '--warm-up', '0', '--rates', '100', '--seconds', '3', '--pause-read-models'], 'the worker and projector paused');
    // The service's two processes among what the bench started: only the worker and projector's is stopped.
    await expect.poll(() => run.started.filter((pid) => stateOf(pid) === 'T').map(rolesOf)).toEqual(['worker,projector']);
    expect(run.started.map(rolesOf)).toContain('api');

    expect(await run.exited).toBe(0);
    expect(run.output()).not.toContain('saturation (closed loop');
    expect(run.output()).toMatch(/offered 100 tx\/s \(open loop, 3 s each\)\n {2}ledger +\d+ tx\/s/);
    const history = /ledger history: (\d+) transactions recorded, (\d+) settled/.exec(run.output());
    expect(history, run.output()).not.toBeNull();
    expect(Number(history![1])).toBeGreaterThan(0);
    expect(history![2]).toBe(history![1]);
    // Every process it started gone (the paused one resumed to take its SIGTERM), and its database.
    await expectCleanedUp(run);
  }, 120_000);

  it('with --soak: pauses them for the soak, then resumes them and reports their catch-up on what it appended', async () => {
    const run = await startedBench(['--soak', '--warm-up', '0', '--rates', '100', '--seconds', '3', '--pause-read-models'], 'paused (SIGSTOP) for the soak');
    await expect.poll(() => run.started.filter((pid) => stateOf(pid) === 'T').map(rolesOf)).toEqual(['worker,projector']);
    expect(await run.exited).toBe(0);
    const caughtUp = /catch-up: the worker and projector resumed with (\d+) projection\(s\) behind, up to ([\d,]+) events; all caught up in [\d.]+ s .*RSS \(MB\) \d+ when resumed, median \d+, peak \d+/.exec(run.output());
    expect(caughtUp, run.output()).not.toBeNull();
    expect(Number(caughtUp![1])).toBeGreaterThan(0);
    // The soak's 300 transactions, each recorded and settled: at least two events each, none yet projected.
    expect(Number(caughtUp![2]!.replace(/,/g, ''))).toBeGreaterThanOrEqual(600);
    await expectCleanedUp(run);
  }, 120_000);

  // SIGINT to it alone (its own process group), as Ctrl-C in its terminal sends it.
  it('with --soak, interrupted while they are paused: resumes them to stop them, drops its database and exits 130', async () => {
    const run = await startedBench(['--soak', '--warm-up', '0', '--rates', '100', '--seconds', '60', '--pause-read-models'], 'paused (SIGSTOP) for the soak');
    await expect.poll(() => run.started.filter((pid) => stateOf(pid) === 'T').map(rolesOf)).toEqual(['worker,projector']);
    run.child.kill('SIGINT');
    expect(await run.exited).toBe(130);
    await expectCleanedUp(run);
  }, 120_000);
});
