/**
 * The fault run: a seeded simulator in the spirit of TigerBeetle's VOPR and Jepsen. Two providers and two
 * operators (each with its own wallet) drive the service, split into its four roles as separate OS
 * processes, with ids that collide across providers, operators and adjustments, rollbacks racing their
 * bets and rollbacks with wrong amounts, duplicate deliveries, wallets that fail, hang, apply late or
 * answer late, process kills (the api and the worker in every run), Redis flushes and Postgres connection
 * purges. Every choice comes from one seed, so a failure replays with `--seed`. Then a hung-neighbour
 * phase measures whether one operator's hung wallet delays the other's retries and first attempts, and
 * the checker compares each wallet's own ledger with the service's history, asks every transaction for
 * its answer again, and checks every read model against a rebuild.
 * Used by `npm run test:faults` (test/faults/cli.ts) and, shorter, by the test suite.
 */
import { execSync } from 'node:child_process';
import net from 'node:net';
import { Redis } from 'ioredis';
import pg from 'pg';
import { allProjections } from '../../services/read-models.ts';
import { replayPoolSize, verifyProjection } from '../../services/audit/rebuild.ts';
import { verifyChain } from '../../services/chain/verify.ts';
import { prng } from '../helpers/prng.ts';
import { fold } from '../../shared/decider.ts';
import { createPool } from '../../shared/db/pool.ts';
import { roundDecider, type TxState } from '../../services/rounds/decider.ts';
import { unansweredBets } from '../../services/rounds/queries.ts';
import type { RoundEvent, TransactionRequest } from '../../services/rounds/events.ts';
import { createEventStore } from '../../shared/eventstore/index.ts';
import { START, type EventStore } from '../../shared/eventstore/port.ts';
import { PostgresEventStore } from '../../shared/eventstore/postgres.ts';
import { startEsdbTestServer } from '../eventstore/esdb-server.ts';
import { OP1, OP2, PROV_A, PROV_B, testCatalog } from '../helpers/catalog.ts';
import { startFakeProvider } from '../helpers/fakes.ts';
import { ADMIN_TOKEN, createTestEnv, ESDB_MAX_APPEND_SIZE, spawnService, writeCatalogFile, type SpawnedService } from '../helpers/service.ts';
import { signRequest, toTestResponse, type TestResponse } from '../helpers/signing.ts';
import { startSimWallet, walletKey, type SimWallet, type WalletChaos } from './sim-wallet.ts';

export interface FaultRunOptions {
  seed: number;
  durationMs: number;
  /**
   * Also restart the Postgres and Redis servers themselves. Only for a machine where nothing else uses
   * them (npm run test:faults -- --restart-servers), never inside the test suite.
   */
  restartServers?: boolean;
  /** The event store the service runs on: Postgres (default), or EventStoreDB (the protocol-level test server). */
  store?: 'postgres' | 'esdb';
  /**
   * The hung-neighbour phase after the workload (operator one's retries beside operator two's hung wallet,
   * contract 8 rule 8), on unless false. The retry queues it measures are the same whatever the event store.
   */
  tenants?: boolean;
  log?: (line: string) => void;
}

export interface TenantFigures {
  /** Operator one's failed WIN: ms from the failed attempt to its retry, with its neighbour healthy. */
  retryAloneMs: number[];
  /** The same with operator two's wallet hung and its credits awaiting retry. */
  retryBesideHungMs: number[];
  /** Operator one's BETs answered while operator two's wallet hung: ms per request. */
  firstAttemptBesideHungMs: number[];
  /** Operator two's credits awaiting retry during that phase. */
  neighbourBacklog: number;
}

