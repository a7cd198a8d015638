import type { Pool } from '../../shared/db/pool.ts';

/** The only way other code reads sessions (session_tokens and the rm_sessions read model). */

export interface SessionRow {
  token: string;
  provider_id: string;
  game_id: string;
  currency: string;
  language: string | null;
  demo: boolean;
  created_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
}

/** A player's sessions in launch order, with when a kick ended them (rows, column names as stored). */
export async function sessionsOfPlayer(pool: Pool, operatorId: string, playerRef: string): Promise<SessionRow[]> {
  const { rows } = await pool.query<SessionRow>(
    `SELECT t.token, t.provider_id, t.game_id, t.currency, t.language, t.demo, t.created_at, t.expires_at, s.revoked_at
     FROM session_tokens t JOIN rm_sessions s USING (token)
     WHERE t.operator_id = $1 AND t.player_ref = $2 ORDER BY t.created_at`,
    [operatorId, playerRef],
  );
  return rows;
}
