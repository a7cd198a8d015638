import { readFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { Redis } from 'ioredis';
import { loadCursors } from '../shared/http/cursor.ts';
import { NODE_MAJOR, readsNumberSources } from '../shared/runtime.ts';
import { allMigrations } from './migrations.ts';
import { answerClientError } from '../shared/http/client-error.ts';
import { allProjections, runnerNames } from './read-models.ts';
import { checkCheckpointStore, CheckpointStoreMismatch, projectionFailures, ProjectionRunner, type Projection } from '../projections/runner.ts';
import { SharedLogReads } from '../projections/shared-reads.ts';
import { BackgroundTasks } from '../shared/background.ts';
import { CatalogError, CatalogStore } from '../shared/catalog/store.ts';
import type { Config } from '../shared/config.ts';
import { migrate } from '../shared/db/migrations.ts';
import { createPool, ensureDatabase } from '../shared/db/pool.ts';
import { AppError } from '../shared/errors.ts';
import { createEventStore } from '../shared/eventstore/index.ts';
import type { EventStore, TransactionRecorder } from '../shared/eventstore/port.ts';
import { createLogger, type Logger } from '../shared/logger.ts';
import { createMetrics } from '../shared/metrics.ts';
import { createApp } from './api/app.ts';
import { createOpsApp } from './api/ops.ts';
import { sessionRoutes } from './sessions/routes.ts';
import { balanceRoutes } from './sessions/balance.ts';
import { transactionRoutes } from './rounds/routes.ts';
import { replayRoutes } from './rounds/replay.ts';
import { reconciliationRoutes } from './reconciliation/routes.ts';
import { chainProjection, startChainWitness } from './chain/projection.ts';
import { RetiredKeyError, signingKey, startCheckpointSigner } from './chain/checkpoints.ts';
import { chainAuditRoutes, historyRoutes } from './chain/routes.ts';
import { redriveRoutes } from './rounds/redrive.ts';
import { consoleRoutes } from './console/routes.ts';
import { startLagSampler } from './console/lag-history.ts';
import { grantRoutes } from './grants/routes.ts';
import { adjustmentRoutes } from './rounds/adjustments.ts';
import { auditRoutes } from './audit/routes.ts';
import { deadLetteredByOperator } from './rounds/queries.ts';
import { bullConnection, DispatchQueues } from './rounds/queue.ts';
import type { LedgerDeps } from './rounds/submit.ts';
import { RoundCache } from './rounds/round-cache.ts';
import { OutcomeWriter } from './rounds/outcome-writer.ts';
import { startWorkerRole, type RunningWorker } from './rounds/worker.ts';
import { startReconcilerRole, type RunningReconciler } from './rounds/reconciler.ts';
import { startGrantFinisher, type GrantFinisher } from './grants/issue.ts';
import { within } from '../shared/timeout.ts';
import { postgresConnections } from './connections.ts';
import type { ServiceContext } from './context.ts';


export interface RunningService {
  ctx: ServiceContext;
  /** Base URL of the API when the api role runs. */
  url: string | undefined;
  /** Base URL of this process's port: the API, or without the api role only /healthz, /readyz and /metrics. */
  httpUrl: string;
  runners: ProjectionRunner[];
  worker: RunningWorker | undefined;
  reconciler: RunningReconciler | undefined;
  /** The reconciler role's finishing of free-spin grants a process abandoned mid-call. */
  grantFinisher: GrantFinisher | undefined;
  stop(): Promise<void>;
}

export class StartupError extends Error {
  override name = 'StartupError';
}

/**
 * The Redis database REDIS_URL names exists on the server. ioredis selects it on connecting, and when the
 * server has no such database it only reports an error and goes on in database 0: nonces, rate limits and
 * the retry queues would then be shared with whatever else uses database 0. Checked once at start, when
 * Redis answers; a Redis not up yet is the start's usual wait, not a refusal.
 */
export async function checkRedisDatabase(url: string): Promise<void> {
  const db = Number(new URL(url).pathname.slice(1) || '0');
  const probe = new Redis(url, { db: 0, lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, connectTimeout: 2000, commandTimeout: 2000, retryStrategy: () => null });
  probe.on('error', () => undefined);
  // A Redis that takes the connection and never answers: not this check's to wait for.
  let timer: NodeJS.Timeout | undefined;
  const answered = await Promise.race([
    probe.connect().then(
      () => true,
      () => false,
    ),
    new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), 3000))),
  ]);
  clearTimeout(timer);
  if (!answered) {
    probe.disconnect();
    return;
  }
  try {
    await probe.call('SELECT', String(db));
  } catch (err) {
    if (/DB index is out of range/i.test((err as Error).message)) {
      throw new StartupError(`REDIS_URL: the Redis server has no database ${db} (its databases setting is lower): nothing of the service may share database 0 by mistake; name one it has`);
    }
  } finally {
    probe.disconnect();
  }
}

