import type { Pool } from '../../shared/db/pool.ts';
import { DEAD_STATUSES, isStuck, operatorStatus, UNSETTLED_STATUSES, type OperatorStatus, type TxStatus } from './decider.ts';
import type { TransactionType } from './events.ts';

/**
 * The only way other code reads the rounds read model (rm_rounds, rm_transactions). Which statuses are
 * "unsettled" is the decider's (UNSETTLED_STATUSES), passed in, never spelled out here; "outstanding"
 * is the projection's figure, the tested twin of the decider's outstandingBets (see
 * projection.int.test.ts).
 */

export interface TxRow {
  roundStream: string;
  transactionId: string;
  operatorId: string;
}

/** Credits (WIN, ROLLBACK, ADJUSTMENT) recorded and not settled for good, untouched for `quietSeconds` (an attempt in flight is left to finish). */
export async function unsettledCredits(pool: Pool, quietSeconds: number): Promise<TxRow[]> {
  const { rows } = await pool.query<{ round_stream: string; transaction_id: string; operator_id: string }>(
    `SELECT round_stream, transaction_id, operator_id FROM rm_transactions
     WHERE type <> 'BET' AND status = ANY($1::text[]) AND updated_at < now() - $2 * interval '1 second'`,
    [UNSETTLED_STATUSES, quietSeconds],
  );
  return rows.map((r) => ({ roundStream: r.round_stream, transactionId: r.transaction_id, operatorId: r.operator_id }));
}

/**
 * BETs still recorded (no outcome of their own attempt recorded), in a round that holds a transaction of
 * their provider's recorded after them in the log (workerAttempts: the provider went on as if it had the BET's answer;
 * the log's order, as the decider's, not the api processes' clocks), untouched for `quietSeconds`: never
 * asked yet, or asked and the ask failed.
 * Candidates only: the decider confirms each on its own stream, and the lease keeps out an attempt still
 * under way.
 */
export async function unansweredBets(pool: Pool, quietSeconds: number): Promise<TxRow[]> {
  const { rows } = await pool.query<{ round_stream: string; transaction_id: string; operator_id: string }>(
    `SELECT b.round_stream, b.transaction_id, b.operator_id FROM rm_transactions b
     WHERE b.type = 'BET' AND b.status = 'recorded' AND b.updated_at < now() - $1 * interval '1 second'
       AND EXISTS (SELECT 1 FROM rm_transactions later WHERE later.round_stream = b.round_stream AND later.origin = 'provider' AND (later.log_major, later.log_minor) > (b.log_major, b.log_minor))`,
    [quietSeconds],
  );
  return rows.map((r) => ({ roundStream: r.round_stream, transactionId: r.transaction_id, operatorId: r.operator_id }));
}

/**
 * Rounds the reconciler looks at, oldest first, at most `perOperator` per operator: open ones with
 * outstanding bets and no activity for staleAfterSeconds, and force-closed ones whose outstanding bets
 * are not all rolled back yet (a process died between closing and rolling back). Candidates only: the
 * decider confirms each on its own stream (isStale).
 */
export async function staleRoundCandidates(pool: Pool, staleAfterSeconds: number, perOperator: number): Promise<Array<{ roundStream: string; operatorId: string }>> {
  const { rows } = await pool.query<{ round_stream: string; operator_id: string }>(
    `SELECT round_stream, operator_id FROM (
       SELECT round_stream, operator_id, last_activity_at,
              row_number() OVER (PARTITION BY operator_id ORDER BY last_activity_at) AS n
       FROM rm_rounds
       WHERE outstanding_bets > 0
         AND ((status = 'open' AND last_activity_at < now() - $1 * interval '1 second') OR force_closed)
     ) stale
     WHERE n <= $2 ORDER BY last_activity_at`,
    [staleAfterSeconds, perOperator],
  );
  return rows.map((r) => ({ roundStream: r.round_stream, operatorId: r.operator_id }));
}

/** Whether a ROLLBACK of its round names the transaction `t` (the decider's rolledBackBy, as the read model holds it). */
const ROLLED_BACK = `EXISTS (SELECT 1 FROM rm_transactions r WHERE r.round_stream = t.round_stream AND r.type = 'ROLLBACK' AND r.original_transaction_id = t.transaction_id)`;

/** Where a page of `transactionsIn` ends: the last row read, by its place in the order of the list. */
export interface TransactionKey {
  /** `recorded_at` as Postgres writes it (microseconds and offset kept: a Date would drop the microseconds). */
  recordedAt: string;
  roundStream: string;
  transactionId: string;
}

/**
 * The transactions in the given statuses, oldest first (by `recorded_at`, then the table's key, so the order
 * is total), at most `limit`, after `after` when given: rows of rm_transactions, column names as stored,
 * each with whether it is a transaction a ROLLBACK names (`rolledBack`, beside the row) for the decider's
 * rules (isUnsettled), and its key (`key`) to read on from.
 */
