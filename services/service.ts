import { readFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { allMigrations } from './migrations.ts';
import { allRunners, runnerNames } from './read-models.ts';
import { checkCheckpointStore, CheckpointStoreMismatch, projectionFailures, ProjectionRunner } from '../projections/runner.ts';
import { SharedLogReads } from '../projections/shared-reads.ts';
import { BackgroundTasks } from '../shared/background.ts';
import { CatalogError, CatalogStore } from '../shared/catalog/store.ts';
import type { Config } from '../shared/config.ts';
import { migrate } from '../shared/db/migrations.ts';
import { createPool, ensureDatabase } from '../shared/db/pool.ts';
import { AppError } from '../shared/errors.ts';
import { createEventStore } from '../shared/eventstore/index.ts';
import { createLogger, type Logger } from '../shared/logger.ts';
import { createMetrics } from '../shared/metrics.ts';
import { createApp } from './api/app.ts';
import { createOpsApp } from './api/ops.ts';
import { sessionRoutes } from './sessions/routes.ts';
import { balanceRoutes } from './sessions/balance.ts';
import { transactionRoutes } from './rounds/routes.ts';
import { replayRoutes } from './rounds/replay.ts';
import { reconciliationRoutes } from './reconciliation/routes.ts';
import { chainProjection } from './chain/projection.ts';
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
  stop(): Promise<void>;
}

export class StartupError extends Error {
  override name = 'StartupError';
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

/** Builds everything the configured roles need and starts them. */
export async function startService(config: Config, logger: Logger = createLogger(config.logLevel)): Promise<RunningService> {
  const pool = createPool(config.databaseUrl, config.databasePoolSize);
  await retry('database migration', logger, async () => {
    await ensureDatabase(config.databaseUrl);
    await migrate(pool, allMigrations);
  });
  const eventStore = await createEventStore(config.eventStore, pool, config.databaseUrl, logger);
  try {
    await checkCheckpointStore(pool, eventStore.kind);
  } catch (err) {
    await eventStore.close();
    await pool.end();
    if (err instanceof CheckpointStoreMismatch) throw new StartupError(err.message);
    throw err;
  }
  const catalog = new CatalogStore(pool, config.databaseUrl, (err) => logger.error({ err }, 'catalog reload failed'));
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
  const redis = createRequestRedis(config.redisUrl, logger);
  // Requests fail fast while Redis is unreachable; do not open the doors before the first connection is
  // up (or has failed: then /readyz says so and requests get 503 until it is back).
  await new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      redis.off('ready', done);
      redis.off('error', done);
      resolve();
    };
    const timer = setTimeout(done, 3000);
    if (redis.status === 'ready') done();
    redis.once('ready', done);
    redis.once('error', done);
  });
  const ctx: ServiceContext = { config, logger, pool, redis, eventStore, catalog, background: new BackgroundTasks(), now: () => new Date(), metrics: createMetrics() };

  const runners: ProjectionRunner[] = [];
  let signer: { stop(): Promise<void> } | undefined;
  let lagSampler: { stop(): Promise<void> } | undefined;
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
    // database and linked again is what an operator's kept checkpoints expose).
    const reads = new SharedLogReads(eventStore);
    for (const projection of allRunners()) {
      const shared = projection === chainProjection ? {} : { reads };
      const runner = new ProjectionRunner(pool, config.databaseUrl, eventStore, projection, { logger, ...shared, onApplyFailure: (err) => ctx.metrics.projectionApplyFailed(err.projection) });
      runner.start();
      runners.push(runner);
    }
    signer = startCheckpointSigner(pool, key, config.chainCheckpointSeconds, logger);
    lagSampler = startLagSampler(pool, runners, logger);
    ctx.metrics.watchReadModels({ deadLettered: () => deadLetteredByOperator(pool), runners, operators: () => catalog.snapshot().operators.keys(), failing: () => projectionFailures(pool, runnerNames()), logger });
  }

  const queueConnection = bullConnection(config.redisUrl, false);
  const queues = new DispatchQueues(queueConnection, (err, operatorId) => logger.warn({ err: err.message, operatorId }, 'dispatch queue error'));
  const ledger: LedgerDeps = { ...ctx, queues, retryDelayMs: config.dispatchBackoffBaseMs, rounds: new RoundCache(), recorder: eventStore.transactionRecorder(pool) };
  // Providers are answered as soon as the wallet replies; the outcome is recorded behind the answer.
  const outcomes = new OutcomeWriter(logger, { maxQueuedBytes: config.outcomeBacklogBytes, maxOperatorBytes: config.outcomeBacklogOperatorBytes });
  ctx.metrics.watchOutcomeBacklog(outcomes);

  let worker: RunningWorker | undefined;
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

  const reconciler = config.roles.includes('reconciler')
    ? startReconcilerRole({ ...ledger, staleAfterSeconds: config.staleRoundAfterSeconds, intervalSeconds: config.reconcileIntervalSeconds }, logger)
    : undefined;

  // Without the api role the port serves only /healthz, /readyz and /metrics (probes and scraping).
  const server = http.createServer(
    config.roles.includes('api')
      ? createApp(ctx, {
          operator: [sessionRoutes(ctx, ledger.recorder), replayRoutes(ctx), grantRoutes(ctx), reconciliationRoutes(ctx), historyRoutes(ctx)],
          provider: [balanceRoutes(ctx), transactionRoutes(ctx, { ...ledger, outcomes })],
          admin: [adjustmentRoutes(ctx, ledger), redriveRoutes(ledger), consoleRoutes(ctx)],
          audit: [auditRoutes(ctx), chainAuditRoutes(ctx)],
        })
      : createOpsApp(ctx),
  );
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(new StartupError(`HOST ${config.host} PORT ${config.port}: ${err.message}`)));
    server.listen(config.port, config.host, () => resolve());
  });
  const local = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host.includes(':') ? `[${config.host}]` : config.host;
  const httpUrl = `http://${local}:${(server.address() as AddressInfo).port}`;
  const url = config.roles.includes('api') ? httpUrl : undefined;
  logger.info({ roles: config.roles, url: httpUrl, host: config.host, eventStore: eventStore.kind, postgresConnections: postgresConnections(config) }, 'service started');
  warnAboutFirstRun(config, catalog, logger);

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      logger.info('stopping: no new requests, finishing those in flight');
      if (server) {
        const closed = new Promise<void>((resolve) => server!.close(() => resolve()));
        // close() ends the connections idle now; a keep-alive connection whose request finishes later
        // would hold shutdown open until its idle timeout, so keep ending them while requests drain.
        const sweeper = setInterval(() => server!.closeIdleConnections(), 50);
        const force = setTimeout(() => server!.closeAllConnections(), 20_000);
        server.closeIdleConnections();
        await closed;
        clearInterval(sweeper);
        clearTimeout(force);
      }
      await outcomes.drain();
      await reconciler?.close();
      await worker?.close();
      await signer?.stop();
      await lagSampler?.stop();
      await Promise.all(runners.map((r) => r.stop()));
      await ctx.background.drain();
      // Again: a request that outlived the connections' forced close may have answered since.
      await outcomes.drain();
      await ledger.recorder.close();
      await queues.close();
      queueConnection.disconnect();
      await catalog.close();
      await eventStore.close();
      redis.disconnect();
      await pool.end();
      logger.info('stopped');
    })());

  return { ctx, url, httpUrl, runners, worker, reconciler, stop };
}
