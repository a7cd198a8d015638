import { performance } from 'node:perf_hooks';
import type { Express, NextFunction, Request, RequestHandler, Response } from 'express';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { OutboundResult } from './http/outbound.ts';
import type { Logger } from './logger.ts';
import { within } from './timeout.ts';

/**
 * What a wallet call came to. A transaction call ends as API document 3.3 names it (and as the ledger
 * records it: TxStatus); a balance call is `ok` (200) or fails like one. An unreachable wallet counts
 * as `failed`, as the ledger records it.
 */
export type WalletCallOutcome = 'applied' | 'declined' | 'invalid' | 'failed' | 'timed_out' | 'ok';
export type WalletCallKind = 'transaction' | 'balance';

/** A projection's lag as its runner reports it (projections/runner.ts). */
export interface LagSource {
  isOwner(): boolean;
  lag(): Promise<{ name: string; eventsBehind: number; msBehind: number }>;
}

/** Gauges read from Postgres at scrape time: computed at most once per this many ms, whoever scrapes. */
const READ_MODEL_TTL_MS = 2000;
/** A scrape does not wait longer than this for them; it answers without them instead. */
const READ_MODEL_TIMEOUT_MS = 2500;

const METHODS = new Set(['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS']);

/** Process-wide metrics (CPU, memory, event loop, GC) exist once per process, whatever the services in it. */
let processRegistry: Registry | undefined;
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

interface ReadModelSnapshot {
  lag: Array<{ name: string; eventsBehind: number; msBehind: number }>;
  deadLettered: Map<string, number>;
  /** Per projection: 1 while it is stuck on an event it cannot apply (database-wide). */
  failing: Map<string, number>;
}

