import type { Migration } from '../../shared/db/migrations.ts';
import type { PoolClient } from '../../shared/db/pool.ts';
import { periodStart } from '../../shared/periods.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';
import type { RoundEvent } from '../rounds/events.ts';
import { completesRound, type OperatorStatus } from '../rounds/decider.ts';

/**
 * The operators' reconciliation view (contract section 9), kept by the rounds read model
 * (services/rounds/projection.ts) in the same transactions as the rows it is counted from:
 *
 * - rm_transactions: every wallet-bound transaction, with the status operators reconcile (the decider's
 *   operatorStatus, column operator_status) and the log position of its TransactionRecorded
 *   (log_major, log_minor), which no later record can sort before: the cursor of the transactions list.
 * - rm_rounds: each round's status as operators see it (open, complete, force-closed: operator_status,
 *   NULL for the platform's rounds of adjustments) and when it closed (closed_at; it opened at created_at).
 * - rm_settlement_quarters: per operator and quarter hour of recording, per provider, game, currency,
 *   type, direction and status, how many transactions and their amount. A statement sums the quarters
 *   inside its interval and reads single rows only for the parts of a quarter at its two ends (see
 *   queries.ts), so a 31-day statement reads thousands of rows, not millions. Quarter hours, not hours:
 *   every time zone in use has its midnight on one (+05:30, +05:45).
 *
 * Until rm-reconciliation-002 this was a read model of its own, with its own copy of every transaction
 * and round (rm_operator_transactions, rm_operator_rounds): the same rows written twice, by two folds of
 * the same events.
 */
