/**
 * The bench's building blocks, shared by its modes (bench.ts, ab.ts): helper processes, the service's
 * processes, and the load generator (signed BET+WIN rounds, closed loop to saturation or open loop at
 * an offered rate) with its figures.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import type { Pool as HttpPool } from 'undici';
import { PROV_A } from '../helpers/catalog.ts';
import { signRequest } from '../helpers/signing.ts';

export const ROOT = path.resolve(import.meta.dirname, '../..');
/** A saturation phase: closed loop, this many rounds at once, this long. */
export const SATURATION_SECONDS = 6;
export const SATURATION_CONCURRENCY = 64;
/** At the saturation concurrency, before a fresh deployment is measured. */
export const WARM_UP_SECONDS = 5;
/** Players with a launched session; each round picks one. */
export const PLAYERS = 200;

/** The service's settings a bench passes on to the processes it starts, when they are set. */
const PASSED_SETTINGS = ['HEAP_GROWING_PERCENT', 'DATABASE_POOL_SIZE', 'OUTCOME_BACKLOG_BYTES', 'OUTCOME_BACKLOG_OPERATOR_BYTES'];

/** Node's options for a process the bench starts: a V8 CPU profile of it into BENCH_PROFILE, when set. */
export const profiled = (): string[] => (process.env.BENCH_PROFILE ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_PROFILE] : []);

/** Starts a helper process, added to `children` at once (an interrupted start stops it too), and waits for its ready line. */
export function start(children: ChildProcess[], script: string, env: Record<string, string>, readyPattern: RegExp): Promise<{ child: ChildProcess; line: string }> {
  const child = spawn(process.execPath, [...profiled(), '--import', 'tsx', script], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} did not start:\n${out}`)), 30_000);
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = readyPattern.exec(out);
      if (m) {
        clearTimeout(timer);
        child.stdout!.off('data', onData);
        child.stdout!.resume();
        child.stderr!.resume();
        resolve({ child, line: m[1] ?? m[0] });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    child.once('exit', (code) => reject(new Error(`${script} exited ${code}:\n${out}`)));
  });
}

/** A service the load generator drives: its connections, the players' launched sessions, its successes. */
export interface Target<N extends string = string> {
  name: N;
  pool: HttpPool;
  sessions: Array<{ token: string; playerRef: string }>;
  /** Transactions it answered 200 to, warm-up included. */
  ok: number;
}

export async function post(pool: HttpPool, pathName: string, body: unknown, as: { kind: 'operator' | 'provider'; id: string; secret: string }) {
  const signed = signRequest({ path: pathName, body, as });
  const res = await pool.request({ path: pathName, method: 'POST', headers: signed.headers, body: signed.body });
  const text = await res.body.text();
  return { status: res.statusCode, text };
}

/** Latencies of one phase, ms: all, and apart for the round's BET and its WIN (sent as the BET is answered). */
interface Latencies {
  all: number[];
  BET: number[];
  WIN: number[];
}

const newLatencies = (): Latencies => ({ all: [], BET: [], WIN: [] });

/** One round: a BET, then the WIN that completes it. Records each transaction's latency in ms. */
async function round(t: Target, latencies: Latencies, errors: { n: number }, scheduledAt?: number): Promise<void> {
  const s = t.sessions[Math.floor(Math.random() * t.sessions.length)]!;
  const roundId = randomUUID();
  const base = { sessionToken: s.token, roundId, playerRef: s.playerRef, currency: 'EUR', gameId: 'fruit-1' };
  let from = scheduledAt ?? performance.now();
  for (const tx of [
    { ...base, transactionId: randomUUID(), type: 'BET' as const, roundComplete: false, amount: 100 },
    { ...base, transactionId: randomUUID(), type: 'WIN' as const, roundComplete: true, amount: 150 },
  ]) {
    const r = await post(t.pool, '/v1/wallet/transaction', tx, PROV_A).catch(() => ({ status: 0, text: '' }));
    const now = performance.now();
    latencies.all.push(now - from);
    latencies[tx.type].push(now - from);
    if (r.status !== 200) errors.n++;
    else t.ok++;
    from = now;
  }
}

export const pct = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : NaN);

export interface PhaseResult {
  throughput: number;
  p50: number;
  p95: number;
  p99: number;
  errors: number;
  count: number;
  /** p50 of the rounds' BETs alone, and of their WINs. */
  p50Bet: number;
  p50Win: number;
}

export async function saturate(t: Target, seconds: number, concurrency: number): Promise<PhaseResult> {
  const latencies = newLatencies();
  const errors = { n: 0 };
  const end = performance.now() + seconds * 1000;
  const begin = performance.now();
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (performance.now() < end) await round(t, latencies, errors);
  }));
  return summarize(latencies, errors.n, (performance.now() - begin) / 1000);
}

/** Open loop: rounds start on schedule whatever the latency, so slow answers cannot hide (no coordinated omission). */
export async function fixedRate(t: Target, txPerSecond: number, seconds: number): Promise<PhaseResult> {
  const latencies = newLatencies();
  const errors = { n: 0 };
  const roundsPerMs = txPerSecond / 2 / 1000;
  const begin = performance.now();
  const inflight: Promise<void>[] = [];
  let started = 0;
  while (performance.now() - begin < seconds * 1000) {
    // Round k is due at k / roundsPerMs: every round up to now's is started (round 0 at once).
    const due = Math.floor((performance.now() - begin) * roundsPerMs) + 1;
    for (; started < due; started++) inflight.push(round(t, latencies, errors, begin + started / roundsPerMs));
    await new Promise((r) => setTimeout(r, 1)); // a 1 ms tick: starts every round that is due, without spinning the CPU
  }
  await Promise.all(inflight);
  return summarize(latencies, errors.n, (performance.now() - begin) / 1000);
}

function summarize(latencies: Latencies, errors: number, seconds: number): PhaseResult {
  const sorted = [...latencies.all].sort((a, b) => a - b);
  const p50Of = (l: number[]) => pct([...l].sort((a, b) => a - b), 50);
  return {
    // Answered transactions a second: a failure answered fast must not count as throughput.
    throughput: (sorted.length - errors) / seconds, p50: pct(sorted, 50), p95: pct(sorted, 95), p99: pct(sorted, 99), errors, count: sorted.length,
    p50Bet: p50Of(latencies.BET), p50Win: p50Of(latencies.WIN),
  };
}

export const percent = (ratio: number) => `${(ratio * 100).toFixed(0)} %`;
/** The middle value; of an even count, the mean of the two middle ones. */
export const median = (xs: number[]): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

/** What a target's latency adds to the forwarder's at one offered rate: p50 (its BETs' and WINs' too) and p99, with their targets if given. */
export function added(r: PhaseResult, base: PhaseResult, target?: { p50: number; p99: number }): string {
  const d = (a: number, b: number) => (a - b).toFixed(2);
  return (
    `p50 ${d(r.p50, base.p50)} ms (${target ? `target <= ${target.p50}; ` : ''}BET ${d(r.p50Bet, base.p50Bet)}, WIN ${d(r.p50Win, base.p50Win)}), ` +
    `p99 ${d(r.p99, base.p99)} ms${target ? ` (target <= ${target.p99})` : ''}`
  );
}

export const fmt = (r: PhaseResult) =>
  `${r.throughput.toFixed(0).padStart(6)} tx/s  p50 ${r.p50.toFixed(2).padStart(6)} ms  p95 ${r.p95.toFixed(2).padStart(6)} ms  p99 ${r.p99.toFixed(2).padStart(6)} ms  errors ${r.errors}/${r.count}`;

export async function freePort(): Promise<number> {
  const net = await import('node:net');
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

export async function waitHealthy(url: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (await fetch(`${url}/healthz`).then((r) => r.ok, () => false)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not come up`);
}

