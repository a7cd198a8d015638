import type { Migration } from '../../shared/db/migrations.ts';
import type { Pool, PoolClient } from '../../shared/db/pool.ts';
import { grantDecider, grantOf, type Grant } from './decider.ts';
import { rowToGrant, type GrantRow } from './queries.ts';
import type { GrantEvent } from './events.ts';
import { GRANT_EVENT_TYPES } from './events.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';
import type { Projection } from '../../projections/runner.ts';

export const grantsReadModelMigrations: Migration[] = [
  {
    // spins is a bigint: events recorded before grants were bounded (shared/bounds.ts) may hold up to
    // 2^53-1 spins, and a row that cannot be stored would stop this read model for good.
    id: 'rm-grants-baseline',
    replaces: ['rm-grants-001', 'rm-grants-002'],
    sql: `
      CREATE TABLE rm_grants (
        id uuid PRIMARY KEY,
        campaign_id text,
        operator_id text NOT NULL,
        provider_id text NOT NULL,
        game_id text NOT NULL,
        player_ref text NOT NULL,
        spins bigint NOT NULL,
        bet_amount_minor bigint NOT NULL,
        currency text NOT NULL,
        external_ref text,
        status text NOT NULL,
        idempotency_key text NOT NULL,
        expires_at text,
        last_error text,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        version bigint NOT NULL
      );
      CREATE INDEX rm_grants_list_idx ON rm_grants (operator_id, created_at DESC);
    `,
  },
  {
    // The reconciler's candidates for finishing abandoned grants (abandonedGrantCandidates): few rows.
    id: 'rm-grants-003-pending',
    sql: `CREATE INDEX rm_grants_pending_idx ON rm_grants (created_at) WHERE status = 'pending';`,
  },
  {
    // The console's search finds a player by their grants, whatever the operator.
    id: 'rm-grants-004-player',
    sql: `CREATE INDEX rm_grants_player_idx ON rm_grants (player_ref);`,
  },
];

/** Writes the grant as of stream revision `version` (a row already at that revision or later is kept). */
export async function writeGrantRow(db: Pool | PoolClient, g: Grant, version: number): Promise<void> {
  await db.query(
    `INSERT INTO rm_grants (id, campaign_id, operator_id, provider_id, game_id, player_ref, spins, bet_amount_minor, currency, external_ref,
       status, idempotency_key, expires_at, last_error, created_at, updated_at, version)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
     ON CONFLICT (id) DO UPDATE SET external_ref = EXCLUDED.external_ref, status = EXCLUDED.status, last_error = EXCLUDED.last_error,
       updated_at = EXCLUDED.updated_at, version = EXCLUDED.version
     WHERE rm_grants.version < EXCLUDED.version`,
    [g.id, g.campaignId ?? null, g.operatorId, g.providerId, g.gameId, g.playerRef, g.spins, g.betAmountMinor, g.currency, g.externalRef ?? null,
      g.status, g.idempotencyKey, g.expiresAt ?? null, g.lastError ?? null, g.createdAt, g.updatedAt, version],
  );
}

/** Free-spin grants per operator, newest first: the list operators read. */
export const grantsProjection: Projection = {
  name: 'grants',
  // Creating a grant answers once it is in this read model (waitForProjection): little traffic, little lag.
  gatherMs: 25,
  tables: [{ name: 'rm_grants', key: ['id'] }],
  eventTypes: GRANT_EVENT_TYPES,
  async apply(events: RecordedEvent[], tx: PoolClient) {
    for (const recorded of events) {
      const event = recorded as unknown as GrantEvent;
      // Later events carry no grant fields: fold them onto the row as stored.
      const current = event.type === 'GrantRequested'
        ? undefined
        : (await tx.query<GrantRow>('SELECT * FROM rm_grants WHERE id = $1', [recorded.streamId.slice('grant|'.length)])).rows[0];
      const next = grantOf(grantDecider.evolve(current ? rowToGrant(current) : grantDecider.initialState(), event, recorded));
      if (next) await writeGrantRow(tx, next, recorded.revision);
    }
  },
  async reset(tx: PoolClient) {
    await tx.query('DELETE FROM rm_grants');
  },
};