export const reconciliationMigrations: Migration[] = [
  {
    id: 'rm-reconciliation-001',
    sql: `
      CREATE TABLE rm_operator_transactions (
        round_stream text NOT NULL,
        transaction_id text NOT NULL,
        operator_id text NOT NULL,
        log_major bigint NOT NULL,
        log_minor bigint NOT NULL,
        provider_id text NOT NULL,
        origin text NOT NULL,
        round_id text NOT NULL,
        game_id text NOT NULL,
        player_ref text NOT NULL,
        type text NOT NULL,
        direction text,
        amount bigint NOT NULL,
        currency text NOT NULL,
        original_transaction_id text,
        status text NOT NULL,
        wallet_balance numeric,
        attempts int NOT NULL,
        recorded_at timestamptz NOT NULL,
        settled_at timestamptz,
        PRIMARY KEY (round_stream, transaction_id)
      );
      CREATE UNIQUE INDEX rm_operator_transactions_order_idx ON rm_operator_transactions (operator_id, log_major, log_minor);
      CREATE INDEX rm_operator_transactions_time_idx ON rm_operator_transactions (operator_id, recorded_at);
      CREATE INDEX rm_operator_transactions_player_idx ON rm_operator_transactions (operator_id, player_ref, recorded_at);
      CREATE INDEX rm_operator_transactions_round_idx ON rm_operator_transactions (operator_id, round_id);
      -- The console's search by transaction id, and its counts of what the wallet has not acknowledged.
      CREATE INDEX rm_operator_transactions_id_idx ON rm_operator_transactions (transaction_id);
      -- The transactions list filtered by status, in recorded order.
      CREATE INDEX rm_operator_transactions_status_idx ON rm_operator_transactions (operator_id, status, log_major, log_minor);
      CREATE INDEX rm_operator_transactions_unsettled_idx ON rm_operator_transactions (status) WHERE status IN ('pending', 'failed', 'dead');
      CREATE TABLE rm_operator_rounds (
        round_stream text PRIMARY KEY,
        operator_id text NOT NULL,
        provider_id text NOT NULL,
        round_id text NOT NULL,
        game_id text NOT NULL,
        player_ref text NOT NULL,
        currency text NOT NULL,
        status text NOT NULL,
        opened_at timestamptz NOT NULL,
        closed_at timestamptz
      );
      CREATE INDEX rm_operator_rounds_lookup_idx ON rm_operator_rounds (operator_id, round_id);
      CREATE INDEX rm_operator_rounds_round_idx ON rm_operator_rounds (round_id);
      CREATE INDEX rm_operator_rounds_player_idx ON rm_operator_rounds (player_ref, operator_id, opened_at DESC);
      CREATE TABLE rm_settlement_quarters (
        operator_id text NOT NULL,
        quarter timestamptz NOT NULL,
        provider_id text NOT NULL,
        game_id text NOT NULL,
        currency text NOT NULL,
        type text NOT NULL,
        direction text NOT NULL,
        status text NOT NULL,
        count bigint NOT NULL,
        amount numeric NOT NULL,
        PRIMARY KEY (operator_id, quarter, provider_id, game_id, currency, type, direction, status)
      );
    `,
  },
  {
    // One table of transactions: the operators' columns join the rounds read model's rows, whose runner
    // now keeps the operators' rounds and quarters too, and the separate copy goes. The merged read model
    // is projected again from the start of the history on the next start of the projector (or by
    // `npm run audit -- rebuild`, which swaps it in whole).
    id: 'rm-reconciliation-002-one-transactions-table',
    sql: `
      DROP TABLE rm_operator_transactions, rm_operator_rounds;
      -- TRUNCATE: instant on a large ledger, and it locks the tables out of any writer of the release before.
      TRUNCATE rm_transactions, rm_rounds, rm_settlement_quarters;
      ALTER TABLE rm_transactions
        ADD COLUMN log_major bigint NOT NULL,
        ADD COLUMN log_minor bigint NOT NULL,
        ADD COLUMN operator_status text NOT NULL;
      -- A round as operators see it: open, complete or force-closed, closed at its first close. NULL for
      -- the platform's rounds of adjustments, which are no operator's round.
      ALTER TABLE rm_rounds ADD COLUMN operator_status text, ADD COLUMN closed_at timestamptz;
      CREATE INDEX rm_rounds_round_idx ON rm_rounds (round_id);
      CREATE INDEX rm_rounds_player_idx ON rm_rounds (player_ref, operator_id, created_at DESC);
      CREATE UNIQUE INDEX rm_transactions_order_idx ON rm_transactions (operator_id, log_major, log_minor);
      CREATE INDEX rm_transactions_time_idx ON rm_transactions (operator_id, recorded_at);
      CREATE INDEX rm_transactions_player_idx ON rm_transactions (operator_id, player_ref, recorded_at);
      CREATE INDEX rm_transactions_round_idx ON rm_transactions (operator_id, round_id);
      -- The console's search by transaction id.
      CREATE INDEX rm_transactions_id_idx ON rm_transactions (transaction_id);
      -- The transactions list filtered by status, in recorded order.
      CREATE INDEX rm_transactions_operator_status_idx ON rm_transactions (operator_id, operator_status, log_major, log_minor);
      DO $reproject$ BEGIN
        IF to_regclass('projection_checkpoints') IS NOT NULL THEN
          UPDATE projection_checkpoints SET position = 'start', events_applied = 0, last_event_at = NULL, updated_at = now(),
            failing_since = NULL, failing_event = NULL, failing_error = NULL
          WHERE name = 'rounds';
          DELETE FROM projection_checkpoints WHERE name = 'reconciliation';
        END IF;
        IF to_regclass('console_lag_minutes') IS NOT NULL THEN
          DELETE FROM console_lag_minutes WHERE name = 'reconciliation';
        END IF;
      END $reproject$;
    `,
  },
  {
    // Fewer index entries for every transaction and round the read model writes. A round's transactions
    // are found through its row in rm_rounds and their own key, which begins with the round's stream, not
    // through an index of their own on (operator_id, round_id). The status filter's index holds only the
    // statuses other than 'applied', nearly every transaction's, whose list reads the operator's
    // transactions in recorded order (rm_transactions_order_idx) as the unfiltered list does. A round is
    // looked up by its id, with or without its operator, through one index (round_id, operator_id), where
    // there were two; a round's every update writes an entry in each (its last activity is indexed).
    id: 'rm-reconciliation-003-fewer-indexes',
    sql: `
      DROP INDEX rm_transactions_round_idx;
      DROP INDEX rm_transactions_operator_status_idx;
      CREATE INDEX rm_transactions_operator_status_idx ON rm_transactions (operator_id, operator_status, log_major, log_minor) WHERE operator_status <> 'applied';
      DROP INDEX rm_rounds_lookup_idx, rm_rounds_round_idx;
      CREATE INDEX rm_rounds_round_idx ON rm_rounds (round_id, operator_id);
    `,
  },
];

/** The quarter hour a recording time falls in (UTC). */
export const QUARTER_MS = 15 * 60 * 1000;
export const quarterOf = (iso: string): string => periodStart(iso, QUARTER_MS);

/** One transaction's place in the settlement quarters. */
export interface QuarterKey {
  operatorId: string;
  quarter: string;
  providerId: string;
  gameId: string;
  currency: string;
  type: string;
  direction: string;
  status: OperatorStatus;
}

/** The columns of a transaction that place it in a quarter, with the status it shows. */
export interface Placed {
  operatorId: string;
  recordedAt: string;
  providerId: string;
  gameId: string;
  currency: string;
  type: string;
  direction: string | null;
}

export const quarterKey = (r: Placed, status: OperatorStatus): QuarterKey => ({
  operatorId: r.operatorId, quarter: quarterOf(r.recordedAt), providerId: r.providerId, gameId: r.gameId, currency: r.currency, type: r.type,
  direction: r.direction ?? '', status,
});

