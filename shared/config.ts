import { createPrivateKey } from 'node:crypto';
import { userInfo } from 'node:os';
import { z } from 'zod';

export const ROLE_NAMES = ['api', 'worker', 'projector', 'reconciler'] as const;
export type Role = (typeof ROLE_NAMES)[number];

/** Node timers hold at most 2^31-1 ms (a longer one fires at once); int4 columns hold as much. */
const MAX_TIMER_MS = 2_147_483_647;
/** Whole seconds that still fit a Node timer in ms (24.8 days). */
const MAX_SECONDS = Math.floor(MAX_TIMER_MS / 1000);
const positiveInt = (fallback: number, max = MAX_SECONDS) => z.coerce.number().int().positive().max(max).default(fallback);
const positiveMs = (fallback: number) => positiveInt(fallback, MAX_TIMER_MS);

const rolesSchema = z
  .string()
  .default(ROLE_NAMES.join(','))
  .transform((raw, ctx) => {
    const roles = raw.split(',').map((r) => r.trim()).filter((r) => r.length > 0);
    const unknown = roles.filter((r) => !(ROLE_NAMES as readonly string[]).includes(r));
    if (unknown.length > 0 || roles.length === 0) {
      ctx.addIssue({ code: 'custom', message: `expected a comma list of ${ROLE_NAMES.join(', ')}; got "${raw}"` });
      return z.NEVER;
    }
    return [...new Set(roles)] as Role[];
  });

/**
 * `postgres`, or a connection string @eventstore/db-client 6 takes: `esdb://` or `esdb+discover://` and
 * at least one host. (`kurrentdb://` is the newer KurrentDB client's scheme, which this client refuses at
 * its first call: said here, at start, instead.)
 */
const eventStoreSchema = z
  .string()
  .default('postgres')
  .superRefine((v, ctx) => {
    if (v === 'postgres') return;
    const scheme = /^([a-z+]+):\/\//.exec(v)?.[1];
    if (scheme === 'kurrentdb' || scheme === 'kurrent' || scheme === 'kdb') {
      // The rest of the string as given, its credentials masked: the message goes to the log.
      const rest = v.slice(scheme.length + 3).replace(/^[^/?@]*@/, '<user>:<password>@');
      ctx.addIssue({ code: 'custom', message: `the ${scheme}:// scheme is the KurrentDB client's; this service's EventStoreDB client takes the same string as esdb://${rest}` });
    } else if (scheme !== 'esdb' && scheme !== 'esdb+discover') {
      ctx.addIssue({ code: 'custom', message: 'expected "postgres" or an EventStoreDB connection string (esdb://host:2113?tls=false)' });
    } else if (!/^[a-z+]+:\/\/([^/?@]*@)?[^/?@:,]+/.test(v)) {
      ctx.addIssue({ code: 'custom', message: 'expected a host in the EventStoreDB connection string (esdb://host:2113?tls=false)' });
    }
  });

const envSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  // Loopback unless asked: a machine's other interfaces only when the operator says so (compose: 0.0.0.0).
  HOST: z.union([z.ipv4(), z.ipv6(), z.literal('localhost')], { error: 'expected an IP address to listen on, e.g. 127.0.0.1 or 0.0.0.0' }).default('127.0.0.1'),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'expected a postgres:// URL')
    // A host and a database name, each as a URL writes it (a "%" starts an escape: "%zz" is no name).
    .refine(
      (v) => URL.canParse(v) && (new URL(v).hostname !== '' || new URL(v).searchParams.has('host')),
      'expected a postgres:// URL with a host (or ?host=/socket/directory), such as postgres://127.0.0.1:5432/ledger',
    )
    .refine((v) => !URL.canParse(v) || databaseName(v) !== undefined, 'expected the database name after the host, written as a URL writes it (%25 for a "%")')
    .default('postgres://127.0.0.1:5432/ledger'),
  // Most connections one process holds for its queries (services/connections.ts counts the others it opens).
  DATABASE_POOL_SIZE: z.coerce.number().int().min(2).max(1000).default(20),
  // The database number, when given, is digits: ioredis would select NaN and crash after the start's migrations.
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\/[^/?#]*(\/(\d{1,5})?)?([?#].*)?$/, 'expected a redis:// URL, with a database number of digits after the host if any (redis://host:6379/3)')
    .default('redis://127.0.0.1:6379'),
  EVENT_STORE: eventStoreSchema,
  CATALOG_FILE: z.string().min(1).optional(),
  ROLES: rolesSchema,
  STALE_ROUND_AFTER_SECONDS: positiveInt(3600),
  RECONCILE_INTERVAL_SECONDS: positiveInt(60),
  SESSION_TTL_SECONDS: positiveInt(14400),
  REPLAY_LINK_TTL_SECONDS: positiveInt(900),
  SIGNATURE_WINDOW_SECONDS: positiveInt(300),
  ADMIN_TOKEN: z.string().min(1).optional(),
  // Not in the contract: tuning of wallet retries and recovery (defaults are the contract's 1 s and 24 h).
  DISPATCH_BACKOFF_BASE_MS: positiveMs(1000),
  DISPATCH_BACKOFF_MAX_MS: positiveMs(600_000),
  DISPATCH_RETRY_WINDOW_SECONDS: positiveInt(86_400),
  RECOVERY_SWEEP_SECONDS: positiveInt(10),
  // Each operator's retries have slots of their own (contract section 8, rule 8): this many per operator.
  DISPATCH_CONCURRENCY_PER_OPERATOR: positiveInt(32),
  // The hash chain's checkpoints (contract section 10): how often they are signed, and with which key.
  CHAIN_CHECKPOINT_SECONDS: positiveInt(60),
  CHAIN_SIGNING_KEY: z
    .string()
    // A PEM passed through an environment file often has its line breaks written as \n.
    .transform((v) => v.replaceAll('\\n', '\n'))
    .superRefine((v, ctx) => {
      try {
        const key = createPrivateKey(v);
        if (key.asymmetricKeyType !== 'ed25519') ctx.addIssue({ code: 'custom', message: `expected an Ed25519 private key, got ${key.asymmetricKeyType ?? 'another kind'}` });
      } catch {
        ctx.addIssue({ code: 'custom', message: 'expected an Ed25519 private key as a PKCS#8 PEM (-----BEGIN PRIVATE KEY-----)' });
      }
    })
    .optional(),
  // api role: characters of wallet replies answered and not yet recorded (the outcomes' write-behind)
  // above which new transactions wait, and after 5 s are refused with 503.
  OUTCOME_BACKLOG_BYTES: z.coerce.number().int().min(1024).max(2 ** 31).default(16 * 1024 * 1024),
  // api role: the same for one operator's wallet replies, above which that operator's new transactions
  // wait while the others' go on. Unset: a quarter of OUTCOME_BACKLOG_BYTES, at least 1,024.
  OUTCOME_BACKLOG_OPERATOR_BYTES: z.coerce.number().int().min(1024).max(2 ** 31).optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  // How far above what survived its last full collection V8 lets the heap grow before the next one, in per
  // cent; 0 leaves it to V8, which lets a busy process's heap grow to several times its live data. Unset:
  // defaultHeapGrowingPercent of the process's roles.
  HEAP_GROWING_PERCENT: z.coerce.number().int().min(0).max(400).optional(),
});

/**
 * HEAP_GROWING_PERCENT when it is not set: 20 for a process that serves the api, whose memory operators
 * size for (docs/operations.md, Memory); V8's own (0) for one that does not. Bounded, the worker and
 * projector's heap was collected whole about every two seconds under load, and each full collection's
 * helper threads took the cores the api and Postgres answer on: the ledger's p99 at 500 and 1000 tx/s was
 * 6-7 ms higher than with that process left to V8 (docs/benchmarks.md, Measured design decisions).
 */
export const defaultHeapGrowingPercent = (roles: readonly Role[]): number => (roles.includes('api') ? 20 : 0);

