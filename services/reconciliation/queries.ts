import type { Pool } from '../../shared/db/pool.ts';
import { safeIntegerFrom } from '../../shared/bounds.ts';
import { QUARTER_MS } from './projection.ts';
import type { OperatorStatus } from '../rounds/decider.ts';
import type { TransactionRecord } from './schemas.ts';

/** The only way other code reads the operators' reconciliation view (see projection.ts). */

interface TxRow {
  transaction_id: string;
  provider_id: string;
  game_id: string;
  round_id: string;
  player_ref: string;
  type: TransactionRecord['type'];
  amount: string;
  currency: string;
  direction: 'DEBIT' | 'CREDIT' | null;
  original_transaction_id: string | null;
  operator_status: OperatorStatus;
  wallet_balance: string | null;
  attempts: number;
  recorded_at: Date;
  /** When the last outcome event changed it (when recorded, if none has). */
  updated_at: Date;
  log_major: string;
  log_minor: string;
}

/** The operators' columns of rm_transactions: their status, and the balance the wallet last answered with. */
const TX_COLUMNS = `transaction_id, provider_id, game_id, round_id, player_ref, type, amount, currency, direction, original_transaction_id,
  operator_status, reply->>'balance' AS wallet_balance, attempts, recorded_at, updated_at, log_major, log_minor`;

function toRecord(r: TxRow): TransactionRecord {
  return {
    transactionId: r.transaction_id,
    ...(r.type !== 'ADJUSTMENT' ? { providerId: r.provider_id } : {}),
    gameId: r.game_id,
    roundId: r.round_id,
    playerRef: r.player_ref,
    type: r.type,
    amount: safeIntegerFrom(r.amount, 'amount'),
    currency: r.currency,
    ...(r.direction !== null ? { direction: r.direction } : {}),
    ...(r.original_transaction_id !== null ? { originalTransactionId: r.original_transaction_id } : {}),
    status: r.operator_status,
    ...(r.wallet_balance !== null ? { walletBalance: Number(r.wallet_balance) } : {}),
    attempts: r.attempts,
    recordedAt: r.recorded_at.toISOString(),
    // Settled once it is no longer pending: when the event that left it so was recorded.
    ...(r.operator_status !== 'pending' ? { settledAt: r.updated_at.toISOString() } : {}),
  };
}

/** Where a page starts: after this transaction, in the order transactions were recorded. */
export interface After {
  major: string;
  minor: string;
}

export type TransactionFilter = ({ from: string; to: string } | { roundId: string; gameId: string }) & {
  playerRef?: string | undefined;
  status?: OperatorStatus | undefined;
};

/**
 * One page of an operator's transactions, in the order they were recorded, after `after`. Returns the
 * page and the last one's place when more may follow. The order is the log position of each
 * transaction's record, which a transaction recorded later can never sort before, so paging yields
 * each transaction once however many are recorded meanwhile.
 */
export async function transactionsPage(
  pool: Pool,
  operatorId: string,
  filter: TransactionFilter,
  limit: number,
  after: After | undefined,
): Promise<{ transactions: TransactionRecord[]; last: After | undefined }> {
  const values: unknown[] = [operatorId];
  const where = ['operator_id = $1'];
  const param = (v: unknown) => {
    values.push(v);
    return `$${values.length}`;
  };
  if ('from' in filter) where.push(`recorded_at >= ${param(filter.from)}::timestamptz AND recorded_at < ${param(filter.to)}::timestamptz`);
  // The transactions of the round roundOf answers (a transaction a provider sent for another game of the
  // round is the round's too), found by their key, which starts with the round's stream.
  else where.push(`round_stream = (${roundStreamOf('$1', param(filter.roundId), param(filter.gameId))})`);
  if (filter.playerRef !== undefined) where.push(`player_ref = ${param(filter.playerRef)}`);
  if (filter.status !== undefined) where.push(`operator_status = ${param(filter.status)}`);
  if (after) where.push(`(log_major, log_minor) > (${param(after.major)}::bigint, ${param(after.minor)}::bigint)`);
  const { rows } = await pool.query<TxRow>(
    `SELECT ${TX_COLUMNS} FROM rm_transactions WHERE ${where.join(' AND ')} ORDER BY log_major, log_minor LIMIT ${param(limit + 1)}`,
    values,
  );
  const more = rows.length > limit;
  const page = more ? rows.slice(0, limit) : rows;
  const last = page[page.length - 1];
  return { transactions: page.map(toRecord), last: more && last ? { major: last.log_major, minor: last.log_minor } : undefined };
}

export interface RoundRecord {
  roundId: string;
  gameId: string;
  providerId: string;
  playerRef: string;
  currency: string;
  status: 'open' | 'complete' | 'force-closed';
  openedAt: string;
  closedAt?: string;
  transactions: TransactionRecord[];
}