/** What a batch moved between the settlement quarters' cells: a transaction counted in, or moved from one status to another. */
export class QuarterDeltas {
  private readonly deltas = new Map<string, QuarterKey & { count: number; amount: bigint }>();
  add(key: QuarterKey, sign: 1 | -1, amount: number | string): void {
    const k = [key.operatorId, key.quarter, key.providerId, key.gameId, key.currency, key.type, key.direction, key.status].join('\n');
    const d = this.deltas.get(k) ?? { ...key, count: 0, amount: 0n };
    d.count += sign;
    d.amount += BigInt(sign) * BigInt(amount);
    this.deltas.set(k, d);
  }
  /**
   * Only the keys whose figures moved, in the order of their keys: every batch locks the rows it adds
   * to in that one order, so batches applied at once (a rebuild's, see Projection.streamLocal) may
   * wait for each other but never deadlock.
   */
  list() {
    return [...this.deltas.entries()]
      .filter(([, d]) => d.count !== 0 || d.amount !== 0n)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, d]) => d);
  }
}

/** Adds the batch's moves to the quarters' cells; a cell with nothing left holds no row, as a rebuild would leave it. */
export async function writeQuarters(tx: PoolClient, quarters: QuarterDeltas): Promise<void> {
  const moved = quarters.list();
  if (moved.length === 0) return;
  await tx.query(
    `INSERT INTO rm_settlement_quarters AS q (operator_id, quarter, provider_id, game_id, currency, type, direction, status, count, amount)
     SELECT operator_id, quarter, provider_id, game_id, currency, type, direction, status, count, amount
     FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::bigint[], $10::numeric[])
       WITH ORDINALITY AS d(operator_id, quarter, provider_id, game_id, currency, type, direction, status, count, amount, n)
     ORDER BY n
     ON CONFLICT (operator_id, quarter, provider_id, game_id, currency, type, direction, status)
     DO UPDATE SET count = q.count + EXCLUDED.count, amount = q.amount + EXCLUDED.amount`,
    [
      moved.map((d) => d.operatorId), moved.map((d) => d.quarter), moved.map((d) => d.providerId), moved.map((d) => d.gameId),
      moved.map((d) => d.currency), moved.map((d) => d.type), moved.map((d) => d.direction), moved.map((d) => d.status),
      moved.map((d) => d.count), moved.map((d) => d.amount.toString()),
    ],
  );
  // A key the batch added more transactions to than it took away cannot be left with none: only the others are looked at.
  const emptied = moved.filter((d) => d.count <= 0);
  if (emptied.length > 0) {
    await tx.query(
      `DELETE FROM rm_settlement_quarters q USING unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[])
         AS k(operator_id, quarter, provider_id, game_id, currency, type, direction, status)
       WHERE q.count = 0 AND (q.operator_id, q.quarter, q.provider_id, q.game_id, q.currency, q.type, q.direction, q.status)
         = (k.operator_id, k.quarter, k.provider_id, k.game_id, k.currency, k.type, k.direction, k.status)`,
      [
        emptied.map((d) => d.operatorId), emptied.map((d) => d.quarter), emptied.map((d) => d.providerId), emptied.map((d) => d.gameId),
        emptied.map((d) => d.currency), emptied.map((d) => d.type), emptied.map((d) => d.direction), emptied.map((d) => d.status),
      ],
    );
  }
}

/**
 * A round as operators see it, as far as a batch concerns it: opened (by a BET, WIN or ROLLBACK; the
 * platform's rounds of adjustments are no operator's round), and closed at its first close, if the batch
 * closed it. Its other facts are the round's own (rm_rounds).
 */
export interface OperatorRound {
  closed?: { status: 'complete' | 'force-closed'; at: string };
}

/** Folds one event into the operators' rounds of a batch: a round is closed at its first close (a completing BET or WIN, or the reconciler). */
export function foldOperatorRound(rounds: Map<string, OperatorRound>, recorded: RecordedEvent): void {
  const event = recorded as unknown as RoundEvent;
  const stream = recorded.streamId;
  if (event.type === 'TransactionRecorded') {
    const { request: r, recordedAt } = event.data;
    if (r.type === 'ADJUSTMENT') return;
    const round = rounds.get(stream) ?? {};
    if (completesRound(r) && !round.closed) round.closed = { status: 'complete', at: recordedAt };
    rounds.set(stream, round);
  } else if (event.type === 'RoundForceClosed') {
    const round = rounds.get(stream) ?? {};
    if (!round.closed) round.closed = { status: 'force-closed', at: event.data.closedAt };
    rounds.set(stream, round);
  }
}
