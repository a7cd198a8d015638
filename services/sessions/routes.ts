import { randomBytes, randomUUID } from 'node:crypto';
import { Router } from 'express';
import type { Game, Provider } from '../../shared/catalog/schema.ts';
import { activeAt, decideLaunch, playerSessionsDecider } from './decider.ts';
import { playerSessionsStream } from './events.ts';
import { recordSessionToken } from './store.ts';
import { eventsOrThrow } from '../../shared/decider.ts';
import { handleCommand } from '../../shared/eventstore/command.ts';
import type { TransactionRecorder } from '../../shared/eventstore/port.ts';
import { providerTarget, signedCall } from '../../shared/http/outbound.ts';
import { withQuery } from '../../shared/http/url.ts';
import { parseOr400 } from '../../shared/http/validate.ts';
import { callingOperator, type ServiceContext } from '../context.ts';
import { kickBody, launchBody, type ProviderRevokeRequest } from './schemas.ts';

export interface GameSummary {
  gameId: string;
  name: string;
  provider: string;
  currencies: string[];
  supportedLanguages: string[];
  launchBaseUrl: string;
  replayBaseUrl: string;
}

export const gameSummary = (game: Game, provider: Provider): GameSummary => ({
  gameId: game.id,
  name: game.name,
  provider: provider.id,
  currencies: provider.currencies,
  supportedLanguages: provider.supportedLanguages,
  launchBaseUrl: game.launchBaseUrl,
  replayBaseUrl: game.replayBaseUrl,
});

export function sessionRoutes(ctx: ServiceContext, recorder: Pick<TransactionRecorder, 'exclusive'>): Router {
  const router = Router();

  router.get('/games', (req, res) => {
    const operator = callingOperator(ctx, req);
    const games = ctx.catalog.snapshot().games;
    const visible = operator.visibleGames.flatMap((id) => {
      const entry = games.get(id);
      return entry ? [gameSummary(entry.game, entry.provider)] : [];
    });
    res.json(visible);
  });

  router.post('/games/launch', async (req, res) => {
    const operator = callingOperator(ctx, req);
    const body = parseOr400(launchBody, req.body);
    const token = randomBytes(24).toString('base64url'); // 192 random bits, URL-safe
    const entry = ctx.catalog.snapshot().games.get(body.gameId);
    const [started] = eventsOrThrow(decideLaunch({ type: 'StartSession', token, operator, game: entry, request: body, ttlSeconds: ctx.config.sessionTtlSeconds, now: ctx.now() }));
    // A launch depends on no earlier history, so it appends at any revision; a kick racing it
    // conflicts on its own expected revision and decides again, seeing this session.
    const appended = await ctx.eventStore.append(playerSessionsStream(operator.id, body.playerRef), [{ id: randomUUID(), type: started!.type, data: started!.data }], 'any');
    await recordSessionToken(ctx.pool, started!.data, appended.nextRevision);
    // launchBaseUrl plus token, language and lobby (ahead of any fragment).
    res.json({ launchUrl: withQuery(entry!.game.launchBaseUrl, { token, language: body.language, lobby: body.lobbyUrl }), sessionToken: token });
  });

  router.post('/players/kick', async (req, res) => {
    const operator = callingOperator(ctx, req);
    const { playerRef } = parseOr400(kickBody, req.body);
    const now = ctx.now();
    const stream = playerSessionsStream(operator.id, playerRef);
    // Under the recorder's fence: a transaction of this player not yet recorded when the kick is
    // acknowledged sees the kick (contract section 8, rule 4).
    const { state } = await recorder.exclusive(stream, (fenced) =>
      handleCommand(fenced, stream, playerSessionsDecider, { type: 'RevokeSessions', operatorId: operator.id, playerRef, now }),
    );
    const ended = activeAt(state, now);
    res.json({ revokedCount: ended.length });
    notifyProviders(ctx, operator.id, playerRef, ended);
  });

  return router;
}

/**
 * Tells each provider whose sessions a kick ended, so an open game client can close early. Best
 * effort, after the answer: a provider that fails or hangs changes nothing (each call is bounded by
 * the provider's timeoutMs).
 */
function notifyProviders(ctx: ServiceContext, operatorId: string, playerRef: string, ended: Array<{ token: string; providerId: string }>): void {
  const byProvider = new Map<string, string[]>();
  for (const s of ended) byProvider.set(s.providerId, [...(byProvider.get(s.providerId) ?? []), s.token]);
  for (const [providerId, sessionTokens] of byProvider) {
    const provider = ctx.catalog.snapshot().providers.get(providerId);
    if (!provider) continue;
    ctx.background.track(
      signedCall({
        ...providerTarget(provider),
        pathAndQuery: '/v1/sessions/revoke',
        method: 'POST',
        body: { operatorId, playerRef, sessionTokens } satisfies ProviderRevokeRequest,
      }).then((r) => {
        const ok = r.kind === 'response' && r.status === 200;
        ctx.logger[ok ? 'info' : 'warn']({ providerId, outcome: r.kind === 'response' ? r.status : r.kind }, 'provider told of revoked sessions');
      }),
    );
  }
}