/**
 * Starts the service's processes of `roles` from `main` (Node's arguments that run its entry point: this
 * tree's bundle, or another tree's for an A/B run) against its own database and Redis, and waits until it
 * answers. The settings are the bench's: quiet logs, and Node's or the heap's options when the bench is
 * given them (BENCH_SERVICE_NODE_OPTIONS and PASSED_SETTINGS).
 */
export async function startService(
  children: ChildProcess[],
  o: { main: string[]; cwd: string; databaseUrl: string; redisUrl: string; roles: string; node?: string },
): Promise<{ child: ChildProcess; url: string }> {
  const nodeOptions = process.env.BENCH_SERVICE_NODE_OPTIONS;
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  // The bench's own Node, or another for one side of an A/B run (BENCH_B_NODE).
  const child = spawn(o.node ?? process.execPath, [...profiled(), ...o.main], {
    cwd: o.cwd,
    env: {
      PATH: process.env.PATH ?? '', DATABASE_URL: o.databaseUrl, REDIS_URL: o.redisUrl, PORT: String(port), LOG_LEVEL: 'warn', ROLES: o.roles, ADMIN_TOKEN: 'bench',
      // Node's own options for the service's processes (say a heap limit), from BENCH_SERVICE_NODE_OPTIONS
      // (the flags of `main` win over the same flag here; one side of an A/B run has its own, on its command line).
      ...(nodeOptions ? { NODE_OPTIONS: nodeOptions } : {}),
      // The service's own settings, when set: its heap setting (docs/operations.md, Memory), to compare it
      // with V8's (0); the size of each process's query pool (the suite runs a bench beside other tests: a
      // small one); the outcomes' backlog, whole and one operator's share.
      ...Object.fromEntries(PASSED_SETTINGS.flatMap((name) => (process.env[name] ? [[name, process.env[name]]] : []))),
    },
    stdio: 'ignore',
  });
  children.push(child);
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code, signal) => reject(new Error(`the service (${o.roles}, from ${o.cwd}) exited (${signal ?? `code ${code}`}) before it answered`))),
  );
  exited.catch(() => undefined); // once healthy, a later exit is the run's to notice
  await Promise.race([waitHealthy(url), exited]);
  return { child, url };
}

