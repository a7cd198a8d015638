import { randomUUID } from 'node:crypto';
import { Router } from 'express';
import { SignJWT } from 'jose';
import { z } from 'zod';
import { roundDecider } from './decider.ts';
import { roundStream } from './events.ts';
import { badRequest, notFound } from '../../shared/errors.ts';
import { fold } from '../../shared/decider.ts';
import { withQuery } from '../../shared/http/url.ts';
import { parseOr400 } from '../../shared/http/validate.ts';
import type { ServiceContext } from '../context.ts';
import { callingOperator } from '../context.ts';

export const replayBody = z.strictObject({ roundId: z.string().min(1).max(255), gameId: z.string().min(1).max(200) });

/**
 * A replay link for the operator's round of this game (API document 4.1.4, contract section 6): 404
 * alike for no such round, another operator's and another game's; 400 when the game has no replay.
 */
export async function replayLink(ctx: ServiceContext, operatorId: string, roundId: string, gameId: string): Promise<string> {
  const entry = ctx.catalog.snapshot().games.get(gameId);
  if (!entry) throw notFound('round not found');
  if (entry.game.replayBaseUrl === '') throw badRequest('gameId: this game does not support round replay');
  // Read from the round's own stream, so a round the provider just wrote is found at once.
  const state = fold(roundDecider, await ctx.eventStore.readStream(roundStream(entry.provider.id, operatorId, roundId)));
  // Another operator's round, another game's round and no round at all look the same, on purpose.
  if (state.status === 'new' || state.gameId !== gameId) throw notFound('round not found');
  const iat = Math.floor(ctx.now().getTime() / 1000);
  const token = await new SignJWT({ purpose: 'round-replay', operatorId, gameId, roundId })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setAudience(entry.provider.id)
    .setIssuedAt(iat)
    .setExpirationTime(iat + ctx.config.replayLinkTtlSeconds)
    .setJti(randomUUID())
    .sign(new TextEncoder().encode(entry.provider.secret));
  // The token in the query, ahead of any fragment (contract section 6).
  return withQuery(entry.game.replayBaseUrl, { token });
}

/** POST /v1/operator/rounds/replay (API document 4.1.4, contract section 6). */
export function replayRoutes(ctx: ServiceContext): Router {
  const router = Router();
  router.post('/rounds/replay', async (req, res) => {
    const operator = callingOperator(ctx, req);
    const { roundId, gameId } = parseOr400(replayBody, req.body);
    res.json({ replayUrl: await replayLink(ctx, operator.id, roundId, gameId) });
  });
  return router;
}
