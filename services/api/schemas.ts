import { z } from 'zod';
import { TX_STATUSES } from '../rounds/decider.ts';
import { ORIGINS, TRANSACTION_TYPES } from '../rounds/events.ts';
import { grantSchema } from '../grants/schemas.ts';
import { operatorStatusSchema, roundDetails } from '../reconciliation/schemas.ts';

// Response bodies of the health, admin (the console's included) and audit routes, and the error body
// every route shares. The OpenAPI document (services/api/openapi) is generated from these, and test/docs
// checks real responses against them. Request schemas stay beside their routers (adjustments.ts,
// redrive.ts, audit.ts, shared/catalog).

/** Every error except the plain-text 401 of a bad signature (shared/http/errors.ts renders it). */
export const errorBody = z.strictObject({ error: z.string() });

/**
 * A body of POST /v1/wallet/balance at a status both the service and the wallet may answer: the
 * service's Error, or (with X-Wallet-Passthrough: true) whatever the wallet answered, verbatim.
 */
export const walletBody = z.unknown();
export const errorOrWalletBody = z.union([errorBody, walletBody]);

/** The plain-text 401 of a refused signature. */
export const invalidSignatureText = z.literal('invalid signature');

export const healthResponse = z.strictObject({ status: z.literal('ok') });
/** A read model stuck on an event it cannot apply (#18 part 8): it names the event and the error. */
export const failingProjection = z.strictObject({
  name: z.string(),
  position: z.string(),
  eventType: z.string(),
  streamId: z.string(),
  error: z.string(),
  since: z.iso.datetime(),
});
/**
 * Ready, or degraded: the money path works (it reads no read model) while a read model is stuck on an
 * event, so the process stays in rotation and says which read model, event and error.
 */
export const readyResponse = z.union([
  z.strictObject({ status: z.literal('ready') }),
  z.strictObject({ status: z.literal('degraded'), failingProjections: z.array(failingProjection).min(1) }),
]);
export const notReadyResponse = z.strictObject({
  error: z.string(),
  down: z.array(z.enum(['postgres', 'redis', 'eventstore'])).min(1),
});

export const catalogCounts = z.strictObject({
  providers: z.number().int().nonnegative(),
  games: z.number().int().nonnegative(),
  operators: z.number().int().nonnegative(),
  campaigns: z.number().int().nonnegative(),
});

export const projectionsResponse = z.strictObject({
  projections: z.array(
    z.strictObject({
      name: z.string(),
      position: z.string(),
      eventsBehind: z.number().int().nonnegative(),
      msBehind: z.number().nonnegative(),
      owned: z.boolean().optional(),
    }),
  ),
});

const txStatus = z.enum(TX_STATUSES);
const walletReplySummary = z.strictObject({ status: z.enum(['OK', 'DECLINED']), balance: z.number().int() });

export const adjustmentResponse = z.strictObject({
  transactionId: z.string(),
  status: txStatus,
  attempts: z.number().int().nonnegative(),
  reply: walletReplySummary.optional(),
  lastError: z.string().optional(),
  retrying: z.boolean(),
});

const jsonObject = z.record(z.string(), z.unknown());

export const auditEvent = z.strictObject({
  position: z.string(),
  streamId: z.string(),
  revision: z.number().int().nonnegative(),
  id: z.string(),
  type: z.string(),
  data: jsonObject,
  metadata: jsonObject,
  /** "" when the store holds no time a date can (a row edited by hand): recordedAtText. */
  createdAt: z.union([z.iso.datetime(), z.literal('')]),
});

export const eventsPage = z.strictObject({ events: z.array(auditEvent), next: z.string() });

export const streamEvents = z.strictObject({ streamId: z.string(), events: z.array(auditEvent) });