export async function transactionsIn(
  pool: Pool,
  statuses: readonly TxStatus[],
  page: { after?: TransactionKey; limit: number },
): Promise<Array<{ row: Record<string, unknown> & { amount: number; type: TransactionType; status: TxStatus }; rolledBack: boolean; key: TransactionKey }>> {
  const { after, limit } = page;
  const { rows } = await pool.query<{ amount: string; type: TransactionType; status: TxStatus; rolled_back: boolean; recorded_key: string; round_stream: string; transaction_id: string } & Record<string, unknown>>(
    `SELECT t.provider_id, t.operator_id, t.round_id, t.round_stream, t.transaction_id, t.type, t.player_ref, t.amount, t.currency, t.status, t.attempts,
            t.last_error, t.recorded_at, t.dead_lettered_at, t.updated_at,
            ${ROLLED_BACK} AS rolled_back, t.recorded_at::text AS recorded_key
     FROM rm_transactions t
     WHERE t.status = ANY($1::text[]) AND ($2::timestamptz IS NULL OR (t.recorded_at, t.round_stream, t.transaction_id) > ($2::timestamptz, $3::text, $4::text))
     ORDER BY t.recorded_at, t.round_stream, t.transaction_id LIMIT $5`,
    [statuses, after?.recordedAt ?? null, after?.roundStream ?? null, after?.transactionId ?? null, limit],
  );
  // bigint arrives as a decimal string; amounts are accepted only as safe integers, so Number() is exact.
  return rows.map(({ rolled_back, recorded_key, ...r }) => ({
    row: { ...r, amount: Number(r.amount) },
    rolledBack: rolled_back,
    key: { recordedAt: recorded_key, roundStream: r.round_stream, transactionId: r.transaction_id },
  }));
}

/** Dead-lettered transactions per operator (operators with none are absent). */
export async function deadLetteredByOperator(pool: Pool): Promise<Map<string, number>> {
  // Dead as operators see it: retries stopped, and credits the wallet answered DECLINED (DEAD_STATUSES).
  const { rows } = await pool.query<{ operator_id: string; n: number }>(
    `SELECT operator_id, count(*)::int AS n FROM rm_transactions WHERE status = ANY($1::text[]) GROUP BY operator_id`,
    [DEAD_STATUSES],
  );
  return new Map(rows.map((r) => [r.operator_id, r.n]));
}

export interface StuckRow {
  operatorId: string;
  providerId: string;
  roundId: string;
  gameId: string;
  transactionId: string;
  type: TransactionType;
  amount: number;
  currency: string;
  status: TxStatus;
  attempts: number;
  lastError: string | null;
  recordedAt: Date;
}

const STUCK_ROWS = `
  SELECT t.operator_id, t.provider_id, t.round_id, t.game_id, t.transaction_id, t.type, t.amount, t.currency, t.status, t.attempts, t.last_error, t.recorded_at,
         ${ROLLED_BACK} AS rolled_back
  FROM rm_transactions t WHERE t.status = ANY($1::text[])`;

interface StuckDbRow {
  operator_id: string; provider_id: string; round_id: string; game_id: string; transaction_id: string; type: TransactionType; amount: string;
  currency: string; status: TxStatus; attempts: number; last_error: string | null; recorded_at: Date; rolled_back: boolean;
}

/**
 * What the console lists as stuck money (the decider's isStuck), oldest first, at most `limit`. The
 * query leaves out the BETs a ROLLBACK settled before it counts to `limit` (as isStuck does, which then
 * decides), so that old refunded BETs never push stuck money off the list.
 */
export async function stuckTransactions(pool: Pool, statuses: readonly TxStatus[], limit: number): Promise<StuckRow[]> {
  const { rows } = await pool.query<StuckDbRow>(
    `SELECT * FROM (${STUCK_ROWS}) s WHERE NOT (s.type = 'BET' AND s.rolled_back) ORDER BY s.recorded_at LIMIT $2`,
    [statuses, limit],
  );
  return rows
    .filter((r) => isStuck(r.type, r.status, r.rolled_back))
    .map((r) => ({
      operatorId: r.operator_id, providerId: r.provider_id, roundId: r.round_id, gameId: r.game_id, transactionId: r.transaction_id, type: r.type,
      amount: Number(r.amount), currency: r.currency, status: r.status, attempts: r.attempts, lastError: r.last_error, recordedAt: r.recorded_at,
    }));
}

/** How many transactions are stuck, by the status operators see (the decider's isStuck and operatorStatus). */
export async function stuckCounts(pool: Pool, statuses: readonly TxStatus[]): Promise<Map<OperatorStatus, number>> {
  const { rows } = await pool.query<{ type: TransactionType; status: TxStatus; rolled_back: boolean; n: number }>(
    `SELECT s.type, s.status, s.rolled_back, count(*)::int AS n FROM (${STUCK_ROWS}) s GROUP BY s.type, s.status, s.rolled_back`,
    [statuses],
  );
  const counts = new Map<OperatorStatus, number>();
  for (const r of rows) {
    if (!isStuck(r.type, r.status, r.rolled_back)) continue;
    const shown = operatorStatus(r.type, r.status);
    counts.set(shown, (counts.get(shown) ?? 0) + r.n);
  }
  return counts;
}
