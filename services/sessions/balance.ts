import { Router } from 'express';
import { z } from 'zod';
import { resolveSession } from './store.ts';
import { Refused } from '../../shared/decider.ts';
import { AppError } from '../../shared/errors.ts';
import { balanceSessionRefusal, type SessionRefusal } from './decider.ts';
import { signedCall, walletTarget } from '../../shared/http/outbound.ts';
import { parseOr400 } from '../../shared/http/validate.ts';
import type { ServiceContext } from '../context.ts';

export const balanceBody = z.strictObject({ sessionToken: z.string().min(1).max(512) });

/** On every answer of POST /v1/wallet/balance that is the wallet's status and body, passed through. */
export const WALLET_PASSTHROUGH_HEADER = 'X-Wallet-Passthrough';

/** POST /v1/wallet/balance: forwarded live to the operator's wallet, its answer returned verbatim. */
export function balanceRoutes(ctx: ServiceContext): Router {
  const router = Router();
  router.post('/balance', async (req, res) => {
    const { sessionToken } = parseOr400(balanceBody, req.body);
    const resolved = await resolveSession(ctx.pool, ctx.eventStore, sessionToken, req.caller!.id, ctx.now());
    const refusal = balanceSessionRefusal(resolved.ok ? resolved.session : undefined, !resolved.ok && resolved.reason === 'revoked');
    if (refusal || !resolved.ok) throw new Refused<SessionRefusal>(refusal ?? { kind: 'session-invalid' });
    const session = resolved.session;
    const operator = ctx.catalog.snapshot().operators.get(session.operatorId);
    if (!operator) throw new Refused<SessionRefusal>({ kind: 'session-invalid' });
    const startedAt = performance.now();
    const result = await signedCall({
      ...walletTarget(operator),
      pathAndQuery: `/v1/wallet/balance?playerRef=${encodeURIComponent(session.playerRef)}`,
      method: 'GET',
    });
    ctx.metrics.walletBalance(operator.id, result, startedAt);
    switch (result.kind) {
      case 'timeout':
        throw new AppError(504, 'wallet timeout');
      case 'unreachable':
        throw new AppError(502, 'wallet unreachable');
      case 'oversized':
        throw new AppError(502, 'wallet reply over 1 MiB');
      case 'response':
        // Marks the wallet's own answer, whatever its status: a wallet 401 or 503 is told from ours by this header.
        res.setHeader(WALLET_PASSTHROUGH_HEADER, 'true');
        res.status(result.status).type(result.contentType ?? 'application/json').send(result.body);
        return;
      default: {
        const unknown: never = result;
        throw new Error(`unknown outbound result ${JSON.stringify(unknown)}`);
      }
    }
  });
  return router;
}