/** Puts the bench's catalog into a service (its admin route). */
export async function putCatalog(url: string, catalog: unknown): Promise<void> {
  const put = await fetch(`${url}/v1/admin/catalog`, { method: 'PUT', headers: { authorization: 'Bearer bench', 'content-type': 'application/json' }, body: JSON.stringify(catalog) });
  if (!put.ok) throw new Error(`catalog: ${put.status}`);
}

/**
 * Launches a session for each of `players` players through a service's operator API, 16 at a time (one
 * after another, the 200 took 1.5 s of every run's start).
 */
export async function launchSessions(pool: HttpPool, players: number, as: { kind: 'operator'; id: string; secret: string }): Promise<Target['sessions']> {
  const sessions: Target['sessions'] = new Array(players);
  let next = 0;
  const launcher = async () => {
    for (let i = next++; i < players; i = next++) {
      const playerRef = `bench-${i}`;
      const r = await post(pool, '/v1/operator/games/launch', { playerRef, gameId: 'fruit-1', currency: 'EUR', mode: 'REAL' }, as);
      if (r.status !== 200) throw new Error(`launch: ${r.status} ${r.text}`);
      sessions[i] = { token: (JSON.parse(r.text) as { sessionToken: string }).sessionToken, playerRef };
    }
  };
  await Promise.all(Array.from({ length: Math.min(16, players) }, launcher));
  return sessions;
}

/** BENCH_NO_BACKGROUND=1: the ledger's worker and projector are not started (see startLedger). */
export const noBackground = (): boolean => process.env.BENCH_NO_BACKGROUND === '1';

/**
 * The ledger with its api apart: the api in one process, the worker and the projector in another
 * (compose.yaml gives every role a container of its own; `oneProcess`: all three in one, the api then
 * sharing its core with the projector), with the bench's catalog put in.
 */
export async function startLedger(
  children: ChildProcess[],
  o: { main: string[]; cwd: string; node?: string; databaseUrl: string; redisUrl: string; oneProcess: boolean; catalog: unknown },
): Promise<{ url: string; api: ChildProcess; background: ChildProcess | undefined }> {
  const service = (roles: string) => startService(children, { main: o.main, cwd: o.cwd, node: o.node, databaseUrl: o.databaseUrl, redisUrl: o.redisUrl, roles });
  // Both started at once, as compose starts its containers (each process's migrations wait on one lock).
  // BENCH_NO_BACKGROUND=1, a diagnostic: no worker and projector at all (no read models, no hash chain, no
  // retries), to see what the api and its two writes carry by themselves.
  const [api, background] = await Promise.all([
    service(o.oneProcess ? 'api,worker,projector' : 'api'),
    o.oneProcess || noBackground() ? undefined : service('worker,projector').then((s) => s.child),
  ]);
  await putCatalog(api.url, o.catalog);
  return { url: api.url, api: api.child, background };
}

/**
 * Nothing lost: prints what a ledger's history holds against what it answered 200 (`label`: whose), once
 * its processes have stopped (a stop writes the outcomes still behind their answers). Lost: fewer
 * transactions recorded than answered, or fewer settled than recorded.
 */
export async function checkHistory(label: string, databaseUrl: string, answered: number): Promise<{ recorded: number; lost: boolean }> {
  const { rows } = await withClient(databaseUrl, (client) =>
    client.query<{ recorded: string; settled: string }>(
      `SELECT count(*) FILTER (WHERE type = 'TransactionRecorded') AS recorded, count(*) FILTER (WHERE type = 'TransactionSettled') AS settled FROM es_events`,
    ),
  );
  const [recorded, settled] = [Number(rows[0]!.recorded), Number(rows[0]!.settled)];
  console.log(`${label} history: ${recorded} transactions recorded, ${settled} settled; ${answered} answered 200 (warm-ups included)`);
  const lost = recorded < answered || settled < recorded;
  if (lost) console.log(`${label} lost transactions: fewer recorded than answered, or fewer settled than recorded`);
  return { recorded, lost };
}

/**
 * Runs fn on a connection of its own to `url`, ended after. Its connection ended under it (the run
 * interrupted and its database dropped) fails the next query, where an unheard 'error' event would end
 * the process before the interruption's cleanup is done.
 */
export async function withClient<T>(url: string, fn: (client: import('pg').Client) => Promise<T>): Promise<T> {
  const pg = (await import('pg')).default;
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}
