import type { Migration } from '../../shared/db/migrations.ts';
import type { PoolClient } from '../../shared/db/pool.ts';
import { ROUND_EVENT_TYPES, type RoundEvent } from '../../shared/domain/rounds/events.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';
import type { Projection } from '../runner.ts';

export const roundsReadModelMigrations: Migration[] = [
  {
    id: 'rm-rounds-001',
    sql: `
      CREATE TABLE rm_transactions (
        round_stream text NOT NULL,
        transaction_id text NOT NULL,
        provider_id text NOT NULL,
        operator_id text NOT NULL,
        round_id text NOT NULL,
        origin text NOT NULL,
        type text NOT NULL,
        player_ref text NOT NULL,
        game_id text NOT NULL,
        amount bigint NOT NULL,
        currency text NOT NULL,
        direction text,
        original_transaction_id text,
        round_complete boolean NOT NULL,
        status text NOT NULL,
        attempts int NOT NULL,
        last_error text,
        reply jsonb,
        recorded_at timestamptz NOT NULL,
        settled_at timestamptz,
        dead_lettered_at timestamptz,
        updated_at timestamptz NOT NULL,
        PRIMARY KEY (round_stream, transaction_id)
      );
      CREATE INDEX rm_transactions_unsettled_idx ON rm_transactions (status) WHERE status IN ('recorded', 'failed', 'timed_out', 'dead');
      CREATE TABLE rm_rounds (
        round_stream text PRIMARY KEY,
        provider_id text NOT NULL,
        operator_id text NOT NULL,
        round_id text NOT NULL,
        game_id text NOT NULL,
        player_ref text NOT NULL,
        currency text NOT NULL,
        status text NOT NULL,
        force_closed boolean NOT NULL DEFAULT false,
        bets int NOT NULL DEFAULT 0,
        bet_amount bigint NOT NULL DEFAULT 0,
        wins int NOT NULL DEFAULT 0,
        win_amount bigint NOT NULL DEFAULT 0,
        rollbacks int NOT NULL DEFAULT 0,
        outstanding_bets int NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL,
        last_activity_at timestamptz NOT NULL
      );
      CREATE INDEX rm_rounds_stale_idx ON rm_rounds (last_activity_at) WHERE status = 'open' AND outstanding_bets > 0;
      CREATE INDEX rm_rounds_lookup_idx ON rm_rounds (operator_id, round_id);
    `,
  },
];

/** Recomputes a round's figures from its transaction rows: the same answer live and on a rebuild. */
const RECOMPUTE = `
  UPDATE rm_rounds r SET
    bets = a.bets, bet_amount = a.bet_amount, wins = a.wins, win_amount = a.win_amount, rollbacks = a.rollbacks,
    outstanding_bets = a.outstanding,
    status = CASE WHEN r.force_closed OR a.completing > 0 THEN 'completed' ELSE 'open' END
  FROM (
    SELECT
      count(*) FILTER (WHERE t.type = 'BET') AS bets,
      coalesce(sum(t.amount) FILTER (WHERE t.type = 'BET' AND t.status = 'applied'), 0) AS bet_amount,
      count(*) FILTER (WHERE t.type = 'WIN') AS wins,
      coalesce(sum(t.amount) FILTER (WHERE t.type = 'WIN' AND t.status = 'applied'), 0) AS win_amount,
      count(*) FILTER (WHERE t.type = 'ROLLBACK') AS rollbacks,
      count(*) FILTER (
        WHERE t.type = 'BET' AND t.status <> 'declined' AND NOT EXISTS (
          SELECT 1 FROM rm_transactions rb
          WHERE rb.round_stream = t.round_stream AND rb.type = 'ROLLBACK' AND rb.original_transaction_id = t.transaction_id)
      ) AS outstanding,
      count(*) FILTER (WHERE t.type IN ('BET', 'WIN') AND t.round_complete) AS completing
    FROM rm_transactions t WHERE t.round_stream = $1
  ) a
  WHERE r.round_stream = $1`;