export const roundState = z.strictObject({
  completed: z.boolean(),
  playerRef: z.string().optional(),
  gameId: z.string().optional(),
  lastActivityAt: z.iso.datetime().optional(),
  outstandingBets: z.array(z.string()).meta({ description: 'BETs neither declined nor rolled back, in a round its provider has not completed: what the reconciler would refund were the round stale. None once the provider completed it.' }),
  transactions: z.array(
    z.strictObject({
      transactionId: z.string(),
      type: z.enum(TRANSACTION_TYPES),
      amount: z.number().int().nonnegative(),
      origin: z.enum(ORIGINS),
      status: txStatus,
      attempts: z.number().int().nonnegative(),
      redrivable: z.boolean().meta({ description: 'Whether `POST /v1/admin/transactions/redrive` would take it now: a WIN, ROLLBACK or ADJUSTMENT that is dead (retries stopped, or the wallet answered DECLINED).' }),
      rolledBackBy: z.string().optional(),
      reply: walletReplySummary.optional(),
      lastError: z.string().optional(),
    }),
  ),
});

/**
 * Time travel (`asOf` on the round, session-stream and grant routes): the instant as asked, the position
 * of the last event folded (null when none was recorded by then) and the state then. Present only when
 * `asOf` was given; without it the answer is as it always was.
 */
const asOfInstant = z.iso.datetime({ offset: true });
const foldedPosition = z.string().nullable();

export const roundHistory = z.strictObject({
  streamId: z.string(),
  asOf: asOfInstant.optional(),
  position: foldedPosition.optional(),
  state: roundState.optional(),
  history: z.array(z.strictObject({ event: auditEvent, stateAfter: roundState })),
});

const nullableTime = z.iso.datetime().nullable();

const openSessionsState = z.strictObject({
  openSessions: z.array(z.strictObject({ token: z.string(), providerId: z.string(), expiresAt: z.iso.datetime(), demo: z.boolean() })),
});

export const playerSessionsHistory = z.strictObject({
  asOf: asOfInstant.optional(),
  position: foldedPosition.optional(),
  state: openSessionsState.optional(),
  history: z.array(z.strictObject({ event: auditEvent, stateAfter: openSessionsState })),
  /** rm_sessions rows, column names as stored. */
  sessions: z.array(
    z.strictObject({
      token: z.string(),
      provider_id: z.string(),
      game_id: z.string(),
      currency: z.string(),
      language: z.string().nullable(),
      demo: z.boolean(),
      created_at: z.iso.datetime(),
      expires_at: z.iso.datetime(),
      revoked_at: nullableTime,
    }),
  ),
});

/** A grant's state before its first event: no grant yet. */
const noGrantYet = z.strictObject({ status: z.literal('none') });

export const grantHistory = z.strictObject({
  asOf: asOfInstant.optional(),
  position: foldedPosition.optional(),
  state: z.union([grantSchema, noGrantYet]).optional(),
  history: z.array(z.strictObject({ event: auditEvent, stateAfter: grantSchema })),
});

export const auditTransactions = z.strictObject({
  /** rm_transactions rows, column names as stored. */
  transactions: z.array(
    z.strictObject({
      provider_id: z.string(),
      operator_id: z.string(),
      round_id: z.string(),
      round_stream: z.string(),
      transaction_id: z.string(),
      type: z.enum(TRANSACTION_TYPES),
      player_ref: z.string(),
      amount: z.number().int().nonnegative(),
      currency: z.string(),
      status: txStatus,
      attempts: z.number().int().nonnegative(),
      last_error: z.string().nullable(),
      recorded_at: z.iso.datetime(),
      dead_lettered_at: nullableTime,
      updated_at: z.iso.datetime(),
    }),
  ),
  nextCursor: z.string().nullable().meta({ description: 'Pass it as cursor for the next page (with the same status); null on the last one.' }),
});

// The hash chain (GET /v1/audit/chain/*, GET /v1/operator/history/*): services/chain/routes.ts answers these.

const link = z.string().regex(/^[0-9a-f]{64}$/);
const keyId = z.string().regex(/^[0-9a-f]{16}$/);