/**
 * Redis for request paths: a command fails at once while Redis is unreachable instead of queueing, and
 * one that Redis leaves unanswered fails after the command timeout. So does a command whose connection
 * dropped before its reply: it is not sent again on the next connection (ioredis then drops it
 * unanswered, and the timeout fails it, 2 s after it was sent). Redis may have run it, and a nonce's
 * SET NX sent again finds its own nonce: a genuine request would be refused as a replay (401) where
 * Redis only failed to confirm it (503). A rate-limit check sent again would count its request twice.
 * Not auto-pipelined: ioredis keeps one pipeline in flight, so while Redis stalls a command would wait
 * up to two timeouts (docs/benchmarks.md, "Tried and not kept").
 */
export function createRequestRedis(url: string, logger: Logger): Redis {
  const redis = new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 1, commandTimeout: 2000, autoResendUnfulfilledCommands: false });
  let lastLog = 0;
  redis.on('error', (err: Error) => {
    if (Date.now() - lastLog > 10_000) {
      lastLog = Date.now();
      logger.warn({ err: err.message }, 'redis unavailable');
    }
  });
  return redis;
}

async function retry<T>(what: string, logger: Logger, fn: () => Promise<T>, attempts = 30): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (err) {
      if (refusedForGood(err)) throw new StartupError(`${what}: Postgres refused: ${(err as Error).message}. Check the user and password in DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/ledger)`);
      if (i >= attempts) throw new StartupError(`${what}: ${(err as Error).message}`);
      logger.warn({ err: (err as Error).message, attempt: i }, `${what} failed; retrying`);
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

/** What a first `npm start` lacks, said once at start with what to do about it. */
function warnAboutFirstRun(config: Config, catalog: CatalogStore, logger: Logger): void {
  if (!config.roles.includes('api')) return;
  if (catalog.snapshot().operators.size === 0) {
    logger.warn('no operator in the catalog yet: every signed request is refused (401 invalid signature). Load one with CATALOG_FILE=catalog.example.json, or PUT /v1/admin/catalog');
  }
  if (!config.adminToken) logger.warn('ADMIN_TOKEN is not set: the admin and audit routes and /metrics are closed. Set ADMIN_TOKEN to open them');
}

/**
 * Failures that waiting will not mend: Postgres refused the credentials (28000: no such role, 28P01:
 * wrong password) or the rights to create the database (42501). Said at once, not after 30 retries.
 */
function refusedForGood(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return code === '28000' || code === '28P01' || code === '42501';
}

/** How long a start that failed waits for what it had opened to close before it gives its error. */
const FAILED_START_CLOSE_MS = 10_000;

/**
 * Builds everything the configured roles need and starts them. A start that fails partway closes what it
 * had opened, as `stop` would (one shutdown order, each part closed only if it was opened): in a process
 * that goes on (the sandbox, a test, a host embedding the service), its connections would otherwise live
 * on, and its catalog listener would reconnect for ever.
 */
export async function startService(config: Config, logger: Logger = createLogger(config.logLevel)): Promise<RunningService> {
  // Before anything opens, in every process that starts the service (npm start, the sandbox, an embedding host).
  if (!readsNumberSources()) {
    throw new StartupError(
      `Node.js ${process.version} does not give JSON.parse's reviver a number's source text, which the service needs to refuse a number that would reach the wallet changed (a 20-digit id, say): start it on Node.js ${NODE_MAJOR} (npm start runs the one npm ci installs)`,
    );
  }
  const background = new BackgroundTasks();
  const runners: ProjectionRunner[] = [];
  let eventStore: EventStore | undefined;
  let catalog: CatalogStore | undefined;
  let redis: Redis | undefined;
  let signer: { stop(): Promise<void> } | undefined;
  let witness: { stop(): Promise<void> } | undefined;
  let lagSampler: { stop(): Promise<void> } | undefined;
  let queueConnection: Redis | undefined;
  let queues: DispatchQueues | undefined;
  let recorder: TransactionRecorder | undefined;
  let outcomes: OutcomeWriter | undefined;
  let worker: RunningWorker | undefined;
  let reconciler: RunningReconciler | undefined;
  let grantFinisher: GrantFinisher | undefined;
  let server: http.Server | undefined;
  const pool = createPool(config.databaseUrl, config.databasePoolSize);

  let stopping: Promise<void> | undefined;
  /** Closes each part in turn; one whose close fails does not keep the next ones open (the first failure is thrown at the end). */
  const stop = () =>
    (stopping ??= (async () => {
      logger.info('stopping: no new requests, finishing those in flight');
      const failures: unknown[] = [];
      const close = async (part: () => unknown) => {
        try {
          await part();
        } catch (err) {
          failures.push(err);
        }
      };
      if (server?.listening) {
        const listening = server;
        const closed = new Promise<void>((resolve) => listening.close(() => resolve()));
        // close() ends the connections idle now; a keep-alive connection whose request finishes later
        // would hold shutdown open until its idle timeout, so keep ending them while requests drain.
        const sweeper = setInterval(() => listening.closeIdleConnections(), 50);
        const force = setTimeout(() => listening.closeAllConnections(), 20_000);
        listening.closeIdleConnections();
        await closed;
        clearInterval(sweeper);
        clearTimeout(force);
      }
      await close(() => outcomes?.drain());
      await close(() => reconciler?.close());
      await close(() => grantFinisher?.close());
      await close(() => worker?.close());
      await close(() => signer?.stop());
      await close(() => witness?.stop());
      await close(() => lagSampler?.stop());
      await close(() => Promise.all(runners.map((r) => r.stop())));
      await close(() => background.drain());
      // Again: a request that outlived the connections' forced close may have answered since.
      await close(() => outcomes?.drain());
      await close(() => recorder?.close());
      await close(() => queues?.close());
      await close(() => queueConnection?.disconnect());
      await close(() => catalog?.close());
      await close(() => eventStore?.close());
      await close(() => redis?.disconnect());
      await close(() => pool.end());
      if (failures.length > 0) throw failures[0];
      logger.info('stopped');
    })());

  try {
    await checkRedisDatabase(config.redisUrl);
    await retry('database migration', logger, async () => {
      await ensureDatabase(config.databaseUrl);
      await migrate(pool, allMigrations);
    });
    eventStore = await createEventStore(config.eventStore, pool, config.databaseUrl, logger);
    try {
      await checkCheckpointStore(pool, eventStore.kind);
    } catch (err) {
      if (err instanceof CheckpointStoreMismatch) throw new StartupError(err.message);
      throw err;
    }
    catalog = new CatalogStore(pool, config.databaseUrl, (err) => logger.error({ err }, 'catalog reload failed'));
    await catalog.start();
    if (config.catalogFile) {
      let raw: unknown;
      try {
        raw = JSON.parse(await readFile(config.catalogFile, 'utf8'));
      } catch (err) {
        throw new StartupError(`CATALOG_FILE ${config.catalogFile}: ${(err as Error).message}`);
      }
      try {
        await catalog.apply(raw);
      } catch (err) {
        if (err instanceof AppError || err instanceof CatalogError) throw new StartupError(`CATALOG_FILE ${config.catalogFile}: ${err.message}`);
        throw err;
      }
      logger.info({ file: config.catalogFile }, 'catalog applied');
    }
    const requests = createRequestRedis(config.redisUrl, logger);
    redis = requests;
    // Requests fail fast while Redis is unreachable; do not open the doors before the first connection is
    // up (or has failed: then /readyz says so and requests get 503 until it is back).
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        requests.off('ready', done);
        requests.off('error', done);
        resolve();
      };
      const timer = setTimeout(done, 3000);
      if (requests.status === 'ready') done();
      requests.once('ready', done);
      requests.once('error', done);
    });
    const ctx: ServiceContext = { config, logger, pool, redis: requests, eventStore, catalog, background, now: () => new Date(), metrics: createMetrics(), cursors: await loadCursors(pool) };

    if (config.roles.includes('projector')) {
      // The chain's signing key first: a process that may not sign starts nothing.
      let key;
      try {
        key = await signingKey(pool, config.chainSigningKey);
      } catch (err) {
        if (err instanceof RetiredKeyError) throw new StartupError(err.message);
        throw err;
      }
      // The read models, reading the log once for all of them, and the hash chain beside them (run the same
      // way, but never rebuilt). The chain reads the store itself: it links what the store holds when it
      // reads, never what this process read of it earlier (docs/auditors.md: a history rewritten in the
      // database and linked again is what an operator's kept checkpoints expose). While this process's
      // chain runner owns the chain its signer signs the heads the runner linked; while it stands by,
      // its witness checks the links another process's runner adds (services/chain/projection.ts, ChainHeads).
      const store = eventStore;
      const reads = new SharedLogReads(store);
      const chain = chainProjection(store);
      const runnerOf = (projection: Projection, shared: { reads?: SharedLogReads }) => {
        const runner = new ProjectionRunner(pool, config.databaseUrl, store, projection, { logger, ...shared, onApplyFailure: (err) => ctx.metrics.projectionApplyFailed(err.projection) });
        runner.start();
        runners.push(runner);
        return runner;
      };
      for (const projection of allProjections()) runnerOf(projection, { reads });
      const chainRunner = runnerOf(chain, {});
      witness = startChainWitness(pool, store, chain.heads, () => chainRunner.isOwner(), logger, () => ctx.metrics.chainWitnessRefused());
      signer = startCheckpointSigner(pool, key, chain.heads, () => chainRunner.isOwner(), config.chainCheckpointSeconds, logger, (c) => ctx.metrics.chainSigningRefused(c));
      lagSampler = startLagSampler(pool, runners, logger);
      ctx.metrics.watchReadModels({ deadLettered: () => deadLetteredByOperator(pool), runners, operators: () => ctx.catalog.snapshot().operators.keys(), failing: () => projectionFailures(pool, runnerNames()), logger });
    }

    queueConnection = bullConnection(config.redisUrl, false);
    queues = new DispatchQueues(queueConnection, (err, operatorId) => logger.warn({ err: err.message, operatorId }, 'dispatch queue error'));
    recorder = eventStore.transactionRecorder(pool, {
      fenceLost: (guardStream, mode, err) => logger.warn({ guardStream, mode, err: err?.message }, 'kick fence connection lost while held: a record appends nothing under it, a kick takes the fence again before it is acknowledged'),
      kickMissed: (missed) => {
        logger.error(
          missed,
          missed.position === undefined
            ? 'transaction possibly recorded after a kick while the kick fence was being lost (its append lost its answer, and its round could not be read to tell): look for it in its round stream; tell the operator if it is there'
            : 'transaction recorded after a kick while the kick fence was being lost (its Postgres connection died): the kick may have been acknowledged first; tell the operator',
        );
        ctx.metrics.kickFenceMissed();
      },
    });
    const ledger: LedgerDeps = { ...ctx, queues, retryDelayMs: config.dispatchBackoffBaseMs, rounds: new RoundCache(), recorder, inflight: background };
    // Providers are answered as soon as the wallet replies; the outcome is recorded behind the answer.
    outcomes = new OutcomeWriter(logger, { maxQueuedBytes: config.outcomeBacklogBytes, maxOperatorBytes: config.outcomeBacklogOperatorBytes });
    ctx.metrics.watchOutcomeBacklog(outcomes);

    if (config.roles.includes('worker')) {
      worker = startWorkerRole(
        {
          ...ctx,
          queues,
          redisUrl: config.redisUrl,
          retryWindowSeconds: config.dispatchRetryWindowSeconds,
          backoffBaseMs: config.dispatchBackoffBaseMs,
          backoffMaxMs: config.dispatchBackoffMaxMs,
          sweepSeconds: config.recoverySweepSeconds,
          concurrencyPerOperator: config.dispatchConcurrencyPerOperator,
        },
        logger,
      );
    }

    reconciler = config.roles.includes('reconciler')
      ? startReconcilerRole({ ...ledger, staleAfterSeconds: config.staleRoundAfterSeconds, intervalSeconds: config.reconcileIntervalSeconds }, logger)
      : undefined;
    // Free-spin grants a process left pending mid-call (it died before the provider answered) are
    // finished by the reconciler too, whether or not their operator repeats the request.
    grantFinisher = config.roles.includes('reconciler') ? startGrantFinisher(ctx, config.reconcileIntervalSeconds, logger) : undefined;

    // Without the api role the port serves only /healthz, /readyz and /metrics (probes and scraping).
    const listener = http.createServer(
      config.roles.includes('api')
        ? createApp(ctx, {
            operator: [sessionRoutes(ctx, ledger.recorder), replayRoutes(ctx), grantRoutes(ctx), reconciliationRoutes(ctx), historyRoutes(ctx)],
            provider: [balanceRoutes(ctx), transactionRoutes(ctx, { ...ledger, outcomes })],
            admin: [adjustmentRoutes(ctx, ledger), redriveRoutes(ledger), consoleRoutes(ctx)],
            audit: [auditRoutes(ctx), chainAuditRoutes(ctx)],
          })
        : createOpsApp(ctx),
    );
    server = listener;
    listener.keepAliveTimeout = 65_000;
    // A request Node's parser cannot read is answered in the service's error form, not Node's bare status line.
    listener.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => answerClientError(err, socket, logger));
    await new Promise<void>((resolve, reject) => {
      listener.once('error', (err) => reject(new StartupError(`HOST ${config.host} PORT ${config.port}: ${err.message}`)));
      listener.listen(config.port, config.host, () => resolve());
    });
    const local = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host.includes(':') ? `[${config.host}]` : config.host;
    const httpUrl = `http://${local}:${(listener.address() as AddressInfo).port}`;
    const url = config.roles.includes('api') ? httpUrl : undefined;
    logger.info({ roles: config.roles, url: httpUrl, host: config.host, eventStore: eventStore.kind, postgresConnections: postgresConnections(config) }, 'service started');
    warnAboutFirstRun(config, catalog, logger);
    return { ctx, url, httpUrl, runners, worker, reconciler, grantFinisher, stop };
  } catch (err) {
    // Said before the closing, which can wait (a worker's sweep for a Redis that is down, say), and the
    // closing bounded: a process whose start failed exits (services/main.ts) rather than hang unlistening.
    logger.warn({ err: (err as Error).message }, 'start failed: closing what it had opened');
    const closing = stop().then(
      () => true,
      (failed: unknown) => (logger.warn({ err: failed }, 'closing what a failed start had opened failed'), true),
    );
    if (!(await within(closing, FAILED_START_CLOSE_MS, () => false))) logger.warn(`closing what a failed start had opened took longer than ${FAILED_START_CLOSE_MS / 1000} s: left to the process's exit`);
    throw err;
  }
}