/** Rounds with their bets, wins, rollbacks and outstanding bets, and every transaction with its outcome. */
export const roundsProjection: Projection = {
  name: 'rounds',
  tables: [
    { name: 'rm_rounds', key: ['round_stream'] },
    { name: 'rm_transactions', key: ['round_stream', 'transaction_id'] },
  ],
  eventTypes: ROUND_EVENT_TYPES,
  async apply(events: RecordedEvent[], tx: PoolClient) {
    for (const recorded of events) await applyOne(recorded, tx);
    // Each touched round's figures once per batch, from its transaction rows.
    for (const stream of new Set(events.map((e) => e.streamId))) await tx.query(RECOMPUTE, [stream]);
  },
  async reset(tx: PoolClient) {
    await tx.query('DELETE FROM rm_transactions');
    await tx.query('DELETE FROM rm_rounds');
  },
};

async function applyOne(recorded: RecordedEvent, tx: PoolClient): Promise<void> {
  const event = recorded as unknown as RoundEvent;
  const stream = recorded.streamId;
  switch (event.type) {
    case 'TransactionRecorded': {
      const { request: r, recordedAt } = event.data;
      await tx.query(
        `INSERT INTO rm_transactions (round_stream, transaction_id, provider_id, operator_id, round_id, origin, type, player_ref, game_id, amount,
           currency, direction, original_transaction_id, round_complete, status, attempts, recorded_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, 'recorded', 0, $15, $15)
         ON CONFLICT (round_stream, transaction_id) DO NOTHING`,
        [stream, r.transactionId, event.data.providerId, event.data.operatorId, r.roundId, event.data.origin, r.type, r.playerRef, r.gameId, r.amount,
          r.currency, r.direction ?? null, r.originalTransactionId ?? null, (r.type === 'BET' || r.type === 'WIN') && r.roundComplete, recordedAt],
      );
      await tx.query(
        `INSERT INTO rm_rounds (round_stream, provider_id, operator_id, round_id, game_id, player_ref, currency, status, created_at, last_activity_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'open', $8, $8)
         ON CONFLICT (round_stream) DO UPDATE SET last_activity_at = GREATEST(rm_rounds.last_activity_at, EXCLUDED.last_activity_at)`,
        [stream, event.data.providerId, event.data.operatorId, r.roundId, r.gameId, r.playerRef, r.currency, recordedAt],
      );
      break;
    }
    case 'TransactionSettled': {
      const d = event.data;
      await tx.query(
        `UPDATE rm_transactions SET status = $3, attempts = $4, reply = $5, settled_at = $6, updated_at = $6 WHERE round_stream = $1 AND transaction_id = $2`,
        [stream, d.transactionId, d.outcome, d.attempt, JSON.stringify({ status: d.reply.status, balance: d.reply.balance }), d.settledAt],
      );
      break;
    }
    case 'TransactionAttemptFailed': {
      const d = event.data;
      await tx.query(
        `UPDATE rm_transactions SET status = $3, attempts = $4, last_error = $5, updated_at = $6 WHERE round_stream = $1 AND transaction_id = $2`,
        [stream, d.transactionId, d.outcome, d.attempt, d.detail, d.failedAt],
      );
      break;
    }
    case 'TransactionDeadLettered': {
      const d = event.data;
      await tx.query(
        `UPDATE rm_transactions SET status = 'dead', last_error = $3, dead_lettered_at = $4, updated_at = $4 WHERE round_stream = $1 AND transaction_id = $2`,
        [stream, d.transactionId, d.lastError, d.deadLetteredAt],
      );
      break;
    }
    case 'RoundForceClosed':
      await tx.query(`UPDATE rm_rounds SET force_closed = true WHERE round_stream = $1`, [stream]);
      break;
    default: {
      const unknown: never = event;
      return unknown;
    }
  }
}