export interface Config {
  port: number;
  host: string;
  databaseUrl: string;
  /** Most connections the process's query pool holds. */
  databasePoolSize: number;
  redisUrl: string;
  eventStore: string;
  catalogFile: string | undefined;
  roles: Role[];
  staleRoundAfterSeconds: number;
  reconcileIntervalSeconds: number;
  sessionTtlSeconds: number;
  replayLinkTtlSeconds: number;
  signatureWindowSeconds: number;
  adminToken: string | undefined;
  dispatchBackoffBaseMs: number;
  dispatchBackoffMaxMs: number;
  dispatchRetryWindowSeconds: number;
  recoverySweepSeconds: number;
  dispatchConcurrencyPerOperator: number;
  chainCheckpointSeconds: number;
  /** PKCS#8 PEM; unset: a key generated once and kept in the database. */
  chainSigningKey: string | undefined;
  /** Characters of wallet replies the api holds answered and not yet recorded before new transactions wait. */
  outcomeBacklogBytes: number;
  /** The same for one operator's replies, above which that operator's new transactions wait. */
  outcomeBacklogOperatorBytes: number;
  logLevel: string;
  /** V8's heap growing factor over the live data, in per cent (0: V8's own); by default by the roles. */
  heapGrowingPercent: number;
}

/** One operator's share of the outcomes' backlog when OUTCOME_BACKLOG_OPERATOR_BYTES is unset: a quarter of the whole, at least 1,024 (never more than the whole). */
export const defaultOperatorShare = (wholeBytes: number): number => Math.min(wholeBytes, Math.max(1024, Math.floor(wholeBytes / 4)));

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Parses the environment; throws a ConfigError naming every bad variable. Empty strings count as unset. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = envSchema.safeParse(cleaned);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n  ${lines.join('\n  ')}`);
  }
  const e = parsed.data;
  const operatorShare = e.OUTCOME_BACKLOG_OPERATOR_BYTES ?? defaultOperatorShare(e.OUTCOME_BACKLOG_BYTES);
  if (operatorShare > e.OUTCOME_BACKLOG_BYTES) {
    throw new ConfigError(`invalid configuration:\n  OUTCOME_BACKLOG_OPERATOR_BYTES: must be at most OUTCOME_BACKLOG_BYTES (${e.OUTCOME_BACKLOG_BYTES})`);
  }
  return {
    port: e.PORT,
    host: e.HOST,
    databaseUrl: withDefaultUser(e.DATABASE_URL, env),
    databasePoolSize: e.DATABASE_POOL_SIZE,
    redisUrl: e.REDIS_URL,
    eventStore: e.EVENT_STORE,
    catalogFile: e.CATALOG_FILE,
    roles: e.ROLES,
    staleRoundAfterSeconds: e.STALE_ROUND_AFTER_SECONDS,
    reconcileIntervalSeconds: e.RECONCILE_INTERVAL_SECONDS,
    sessionTtlSeconds: e.SESSION_TTL_SECONDS,
    replayLinkTtlSeconds: e.REPLAY_LINK_TTL_SECONDS,
    signatureWindowSeconds: e.SIGNATURE_WINDOW_SECONDS,
    adminToken: e.ADMIN_TOKEN,
    dispatchBackoffBaseMs: e.DISPATCH_BACKOFF_BASE_MS,
    dispatchBackoffMaxMs: e.DISPATCH_BACKOFF_MAX_MS,
    dispatchRetryWindowSeconds: e.DISPATCH_RETRY_WINDOW_SECONDS,
    recoverySweepSeconds: e.RECOVERY_SWEEP_SECONDS,
    dispatchConcurrencyPerOperator: e.DISPATCH_CONCURRENCY_PER_OPERATOR,
    chainCheckpointSeconds: e.CHAIN_CHECKPOINT_SECONDS,
    chainSigningKey: e.CHAIN_SIGNING_KEY,
    outcomeBacklogBytes: e.OUTCOME_BACKLOG_BYTES,
    outcomeBacklogOperatorBytes: operatorShare,
    logLevel: e.LOG_LEVEL,
    heapGrowingPercent: e.HEAP_GROWING_PERCENT ?? defaultHeapGrowingPercent(e.ROLES),
  };
}

/** The database a postgres:// URL names (its path, decoded), or undefined when it names none or cannot be decoded. */
export function databaseName(url: string): string | undefined {
  try {
    const name = decodeURIComponent(new URL(url).pathname.slice(1));
    return name === '' ? undefined : name;
  } catch {
    return undefined;
  }
}

/**
 * libpq connects as the OS user when the URL names none; node-pg only looks at $USER, which is not
 * always set (containers, CI). Fill the user in the libpq way so the default URL works everywhere.
 */
function withDefaultUser(url: string, env: NodeJS.ProcessEnv): string {
  const parsed = new URL(url);
  if (parsed.username) return url;
  parsed.username = env.PGUSER || env.USER || userInfo().username;
  return parsed.toString();
}