/** A signed checkpoint of the global chain. */
export const chainCheckpoint = z.strictObject({
  position: z.string(),
  link,
  count: z.number().int().positive(),
  signedAt: z.iso.datetime(),
  keyId,
  // An Ed25519 signature is 64 bytes: 88 characters of base64.
  signature: z.string().regex(/^[A-Za-z0-9+/]{86}==$/),
});
/** A signed checkpoint of one operator's chain. */
export const operatorCheckpoint = z.strictObject({ operatorId: z.string(), ...chainCheckpoint.shape });

export const chainCheckpoints = z.strictObject({ checkpoints: z.array(chainCheckpoint) });
export const operatorCheckpoints = z.strictObject({ checkpoints: z.array(operatorCheckpoint) });

/** The public key checkpoints are verified with: an Ed25519 key as an SPKI PEM. */
export const chainPublicKeyPem = z.string().regex(/^-----BEGIN PUBLIC KEY-----\n[A-Za-z0-9+/=\n]+-----END PUBLIC KEY-----\n?$/);

/**
 * One event of an operator's chain. An event the chain linked but the store no longer holds is shown
 * with type `(missing from the event store)`, data and metadata null and recordedAt "": recomputing
 * the chain breaks there, as it should. So does an event whose stored time is no time (recordedAt "" too).
 */
export const historyEvent = z.strictObject({
  count: z.number().int().positive(),
  stream: z.string(),
  type: z.string(),
  data: jsonObject.nullable(),
  metadata: jsonObject.nullable(),
  position: z.string(),
  recordedAt: z.union([z.iso.datetime(), z.literal('')]),
  link,
});
export const historyEventsPage = z.strictObject({ events: z.array(historyEvent), next: z.number().int().nonnegative() });

/** Prometheus text exposition (GET /metrics). */
export const metricsText = z.string();

// The back-office console (services/console/routes.ts) and the re-drive (services/rounds/redrive.ts),
// under /v1/admin: what they answer.

const count = z.number().int().nonnegative();
const minorUnits = z.number().int().nonnegative();

/** POST /v1/admin/transactions/redrive: the re-drive is recorded; the worker sends it. */
export const redriveResponse = z.strictObject({ transactionId: z.string(), status: z.literal('redriven') });

/** A latency percentile of a bucket, in ms (the upper bound of its histogram bucket); null when no call was made. */
const percentile = z.number().nonnegative().nullable();

export const consoleOverview = z.strictObject({
  window: z.enum(['hour', 'day']),
  bucketSeconds: z.union([z.literal(60), z.literal(900)]),
  generatedAt: z.iso.datetime(),
  transactions: z.array(z.strictObject({ at: z.iso.datetime(), count })),
  wallet: z.array(
    z.strictObject({
      operatorId: z.string(),
      buckets: z.array(z.strictObject({ at: z.iso.datetime(), calls: count, failures: count, p50Ms: percentile, p99Ms: percentile })),
    }),
  ),
  unsettled: z.strictObject({ pending: count, failed: count, dead: count }),
  projections: z.array(z.strictObject({ name: z.string(), eventsBehind: count, msBehind: z.number().nonnegative() })),
  lagHistory: z
    .array(
      z.strictObject({
        name: z.string(),
        buckets: z.array(z.strictObject({ at: z.iso.datetime(), eventsBehind: count.nullable(), msBehind: z.number().nonnegative().nullable() })),
      }),
    )
    .meta({ description: 'Per projection and bucket, the most it was behind as the projector processes sampled it every 10 s (null: no sample).' }),
  chain: z.strictObject({
    linked: count,
    failing: z.string().nullable().meta({ description: "Why the chain's runner stopped (say a chain rewritten under it), null while it runs." }),
    signingLate: z.boolean().meta({ description: 'Events were linked after the last checkpoint, which is older than two checkpoint periods and half a minute: the projector is not signing them.' }),
    behind: count,
    lastCheckpointAt: nullableTime,
    lastCheckpointCount: z.number().int().positive().nullable(),
    keyId: keyId.nullable(),
  }),
});