export interface FaultRunReport {
  seed: number;
  requests: number;
  transactionsRecorded: number;
  walletEntries: number;
  faults: Record<string, number>;
  /** What the workload did, by kind (collisions tried, races, wrong-amount rollbacks, ...). */
  actions: Record<string, number>;
  tenant: TenantFigures;
  /**
   * BETs whose outcome the history holds only after a later transaction of their round: replies learned
   * again after their process died (the provider had gone on), and the failed asks among the way.
   */
  lostReplies: { learned: number; failedAsks: number };
  violations: string[];
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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const ROLES = ['api', 'worker', 'projector', 'reconciler'] as const;
type RoleName = (typeof ROLES)[number];

type Party = typeof OP1 | typeof OP2 | typeof PROV_A | typeof PROV_B;
/** Where money is played: a provider's game at an operator, in that game's currency. */
interface Table {
  provider: typeof PROV_A | typeof PROV_B;
  operator: typeof OP1 | typeof OP2;
  gameId: string;
  currency: string;
}
const TABLES: readonly Table[] = [
  { provider: PROV_A, operator: OP1, gameId: 'fruit-1', currency: 'EUR' },
  { provider: PROV_A, operator: OP2, gameId: 'fruit-1', currency: 'EUR' },
  { provider: PROV_B, operator: OP1, gameId: 'dice-9', currency: 'GBP' },
];
const PLAYERS = Array.from({ length: 6 }, (_, i) => `sp-${i}`);
const WALLET_TIMEOUT_MS = 400;
const BACKOFF_BASE_MS = 100;
const INITIAL_BALANCE = 1_000_000;

/** A transaction a provider sent and the service recorded: the material for collisions. */
interface Sent {
  table: Table;
  playerRef: string;
  transactionId: string;
}

export async function runFaults(opts: FaultRunOptions): Promise<FaultRunReport> {
  const log = opts.log ?? (() => undefined);
  const random = prng(opts.seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  let idSeq = 0;
  const newId = (tag: string) => `${tag}-${opts.seed.toString(36)}-${(idSeq++).toString(36)}`;
  const env = await createTestEnv('faults');
  const esdb = opts.store === 'esdb' ? await startEsdbTestServer({ maxAppendSize: ESDB_MAX_APPEND_SIZE }) : undefined;
  const eventStoreSetting = esdb?.connectionString ?? 'postgres';
  const wallets = new Map<string, SimWallet>([
    [OP1.id, await startSimWallet(OP1.id, OP1.secret, INITIAL_BALANCE)],
    [OP2.id, await startSimWallet(OP2.id, OP2.secret, INITIAL_BALANCE)],
  ]);
  const w1 = wallets.get(OP1.id)!;
  const w2 = wallets.get(OP2.id)!;
  const providers = [await startFakeProvider(PROV_A.secret), await startFakeProvider(PROV_B.secret)];
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const file = await writeCatalogFile(
    testCatalog({
      walletUrl: w1.url,
      wallet2Url: w2.url,
      providerUrl: providers[0]!.url,
      provider2Url: providers[1]!.url,
      walletTimeoutMs: WALLET_TIMEOUT_MS,
      providerTimeoutMs: 400,
      rateLimit: { limit: 1_000_000, windowSeconds: 1 },
    }),
  );
  const roleEnv = (role: RoleName) => ({
    ...env.env(),
    EVENT_STORE: eventStoreSetting,
    ROLES: role,
    PORT: role === 'api' ? String(port) : '0',
    CATALOG_FILE: file,
    DISPATCH_BACKOFF_BASE_MS: String(BACKOFF_BASE_MS),
    DISPATCH_BACKOFF_MAX_MS: '500',
    RECOVERY_SWEEP_SECONDS: '1',
    STALE_ROUND_AFTER_SECONDS: '3',
    RECONCILE_INTERVAL_SECONDS: '1',
    CHAIN_CHECKPOINT_SECONDS: '1',
  });
  const procs = new Map<RoleName, SpawnedService>();
  /** Every process started, killed ones too: their logs explain a 500. */
  const started: SpawnedService[] = [];
  const requestIds: string[] = [];
  /** Processes that died without being killed by the injector: a crash is a defect. */
  const crashed: string[] = [];
  const watch = (role: RoleName, p: SpawnedService) => {
    void p.exited.then((code) => {
      if (procs.get(role) === p && !stopping) crashed.push(`${role} exited by itself with code ${code}: ${p.output().split('\n').slice(-8).join(' | ').slice(0, 1500)}`);
    });
    procs.set(role, p);
    started.push(p);
  };
  let stopping = false;
  const faults: Record<string, number> = {};
  const actions: Record<string, number> = {};
  const count = (into: Record<string, number>, k: string) => (into[k] = (into[k] ?? 0) + 1);
  let requests = 0;
  const violations: string[] = [];
  const tenant: TenantFigures = { retryAloneMs: [], retryBesideHungMs: [], firstAttemptBesideHungMs: [], neighbourBacklog: 0 };

  try {
    // The API first (it applies the catalog), then the others.
    watch('api', await spawnService(roleEnv('api')));
    for (const role of ROLES.slice(1)) watch(role, await spawnService(roleEnv(role)));
    log(`seed ${opts.seed}: processes up (api on ${base})`);

    /** A partner that retries until it gets an answer: identical content, fresh nonce. */
    const send = async (path: string, body: unknown, as: Party | 'admin'): Promise<TestResponse<Record<string, unknown>>> => {
      const deadline = Date.now() + 60_000;
      for (;;) {
        requests++;
        try {
          const init =
            as === 'admin'
              ? { headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) }
              : (() => {
                  const signed = signRequest({ path, body, as });
                  return { headers: signed.headers, body: signed.body! };
                })();
          const res = await toTestResponse<Record<string, unknown>>(await fetch(base + path, { method: 'POST', ...init, signal: AbortSignal.timeout(10_000) }));
          if (res.status !== 503) return res;
        } catch {
          // the API is down or restarting
        }
        if (Date.now() > deadline) throw new Error(`no answer for ${path} within 60 s`);
        await sleep(200);
      }
    };
    const unexpected = (what: string, res: TestResponse) => {
      const id = res.headers.get('x-request-id');
      if (res.status >= 500 && id) requestIds.push(id);
      violations.push(`${what}: answered ${res.status} ${res.text.slice(0, 300)}${id ? ` (request ${id})` : ''}`);
    };

    // Sessions, per operator, player and game; a kick ends every session of the player at that operator.
    const sessions = new Map<string, string>();
    const sessionKey = (t: Table, playerRef: string) => `${t.operator.id}|${playerRef}|${t.gameId}`;
    const launch = async (t: Table, playerRef: string) => {
      const res = await send('/v1/operator/games/launch', { playerRef, gameId: t.gameId, currency: t.currency, mode: 'REAL' }, t.operator);
      if (res.status === 200) sessions.set(sessionKey(t, playerRef), String(res.json.sessionToken));
      else unexpected(`launch of ${playerRef} at ${t.operator.id}`, res);
    };
    for (const t of TABLES) for (const p of PLAYERS) await launch(t, p);

    const sent: Sent[] = [];
    const tx = (t: Table, playerRef: string, roundId: string, fields: Partial<TransactionRequest> & Pick<TransactionRequest, 'type' | 'amount'>): TransactionRequest => ({
      transactionId: newId('t'),
      sessionToken: sessions.get(sessionKey(t, playerRef)) ?? 'none',
      roundId,
      roundComplete: false,
      playerRef,
      currency: t.currency,
      gameId: t.gameId,
      ...fields,
    });
    /** BETs whose provider, told 502 or 504, closed the round instead of rolling them back: when it was told. */
    const closedOnFailure = new Map<string, number>();
    /** The reply each BET's provider acted on (answered 200), by operator, player and id: the history must hold it. */
    const actedOn = new Map<string, string>();
    /**
     * Submits as the table's provider: sometimes three identical deliveries at once, sometimes a
     * resubmission. A BET answered with the wallet's reply whose other delivery was answered 502 or 504
     * (an attempt that failed before another delivery's succeeded; or one that found the process that
     * answered dead before recording the reply, and whose own call failed; or one that waited out an
     * attempt in progress) is resubmitted, ten times at most, until it is answered with the reply, as
     * docs/providers.md asks of a 502 or 504 on a BET; still failing, it is rolled back.
     */
    const submit = async (t: Table, body: TransactionRequest): Promise<TestResponse<Record<string, unknown>>> => {
      const r = random();
      const deliveries = r < 0.05 ? 3 : 1;
      if (deliveries > 1) count(actions, 'duplicate deliveries at once');
      const answers = await Promise.all(Array.from({ length: deliveries }, () => send('/v1/wallet/transaction', body, t.provider)));
      let first = answers[0]!;
      if (deliveries === 1 && r < 0.15) {
        count(actions, 'resubmissions');
        answers.push(await send('/v1/wallet/transaction', body, t.provider));
      }
      if (body.type === 'BET' && first.status === 200 && answers.some((a) => a.status === 502 || a.status === 504)) {
        count(actions, 'BETs answered with a reply and, delivered again, a failure or "in progress": resubmitted');
        for (let i = 0; i < 10; i++) {
          first = await send('/v1/wallet/transaction', body, t.provider);
          if (first.status !== 502 && first.status !== 504) break;
          await sleep(100);
        }
      }
      if (body.type === 'BET' && first.status === 200) actedOn.set(ledgerKey(t.operator.id, body.playerRef, body.transactionId), first.text);
      if (first.status >= 500 && first.status !== 502 && first.status !== 504) unexpected(`${body.type} ${body.transactionId}`, first);
      if (first.status < 300 || first.status === 502 || first.status === 504) sent.push({ table: t, playerRef: body.playerRef, transactionId: body.transactionId });
      return first;
    };
    const applied = (res: TestResponse<Record<string, unknown>>) => res.status === 200 && res.json.status === 'OK';
    /** The provider's duty for a BET without a usable answer: roll it back until the rollback is recorded. */
    const rollBack = async (t: Table, bet: TransactionRequest, amount = bet.amount) => {
      for (let i = 0; i < 50; i++) {
        const res = await submit(t, tx(t, bet.playerRef, bet.roundId, { type: 'ROLLBACK', originalTransactionId: bet.transactionId, amount }));
        if (res.status === 200 || res.status === 502 || res.status === 504) return;
        if (res.status === 409 && res.text.includes('bet already rolled back')) return;
        if (res.status === 401) return; // kicked meanwhile: the reconciler refunds it
        if (res.status === 400 && res.text.includes('is not a BET of this round')) {
          await sleep(50); // the BET it races is not recorded yet
          continue;
        }
        return unexpected(`ROLLBACK of ${bet.transactionId}`, res);
      }
    };
    /** Counts `what` only when it was refused as it must be; anything else is a violation. */
    const expectRefused = (what: string, res: TestResponse, status: number) => {
      if (res.status === status) count(actions, what);
      else unexpected(`${what} (expected ${status})`, res);
    };

    const chaosOf = (): WalletChaos | undefined => {
      const r = random();
      if (r < 0.05) return { fail: 500 };
      if (r < 0.07) return { hang: true };
      if (r < 0.1) return { applyThenDelayMs: WALLET_TIMEOUT_MS + 200 }; // applied, answered too late
      if (r < 0.12) return { delayMs: WALLET_TIMEOUT_MS + 100 + Math.floor(random() * 800) }; // applied after the timeout
      if (r < 0.2) return { delayMs: 20 + Math.floor(random() * 200) };
      return undefined;
    };
    for (const w of wallets.values()) w.setChaos(chaosOf);

    const playRound = async (t: Table, playerRef: string) => {
      const roundId = newId('r');
      const stake = 1 + Math.floor(random() * 500);
      const bet = tx(t, playerRef, roundId, { type: 'BET', amount: stake });
      const kind = random();
      if (kind < 0.1) {
        // A rollback racing its bet: both sent at once.
        count(actions, 'rollbacks racing their bets');
        await Promise.all([submit(t, bet), rollBack(t, bet)]);
        return;
      }
      const answer = await submit(t, bet);
      if (answer.status >= 400 && answer.status < 500) return; // a kick or a racing rollback: nothing recorded to settle
      if (!applied(answer)) {
        if (answer.status === 200) return; // declined
        // Told it failed (not "still in progress"), sometimes the provider closes the round instead.
        if (!answer.text.includes('still in progress') && random() < 0.2) {
          // A provider that closes the round on a failed BET instead of rolling it back (contract section 5
          // allows the round to complete; the service must then never send that BET on its own).
          count(actions, 'rounds closed on a failed BET, not rolled back');
          closedOnFailure.set(ledgerKey(t.operator.id, playerRef, bet.transactionId), Date.now());
          await submit(t, tx(t, playerRef, roundId, { type: 'WIN', roundComplete: true, amount: 0 }));
          return;
        }
        await rollBack(t, bet); // unknown outcome: the provider rolls it back
        return;
      }
      if (kind < 0.18) {
        count(actions, 'rollbacks with a wrong amount');
        const wrong = await send('/v1/wallet/transaction', tx(t, playerRef, roundId, { type: 'ROLLBACK', originalTransactionId: bet.transactionId, amount: stake + 1 }), t.provider);
        if (wrong.status !== 401) expectRefused('rollbacks with a wrong amount refused', wrong, 400);
        await rollBack(t, bet);
      } else if (kind < 0.55) {
        await submit(t, tx(t, playerRef, roundId, { type: 'WIN', roundComplete: true, amount: random() < 0.3 ? 0 : Math.floor(random() * 1000) }));
      } else if (kind < 0.7) {
        await rollBack(t, bet);
      } else if (kind < 0.85) {
        const second = tx(t, playerRef, roundId, { type: 'BET', amount: 1 + Math.floor(random() * 100) });
        const a2 = await submit(t, second);
        if (applied(a2)) await submit(t, tx(t, playerRef, roundId, { type: 'WIN', roundComplete: true, amount: Math.floor(random() * 300) }));
        else if (a2.status !== 200 && (a2.status >= 500 || a2.status < 400)) await rollBack(t, second);
      } // else: abandoned, for the reconciler
    };

    /** Reuses a transactionId someone already used for this operator's player, or a reserved one. */
    const collide = async () => {
      const victim = sent.length > 0 ? pick(sent) : undefined;
      const r = random();
      if (!victim || r < 0.15) {
        const t = pick(TABLES);
        const p = pick(PLAYERS);
        const res = await send('/v1/wallet/transaction', tx(t, p, newId('r'), { type: 'BET', amount: 10, transactionId: `stale-rollback:${newId('x')}` }), t.provider);
        if (res.status !== 401) expectRefused('reserved stale-rollback: ids refused', res, 400);
        return;
      }
      const { table, playerRef, transactionId } = victim;
      if (r < 0.45) {
        const res = await send('/v1/admin/adjustments', { operatorId: table.operator.id, playerRef, amount: 7, currency: table.currency, direction: 'CREDIT', transactionId, reason: 'simulator collision' }, 'admin');
        return expectRefused('adjustments reusing a provider id refused', res, 409);
      }
      // Another provider at the same operator, or the same provider at another operator: the same id.
      const other = TABLES.find((t) => (r < 0.75 ? t.operator === table.operator && t.provider !== table.provider : t.provider === table.provider && t.operator !== table.operator));
      if (!other) return;
      const res = await send('/v1/wallet/transaction', tx(other, playerRef, newId('r'), { type: 'BET', amount: 10, transactionId }), other.provider);
      if (res.status === 401) return; // that session was kicked meanwhile
      expectRefused(other.provider !== table.provider ? 'ids reused by another provider refused' : 'ids reused by one provider at another operator refused', res, 409);
    };

    const adjust = async () => {
      const t = pick(TABLES);
      const res = await send(
        '/v1/admin/adjustments',
        { operatorId: t.operator.id, playerRef: pick(PLAYERS), amount: 1 + Math.floor(random() * 50), currency: t.currency, direction: random() < 0.5 ? 'CREDIT' : 'DEBIT', transactionId: newId('adj'), reason: 'simulator' },
        'admin',
      );
      count(actions, 'adjustments');
      if (res.status !== 200 && res.status !== 202) unexpected('adjustment', res);
    };

    const until = Date.now() + opts.durationMs;
    const workload = async () => {
      while (Date.now() < until) {
        const t = pick(TABLES);
        const p = pick(PLAYERS);
        const roll = random();
        if (roll < 0.02) {
          count(actions, 'kicks');
          await send('/v1/operator/players/kick', { playerRef: p }, t.operator);
          for (const other of TABLES) if (other.operator === t.operator) await launch(other, p);
        } else if (roll < 0.04) {
          count(actions, 'grants');
          const key = random() < 0.3 ? 'fault-shared-key' : newId('g');
          await send('/v1/operator/free-spins/grants', { playerRef: p, idempotencyKey: key, gameId: 'fruit-1', spins: 3, currency: 'EUR' }, pick([OP1, OP2]));
        } else if (roll < 0.07) {
          await adjust();
        } else if (roll < 0.12) {
          await collide();
        } else {
          await playRound(t, p);
        }
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
      for (let i = 0; i < 100 && !(await check().catch(() => false)); i++) await sleep(200);
    };
    // Every run kills the api and the worker at least once (its first two faults); real server restarts
    // come next when asked for.
    const forced: Array<number | RoleName> = ['api', 'worker', ...(opts.restartServers ? [0.99, 0.9] : [])];
    const kill = async (role: RoleName) => {
      count(faults, `SIGKILL ${role}`);
      log(`fault: SIGKILL ${role}`);
      const victim = procs.get(role)!;
      procs.delete(role);
      await victim.stop('SIGKILL');
      await sleep(200 + random() * 800);
      watch(role, await spawnService(roleEnv(role)));
    };
    /**
     * Half the api's kills come 0, 1 or 2 ms after a wallet replied to a BET: the api is then answering the
     * provider, or has answered and its outcome's append (behind the answer) is still in flight, so the
     * reply must be learned again. Half of those wait for a reply to a BET's call that is not the first the
     * wallet got (a resubmission's after a failed call, which must be recorded before its provider is
     * answered; or a worker's ask, or a duplicate delivery's), if one comes within the wait.
     */
    const killApi = async () => {
      if (random() < 0.5) {
        const delayMs = Math.floor(random() * 3);
        const again = random() < 0.5;
        const replied = new Promise<'first' | 'again'>((resolve) => {
          for (const w of wallets.values()) {
            w.setAfterReply((tx) => {
              if (tx.type !== 'BET') return;
              const repeated = (w.arrivals.get(tx.transactionId)?.length ?? 0) > 1;
              if (repeated || !again) resolve(repeated ? 'again' : 'first');
            });
          }
        });
        const timely = await Promise.race([replied, sleep(again ? 6000 : 3000).then(() => undefined)]);
        for (const w of wallets.values()) w.setAfterReply(undefined);
        if (timely) {
          await (delayMs === 0 ? new Promise((r) => setImmediate(r)) : sleep(delayMs));
          count(faults, timely === 'again' ? "SIGKILL api right after a BET's wallet reply to a repeated call" : "SIGKILL api right after a BET's wallet reply");
        }
      }
      await kill('api');
    };
    const injector = async () => {
      while (Date.now() < until) {
        await sleep(1500 + random() * 2500);
        if (Date.now() >= until) break;
        const next = forced.shift() ?? random();
        if (typeof next === 'string' || next < 0.55) {
          const role = typeof next === 'string' ? next : pick(ROLES);
          await (role === 'api' ? killApi() : kill(role));
        } else if (next < 0.7) {
          count(faults, 'Redis flushed');
          log('fault: Redis flushed');
          const admin = new Redis(env.redis.url, { maxRetriesPerRequest: 1 });
          await admin.flushdb().finally(() => admin.disconnect());
        } else if (next < 0.85 || !opts.restartServers) {
          count(faults, 'Postgres connections killed');
          log('fault: every Postgres connection of the database killed');
          await withAdminPg((c) => c.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()'));
        } else if (next < 0.93) {
          count(faults, 'Postgres restarted');
          log('fault: Postgres server restarted');
          execSync('pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main restart -m fast', { stdio: 'ignore' });
          await waitFor(async () => (await withAdminPg((c) => c.query('SELECT 1')), true));
        } else {
          count(faults, 'Redis restarted');
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
      // Short runs still kill both (the loop may end before its first faults).
      for (const role of forced.filter((f): f is RoleName => typeof f === 'string')) await (role === 'api' ? killApi() : kill(role));
    };
    await Promise.all([...Array.from({ length: 6 }, workload), injector()]);
    for (const w of wallets.values()) w.setChaos(undefined);
    if (opts.tenants === false) {
      log(`workload done: ${requests} requests`);
    } else {
      log(`workload done: ${requests} requests; hung-neighbour phase`);
      await measureTenants();
    }
    log('settling');

    /**
     * Operator one's failed WIN, retried on its own schedule: measured with its neighbour healthy, then
     * with operator two's wallet hung and hundreds of its credits awaiting retry (contract 8, rule 8).
     */
    async function measureTenants(): Promise<void> {
      const t1 = TABLES[0]!;
      const t2 = TABLES[1]!;
      await waitFor(async () => (await fetch(`${base}/readyz`)).status === 200);
      /** Operator one's BET (ms to its answer) and failed WIN (ms from the failure to its retry). */
      const retryOfOne = async (): Promise<{ betMs: number; retryMs: number }> => {
        const p = pick(PLAYERS);
        await launch(t1, p);
        const roundId = newId('r');
        const started = Date.now();
        const bet = await send('/v1/wallet/transaction', tx(t1, p, roundId, { type: 'BET', amount: 1 }), t1.provider);
        const betMs = Date.now() - started;
        if (!applied(bet)) {
          unexpected('hung-neighbour phase: operator one BET', bet);
          return { betMs, retryMs: NaN };
        }
        const win = tx(t1, p, roundId, { type: 'WIN', roundComplete: true, amount: 1 });
        w1.failNext(win.transactionId, 1);
        await send('/v1/wallet/transaction', win, t1.provider);
        const deadline = Date.now() + 30_000;
        while ((w1.arrivals.get(win.transactionId)?.length ?? 0) < 2 && Date.now() < deadline) await sleep(10);
        const at = w1.arrivals.get(win.transactionId) ?? [];
        return { betMs, retryMs: at.length >= 2 ? at[1]! - at[0]! : Infinity };
      };
      for (let i = 0; i < 3; i++) tenant.retryAloneMs.push((await retryOfOne()).retryMs);
      // Operator two: 300 rounds with a BET applied, then its wallet hangs and their WINs wait for retries.
      const rounds: TransactionRequest[] = [];
      for (const p of PLAYERS) await launch(t2, p);
      const batch = async <T>(items: T[], size: number, fn: (x: T) => Promise<unknown>) => {
        for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(fn));
      };
      const bets = Array.from({ length: 300 }, () => tx(t2, pick(PLAYERS), newId('r'), { type: 'BET', amount: 1 }));
      await batch(bets, 25, async (b) => {
        if (applied(await send('/v1/wallet/transaction', b, t2.provider))) rounds.push(b);
      });
      w2.setHung(true);
      await batch(rounds, 50, (b) => send('/v1/wallet/transaction', tx(t2, b.playerRef, b.roundId, { type: 'WIN', roundComplete: true, amount: 1 }), t2.provider));
      tenant.neighbourBacklog = rounds.length;
      for (let i = 0; i < 3; i++) {
        const { betMs, retryMs } = await retryOfOne();
        tenant.firstAttemptBesideHungMs.push(betMs);
        tenant.retryBesideHungMs.push(retryMs);
      }
      w2.setHung(false);
      const allowed = BACKOFF_BASE_MS + 1000;
      for (const ms of tenant.retryBesideHungMs) {
        if (!(ms <= allowed)) violations.push(`tenant isolation: operator one's failed WIN was retried ${ms} ms after its failure while operator two's wallet hung with ${rounds.length} credits awaiting retry (backoff ${BACKOFF_BASE_MS} ms, allowed ${allowed} ms; alone: ${tenant.retryAloneMs.join(', ')} ms)`);
      }
      for (const ms of tenant.firstAttemptBesideHungMs) {
        if (ms > WALLET_TIMEOUT_MS + 1000) violations.push(`tenant isolation: operator one's BET took ${ms} ms to answer while operator two's wallet hung`);
      }
    }

    // Settle: every credit applied, every stale round closed, every lost BET reply learned, read models caught up.
    // Enough for the rebuilds that check the read models below (verifyProjection).
    const pool = createPool(env.db.url, replayPoolSize(allProjections()));
    const store = await createEventStore(eventStoreSetting, pool, env.db.url);
    try {
      const settleDeadline = Date.now() + 180_000;
      for (;;) {
        const { rows } = await pool.query<{ unsettled: number; stale: number }>(
          `SELECT (SELECT count(*)::int FROM rm_transactions WHERE type <> 'BET' AND status IN ('recorded', 'failed', 'timed_out')) AS unsettled,
                  (SELECT count(*)::int FROM rm_rounds WHERE outstanding_bets > 0 AND (status = 'open' OR force_closed)) AS stale`,
        );
        const r = rows[0]!;
        // And every BET whose provider went on as if answered, asked for until the wallet replies.
        const asked = (await unansweredBets(pool, 0)).length;
        if (r.unsettled === 0 && r.stale === 0 && asked === 0) break;
        if (Date.now() > settleDeadline) {
          violations.push(`did not settle within 180 s: ${r.unsettled} unsettled credits, ${r.stale} rounds with outstanding bets, ${asked} BETs whose lost reply is still asked for`);
          const diag = await pool.query(`SELECT name, position, events_applied, updated_at FROM projection_checkpoints`);
          log(`checkpoints: ${JSON.stringify(diag.rows)}; head ${await store.headPosition()}`);
          for (const [role, p] of procs) log(`${role} (exit ${p.child.exitCode}): ${p.output().split('\n').filter((l) => /"level":(40|50|60)/.test(l)).slice(-5).join(' | ').slice(0, 1500)}`);
          break;
        }
        await sleep(500);
      }

      const { txs: ledger, lostReplies } = await ledgerHistory(store);
      // Every transaction asked for again, identically, as a provider or the admin would: each has a final
      // answer (never "still in progress"), the one it had, even after a kick (contract 8, rules 4 and 5).
      await askAgain(ledger);
      violations.push(...compareWallets(ledger, wallets, closedOnFailure));
      // What each BET's provider was told against the history: the reply it acted on is the one the history
      // holds, unless the BET was rolled back since (the reconciler refunds an open round whose BET's reply
      // was lost with its process); a BET it was told failed is never sent again (contract section 5).
      for (const t of ledger) {
        const key = ledgerKey(t.operatorId, t.request.playerRef, t.request.transactionId);
        const answered = actedOn.get(key);
        if (answered !== undefined && t.reply?.body !== answered && t.rolledBackBy === undefined) {
          violations.push(`${t.operatorId}: BET ${t.request.transactionId} of ${t.request.playerRef}: its provider acted on ${answered}; the history holds it ${t.status}${t.reply ? ` with ${t.reply.body}` : ''}`);
        }
        const toldAt = closedOnFailure.get(key);
        const wallet = wallets.get(t.operatorId);
        const calls = (wallet?.arrivals.get(t.request.transactionId) ?? []).map((at, i) => ({ at, signedAt: wallet!.signedAt.get(t.request.transactionId)![i]! }));
        const late = toldAt === undefined ? 0 : sentAfterToldFailed(calls, toldAt, t.attempts);
        if (late > 0) violations.push(`${t.operatorId}: BET ${t.request.transactionId} (${t.status}) sent to the wallet ${late} time(s) after its provider was told it failed`);
      }
      violations.push(...crashed);
      // What the service logged about each 500.
      for (const id of requestIds) {
        const lines = started.flatMap((p) => p.output().split('\n').filter((l) => l.includes(id)));
        log(`request ${id}: ${lines.join(' | ').slice(0, 3000)}`);
      }

      // Every read model equals a fresh rebuild.
      let differing = false;
      for (const p of allProjections()) {
        const v = await verifyProjection(pool, store, p);
        differing ||= v.differences.length > 0;
        for (const d of v.differences.slice(0, 5)) {
          violations.push(`read model ${d.table} ${JSON.stringify(d.key)} differs from a rebuild (${v.differences.length} rows in all, at ${v.position}): live ${JSON.stringify(d.live)}, rebuilt ${JSON.stringify(d.rebuilt)}`);
        }
      }
      if (differing && store instanceof PostgresEventStore) violations.push(...(await describeLogReads(pool, store)));

      // The hash chain, whose runner was killed with the projector and lost its connections like the rest:
      // every event linked once, in log order, no gap, no link twice, every checkpoint valid.
      const head = await store.headPosition();
      const chainDeadline = Date.now() + 30_000;
      const chainSettled = async () =>
        (await pool.query(`SELECT position FROM projection_checkpoints WHERE name = 'chain'`)).rows[0]?.position === head &&
        (await pool.query(`SELECT 1 FROM chain_checkpoints LIMIT 1`)).rows.length > 0;
      while (!(await chainSettled()) && Date.now() < chainDeadline) await sleep(200);
      const chain = await verifyChain(pool, store);
      if (chain.broken) violations.push(`hash chain broken at event #${chain.broken.count} (position ${chain.broken.position}): ${chain.broken.what}`);
      if (chain.unlinked > 0) violations.push(`hash chain: ${chain.unlinked} event(s) not linked 30 s after the run settled`);
      const { rows: links } = await pool.query<{ n: number; top: number | null }>('SELECT count(*)::int AS n, max(seq)::int AS top FROM chain_links');
      if (links[0]!.n !== (links[0]!.top ?? 0) || links[0]!.n !== chain.events) violations.push(`hash chain: ${links[0]!.n} links up to #${links[0]!.top}, ${chain.events} events verified`);
      if (chain.checkpoints === 0) violations.push('hash chain: no checkpoint signed 30 s after the run settled');
      log(`hash chain: ${chain.events} events linked and verified, ${chain.checkpoints} checkpoints valid`);
      return {
        seed: opts.seed,
        requests,
        transactionsRecorded: ledger.length,
        walletEntries: [...wallets.values()].reduce((n, w) => n + w.entries.size, 0),
        faults,
        actions,
        tenant,
        lostReplies,
        violations,
      };
    } finally {
      await store.close();
      await pool.end();
    }

    async function askAgain(ledger: TxState[]): Promise<void> {
      const queue = ledger.filter((t) => t.origin !== 'reconciler');
      const one = async (t: TxState) => {
        const r = t.request;
        const res =
          t.origin === 'admin'
            ? await send(
                '/v1/admin/adjustments',
                { operatorId: t.operatorId, playerRef: r.playerRef, amount: r.amount, currency: r.currency, direction: r.direction, transactionId: r.transactionId, reason: String(r.metadata?.reason ?? ''), ...(r.gameId ? { gameId: r.gameId } : {}) },
                'admin',
              )
            : await send('/v1/wallet/transaction', r, t.providerId === PROV_A.id ? PROV_A : PROV_B);
        const what = `${r.type} ${r.transactionId} (${t.status}) asked again`;
        if (res.text.includes('still in progress')) return violations.push(`${what}: still in progress after the run settled`);
        if (t.origin === 'admin') {
          if (t.status === 'applied' && (res.status !== 200 || res.json.status !== 'applied')) unexpected(what, res);
          return;
        }
        switch (t.status) {
          case 'applied':
          case 'declined':
            if (res.status !== 200 || res.text !== t.reply?.body) unexpected(`${what}, stored reply ${t.reply?.body}`, res);
            break;
          case 'voided':
            if (res.status !== 409 || res.json.error !== 'bet was rolled back') unexpected(what, res);
            break;
          default:
            if (res.status !== 502 && res.status !== 504) unexpected(what, res);
        }
      };
      for (let i = 0; i < queue.length; i += 8) await Promise.all(queue.slice(i, i + 8).map(one));
    }
  } finally {
    stopping = true;
    await Promise.all([...procs.values()].map((p) => p.stop('SIGTERM')));
    await Promise.all([...[...wallets.values()].map((w) => w.close()), ...providers.map((p) => p.close())]);
    await env.cleanup();
    await esdb?.close();
  }
}

/**
 * Every transaction of every round, folded from the streams of record (not from the read models), on
 * either store; and how many BETs had their outcome recorded only after a later transaction of their
 * round (see FaultRunReport.lostReplies).
 */
async function ledgerHistory(store: EventStore): Promise<{ txs: TxState[]; lostReplies: FaultRunReport['lostReplies'] }> {
  const rounds = new Set<string>();
  for (let from = START; ; ) {
    const page = await store.readAll({ from, maxCount: 1000 });
    for (const e of page) if (e.streamId.startsWith('round|')) rounds.add(e.streamId);
    if (page.length < 1000) break;
    from = page[page.length - 1]!.position;
  }
  const txs: TxState[] = [];
  const lostReplies = { learned: 0, failedAsks: 0 };
  for (const stream of rounds) {
    const events = await store.readStream(stream);
    txs.push(...fold(roundDecider, events).txs.values());
    const bets = new Set<string>();
    const wentOn = new Set<string>();
    for (const e of events as unknown as RoundEvent[]) {
      if (e.type === 'TransactionRecorded') {
        // A ROLLBACK racing its BET is not the provider going on with the round.
        for (const b of bets) if (e.data.request.originalTransactionId !== b) wentOn.add(b);
        if (e.data.request.type === 'BET') bets.add(e.data.request.transactionId);
      } else if (e.type === 'TransactionSettled' && wentOn.has(e.data.transactionId)) lostReplies.learned++;
      else if (e.type === 'TransactionAttemptFailed' && e.data.replyLost) lostReplies.failedAsks++;
      if (e.type === 'TransactionSettled' || (e.type === 'TransactionAttemptFailed' && !e.data.replyLost)) bets.delete(e.data.transactionId);
    }
  }
  return { txs, lostReplies };
}

/** A transaction's key across the run: the operator, then its wallet's key (player and id). */
const ledgerKey = (operatorId: string, playerRef: string, transactionId: string): string => `${operatorId}\n${walletKey(playerRef, transactionId)}`;

/**
 * Each wallet's own ledger against the service's history, player by player: the same transactions with
 * the same bodies, the same outcomes, and the same money.
 */
/**
 * How many wallet calls of a BET its provider was told failed (at `toldAt`, and closed its round) were
 * made after that answer. A call signed in a later second than the answer was made after it. One that
 * arrived after the answer but was signed no later than its second is excused only when it is the BET's
 * own call: the only one the wallet got and the one attempt the history counts. That call was made before
 * the answer (the answer is its outcome) and may reach the wallet after it, on a host or network slow
 * enough that the call timed out before its bytes were read.
 */
export function sentAfterToldFailed(calls: ReadonlyArray<{ at: number; signedAt: number }>, toldAt: number, attempts: number): number {
  const ownCallOnly = calls.length === 1 && attempts === 1;
  const toldSecond = Math.floor(toldAt / 1000) * 1000;
  return calls.filter((c) => c.signedAt > toldSecond || (c.at > toldAt && !ownCallOnly)).length;
}

export function compareWallets(ledger: readonly TxState[], wallets: ReadonlyMap<string, SimWallet>, closedOnFailure: ReadonlyMap<string, number> = new Map()): string[] {
  const v: string[] = [];
  const byKey = new Map<string, TxState>();
  for (const t of ledger) {
    const key = ledgerKey(t.operatorId, t.request.playerRef, t.request.transactionId);
    const other = byKey.get(key);
    if (other) v.push(`identity: ${t.request.transactionId} of ${t.request.playerRef} at ${t.operatorId} recorded twice (by ${other.providerId} and ${t.providerId})`);
    byKey.set(key, t);
  }
  for (const w of wallets.values()) {
    v.push(...w.conflicts);
    if (w.badSignatures > 0) v.push(`${w.operatorId}: ${w.badSignatures} calls with a bad signature`);
    for (const [key, e] of w.entries) {
      const t = byKey.get(`${w.operatorId}\n${key}`);
      if (!t) v.push(`${w.operatorId}: the wallet applied ${e.request.type} ${e.request.transactionId} of ${e.request.playerRef}, which the ledger never recorded`);
      else if (t.walletBody !== e.body) v.push(`${w.operatorId}: ${e.request.transactionId} applied as ${e.body}, recorded as ${t.walletBody}`);
    }
  }
  const net = new Map<string, number>();
  const addNet = (t: TxState, delta: number) => {
    const k = `${t.operatorId}\n${t.request.playerRef}`;
    net.set(k, (net.get(k) ?? 0) + delta);
  };
  const entryOf = (t: TxState) => wallets.get(t.operatorId)?.entries.get(walletKey(t.request.playerRef, t.request.transactionId));
  for (const t of ledger) {
    const r = t.request;
    const e = entryOf(t);
    const what = `${t.operatorId}: ${r.type} ${r.transactionId} of ${r.playerRef} (${t.status})`;
    if (t.status === 'recorded') v.push(`${what}: no final answer`);
    if (r.type === 'BET') {
      if (t.rolledBackBy !== undefined) {
        const rb = byKey.get(ledgerKey(t.operatorId, r.playerRef, t.rolledBackBy));
        const pair = (e?.delta ?? 0) + (rb ? (entryOf(rb)?.delta ?? 0) : 0);
        if (pair !== 0) v.push(`${what}: the wallet's net for the bet and its rollback ${t.rolledBackBy} is ${pair}, not 0`);
      } else if (t.status === 'applied') {
        if (e?.status !== 'OK' || e.delta !== -r.amount) v.push(`${what}: the wallet has ${JSON.stringify(e && { status: e.status, delta: e.delta })}`);
        addNet(t, -r.amount);
      } else if (t.status === 'declined') {
        if (e && e.status !== 'DECLINED') v.push(`${what}: the wallet applied it`);
      } else if ((t.status === 'failed' || t.status === 'timed_out') && closedOnFailure.has(ledgerKey(t.operatorId, r.playerRef, r.transactionId))) {
        // Its provider was told it failed and closed the round without rolling it back: whatever the wallet
        // did with its one call (applied late after a timeout, say) stays the provider's to settle.
        if (e?.status === 'OK') addNet(t, e.delta);
      } else {
        v.push(`${what}: outcome unknown and never rolled back`);
      }
    } else {
      if (t.status !== 'applied') v.push(`${what}: a credit never applied`);
      else if (!e || e.status !== 'OK') v.push(`${what}: the wallet has no applied entry`);
      if (r.type === 'ROLLBACK') {
        const bet = byKey.get(ledgerKey(t.operatorId, r.playerRef, r.originalTransactionId ?? ''));
        if (bet && r.amount !== bet.request.amount) v.push(`${what}: its amount ${r.amount} is not its BET's ${bet.request.amount}`);
      } else if (t.status === 'applied') {
        addNet(t, r.type === 'ADJUSTMENT' && r.direction === 'DEBIT' ? -r.amount : r.amount);
      }
    }
  }
  // The money: each player's balance at each wallet is its start plus what the ledger says moved.
  for (const w of wallets.values()) {
    const players = new Set([...w.balances.keys(), ...[...net.keys()].filter((k) => k.startsWith(`${w.operatorId}\n`)).map((k) => k.split('\n')[1]!)]);
    for (const p of players) {
      const balance = w.balances.get(p) ?? w.initialBalance;
      const expected = w.initialBalance + (net.get(`${w.operatorId}\n${p}`) ?? 0);
      if (balance !== expected) v.push(`${w.operatorId}: player ${p} holds ${balance} at the wallet; the ledger's history says ${expected}`);
    }
  }
  return v;
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
