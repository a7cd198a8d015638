import { z } from 'zod';
import { TX_STATUSES } from '../rounds/decider.ts';
import { ORIGINS, TRANSACTION_TYPES } from '../rounds/events.ts';
import { grantSchema } from '../grants/schemas.ts';

// Response bodies of the health, admin and audit routes, and the error body every route shares. The
// OpenAPI document (services/api/openapi) is generated from these, and test/docs checks real responses
// against them. Request schemas stay beside their routers (adjustments.ts, audit.ts, shared/catalog).

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
  createdAt: z.iso.datetime(),
});

export const eventsPage = z.strictObject({ events: z.array(auditEvent), next: z.string() });

export const streamEvents = z.strictObject({ streamId: z.string(), events: z.array(auditEvent) });

export const roundState = z.strictObject({
  completed: z.boolean(),
  playerRef: z.string().optional(),
  gameId: z.string().optional(),
  lastActivityAt: z.iso.datetime().optional(),
  outstandingBets: z.array(z.string()),
  transactions: z.array(
    z.strictObject({
      transactionId: z.string(),
      type: z.enum(TRANSACTION_TYPES),
      amount: z.number().int().nonnegative(),
      origin: z.enum(ORIGINS),
      status: txStatus,
      attempts: z.number().int().nonnegative(),
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
 * the chain breaks there, as it should.
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