const searchLabel = z.string();
export const consoleSearchResults = z.strictObject({
  results: z.array(
    z.discriminatedUnion('kind', [
      z.strictObject({
        kind: z.literal('transaction'),
        label: searchLabel,
        operatorId: z.string(),
        providerId: z.string(),
        roundId: z.string(),
        gameId: z.string(),
        transactionId: z.string(),
      }),
      z.strictObject({ kind: z.literal('round'), label: searchLabel, operatorId: z.string(), providerId: z.string(), roundId: z.string(), gameId: z.string() }),
      z.strictObject({ kind: z.literal('player'), label: searchLabel, operatorId: z.string(), playerRef: z.string() }),
      z.strictObject({ kind: z.literal('grant'), label: searchLabel, operatorId: z.string(), grantId: z.string(), playerRef: z.string() }),
    ]),
  ),
});

export const consolePlayer = z.strictObject({
  sessions: z.array(
    z.strictObject({
      token: z.string(),
      providerId: z.string(),
      gameId: z.string(),
      currency: z.string(),
      status: z.enum(['active', 'expired', 'kicked']).meta({ description: '`kicked` when a kick ended it while it was valid; a session that expired before a kick is `expired`.' }),
      createdAt: z.iso.datetime(),
      expiresAt: z.iso.datetime(),
      revokedAt: z.iso.datetime().optional().meta({ description: 'When the kick that ended it was recorded; only on a `kicked` session.' }),
    }),
  ),
  rounds: z.array(
    z.strictObject({
      providerId: z.string(),
      roundId: z.string(),
      gameId: z.string(),
      currency: z.string(),
      status: roundDetails.shape.status,
      openedAt: z.iso.datetime(),
      closedAt: z.iso.datetime().optional(),
      betMinor: minorUnits,
      winMinor: minorUnits,
      refundMinor: minorUnits,
    }),
  ),
  roundsTotal: z.number().int().min(0).meta({ description: 'How many rounds the player has with this operator: more than `rounds` holds when it was cut at the newest 200.' }),
  adjustments: z
    .array(
      z.strictObject({
        transactionId: z.string(),
        direction: z.enum(['DEBIT', 'CREDIT']),
        amount: minorUnits,
        currency: z.string(),
        status: operatorStatusSchema,
        recordedAt: z.iso.datetime(),
      }),
    )
    .meta({ description: "The platform's adjustments of the player's balance with this operator, newest first (at most 200)." }),
  grants: z.array(grantSchema),
});

export const consoleStuck = z.strictObject({
  transactions: z.array(
    z.strictObject({
      operatorId: z.string(),
      providerId: z.string(),
      roundId: z.string(),
      gameId: z.string(),
      transactionId: z.string(),
      type: z.enum(TRANSACTION_TYPES),
      amount: minorUnits,
      currency: z.string(),
      status: operatorStatusSchema,
      recordedAt: z.iso.datetime(),
      ageSeconds: count,
      attempts: count,
      lastError: z.string().optional(),
      redrivable: z.boolean().meta({ description: 'Whether `POST /v1/admin/transactions/redrive` would take it: a dead WIN, ROLLBACK or ADJUSTMENT (a BET never is).' }),
    }),
  ),
  total: z.number().int().min(0).meta({ description: 'How many transactions are stuck in all: more than the list holds when it was cut at 1,000 (the oldest are listed).' }),
});

export const consoleOperators = z.strictObject({
  operators: z.array(
    z.strictObject({
      id: z.string(),
      name: z.string(),
      walletUrl: z.string(),
      walletTimeoutMs: z.number().int().positive(),
      rateLimit: z.strictObject({ limit: z.number().int().positive(), windowSeconds: z.number().int().positive() }),
      visibleGames: z.array(z.strictObject({ id: z.string(), name: z.string(), providerId: z.string() })),
    }),
  ),
});

// What the console's routes validate: their own schemas (services/console/routes.ts).
export { adminReplayLinkBody, consoleOverviewQuery, consoleSearchQuery } from '../console/routes.ts';

/** GET /console/vendor/chart.umd.js.map: the source map Chart.js ships beside its UMD build. */
export const sourceMap = z.looseObject({ version: z.literal(3), sources: z.array(z.string()), mappings: z.string() });
