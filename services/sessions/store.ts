import type { Migration } from '../../shared/db/migrations.ts';
import type { Pool } from '../../shared/db/pool.ts';
import { guardBroken, type EventStore, type StreamGuard } from '../../shared/eventstore/port.ts';
import { playerSessionsStream, type SessionStarted } from './events.ts';

/**
 * token → (operator, player, start revision): immutable facts of a SessionStarted, written by launch
 * before it answers, so every process can resolve a token the moment launch has answered. Whether the
 * session is still valid is never read from here: it is decided by the player's stream (see
 * resolveSession), so a kick is effective everywhere the moment it is appended.
 */
export const sessionLookupMigrations: Migration[] = [
  {
    id: 'sessions-001-tokens',
    sql: `
      CREATE TABLE session_tokens (
        token text PRIMARY KEY,
        operator_id text NOT NULL,
        player_ref text NOT NULL,
        provider_id text NOT NULL,
        game_id text NOT NULL,
        currency text NOT NULL,
        language text,
        demo boolean NOT NULL,
        start_revision bigint NOT NULL,
        created_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL
      );
    `,
  },
];

export async function recordSessionToken(pool: Pool, data: SessionStarted['data'], revision: number): Promise<void> {
  await pool.query(
    `INSERT INTO session_tokens (token, operator_id, player_ref, provider_id, game_id, currency, language, demo, start_revision, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (token) DO NOTHING`,
    [data.token, data.operatorId, data.playerRef, data.providerId, data.gameId, data.currency, data.language ?? null, data.demo, revision, data.createdAt, data.expiresAt],
  );
}

export interface ResolvedSession {
  token: string;
  operatorId: string;
  playerRef: string;
  providerId: string;
  gameId: string;
  currency: string;
  language: string | undefined;
  demo: boolean;
  createdAt: Date;
  expiresAt: Date;
  expired: boolean;
  /** Revision of its SessionStarted in the player's stream: a kick after it ends the session. */
  startRevision: number;
}

export type SessionResolution = { ok: true; session: ResolvedSession } | { ok: false; reason: 'unknown' | 'other-provider' | 'revoked' };

interface TokenRow {
  token: string;
  operator_id: string;
  player_ref: string;
  provider_id: string;
  game_id: string;
  currency: string;
  language: string | null;
  demo: boolean;
  start_revision: string;
  created_at: Date;
  expires_at: Date;
}

/**
 * Token rows never change once written, so each process keeps the ones it has seen (bounded, oldest
 * dropped first). Only the row is cached: whether the session was kicked is read every time.
 */
const tokenCache = new Map<string, TokenRow>();
const TOKEN_CACHE_MAX = 50_000;

async function tokenRow(pool: Pool, token: string): Promise<TokenRow | undefined> {
  const cached = tokenCache.get(token);
  if (cached) return cached;
  const { rows } = await pool.query<TokenRow>('SELECT * FROM session_tokens WHERE token = $1', [token]);
  const row = rows[0];
  if (row) {
    if (tokenCache.size >= TOKEN_CACHE_MAX) tokenCache.delete(tokenCache.keys().next().value!);
    tokenCache.set(token, row);
  }
  return row;
}

/**
 * A token is valid for the provider it was launched with, until a kick: any SessionsRevoked in the
 * player's stream after the session's own start ends it. Expiry is reported, not enforced here: the
 * caller decides (an expired session may still settle the rounds it opened).
 */
export async function resolveSession(pool: Pool, store: EventStore, token: string, providerId: string, now: Date): Promise<SessionResolution> {
  const launched = await launchedSession(pool, token, providerId, now);
  if (!launched.ok) return launched;
  if (await sessionRevoked(store, launched.session)) return { ok: false, reason: 'revoked' };
  return launched;
}

/**
 * resolveSession's first half: the session the token was launched as, for this provider, not yet
 * checked for a kick. Usually answered from memory; a caller that goes on must then ask sessionRevoked.
 */
export async function launchedSession(
  pool: Pool,
  token: string,
  providerId: string,
  now: Date,
): Promise<{ ok: true; session: ResolvedSession } | { ok: false; reason: 'unknown' | 'other-provider' }> {
  const row = await tokenRow(pool, token);
  if (!row) return { ok: false, reason: 'unknown' };
  if (row.provider_id !== providerId) return { ok: false, reason: 'other-provider' };
  return {
    ok: true,
    session: {
      token: row.token,
      operatorId: row.operator_id,
      playerRef: row.player_ref,
      providerId: row.provider_id,
      gameId: row.game_id,
      currency: row.currency,
      language: row.language ?? undefined,
      demo: row.demo,
      createdAt: row.created_at,
      expiresAt: row.expires_at,
      expired: now.getTime() >= row.expires_at.getTime(),
      startRevision: Number(row.start_revision),
    },
  };
}

/** What a kick of this session is: a SessionsRevoked in the player's stream after the session's start. */
export function revocationGuard(session: ResolvedSession): StreamGuard {
  return { stream: playerSessionsStream(session.operatorId, session.playerRef), fromRevision: session.startRevision + 1, eventType: 'SessionsRevoked' };
}

/** resolveSession's second half, read from the player's stream every time: whether a kick ended the session. */
export function sessionRevoked(store: EventStore, session: ResolvedSession): Promise<boolean> {
  return guardBroken(store, revocationGuard(session));
}
