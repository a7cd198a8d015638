import type { Migration } from '../../shared/db/migrations.ts';
import type { Pool, PoolClient } from '../../shared/db/pool.ts';
import { guardBroken, type EventStore, type StreamGuard } from '../../shared/eventstore/port.ts';
import { expiredAt } from './decider.ts';
import { playerSessionsStream, type SessionStarted } from './events.ts';

/**
 * Sessions are stored once. session_tokens holds the immutable facts of each SessionStarted, written by
 * launch before it answers, so every process resolves a token the moment launch has answered; whether
 * a session is still valid is never read from there but from the player's stream (see
 * resolveSession), so a kick is effective everywhere the moment it is appended. The sessions read model
 * (rm_sessions, see projection.ts) adds only what the history says later: when a kick ended a session.
 */
export const sessionsMigrations: Migration[] = [
  {
    id: 'sessions-baseline',
    replaces: ['sessions-001-tokens', 'rm-sessions-001'],
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
        expires_at timestamptz NOT NULL,
        lobby_url text
      );
      CREATE INDEX session_tokens_player_idx ON session_tokens (operator_id, player_ref, created_at);
      CREATE TABLE rm_sessions (
        token text PRIMARY KEY,
        revoked_at timestamptz
      );
    `,
  },
  {
    // Issue #19: rm_sessions repeated every column of session_tokens. A database from before keeps its
    // data: the lobby URL (and any session session_tokens lacked) moves to session_tokens, rm_sessions
    // keeps only when each session was ended. Replace every projector process at once when upgrading:
    // one of the release before cannot write the new rm_sessions (it is reported failing until replaced).
    id: 'sessions-002-stored-once',
    sql: `
      DO $upgrade$ BEGIN
        IF EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'rm_sessions' AND column_name = 'operator_id') THEN
          ALTER TABLE session_tokens ADD COLUMN lobby_url text;
          UPDATE session_tokens t SET lobby_url = s.lobby_url FROM rm_sessions s WHERE s.token = t.token AND s.lobby_url IS NOT NULL;
          -- A session whose launch died before writing its token row was known only to rm_sessions: its
          -- facts move too (its start revision from the Postgres store; 0, ended by any kick, otherwise).
          INSERT INTO session_tokens (token, operator_id, player_ref, provider_id, game_id, currency, language, demo, start_revision, created_at, expires_at, lobby_url)
          SELECT s.token, s.operator_id, s.player_ref, s.provider_id, s.game_id, s.currency, s.language, s.demo,
            coalesce((SELECT e.revision FROM es_events e WHERE e.type = 'SessionStarted' AND e.data->>'token' = s.token LIMIT 1), 0),
            s.created_at, s.expires_at, s.lobby_url
          FROM rm_sessions s WHERE NOT EXISTS (SELECT 1 FROM session_tokens t WHERE t.token = s.token);
          CREATE INDEX session_tokens_player_idx ON session_tokens (operator_id, player_ref, created_at);
          DROP INDEX rm_sessions_player_idx;
          ALTER TABLE rm_sessions DROP COLUMN operator_id, DROP COLUMN player_ref, DROP COLUMN provider_id, DROP COLUMN game_id, DROP COLUMN currency,
            DROP COLUMN language, DROP COLUMN lobby_url, DROP COLUMN demo, DROP COLUMN created_at, DROP COLUMN expires_at;
        END IF;
      END $upgrade$;
    `,
  },
  {
    // The console's search finds a player by their sessions, whatever the operator (the index above leads with it).
    id: 'sessions-003-player',
    sql: `CREATE INDEX session_tokens_player_ref_idx ON session_tokens (player_ref);`,
  },
];

/** Written by launch before it answers; the sessions projection writes the same row again (a no-op) for a launch that died in between. */
export async function recordSessionToken(pool: Pool | PoolClient, data: SessionStarted['data'], revision: number): Promise<void> {
  await pool.query(
    `INSERT INTO session_tokens (token, operator_id, player_ref, provider_id, game_id, currency, language, lobby_url, demo, start_revision, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (token) DO NOTHING`,
    [data.token, data.operatorId, data.playerRef, data.providerId, data.gameId, data.currency, data.language ?? null, data.lobbyUrl ?? null, data.demo, revision, data.createdAt, data.expiresAt],
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
      expired: expiredAt(row.expires_at, now),
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
