import type { Migration } from '../../shared/db/migrations.ts';
import type { PoolClient } from '../../shared/db/pool.ts';
import type { SessionEvent } from './events.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';
import { perEvent } from '../../projections/runner.ts';

export const sessionsReadModelMigrations: Migration[] = [
  {
    id: 'rm-sessions-001',
    sql: `
      CREATE TABLE rm_sessions (
        token text PRIMARY KEY,
        operator_id text NOT NULL,
        player_ref text NOT NULL,
        provider_id text NOT NULL,
        game_id text NOT NULL,
        currency text NOT NULL,
        language text,
        lobby_url text,
        demo boolean NOT NULL,
        created_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL,
        revoked_at timestamptz
      );
      CREATE INDEX rm_sessions_player_idx ON rm_sessions (operator_id, player_ref, created_at);
    `,
  },
];

/** Sessions of every player, with when a kick ended them: for listing and auditing, never for authorising. */
export const sessionsProjection = perEvent(
  'sessions',
  [{ name: 'rm_sessions', key: ['token'] }],
  ['SessionStarted', 'SessionsRevoked'],
  async (recorded: RecordedEvent, tx: PoolClient) => {
    const event = recorded as unknown as SessionEvent;
    switch (event.type) {
      case 'SessionStarted': {
        const d = event.data;
        await tx.query(
          `INSERT INTO rm_sessions (token, operator_id, player_ref, provider_id, game_id, currency, language, lobby_url, demo, created_at, expires_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (token) DO NOTHING`,
          [d.token, d.operatorId, d.playerRef, d.providerId, d.gameId, d.currency, d.language ?? null, d.lobbyUrl ?? null, d.demo, d.createdAt, d.expiresAt],
        );
        return;
      }
      case 'SessionsRevoked':
        // Events arrive in stream order, so the player's sessions not yet revoked are exactly those started before this kick.
        await tx.query(`UPDATE rm_sessions SET revoked_at = $3 WHERE operator_id = $1 AND player_ref = $2 AND revoked_at IS NULL`, [
          event.data.operatorId,
          event.data.playerRef,
          event.data.revokedAt,
        ]);
        return;
      default: {
        const unknown: never = event;
        return unknown;
      }
    }
  },
  async (tx: PoolClient) => {
    await tx.query('DELETE FROM rm_sessions');
  },
);