/**
 * One service instance's metrics, in a registry of its own (not prom-client's global one), so several
 * services in one process (tests) keep separate counts. Built by startService, carried on the context.
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly walletCalls: Histogram<'operator' | 'kind' | 'outcome'>;
  private readonly walletRetries: Counter<'operator'>;
  private readonly deadLetters: Counter<'operator'>;
  private readonly refusals: Counter<'operator'>;
  private readonly backlogRefusals: Counter<'operator'>;
  private readonly projectionFailures: Counter<'projection'>;
  private readonly chainRefusals: Counter<'chain'>;
  private readonly chainWitnessRefusals: Counter;
  private readonly strayBatches: Counter<'grant' | 'cancelled'>;
  private readonly kickFenceMisses: Counter;
  private readonly httpRequests: Histogram<'method' | 'route' | 'status'>;
  private readModels: (() => Promise<ReadModelSnapshot | undefined>) | undefined;
  private outcomeBacklog: OutcomeBacklog | undefined;

  constructor() {
    const registers = [this.registry];
    this.walletCalls = new Histogram({
      name: 'wallet_call_duration_seconds',
      help: 'Calls to operator wallets: time to the answer (or the timeout), by operator, kind (transaction | balance) and outcome',
      labelNames: ['operator', 'kind', 'outcome'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.walletRetries = new Counter({
      name: 'wallet_retries_total',
      help: 'Wallet transaction calls after the first for the same transaction (worker retries and resubmissions)',
      labelNames: ['operator'],
      registers,
    });
    this.deadLetters = new Counter({
      name: 'wallet_dead_letters_total',
      help: 'Transactions this process dead-lettered (retries stopped after DISPATCH_RETRY_WINDOW_SECONDS)',
      labelNames: ['operator'],
      registers,
    });
    this.refusals = new Counter({
      name: 'rate_limit_refusals_total',
      help: 'Operator requests refused with 429 by the per-operator rate limit',
      labelNames: ['operator'],
      registers,
    });
    this.backlogRefusals = new Counter({
      name: 'outcome_backlog_refusals_total',
      help: 'New provider transactions refused with 503 after 5 s without room in the outcomes\' write-behind, by the player\'s operator (nothing recorded)',
      labelNames: ['operator'],
      registers,
    });
    this.projectionFailures = new Counter({
      name: 'projection_apply_failures_total',
      help: 'Attempts of a projection run by this process at an event it could not apply (each names the event in the log)',
      labelNames: ['projection'],
      registers,
    });
    this.chainRefusals = new Counter({
      name: 'chain_signing_refusals_total',
      help: 'Signing rounds of this process that left a chain unsigned because it no longer holds what was signed before (its tables rewritten: npm run audit -- verify-chain), by chain (global or the operator)',
      labelNames: ['chain'],
      registers,
    });
    this.chainWitnessRefusals = new Counter({
      name: 'chain_witness_refusals_total',
      help: "Checks of this process, standing by while another one's runner links the chain, that found its tables holding links it cannot compute again from the log (it will not link after them: npm run audit -- verify-chain)",
      registers,
    });
    this.kickFenceMisses = new Counter({
      name: 'kick_fence_missed_total',
      help: "Transactions this process recorded on EventStoreDB after a kick of their player, while the kick fence's Postgres connection was being lost (a failover): the kick may have been acknowledged first",
      registers,
    });
    this.strayBatches = new Counter({
      name: 'grant_stray_batches_total',
      help: "Free-spin batches a provider accepted that their grant does not hold (the grant already failed, or holding another batch), by the grant's status and whether this process's cancel of the batch at the provider succeeded",
      labelNames: ['grant', 'cancelled'],
      registers,
    });
    this.httpRequests = new Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP requests answered by this process, by method, route template (unmatched: no route) and status',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    const backlog = () => this.outcomeBacklog;
    new Gauge({
      name: 'outcome_backlog_writes',
      help: 'Wallet outcomes this api process answered and has not recorded yet (the write-behind; at 2,000 new transactions wait)',
      registers,
      collect() {
        this.set(backlog()?.size ?? 0);
      },
    });
    new Gauge({
      name: 'outcome_backlog_bytes',
      help: 'Characters of the wallet replies those outcomes hold, and expected from the transactions let in after a wait, at their operator\'s usual reply size (at OUTCOME_BACKLOG_BYTES new transactions wait; after 5 s they are refused with 503)',
      registers,
      collect() {
        this.set(backlog()?.bytes ?? 0);
      },
    });
    new Gauge({
      name: 'outcome_backlog_operator_bytes',
      help: 'The same by operator, whose wallet replied (at OUTCOME_BACKLOG_OPERATOR_BYTES that operator\'s new transactions wait, the others\' go on)',
      labelNames: ['operator'],
      registers,
      collect() {
        this.reset();
        for (const [operator, bytes] of backlog()?.byOperator ?? []) this.set({ operator }, bytes);
      },
    });
    new Gauge({
      name: 'outcome_backlog_waiting',
      help: 'New transactions waiting for room in the outcomes\' write-behind',
      registers,
      collect() {
        this.set(backlog()?.waiting ?? 0);
      },
    });
    const snapshot = () => this.readModels?.();
    new Gauge({
      name: 'projection_lag_events',
      help: 'Events in the log a projection owned by this process has not applied yet (counted up to 10000)',
      labelNames: ['projection'],
      registers,
      async collect() {
        const snap = await snapshot();
        this.reset();
        for (const l of snap?.lag ?? []) this.set({ projection: l.name }, l.eventsBehind);
      },
    });
    new Gauge({
      name: 'projection_lag_seconds',
      help: 'Age of the oldest event a projection owned by this process has not applied yet (0: caught up)',
      labelNames: ['projection'],
      registers,
      async collect() {
        const snap = await snapshot();
        this.reset();
        for (const l of snap?.lag ?? []) this.set({ projection: l.name }, l.msBehind / 1000);
      },
    });
    new Gauge({
      name: 'projection_failing',
      help: '1 while a projection is stuck on an event it cannot apply, else 0 (database-wide, served by projector processes; /readyz names the event)',
      labelNames: ['projection'],
      registers,
      async collect() {
        const snap = await snapshot();
        this.reset();
        for (const [projection, n] of snap?.failing ?? []) this.set({ projection }, n);
      },
    });
    new Gauge({
      name: 'wallet_dead_lettered_transactions',
      help: 'Transactions dead-lettered now, from the rounds read model (database-wide, served by projector processes)',
      labelNames: ['operator'],
      registers,
      async collect() {
        const snap = await snapshot();
        this.reset();
        for (const [operator, n] of snap?.deadLettered ?? []) this.set({ operator }, n);
      },
    });
  }

  /**
   * One wallet transaction call that was made (attempt 1 is the first), timed from `startedAt`
   * (performance.now()), with what the ledger read its answer as (the rounds decider's attemptStatus).
   */
  walletTransaction(operatorId: string, attempt: number, outcome: Exclude<WalletCallOutcome, 'ok'>, startedAt: number): void {
    this.walletCalls.observe({ operator: operatorId, kind: 'transaction', outcome }, elapsed(startedAt));
    if (attempt > 1) this.walletRetries.inc({ operator: operatorId });
  }

  /** One wallet balance call, timed from `startedAt` (performance.now()). */
  walletBalance(operatorId: string, result: OutboundResult, startedAt: number): void {
    const outcome: WalletCallOutcome = result.kind === 'timeout' ? 'timed_out' : result.kind === 'response' && result.status === 200 ? 'ok' : 'failed';
    this.walletCalls.observe({ operator: operatorId, kind: 'balance', outcome }, elapsed(startedAt));
  }

  deadLettered(operatorId: string): void {
    this.deadLetters.inc({ operator: operatorId });
  }

  projectionApplyFailed(projection: string): void {
    this.projectionFailures.inc({ projection });
  }

  /** A chain ('' = the global one) left unsigned by a signing round (services/chain/checkpoints.ts whyNotSign). */
  chainSigningRefused(chain: string): void {
    this.chainRefusals.inc({ chain: chain === '' ? 'global' : chain });
  }

  /** A check of the chain by a standing-by process that refused it (services/chain/projection.ts startChainWitness). */
  chainWitnessRefused(): void {
    this.chainWitnessRefusals.inc();
  }

  /** A transaction recorded while its kick fence was lost, after a kick (shared/eventstore/claim-then-append.ts). */
  kickFenceMissed(): void {
    this.kickFenceMisses.inc();
  }

  /** A stray batch of a grant, cancelled at its provider or not (services/grants/issue.ts). */
  strayBatch(grantStatus: string, cancelled: boolean): void {
    this.strayBatches.inc({ grant: grantStatus, cancelled: String(cancelled) });
  }

  /** The api's outcome write-behind, read at scrape time (services/rounds/outcome-writer.ts). */
  watchOutcomeBacklog(source: OutcomeBacklog): void {
    this.outcomeBacklog = source;
  }

  outcomeBacklogRefused(operatorId: string): void {
    this.backlogRefusals.inc({ operator: operatorId });
  }

  rateLimitRefused(operatorId: string): void {
    this.refusals.inc({ operator: operatorId });
  }

  httpRequest(method: string, route: string, status: number, seconds: number): void {
    this.httpRequests.observe({ method: METHODS.has(method) ? method : 'other', route, status: String(status) }, seconds);
  }

  /**
   * Serves the read-model gauges from this process: lag of the projections its runners own (each
   * projection is owned by one process, so every lag series comes from exactly one) and dead-lettered
   * transactions per operator (operators of the catalog with none show 0). Computed on scrape, at most
   * every READ_MODEL_TTL_MS, and left out of a scrape that would wait for them longer than
   * READ_MODEL_TIMEOUT_MS.
   */
  watchReadModels(opts: {
    /** Dead-lettered transactions per operator (the rounds read model's query). */
    deadLettered: () => Promise<ReadonlyMap<string, number>>;
    runners: Array<LagSource & { readonly projection: { name: string } }>;
    operators: () => Iterable<string>;
    /** The projections stuck on an event (projectionFailures of the runner module). */
    failing: () => Promise<ReadonlyArray<{ name: string }>>;
    logger: Logger;
  }): void {
    let computing: Promise<ReadModelSnapshot | undefined> | undefined;
    let computedAt = 0;
    const compute = async (): Promise<ReadModelSnapshot | undefined> => {
      try {
        const [lag, dead, stuck] = await Promise.all([
          Promise.all(opts.runners.filter((r) => r.isOwner()).map((r) => r.lag())),
          opts.deadLettered(),
          opts.failing(),
        ]);
        const deadLettered = new Map<string, number>();
        for (const id of opts.operators()) deadLettered.set(id, 0);
        for (const [id, n] of dead) deadLettered.set(id, n);
        const failing = new Map<string, number>();
        for (const r of opts.runners) failing.set(r.projection.name, 0);
        for (const r of stuck) failing.set(r.name, 1);
        return { lag, deadLettered, failing };
      } catch (err) {
        opts.logger.warn({ err }, 'metrics: could not read projection lag or dead letters');
        return undefined;
      }
    };
    this.readModels = () => {
      if (!computing || Date.now() - computedAt > READ_MODEL_TTL_MS) {
        computedAt = Date.now();
        computing = compute();
      }
      return within(computing, READ_MODEL_TIMEOUT_MS, () => undefined);
    };
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The Prometheus text exposition: this service's metrics and the process's. */
  exposition(): Promise<string> {
    return Registry.merge([processMetrics(), this.registry]).metrics();
  }
}

