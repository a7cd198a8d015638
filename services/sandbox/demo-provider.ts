import { randomUUID } from 'node:crypto';
import { jwtVerify } from 'jose';
import type { Logger } from 'pino';
import { z } from 'zod';
import { providerCancelRequest, providerGrantRequest } from '../grants/schemas.ts';
import { providerRevokeRequest } from '../sessions/schemas.ts';
import type { TransactionRequest } from '../rounds/events.ts';
import { signatureCheck, startPartnerServer, type PartnerReply } from './partner-server.ts';
import { SignedClient, type ApiResponse } from './signed-client.ts';

/*
 * A demo game provider (studio), both halves of what a provider integrates:
 *  - its server, which the service calls (contract section 6): free-spin grants, their cancellation and
 *    session revocation after a kick, each signed by the service with the provider's secret over path
 *    plus query;
 *  - its client, which calls the service (contract section 5): transactions and balance, signed with
 *    X-Provider-Id over the path.
 * State is in memory: a sandbox, not a game server.
 */

export interface DemoProviderOptions {
  providerId: string;
  /** The provider's catalog secret: verifies the service's calls and signs ours. */
  secret: string;
  port?: number;
  host?: string;
  /** Accepted X-Timestamp skew of the service's calls, both ways. */
  signatureWindowSeconds?: number;
  logger?: Logger;
}

/** One call the service made to us, as received, with what we answered. */
export interface DemoProviderCall {
  at: string;
  method: string;
  /** Path plus query, as sent (what the service signed). */
  target: string;
  body: unknown;
  status: number;
}

export interface DemoProviderGrant {
  externalRef: string;
  requestRef: string;
  operatorId: string;
  playerRef: string;
  gameId: string;
  spins: number;
  betAmountMinor: number;
  currency: string;
  expiresAt?: string;
  status: 'active' | 'cancelled';
}

export interface DemoProvider {
  url: string;
  /** Every call received, in order, refused ones included. */
  received(): readonly DemoProviderCall[];
  grants(): readonly DemoProviderGrant[];
  /** Whether the service told us a session token was revoked (a kick). */
  isRevoked(sessionToken: string): boolean;
  close(): Promise<void>;
}

// What the service sends (contract section 6): the schemas its OpenAPI webhooks document, loosened as a
// partner should be, so a field the service adds later is ignored rather than refused.
const grantRequest = providerGrantRequest.loose();
const cancelRequest = providerCancelRequest.loose();
const revokeRequest = providerRevokeRequest.loose();

const BODY_LIMIT = 64 * 1024;

type Answer = PartnerReply;

