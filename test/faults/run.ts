/**
 * The fault run: a seeded random workload against the service split into its four roles as separate
 * OS processes, with faults injected, then a checker over the wallet's ledger and the event history.
 * Used by `npm run test:faults` (test/faults/cli.ts) and, shorter, by the test suite.
 */
import { execSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { Redis } from 'ioredis';
import pg from 'pg';
import { allProjections } from '../../projections/index.ts';
import { verifyProjection } from '../../services/audit/rebuild.ts';
import { fold } from '../../shared/eventstore/command.ts';
import { createPool } from '../../shared/db/pool.ts';
import { outstandingBets, roundDecider } from '../../shared/domain/rounds/decider.ts';
import { PostgresEventStore } from '../../shared/eventstore/postgres.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';
import { OP1, PROV_A, testCatalog } from '../helpers/catalog.ts';
import { startFakeProvider, startFakeWallet, type Chaos, type FakeWallet } from '../helpers/fakes.ts';
import { createTestEnv, spawnService, writeCatalogFile, type SpawnedService } from '../helpers/service.ts';
import { signRequest, toTestResponse } from '../helpers/signing.ts';

export interface FaultRunOptions {
  seed: number;
  durationMs: number;
  /**
   * Also restart the Postgres and Redis servers themselves. Only for a machine where nothing else uses
   * them (npm run test:faults -- --restart-servers), never inside the test suite.
   */
  restartServers?: boolean;
  log?: (line: string) => void;
}

export interface FaultRunReport {
  seed: number;
  requests: number;
  transactionsRecorded: number;
  walletEffects: number;
  faults: Record<string, number>;
  violations: string[];
}

/** mulberry32: a small seeded PRNG, so a failing run replays from its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

const ROLES = ['api', 'worker', 'projector', 'reconciler'] as const;
type RoleName = (typeof ROLES)[number];

export async function runFaults(opts: FaultRunOptions): Promise<FaultRunReport> {
  const log = opts.log ?? (() => undefined);
  const random = prng(opts.seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const env = await createTestEnv('faults');
  const wallet: FakeWallet = await startFakeWallet(OP1.secret);
  const provider = await startFakeProvider(PROV_A.secret);
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const file = await writeCatalogFile(testCatalog({ walletUrl: wallet.url, providerUrl: provider.url, walletTimeoutMs: 400, providerTimeoutMs: 400, rateLimit: { limit: 100_000, windowSeconds: 1 } }));
  const roleEnv = (role: RoleName) => ({
    ...env.env(),
    ROLES: role,
    PORT: role === 'api' ? String(port) : '0',
    CATALOG_FILE: file,
    DISPATCH_BACKOFF_BASE_MS: '100',
    DISPATCH_BACKOFF_MAX_MS: '500',
    RECOVERY_SWEEP_SECONDS: '1',
    STALE_ROUND_AFTER_SECONDS: '3',
    RECONCILE_INTERVAL_SECONDS: '1',
  });
  const procs = new Map<RoleName, SpawnedService>();
  /** Processes that died without being killed by the injector: a crash is a defect. */
  const crashed: string[] = [];
  const watch = (role: RoleName, p: SpawnedService) => {
    void p.exited.then((code) => {
      if (procs.get(role) === p && !stopping) crashed.push(`${role} exited by itself with code ${code}: ${p.output().split('\n').slice(-8).join(' | ').slice(0, 1500)}`);
    });
    procs.set(role, p);
  };
  let stopping = false;
  const faults: Record<string, number> = {};
  const count = (k: string) => (faults[k] = (faults[k] ?? 0) + 1);
  let requests = 0;
  const violations: string[] = [];

  try {
    // The API first (it applies the catalog), then the others.
    watch('api', await spawnService(roleEnv('api')));
    for (const role of ROLES.slice(1)) watch(role, await spawnService(roleEnv(role)));
    log(`seed ${opts.seed}: processes up (api on ${base})`);

    /** A provider or operator that retries until it gets an answer, identical content, fresh nonce. */
    const send = async (path: string, body: unknown, as: typeof OP1 | typeof PROV_A) => {
      const deadline = Date.now() + 60_000;
      for (;;) {
        requests++;
        try {
          const signed = signRequest({ path, body, as });
          const res = await toTestResponse<Record<string, unknown>>(
            await fetch(base + path, { method: 'POST', headers: signed.headers, body: signed.body!, signal: AbortSignal.timeout(10_000) }),
          );
          if (res.status !== 503) return res;
        } catch {
          // the API is down or restarting
        }
        if (Date.now() > deadline) throw new Error(`no answer for ${path} within 60 s`);
        await new Promise((r) => setTimeout(r, 200));
      }
    };

    const players = Array.from({ length: 12 }, (_, i) => ({ ref: `fp-${i}`, token: '' }));
    const launch = async (p: (typeof players)[number]) => {
      const res = await send('/v1/operator/games/launch', { playerRef: p.ref, gameId: 'fruit-1', currency: 'EUR', mode: 'REAL' }, OP1);
      if (res.status === 200) p.token = String(res.json.sessionToken);
    };
    for (const p of players) await launch(p);

    const tx = (p: (typeof players)[number], roundId: string, fields: Record<string, unknown>): Record<string, unknown> =>
      ({ transactionId: `f-${randomUUID()}`, sessionToken: p.token, roundId, playerRef: p.ref, currency: 'EUR', gameId: 'fruit-1', ...fields });
    const submit = async (body: Record<string, unknown>) => {
      const r = random();
      if (r < 0.05) return (await Promise.all([1, 2, 3].map(() => send('/v1/wallet/transaction', body, PROV_A))))[0]!;
      const first = await send('/v1/wallet/transaction', body, PROV_A);
      if (r < 0.15) await send('/v1/wallet/transaction', body, PROV_A); // a resubmission
      return first;
    };

    wallet.setChaos((): Chaos | undefined => {
      const r = random();
      if (r < 0.06) return { fail: 500 };
      if (r < 0.08) return { hang: true };
      if (r < 0.12) return { applyThenDelayMs: 600 };
      if (r < 0.2) return { delayMs: 50 + Math.floor(random() * 200) };
      return undefined;
    });

    const until = Date.now() + opts.durationMs;
    const workload = async () => {
      while (Date.now() < until) {
        const p = pick(players);
        const roll = random();
        if (roll < 0.03) {
          await send('/v1/operator/players/kick', { playerRef: p.ref }, OP1);
          await launch(p);
          continue;
        }
        if (roll < 0.06) {
          const key = random() < 0.3 ? 'fault-shared-key' : randomUUID();
          await send('/v1/operator/free-spins/grants', { playerRef: p.ref, idempotencyKey: key, gameId: 'fruit-1', spins: 3, currency: 'EUR' }, OP1);
          continue;
        }
        const roundId = `fr-${randomUUID()}`;
        const stake = 1 + Math.floor(random() * 500);
        const bet = tx(p, roundId, { type: 'BET', roundComplete: false, amount: stake });
        await submit(bet);
        const next = random();
        if (next < 0.5) await submit(tx(p, roundId, { type: 'WIN', roundComplete: true, amount: random() < 0.3 ? 0 : Math.floor(random() * 1000) }));
        else if (next < 0.7) await submit(tx(p, roundId, { type: 'ROLLBACK', originalTransactionId: bet.transactionId, amount: stake }));
        else if (next < 0.85) {
          await submit(tx(p, roundId, { type: 'BET', roundComplete: false, amount: 1 + Math.floor(random() * 100) }));
          await submit(tx(p, roundId, { type: 'WIN', roundComplete: true, amount: Math.floor(random() * 300) }));
        } // else: abandoned, for the reconciler
      }
    };

    const withAdminPg = async (fn: (c: pg.Client) => Promise<unknown>) => {
      const c = new pg.Client({ connectionString: env.db.url });
      c.on('error', () => undefined);
      await c.connect();
      try {
        await fn(c);
      } finally {
        await c.end().catch(() => undefined);
      }
    };
    const waitFor = async (check: () => Promise<boolean>) => {
      for (let i = 0; i < 100 && !(await check().catch(() => false)); i++) await new Promise((r) => setTimeout(r, 200));
    };
    // With real restarts asked for, each server is restarted at least once (the first two faults).
    const forced = opts.restartServers ? [0.99, 0.9] : [];
    const injector = async () => {
      while (Date.now() < until) {
        await new Promise((r) => setTimeout(r, 1500 + random() * 2500));
        if (Date.now() >= until) break;
        const kind = forced.shift() ?? random();
        if (kind < 0.55) {
          const role = pick(ROLES);
          count(`SIGKILL ${role}`);
          log(`fault: SIGKILL ${role}`);
          const victim = procs.get(role)!;
          procs.delete(role);
          await victim.stop('SIGKILL');
          await new Promise((r) => setTimeout(r, 200 + random() * 800));
          watch(role, await spawnService(roleEnv(role)));
        } else if (kind < 0.7) {
          count('Redis flushed');
          log('fault: Redis flushed');
          const admin = new Redis(env.redis.url, { maxRetriesPerRequest: 1 });
          await admin.flushdb().finally(() => admin.disconnect());
        } else if (kind < 0.85 || !opts.restartServers) {
          count('Postgres connections killed');
          log('fault: every Postgres connection of the database killed');
          await withAdminPg((c) => c.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()'));
        } else if (kind < 0.93) {
          count('Postgres restarted');
          log('fault: Postgres server restarted');
          execSync('pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main restart -m fast', { stdio: 'ignore' });
          await waitFor(async () => (await withAdminPg((c) => c.query('SELECT 1')), true));
        } else {
          count('Redis restarted');
          log('fault: Redis server restarted (its data lost)');
          execSync('redis-cli -h 127.0.0.1 -p 6379 shutdown nosave || true', { stdio: 'ignore' });
          execSync('redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no', { stdio: 'ignore' });
          await waitFor(async () => {
            const r = new Redis(env.redis.url, { maxRetriesPerRequest: 1, lazyConnect: true });
            try {
              await r.connect();
              return (await r.ping()) === 'PONG';
            } finally {
              r.disconnect();
            }
          });
        }
      }
    };
    await Promise.all([...Array.from({ length: 6 }, workload), injector()]);
    wallet.setChaos(undefined);
    log(`workload done: ${requests} requests; settling`);

    // Settle: every credit applied, every stale round closed, read models caught up.
    const pool = createPool(env.db.url, 4);
    const store = new PostgresEventStore(pool, env.db.url);
    try {
      const settleDeadline = Date.now() + 120_000;
      for (;;) {
        const { rows } = await pool.query<{ unsettled: number; stale: number; behind: number }>(
          `SELECT (SELECT count(*)::int FROM rm_transactions WHERE type <> 'BET' AND status IN ('recorded', 'failed', 'timed_out')) AS unsettled,
                  (SELECT count(*)::int FROM rm_rounds WHERE outstanding_bets > 0 AND (status = 'open' OR force_closed)) AS stale,
                  (SELECT count(*)::int FROM projection_checkpoints c WHERE c.position <> (SELECT max(position) FROM projection_checkpoints)) AS behind`,
        );
        const r = rows[0]!;
        if (r.unsettled === 0 && r.stale === 0) break;
        if (Date.now() > settleDeadline) {
          violations.push(`did not settle within 120 s: ${r.unsettled} unsettled credits, ${r.stale} rounds with outstanding bets`);
          const diag = await pool.query(`SELECT name, position, events_applied, updated_at FROM projection_checkpoints`);
          log(`checkpoints: ${JSON.stringify(diag.rows)}`);
          const head = await store.headPosition();
          log(`head: ${head}`);
          const act = await pool.query(`SELECT pid, state, xact_start, backend_xid, left(query, 80) AS q FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`);
          log(`activity: ${JSON.stringify(act.rows)}`);
          for (const [role, p] of procs) log(`${role} (exit ${p.child.exitCode}): ${p.output().split('\n').filter((l) => /"level":(40|50|60)/.test(l)).slice(-5).join(' | ').slice(0, 1500)}`);
          break;
        }
        await new Promise((res) => setTimeout(res, 500));
      }

      // Every round's history, read stream by stream (a stream read sees every committed event at once;
      // the global log may briefly hold back the newest while another transaction on the server is open).
      const byStream = new Map<string, RecordedEvent[]>();
      const { rows: streams } = await pool.query<{ stream_id: string }>(`SELECT stream_id FROM es_streams WHERE stream_id LIKE 'round|%'`);
      for (const { stream_id } of streams) byStream.set(stream_id, await store.readStream(stream_id));
      const recorded = new Map<string, { type: string; status: string; reply: string | undefined }>();
      for (const [stream, es] of byStream) {
        if (!stream.startsWith('round|')) continue;
        const state = fold(roundDecider, es);
        for (const t of state.txs.values()) recorded.set(t.request.transactionId, { type: t.request.type, status: t.status, reply: t.reply?.body });
        const left = outstandingBets(state);
        if (left.length > 0 && (!state.completed || state.forceClosed)) {
          violations.push(`round ${stream}: bets still outstanding after the reconciler: ${left.map((b) => b.request.transactionId).join(', ')}`);
        }
      }

      // 1. At most one effect per transaction. 2. No effect the ledger does not know of.
      for (const [id, n] of wallet.effects) {
        if (n > 1) violations.push(`transaction ${id} changed a balance ${n} times`);
        if (!recorded.has(id)) violations.push(`wallet applied ${id}, which the ledger never recorded`);
      }
      // Each player's balance is the sum of the effects on it.
      const sums = new Map<string, number>();
      for (const m of wallet.movements) sums.set(m.playerRef, (sums.get(m.playerRef) ?? 0) + m.delta);
      for (const [player, sum] of sums) {
        if (wallet.balances.get(player) !== wallet.initialBalance + sum) violations.push(`player ${player}: balance ${wallet.balances.get(player)} is not ${wallet.initialBalance} + effects ${sum}`);
      }
      // 3. Every recorded credit applied; every settled reply is the wallet's.
      for (const [id, t] of recorded) {
        if (t.type !== 'BET' && wallet.effects.get(id) !== 1) violations.push(`${t.type} ${id} (${t.status}) was never applied by the wallet`);
        if (t.status === 'applied' || t.status === 'declined') {
          const w = wallet.processed.get(id);
          if (!w || t.reply === undefined || JSON.stringify(JSON.parse(t.reply)) !== JSON.stringify(w)) violations.push(`${id}: ledger reply ${t.reply} differs from the wallet's ${JSON.stringify(w)}`);
        }
      }
      violations.push(...crashed);
      // 4. Every read model equals a fresh rebuild.
      let differing = false;
      for (const p of allProjections()) {
        const v = await verifyProjection(pool, store, p);
        differing ||= v.differences.length > 0;
        for (const d of v.differences.slice(0, 5)) {
          violations.push(`read model ${d.table} ${JSON.stringify(d.key)} differs from a rebuild (${v.differences.length} rows in all, at ${v.position}): live ${JSON.stringify(d.live)}, rebuilt ${JSON.stringify(d.rebuilt)}`);
        }
      }
      if (differing) violations.push(...(await describeLogReads(pool, store)));
      return { seed: opts.seed, requests, transactionsRecorded: recorded.size, walletEffects: wallet.effects.size, faults, violations };
    } finally {
      await store.close();
      await pool.end();
    }
  } finally {
    stopping = true;
    await Promise.all([...procs.values()].map((p) => p.stop('SIGTERM')));
    await Promise.all([wallet.close(), provider.close()]);
    await env.cleanup();
  }
}

/**
 * What a rebuild that differs needs explained: whether paging the global log from the start returns
 * every stored event (and which it passes over), and whether a second verify agrees with the first.
 */
async function describeLogReads(pool: pg.Pool, store: PostgresEventStore): Promise<string[]> {
  const out: string[] = [];
  const { rows: all } = await pool.query<{ position: string; type: string; created_at: Date }>(
    `SELECT transaction_id::text || '.' || global_position AS position, type, created_at FROM es_events ORDER BY transaction_id, global_position`,
  );
  const seen = new Set<string>();
  let from: string = 'start';
  for (;;) {
    const page = await store.readAll({ from, maxCount: 500 });
    for (const e of page) seen.add(e.position);
    if (page.length < 500) break;
    from = page[page.length - 1]!.position;
  }
  const missing = all.filter((r) => !seen.has(r.position));
  const { rows: snap } = await pool.query<{ snapshot: string }>('SELECT pg_current_snapshot()::text AS snapshot');
  out.push(`diagnosis: ${all.length} events stored, paging readAll from the start returned ${seen.size}, ${missing.length} of the stored ones not among them; snapshot ${snap[0]!.snapshot}; rows dropped as out of order: ${store.outOfOrderRowsDropped}`);
  out.push(`diagnosis: first stored ${JSON.stringify(all.slice(0, 3))}; first passed over ${JSON.stringify(missing.slice(0, 5))}`);
  // A transaction that took its id long before it wrote its events sorts them before earlier-written ones.
  const inversions = all.flatMap((r, i) => {
    const next = all[i + 1];
    return next && r.created_at.getTime() - next.created_at.getTime() > 500 ? [{ at: r.position, type: r.type, written: r.created_at, before: next.position, nextWritten: next.created_at }] : [];
  });
  out.push(`diagnosis: ${inversions.length} events written over 0.5 s after the next one in log order: ${JSON.stringify(inversions.slice(0, 5))}`);
  for (const p of allProjections()) {
    const again = await verifyProjection(pool, store, p);
    out.push(`diagnosis: second verify of ${p.name} at ${again.position}: ${again.differences.length} differing rows`);
  }
  return out;
}