/**
 * The operator's round of an id and game, as SQL over the given parameters: the one the round route and
 * the list by round answer (the round's own game, its first transaction's; the first opened, should a game
 * ever move between providers), found through rm_rounds_round_idx.
 */
const roundStreamOf = (operatorId: string, roundId: string, gameId: string): string =>
  `SELECT round_stream FROM rm_rounds WHERE operator_id = ${operatorId} AND round_id = ${roundId} AND game_id = ${gameId} AND operator_status IS NOT NULL ORDER BY created_at LIMIT 1`;

/** The operator's round of this game with its transactions in recorded order; undefined when it has none. */
export async function roundOf(pool: Pool, operatorId: string, roundId: string, gameId: string): Promise<RoundRecord | undefined> {
  const { rows } = await pool.query<{
    round_stream: string; provider_id: string; player_ref: string; currency: string; status: RoundRecord['status']; opened_at: Date; closed_at: Date | null;
  }>(
    `SELECT round_stream, provider_id, player_ref, currency, operator_status AS status, created_at AS opened_at, closed_at FROM rm_rounds
     WHERE round_stream = (${roundStreamOf('$1', '$2', '$3')})`,
    [operatorId, roundId, gameId],
  );
  const round = rows[0];
  if (!round) return undefined;
  const { rows: txs } = await pool.query<TxRow>(
    `SELECT ${TX_COLUMNS} FROM rm_transactions WHERE round_stream = $1 ORDER BY log_major, log_minor`,
    [round.round_stream],
  );
  return {
    roundId,
    gameId,
    providerId: round.provider_id,
    playerRef: round.player_ref,
    currency: round.currency,
    status: round.status,
    openedAt: round.opened_at.toISOString(),
    ...(round.closed_at ? { closedAt: round.closed_at.toISOString() } : {}),
    transactions: txs.map(toRecord),
  };
}

/** Transactions of one kind and status over an interval, summed: the cells of a settlement statement. */
export interface SettlementCell {
  providerId: string;
  gameId: string;
  currency: string;
  type: TransactionRecord['type'];
  direction: 'DEBIT' | 'CREDIT' | null;
  status: OperatorStatus;
  count: bigint;
  amount: bigint;
}

const quarterFloor = (ms: number) => Math.floor(ms / QUARTER_MS) * QUARTER_MS;

/**
 * The operator's transactions recorded in `[from, to)`, summed per provider, game, currency, type,
 * direction and status. The whole quarter hours inside the interval are read from their sums; only
 * the transactions in the parts of a quarter at either end are read one by one.
 */
export async function settlementCells(pool: Pool, operatorId: string, from: string, to: string): Promise<SettlementCell[]> {
  const fromMs = Date.parse(from);
  const toMs = Date.parse(to);
  // The first whole quarter starts at or after from; the last ends at or before to.
  const qFrom = fromMs % QUARTER_MS === 0 ? fromMs : quarterFloor(fromMs) + QUARTER_MS;
  const qTo = quarterFloor(toMs);
  const whole = qFrom < qTo;
  const iso = (ms: number) => new Date(ms).toISOString();
  const { rows } = await pool.query<{
    provider_id: string; game_id: string; currency: string; type: SettlementCell['type']; direction: string; status: OperatorStatus; count: string; amount: string;
  }>(
    `SELECT provider_id, game_id, currency, type, direction, status, sum(count)::text AS count, sum(amount)::text AS amount FROM (
       SELECT provider_id, game_id, currency, type, direction, status, count, amount FROM rm_settlement_quarters
       WHERE operator_id = $1 AND quarter >= $4::timestamptz AND quarter < $5::timestamptz
       UNION ALL
       SELECT provider_id, game_id, currency, type, coalesce(direction, ''), operator_status, 1, amount FROM rm_transactions
       WHERE operator_id = $1 AND recorded_at >= $2::timestamptz AND recorded_at < $4::timestamptz
       UNION ALL
       SELECT provider_id, game_id, currency, type, coalesce(direction, ''), operator_status, 1, amount FROM rm_transactions
       WHERE operator_id = $1 AND recorded_at >= $5::timestamptz AND recorded_at < $3::timestamptz
     ) x
     GROUP BY provider_id, game_id, currency, type, direction, status`,
    // The two ends are read row by row: [from, first whole quarter) and [end of the last, to). Without
    // a whole quarter, the sums' range is empty and the first end is the whole interval.
    [operatorId, from, to, whole ? iso(qFrom) : to, whole ? iso(qTo) : to],
  );
  return rows.map((r) => ({
    providerId: r.provider_id,
    gameId: r.game_id,
    currency: r.currency,
    type: r.type,
    direction: r.direction === '' ? null : (r.direction as 'DEBIT' | 'CREDIT'),
    status: r.status,
    count: BigInt(r.count),
    amount: BigInt(r.amount),
  }));
}
