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

export const roundHistory = z.strictObject({
  streamId: z.string(),
  history: z.array(z.strictObject({ event: auditEvent, stateAfter: roundState })),
});

const nullableTime = z.iso.datetime().nullable();

export const playerSessionsHistory = z.strictObject({
  history: z.array(
    z.strictObject({
      event: auditEvent,
      stateAfter: z.strictObject({
        openSessions: z.array(z.strictObject({ token: z.string(), providerId: z.string(), expiresAt: z.iso.datetime(), demo: z.boolean() })),
      }),
    }),
  ),
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

export const grantHistory = z.strictObject({
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

/** Prometheus text exposition (GET /metrics). */
export const metricsText = z.string();
