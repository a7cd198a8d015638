import type { PoolClient } from '../../shared/db/pool.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';
import { perEvent } from '../../projections/runner.ts';
import type { SessionEvent } from './events.ts';
import { recordSessionToken } from './store.ts';

/**
 * Sessions of every player with when a kick ended them: for listing and auditing, never for
 * authorising. The session's facts are in session_tokens (stored once, see store.ts); this read model
 * holds what the history adds to them.
 */
export const sessionsProjection = perEvent(
  'sessions',
  [{ name: 'rm_sessions', key: ['token'] }],
  ['SessionStarted', 'SessionsRevoked'],
  async (recorded: RecordedEvent, tx: PoolClient) => {
    const event = recorded as unknown as SessionEvent;
    switch (event.type) {
      case 'SessionStarted':
        // Launch wrote the facts before it answered; written again (a no-op) for a launch that died in between.
        await recordSessionToken(tx, event.data, recorded.revision);
        await tx.query('INSERT INTO rm_sessions (token) VALUES ($1) ON CONFLICT (token) DO NOTHING', [event.data.token]);
        return;
      case 'SessionsRevoked':
        // Events arrive in stream order, so the player's sessions in this read model and not yet ended are
        // exactly those started before this kick.
        await tx.query(
          `UPDATE rm_sessions s SET revoked_at = $3 FROM session_tokens t
           WHERE t.token = s.token AND t.operator_id = $1 AND t.player_ref = $2 AND s.revoked_at IS NULL`,
          [event.data.operatorId, event.data.playerRef, event.data.revokedAt],
        );
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
