import { Router } from 'express';
import { z } from 'zod';
import { handleCommand } from '../../shared/eventstore/command.ts';
import { parseOr400 } from '../../shared/http/validate.ts';
import type { LedgerDeps } from './submit.ts';
import { roundDecider } from './decider.ts';
import { roundStream } from './events.ts';
import { enqueueRetry } from './queue.ts';

export const redriveBody = z.strictObject({
  operatorId: z.string().min(1).max(200),
  /** The provider of the round; `platform` for an adjustment (whose roundId is `adjustment:<transactionId>`). */
  providerId: z.string().min(1).max(200),
  roundId: z.string().min(1).max(300),
  transactionId: z.string().min(1).max(255),
  /** Who re-drives it (a name or an email): kept in the history with the reason. */
  by: z.string({ error: 'say who re-drives it' }).trim().min(1, 'say who re-drives it').max(200, 'at most 200 characters'),
  reason: z.string({ error: 'say why' }).trim().min(1, 'say why').max(1000, 'at most 1000 characters'),
});

/**
 * POST /v1/admin/transactions/redrive: a dead credit sent to the wallet again with the same
 * transactionId and body. The decision (and its refusals) are the round decider's; the re-drive is an
 * event of the round, with who and why; the worker then retries it like any credit.
 */
export function redriveRoutes(ledger: LedgerDeps): Router {
  const router = Router();
  router.post('/transactions/redrive', async (req, res) => {
    const body = parseOr400(redriveBody, req.body);
    const stream = roundStream(body.providerId, body.operatorId, body.roundId);
    // `by` is what the admin says; the request's id and origin go with it, in the event's metadata.
    const metadata = { requestId: String(res.getHeader('X-Request-Id') ?? ''), remoteAddress: req.socket.remoteAddress ?? '' };
    const { next, revision } = await handleCommand(
      ledger.eventStore,
      stream,
      roundDecider,
      { type: 'Redrive', transactionId: body.transactionId, by: body.by, reason: body.reason, now: ledger.now() },
      { metadata },
    );
    ledger.rounds.put(stream, { state: next, revision });
    // The recovery sweep would find it too; this sends it now.
    await enqueueRetry(ledger.queues, body.operatorId, { roundStream: stream, transactionId: body.transactionId }, 0).catch(() => undefined);
    res.status(202).json({ transactionId: body.transactionId, status: 'redriven' });
  });
  return router;
}
