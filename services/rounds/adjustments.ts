import { randomUUID } from 'node:crypto';
import { Router } from 'express';
import { z } from 'zod';
import { amountMinor, currencyCode } from '../../shared/bounds.ts';
import { ADMIN_SESSION, PLATFORM_PROVIDER, roundStream, type TransactionRequest } from './events.ts';
import { badRequest, notFound } from '../../shared/errors.ts';
import { parseOr400 } from '../../shared/http/validate.ts';
import type { ServiceContext } from '../context.ts';
import { submitTransaction, type LedgerDeps } from './submit.ts';
import { submittedTransactionId } from './schemas.ts';
import { adjustmentAnswer } from './answers.ts';

export const adjustmentBody = z.strictObject({
  operatorId: z.string().min(1),
  playerRef: z.string().min(1).max(255),
  amount: amountMinor().min(1, 'expected a positive integer'),
  currency: currencyCode(),
  direction: z.enum(['DEBIT', 'CREDIT']),
  /** Optional: a retry with the same id is answered from the first (idempotent). Generated when omitted. */
  transactionId: submittedTransactionId.optional(),
  gameId: z.string().max(200).optional(),
  // Kept as written; one of only spaces says nothing to whoever reads the history.
  reason: z
    .string({ error: 'say why' })
    .max(1000, 'at most 1000 characters')
    .refine((v) => v.trim() !== '', 'say why'),
});

/** POST /v1/admin/adjustments: a manual balance correction, dispatched and retried like a WIN. */
export function adjustmentRoutes(ctx: ServiceContext, ledger: LedgerDeps): Router {
  const router = Router();
  router.post('/adjustments', async (req, res) => {
    const body = parseOr400(adjustmentBody, req.body);
    const catalog = ctx.catalog.snapshot();
    if (!catalog.operators.has(body.operatorId)) throw notFound('operator not found');
    // A game named is one of the catalog's: the statement and the console file the adjustment under it.
    if (body.gameId && !catalog.games.has(body.gameId)) throw badRequest(`gameId: unknown game "${body.gameId}"`);
    const transactionId = body.transactionId ?? `adj-${randomUUID()}`;
    const roundId = `adjustment:${transactionId}`;
    const request: TransactionRequest = {
      transactionId,
      sessionToken: ADMIN_SESSION,
      type: 'ADJUSTMENT',
      roundId,
      roundComplete: false,
      playerRef: body.playerRef,
      amount: body.amount,
      currency: body.currency,
      gameId: body.gameId ?? '',
      direction: body.direction,
      metadata: { reason: body.reason },
    };
    const tx = await submitTransaction(ledger, {
      request,
      registryKey: PLATFORM_PROVIDER,
      providerId: PLATFORM_PROVIDER,
      operatorId: body.operatorId,
      origin: 'admin',
      roundStream: roundStream(PLATFORM_PROVIDER, body.operatorId, roundId),
      sessionExpired: false,
    });
    const answer = adjustmentAnswer(tx);
    res.status(answer.status).json(answer.body);
  });
  return router;
}