export async function startDemoProvider(options: DemoProviderOptions): Promise<DemoProvider> {
  const windowSeconds = options.signatureWindowSeconds ?? 300;
  const calls: DemoProviderCall[] = [];
  const byRequestRef = new Map<string, DemoProviderGrant>();
  const byExternalRef = new Map<string, DemoProviderGrant>();
  const revoked = new Set<string>();
  const checkSignature = signatureCheck({ secret: options.secret, windowSeconds });

  const handle = (method: string, path: string, body: unknown): Answer => {
    if (method === 'POST' && path === '/v1/free-spins/grants') {
      const parsed = grantRequest.safeParse(body);
      if (!parsed.success) return { status: 400, json: { error: `invalid grant request: ${parsed.error.issues[0]?.message ?? ''}` } };
      // requestRef is the service's grant id: a repeat (the service finishing an abandoned call) gets the same batch.
      const known = byRequestRef.get(parsed.data.requestRef);
      if (known) return { status: 200, json: { externalRef: known.externalRef } };
      const g = parsed.data;
      const grant: DemoProviderGrant = {
        externalRef: `fs-${randomUUID()}`,
        requestRef: g.requestRef,
        operatorId: g.operatorId,
        playerRef: g.playerRef,
        gameId: g.gameId,
        spins: g.spins,
        betAmountMinor: g.betAmountMinor,
        currency: g.currency,
        ...(g.expiresAt !== undefined ? { expiresAt: g.expiresAt } : {}),
        status: 'active',
      };
      byRequestRef.set(grant.requestRef, grant);
      byExternalRef.set(grant.externalRef, grant);
      return { status: 200, json: { externalRef: grant.externalRef } };
    }
    const cancel = /^\/v1\/free-spins\/grants\/([^/]+)\/cancel$/.exec(path);
    if (method === 'POST' && cancel) {
      const parsed = cancelRequest.safeParse(body);
      if (!parsed.success) return { status: 400, json: { error: 'invalid cancel request' } };
      const grant = byExternalRef.get(decodeURIComponent(cancel[1]!));
      if (!grant || grant.requestRef !== parsed.data.requestRef) return { status: 404, json: { error: 'unknown grant' } };
      grant.status = 'cancelled';
      return { status: 200, json: { externalRef: grant.externalRef, status: grant.status } };
    }
    if (method === 'POST' && path === '/v1/sessions/revoke') {
      const parsed = revokeRequest.safeParse(body);
      if (!parsed.success) return { status: 400, json: { error: 'invalid revoke request' } };
      // A real studio would close the open game clients of these sessions now.
      for (const token of parsed.data.sessionTokens) revoked.add(token);
      return { status: 200, json: { revoked: parsed.data.sessionTokens.length } };
    }
    return { status: 404, json: { error: 'not found' } };
  };

  const server = await startPartnerServer({
    port: options.port,
    host: options.host,
    bodyLimit: BODY_LIMIT,
    handle: (req, raw) => {
      const target = req.url ?? '/';
      let body: unknown;
      let answer = checkSignature(req, raw);
      if (!answer) {
        try {
          body = raw.length > 0 ? JSON.parse(raw.toString('utf8')) : undefined;
          answer = handle(req.method ?? '', new URL(target, 'http://x').pathname, body);
        } catch {
          answer = { status: 400, json: { error: 'request body is not valid JSON' } };
        }
      }
      calls.push({ at: new Date().toISOString(), method: req.method ?? '', target, body, status: answer.status });
      options.logger?.debug({ method: req.method, target, status: answer.status }, 'demo provider call');
      return answer;
    },
    onError: (err) => options.logger?.error({ err }, 'demo provider failed'),
  });
  return {
    url: server.url,
    received: () => calls,
    grants: () => [...byRequestRef.values()],
    isRevoked: (token) => revoked.has(token),
    close: () => server.close(),
  };
}

export interface ReplayClaims {
  operatorId: string;
  gameId: string;
  roundId: string;
  iat: number;
  exp: number;
  jti: string;
}

/**
 * What the provider's replay page does with `?token=` (contract section 6): verify the HS256 JWT with
 * its own secret, check it was made for it (`aud`) and for a replay, then show that operator's round.
 * Throws when the token is forged, expired or meant for something else.
 */
export async function verifyReplayToken(token: string, providerId: string, secret: string): Promise<ReplayClaims> {
  const { payload } = await jwtVerify(token, new TextEncoder().encode(secret), { audience: providerId, algorithms: ['HS256'] });
  const claims = z
    .object({ purpose: z.literal('round-replay'), operatorId: z.string(), gameId: z.string(), roundId: z.string(), iat: z.number(), exp: z.number(), jti: z.string() })
    .parse(payload);
  return { operatorId: claims.operatorId, gameId: claims.gameId, roundId: claims.roundId, iat: claims.iat, exp: claims.exp, jti: claims.jti };
}

/** TransactionRequest (API document 2.10) as a provider sends it; `metadata` is yours, passed to the wallet verbatim. */
export type ProviderTransaction = Omit<TransactionRequest, 'roundComplete'> & { roundComplete?: boolean };

/** The wallet's TransactionResponse (API document 2.12), returned by the service verbatim. */
export interface TransactionReply {
  status: 'OK' | 'DECLINED';
  balance: number;
}

/**
 * The provider's side of contract section 5: every money movement of a game round goes through
 * `transaction`, and `balance` reads the player's balance live from the operator's wallet.
 * Send a retry with the identical body (same transactionId): it is answered from the stored reply.
 */
export class ProviderClient {
  private readonly client: SignedClient;

  constructor(serviceUrl: string, providerId: string, secret: string) {
    this.client = new SignedClient(serviceUrl, { kind: 'provider', id: providerId, secret });
  }

  transaction(tx: ProviderTransaction): Promise<ApiResponse<TransactionReply | { error: string }>> {
    return this.client.call('POST', '/v1/wallet/transaction', tx);
  }

  balance(sessionToken: string): Promise<ApiResponse<{ balance: number } | { error: string }>> {
    return this.client.call('POST', '/v1/wallet/balance', { sessionToken });
  }
}
