import { z } from 'zod';
import { amountMinor, currencyCode } from '../../shared/bounds.ts';
import { STALE_ROLLBACK_PREFIX, TRANSACTION_TYPES } from './events.ts';

export const METADATA_MAX_BYTES = 8 * 1024;

/** Whether every number in a parsed JSON value is finite: JSON.parse makes 1e400 Infinity, which JSON keeps as null. */
function numbersFinite(value: unknown): boolean {
  const stack: unknown[] = [value]; // iterative: nesting depth is bounded only by the body size
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'number' && !Number.isFinite(v)) return false;
    if (v !== null && typeof v === 'object') stack.push(...Object.values(v));
  }
  return true;
}

/**
 * Provider-supplied and opaque (API document 2.11): a JSON object of at most 8 KiB, stored and forwarded
 * verbatim, so it may not hold a number past a double (1e400 would be kept and sent as null).
 */
export const transactionMetadata = z
  .custom<Record<string, unknown>>((v) => typeof v === 'object' && v !== null && !Array.isArray(v), 'expected a JSON object')
  .refine((v) => Buffer.byteLength(JSON.stringify(v), 'utf8') <= METADATA_MAX_BYTES, `must be at most ${METADATA_MAX_BYTES} bytes of JSON`)
  .refine((v) => numbersFinite(v), 'holds a number too large for a double (e.g. 1e400), which cannot be kept verbatim');

/**
 * A transactionId a provider or an adjustment may use: the prefix `stale-rollback:` is the reconciler's
 * (contract section 8), so nobody else can pre-empt, or collide with, a stale round's refund.
 */
export const submittedTransactionId = z
  .string()
  .min(1)
  .max(255)
  .refine((id) => !id.startsWith(STALE_ROLLBACK_PREFIX), `the prefix ${STALE_ROLLBACK_PREFIX} is reserved`);

/** TransactionRequest (API document 2.10) as a provider submits it. */
export const transactionBody = z
  .strictObject({
    transactionId: submittedTransactionId,
    sessionToken: z.string().min(1).max(512),
    type: z.enum(TRANSACTION_TYPES),
    roundId: z.string().min(1).max(255),
    roundComplete: z.boolean().optional(),
    originalTransactionId: z.string().min(1).max(255).optional(),
    playerRef: z.string().min(1).max(255),
    amount: amountMinor(),
    currency: currencyCode(),
    gameId: z.string().min(1).max(200),
    direction: z.enum(['DEBIT', 'CREDIT']).optional(),
    metadata: transactionMetadata.optional(),
  })
  .superRefine((b, ctx) => {
    if ((b.type === 'BET' || b.type === 'WIN') && b.roundComplete === undefined) {
      ctx.addIssue({ code: 'custom', path: ['roundComplete'], message: `required for a ${b.type}` });
    }
    if (b.type === 'ROLLBACK' && b.originalTransactionId === undefined) {
      ctx.addIssue({ code: 'custom', path: ['originalTransactionId'], message: 'required for a ROLLBACK' });
    }
    if (b.type !== 'ROLLBACK' && b.originalTransactionId !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['originalTransactionId'], message: 'allowed only on a ROLLBACK' });
    }
    if (b.type !== 'ADJUSTMENT' && b.direction !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['direction'], message: 'allowed only on an ADJUSTMENT' });
    }
  });
export type TransactionBody = z.infer<typeof transactionBody>;

// What the operator's wallet receives and answers (API document 2.10, 2.12, 4.2). The OpenAPI document
// describes these as the webhooks operators implement; test/docs checks real wallet calls against them.

/**
 * The body the service sends to POST {walletUrl}/v1/wallet/transaction, identical on every retry. Looser
 * than transactionBody where the service itself writes: a stale-round rollback's id is
 * `stale-rollback:<bet id>`, an adjustment without a game has gameId "".
 */
export const walletTransactionRequest = z.strictObject({
  transactionId: z.string().min(1),
  sessionToken: z.string().min(1),
  type: z.enum(TRANSACTION_TYPES),
  roundId: z.string().min(1),
  roundComplete: z.boolean(),
  originalTransactionId: z.string().min(1).optional(),
  playerRef: z.string().min(1),
  amount: amountMinor(),
  currency: currencyCode(),
  gameId: z.string(),
  direction: z.enum(['DEBIT', 'CREDIT']).optional(),
  metadata: transactionMetadata.optional(),
});

/** TransactionResponse: the wallet's 200 reply, which the provider receives verbatim. */
export const transactionResponse = z.looseObject({
  status: z.enum(['OK', 'DECLINED']),
  balance: z.number().int(),
});

/** POST /v1/operator/rounds/replay's answer (API document 4.1.4). */
export const replayResponse = z.strictObject({ replayUrl: z.string() });
