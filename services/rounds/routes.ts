import { Router } from 'express';
import type { TransactionRequest } from './events.ts';
import { roundStream } from './events.ts';
import { launchedSession, revocationGuard, sessionRevoked } from '../sessions/store.ts';
import { badRequest } from '../../shared/errors.ts';
import { parseOr400 } from '../../shared/http/validate.ts';
import { submitTransaction, type LedgerDeps } from './submit.ts';
import { transactionAnswer } from './answers.ts';
import { Refused } from '../../shared/decider.ts';
import type { ServiceContext } from '../context.ts';
import { transactionSessionRefusal, type SessionRefusal } from '../sessions/decider.ts';
import { transactionBody, type TransactionBody } from './schemas.ts';

/** The wallet body, fields in one fixed order, exactly as the operator's wallet will receive it. */
export function toWalletRequest(b: TransactionBody): TransactionRequest {
  return {
    transactionId: b.transactionId,
    sessionToken: b.sessionToken,
    type: b.type,
    roundId: b.roundId,
    roundComplete: b.roundComplete ?? false,
    ...(b.originalTransactionId !== undefined ? { originalTransactionId: b.originalTransactionId } : {}),
    playerRef: b.playerRef,
    amount: b.amount,
    currency: b.currency,
    gameId: b.gameId,
    ...(b.direction !== undefined ? { direction: b.direction } : {}),
    ...(b.metadata !== undefined ? { metadata: b.metadata } : {}),
  };
}

/** POST /v1/wallet/transaction (contract section 5). */
export function transactionRoutes(ctx: ServiceContext, ledger: LedgerDeps): Router {
  const router = Router();
  router.post('/transaction', async (req, res) => {
    const body = parseOr400(transactionBody, req.body);
    if (body.type === 'ADJUSTMENT') throw badRequest('type: ADJUSTMENT is platform-internal and cannot be submitted by a provider');
    const providerId = req.caller!.id;
    // Whether a kick ended the session is checked with the claim (see Submission.revocation): an identical
    // resubmission of what was recorded before the kick is still answered.
    const resolved = await launchedSession(ctx.pool, body.sessionToken, providerId, ctx.now());
    if (!resolved.ok) throw new Refused<SessionRefusal>({ kind: 'session-invalid' });
    const session = resolved.session;
    const refusal = transactionSessionRefusal(session, body);
    if (refusal) {
      // A kicked session is refused as such, whatever else is wrong with the request.
      throw new Refused<SessionRefusal>((await sessionRevoked(ctx.eventStore, session)) ? { kind: 'session-invalid' } : refusal);
    }

    const tx = await submitTransaction(ledger, {
      request: toWalletRequest(body),
      registryKey: providerId,
      providerId,
      operatorId: session.operatorId,
      origin: 'provider',
      roundStream: roundStream(providerId, session.operatorId, body.roundId),
      sessionExpired: session.expired,
      revocation: revocationGuard(session),
    });
    const reply = transactionAnswer(tx);
    res.status(reply.status).type('application/json').send(reply.body);
  });
  return router;
}
