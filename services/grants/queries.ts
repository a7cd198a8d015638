import { safeIntegerFrom } from '../../shared/bounds.ts';
import type { Pool } from '../../shared/db/pool.ts';
import type { Grant } from './decider.ts';

/** The only way other code reads the grants read model (rm_grants). */

export interface GrantRow {
  id: string;
  campaign_id: string | null;
  operator_id: string;
  provider_id: string;
  game_id: string;
  player_ref: string;
  /** bigint columns: pg answers decimal strings. */
  spins: string;
  bet_amount_minor: string;
  currency: string;
  external_ref: string | null;
  status: Grant['status'];
  idempotency_key: string;
  expires_at: string | null;
  last_error: string | null;
  created_at: Date;
  updated_at: Date;
}

export function rowToGrant(r: GrantRow): Grant {
  return {
    id: r.id,
    ...(r.campaign_id !== null ? { campaignId: r.campaign_id } : {}),
    operatorId: r.operator_id,
    providerId: r.provider_id,
    gameId: r.game_id,
    playerRef: r.player_ref,
    spins: safeIntegerFrom(r.spins, 'rm_grants.spins'),
    betAmountMinor: safeIntegerFrom(r.bet_amount_minor, 'rm_grants.bet_amount_minor'),
    currency: r.currency,
    ...(r.external_ref !== null ? { externalRef: r.external_ref } : {}),
    status: r.status,
    idempotencyKey: r.idempotency_key,
    ...(r.expires_at !== null ? { expiresAt: r.expires_at } : {}),
    ...(r.last_error !== null ? { lastError: r.last_error } : {}),
    createdAt: r.created_at.toISOString(),
    updatedAt: r.updated_at.toISOString(),
  };
}

export async function listGrants(db: Pool, operatorId: string, playerRef: string | undefined): Promise<Grant[]> {
  const { rows } = await db.query<GrantRow>(
    `SELECT * FROM rm_grants WHERE operator_id = $1 AND ($2::text IS NULL OR player_ref = $2) ORDER BY created_at DESC, id DESC`,
    [operatorId, playerRef ?? null],
  );
  return rows.map(rowToGrant);
}

/**
 * Grants still pending that were requested before `before`, oldest first (at most 100): the candidates
 * for the reconciler's finishing of abandoned grants. Which are abandoned the decider decides.
 */
export async function abandonedGrantCandidates(db: Pool, before: Date): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(`SELECT id FROM rm_grants WHERE status = 'pending' AND created_at < $1 ORDER BY created_at LIMIT 100`, [before]);
  return rows.map((r) => r.id);
}