export function createMetrics(): Metrics {
  return new Metrics();
}

const elapsed = (startedAt: number): number => (performance.now() - startedAt) / 1000;

const ROUTE = Symbol('route');
const TEMPLATE = Symbol('routeTemplate');
type TrackedRequest = Request & { [ROUTE]?: unknown; [TEMPLATE]?: string };

/**
 * Times every request of `app` and labels it with the express route template that matched (mount
 * path plus route path, e.g. /v1/audit/rounds/:providerId/:operatorId/:roundId), never the raw URL: ids
 * in paths would make a series per id. A request no route matched (refused by a middleware before it:
 * a bad signature, the rate limit, an unknown path) is `unmatched`.
 *
 * Express sets req.route when a route matches, while req.baseUrl still holds the mount path (it is
 * restored on the way out, e.g. when the route's handler throws): the template is taken at that moment,
 * by an accessor defined once on the app's request prototype. (It was defined on each request, with a
 * new getter and setter every time; A/B runs of the two measured anywhere from no difference to a tenth
 * of the api's CPU a transaction, on a machine whose noise is a few per cent.)
 */
export function httpMetrics(app: Express, metrics: Metrics): RequestHandler {
  Object.defineProperty(app.request, 'route', {
    configurable: true,
    enumerable: true,
    get(this: TrackedRequest) {
      return this[ROUTE];
    },
    set(this: TrackedRequest, value: unknown) {
      this[ROUTE] = value;
      const path = (value as { path?: unknown } | undefined)?.path;
      // baseUrl is the mount path as the caller wrote it, and Express matches paths whatever their case:
      // the mounts are lowercase, so the template is too (else every case of a path a series of its own).
      if (path !== undefined) this[TEMPLATE] = this.baseUrl.toLowerCase() + String(path);
    },
  });
  return (req: TrackedRequest, res: Response, next: NextFunction) => {
    const started = performance.now();
    res.once('finish', () => metrics.httpRequest(req.method, req[TEMPLATE] ?? 'unmatched', res.statusCode, (performance.now() - started) / 1000));
    next();
  };
}

/** GET /metrics: the text exposition (mount it behind the admin bearer check). */
export function metricsEndpoint(metrics: Metrics): RequestHandler {
  return async (_req: Request, res: Response) => {
    const body = await metrics.exposition();
    res.set('Content-Type', metrics.contentType).send(body);
  };
}

/** What the outcome backlog's gauges read (OutcomeWriter), at scrape time. */
interface OutcomeBacklog {
  /** Outcomes answered and not yet recorded. */
  readonly size: number;
  readonly bytes: number;
  readonly waiting: number;
  readonly byOperator: ReadonlyMap<string, number>;
}
