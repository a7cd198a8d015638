import type { Migration } from '../../shared/db/migrations.ts';
import type { PoolClient } from '../../shared/db/pool.ts';
import { jsonbRows, jsonbRowsInsert, type RowColumn } from '../../shared/db/rows.ts';
import { positionParts, type RecordedEvent } from '../../shared/eventstore/port.ts';
import type { Projection } from '../../projections/runner.ts';
import { ROUND_EVENT_TYPES, type RoundEvent } from '../rounds/events.ts';
import { completesRound, operatorStatus, type OperatorStatus, type TxStatus } from '../rounds/decider.ts';

/**
 * The operators' reconciliation read model (contract section 9), built from the rounds' events:
 *
 * - rm_operator_transactions: every wallet-bound transaction with the status operators reconcile
 *   (the decider's operatorStatus), in the order it was recorded (the log position of its
 *   TransactionRecorded, which no later record can sort before: the cursor of the transactions list).
 * - rm_operator_rounds: each round's status as operators see it (open, complete, force-closed) and when
 *   it opened and closed.
 * - rm_settlement_quarters: per operator and quarter hour of recording, per provider, game, currency,
 *   type, direction and status, how many transactions and their amount. A statement sums the quarters
 *   inside its interval and reads single rows only for the parts of a quarter at its two ends (see
 *   queries.ts), so a 31-day statement reads thousands of rows, not millions. Quarter hours, not hours:
 *   every time zone in use has its midnight on one (+05:30, +05:45).
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
];

/** The quarter hour a recording time falls in (UTC). */
export const QUARTER_MS = 15 * 60 * 1000;
export const quarterOf = (iso: string): string => new Date(Math.floor(Date.parse(iso) / QUARTER_MS) * QUARTER_MS).toISOString();

/** A transaction as first recorded, with what the rest of its batch made of it. */
interface NewRow {
  roundStream: string;
  transactionId: string;
  operatorId: string;
  logMajor: string;
  logMinor: string;
  providerId: string;
  origin: string;
  roundId: string;
  gameId: string;
  playerRef: string;
  type: 'BET' | 'WIN' | 'ROLLBACK' | 'ADJUSTMENT';
  direction: string | null;
  amount: number;
  currency: string;
  originalTransactionId: string | null;
  recordedAt: string;
  change?: Change;
}

/** What a batch's outcome events did to one transaction: the last status they left, and when. */
interface Change {
  roundStream: string;
  transactionId: string;
  status: TxStatus;
  at: string;
  attempts?: number;
  walletBalance?: number;
}

interface RoundRow {
  roundStream: string;
  operatorId: string;
  providerId: string;
  roundId: string;
  gameId: string;
  playerRef: string;
  currency: string;
  openedAt: string;
  /** Set when the batch closed the round (a completing BET or WIN, or the reconciler). */
  closed?: { status: 'complete' | 'force-closed'; at: string };
}

/**
 * The batch folded in log order: the transactions it records (with their outcomes in the same batch),
 * the outcomes of transactions recorded before it, and the rounds it opens or closes.
 */
export function foldReconciliation(events: RecordedEvent[]): { rows: NewRow[]; changes: Change[]; rounds: RoundRow[] } {
  const rows = new Map<string, NewRow>();
  const changes = new Map<string, Change>();
  const rounds = new Map<string, RoundRow>();
  const change = (stream: string, transactionId: string, set: Omit<Change, 'roundStream' | 'transactionId'>) => {
    const key = `${stream}\n${transactionId}`;
    const prev = changes.get(key);
    changes.set(key, {
      roundStream: stream,
      transactionId,
      status: set.status,
      at: set.at,
      ...((set.attempts ?? prev?.attempts) !== undefined ? { attempts: set.attempts ?? prev?.attempts } : {}),
      ...((set.walletBalance ?? prev?.walletBalance) !== undefined ? { walletBalance: set.walletBalance ?? prev?.walletBalance } : {}),
    });
  };
  for (const recorded of events) {
    const event = recorded as unknown as RoundEvent;
    const stream = recorded.streamId;
    switch (event.type) {
      case 'TransactionRecorded': {
        const { request: r, recordedAt, providerId, operatorId, origin } = event.data;
        const key = `${stream}\n${r.transactionId}`;
        if (!rows.has(key)) {
          const [major, minor] = positionParts(recorded.position);
          rows.set(key, {
            roundStream: stream, transactionId: r.transactionId, operatorId, logMajor: major.toString(), logMinor: minor.toString(), providerId, origin,
            roundId: r.roundId, gameId: r.gameId, playerRef: r.playerRef, type: r.type, direction: r.direction ?? null, amount: r.amount,
            currency: r.currency, originalTransactionId: r.originalTransactionId ?? null, recordedAt,
          });
        }
        if (r.type === 'ADJUSTMENT') break;
        let round = rounds.get(stream);
        if (!round) {
          round = { roundStream: stream, operatorId, providerId, roundId: r.roundId, gameId: r.gameId, playerRef: r.playerRef, currency: r.currency, openedAt: recordedAt };
          rounds.set(stream, round);
        }
        if (completesRound(r) && !round.closed) round.closed = { status: 'complete', at: recordedAt };
        break;
      }
      case 'TransactionSettled': {
        const d = event.data;
        change(stream, d.transactionId, { status: d.outcome, at: d.settledAt, attempts: d.attempt, walletBalance: d.reply.balance });
        break;
      }
      case 'TransactionAttemptFailed':
        change(stream, event.data.transactionId, { status: event.data.outcome, at: event.data.failedAt, attempts: event.data.attempt });
        break;
      case 'TransactionDeadLettered':
        change(stream, event.data.transactionId, { status: 'dead', at: event.data.deadLetteredAt });
        break;
      case 'TransactionVoided':
        change(stream, event.data.transactionId, { status: 'voided', at: event.data.voidedAt });
        break;
      case 'TransactionRedriven':
        change(stream, event.data.transactionId, { status: 'recorded', at: event.data.redrivenAt });
        break;
      case 'RoundForceClosed': {
        // A round the batch did not open is closed by an update (see apply); one it opened, here.
        const round = rounds.get(stream) ?? { roundStream: stream, operatorId: '', providerId: '', roundId: '', gameId: '', playerRef: '', currency: '', openedAt: '' };
        if (!round.closed) round.closed = { status: 'force-closed', at: event.data.closedAt };
        rounds.set(stream, round);
        break;
      }
      default: {
        const unknown: never = event;
        return unknown;
      }
    }
  }
  const rest: Change[] = [];
  for (const [key, c] of changes) {
    const row = rows.get(key);
    if (row) row.change = c;
    else rest.push(c);
  }
  return { rows: [...rows.values()], changes: rest, rounds: [...rounds.values()] };
}

/** One transaction's place in the settlement quarters. */
interface QuarterKey {
  operatorId: string;
  quarter: string;
  providerId: string;
  gameId: string;
  currency: string;
  type: string;
  direction: string;
  status: OperatorStatus;
}

class QuarterDeltas {
  private readonly deltas = new Map<string, QuarterKey & { count: number; amount: bigint }>();
  add(key: QuarterKey, sign: 1 | -1, amount: number | string): void {
    const k = [key.operatorId, key.quarter, key.providerId, key.gameId, key.currency, key.type, key.direction, key.status].join('\n');
    const d = this.deltas.get(k) ?? { ...key, count: 0, amount: 0n };
    d.count += sign;
    d.amount += BigInt(sign) * BigInt(amount);
    this.deltas.set(k, d);
  }
  /** Only the keys whose figures moved. */
  list() {
    return [...this.deltas.values()].filter((d) => d.count !== 0 || d.amount !== 0n);
  }
}

/** A transaction row as it is inserted: the columns it fills, in the order of jsonbRows' cells. */
const TRANSACTION_ROW: RowColumn[] = [
  ['round_stream', 'text'], ['transaction_id', 'text'], ['operator_id', 'text'], ['log_major', 'bigint'], ['log_minor', 'bigint'],
  ['provider_id', 'text'], ['origin', 'text'], ['round_id', 'text'], ['game_id', 'text'], ['player_ref', 'text'], ['type', 'text'],
  ['direction', 'text'], ['amount', 'bigint'], ['currency', 'text'], ['original_transaction_id', 'text'], ['status', 'text'],
  ['wallet_balance', 'numeric'], ['attempts', 'int'], ['recorded_at', 'timestamptz'], ['settled_at', 'timestamptz'],
];

/** The status and settling time a transaction shows after a change (settledAt only once final). */
const shown = (type: NewRow['type'], c: Change): { status: OperatorStatus; settledAt: string | null } => {
  const status = operatorStatus(type, c.status);
  return { status, settledAt: status === 'pending' ? null : c.at };
};

export const reconciliationProjection: Projection = {
  name: 'reconciliation',
  tables: [
    { name: 'rm_operator_transactions', key: ['round_stream', 'transaction_id'] },
    { name: 'rm_operator_rounds', key: ['round_stream'] },
    { name: 'rm_settlement_quarters', key: ['operator_id', 'quarter', 'provider_id', 'game_id', 'currency', 'type', 'direction', 'status'] },
  ],
  eventTypes: ROUND_EVENT_TYPES,
  async apply(events: RecordedEvent[], tx: PoolClient) {
    const { rows, changes, rounds } = foldReconciliation(events);
    const quarters = new QuarterDeltas();
    const keyOf = (r: { operatorId: string; recordedAt: string; providerId: string; gameId: string; currency: string; type: string; direction: string | null }, status: OperatorStatus): QuarterKey => ({
      operatorId: r.operatorId, quarter: quarterOf(r.recordedAt), providerId: r.providerId, gameId: r.gameId, currency: r.currency, type: r.type,
      direction: r.direction ?? '', status,
    });

    if (rows.length > 0) {
      const values = rows.map((r) => {
        const after = r.change ? shown(r.type, r.change) : { status: 'pending' as const, settledAt: null };
        return { r, ...after };
      });
      const { rows: created } = await tx.query<{ round_stream: string; transaction_id: string }>(
        `${jsonbRowsInsert('rm_operator_transactions', TRANSACTION_ROW, '$1')}
         ON CONFLICT (round_stream, transaction_id) DO NOTHING
         RETURNING round_stream, transaction_id`,
        [
          jsonbRows(
            values.map(({ r, status, settledAt }) => [
              r.roundStream, r.transactionId, r.operatorId, r.logMajor, r.logMinor, r.providerId, r.origin, r.roundId, r.gameId, r.playerRef, r.type,
              r.direction, r.amount, r.currency, r.originalTransactionId, status, r.change?.walletBalance ?? null, r.change?.attempts ?? 0, r.recordedAt,
              settledAt,
            ]),
          ),
        ],
      );
      const inserted = new Set(created.map((c) => `${c.round_stream}\n${c.transaction_id}`));
      for (const v of values) {
        if (inserted.has(`${v.r.roundStream}\n${v.r.transactionId}`)) quarters.add(keyOf(v.r, v.status), 1, v.r.amount);
        // Recorded before (a repeat): what the batch did to it is a change like any other.
        else if (v.r.change) changes.push(v.r.change);
      }
    }

    if (changes.length > 0) {
      // The rows as they are, to know each one's type (the status it shows depends on it) and where it counts.
      const { rows: current } = await tx.query<{
        round_stream: string; transaction_id: string; operator_id: string; provider_id: string; game_id: string; currency: string;
        type: NewRow['type']; direction: string | null; amount: string; status: OperatorStatus; recorded_at: Date;
      }>(
        `SELECT t.round_stream, t.transaction_id, t.operator_id, t.provider_id, t.game_id, t.currency, t.type, t.direction, t.amount, t.status, t.recorded_at
         FROM unnest($1::text[], $2::text[]) AS k(round_stream, transaction_id)
         JOIN rm_operator_transactions t ON t.round_stream = k.round_stream AND t.transaction_id = k.transaction_id
         FOR UPDATE OF t`,
        [changes.map((c) => c.roundStream), changes.map((c) => c.transactionId)],
      );
      const byKey = new Map(current.map((c) => [`${c.round_stream}\n${c.transaction_id}`, c]));
      const updates = changes.flatMap((c) => {
        const row = byKey.get(`${c.roundStream}\n${c.transactionId}`);
        if (!row) return []; // an outcome of a transaction this read model never saw recorded: nothing to show it on
        const after = shown(row.type, c);
        if (after.status !== row.status) {
          const at = { operatorId: row.operator_id, recordedAt: row.recorded_at.toISOString(), providerId: row.provider_id, gameId: row.game_id, currency: row.currency, type: row.type, direction: row.direction };
          quarters.add(keyOf(at, row.status), -1, row.amount);
          quarters.add(keyOf(at, after.status), 1, row.amount);
        }
        return [{ c, ...after }];
      });
      if (updates.length > 0) {
        await tx.query(
          `UPDATE rm_operator_transactions t SET status = u.status, settled_at = u.settled_at,
             attempts = coalesce(u.attempts, t.attempts), wallet_balance = coalesce(u.wallet_balance, t.wallet_balance)
           FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::int[], $6::numeric[])
             AS u(round_stream, transaction_id, status, settled_at, attempts, wallet_balance)
           WHERE t.round_stream = u.round_stream AND t.transaction_id = u.transaction_id`,
          [
            updates.map((u) => u.c.roundStream), updates.map((u) => u.c.transactionId), updates.map((u) => u.status), updates.map((u) => u.settledAt),
            updates.map((u) => u.c.attempts ?? null), updates.map((u) => u.c.walletBalance ?? null),
          ],
        );
      }
    }

    const moved = quarters.list();
    if (moved.length > 0) {
      await tx.query(
        `INSERT INTO rm_settlement_quarters AS q (operator_id, quarter, provider_id, game_id, currency, type, direction, status, count, amount)
         SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::bigint[], $10::numeric[])
         ON CONFLICT (operator_id, quarter, provider_id, game_id, currency, type, direction, status)
         DO UPDATE SET count = q.count + EXCLUDED.count, amount = q.amount + EXCLUDED.amount`,
        [
          moved.map((d) => d.operatorId), moved.map((d) => d.quarter), moved.map((d) => d.providerId), moved.map((d) => d.gameId),
          moved.map((d) => d.currency), moved.map((d) => d.type), moved.map((d) => d.direction), moved.map((d) => d.status),
          moved.map((d) => d.count), moved.map((d) => d.amount.toString()),
        ],
      );
      // A quarter with nothing left in a status holds no row, as a rebuild would leave it. A key the batch
      // added more transactions to than it took away cannot be left with none: only the others are looked at.
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

    if (rounds.length > 0) {
      const opened = rounds.filter((r) => r.openedAt !== '');
      /** Rounds this batch created: each was written with its close already (if the batch closed it). */
      let created = new Set<string>();
      if (opened.length > 0) {
        const { rows: inserted } = await tx.query<{ round_stream: string }>(
          `INSERT INTO rm_operator_rounds (round_stream, operator_id, provider_id, round_id, game_id, player_ref, currency, status, opened_at, closed_at)
           SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::timestamptz[], $10::timestamptz[])
           ON CONFLICT (round_stream) DO NOTHING
           RETURNING round_stream`,
          [
            opened.map((r) => r.roundStream), opened.map((r) => r.operatorId), opened.map((r) => r.providerId), opened.map((r) => r.roundId),
            opened.map((r) => r.gameId), opened.map((r) => r.playerRef), opened.map((r) => r.currency), opened.map((r) => r.closed?.status ?? 'open'),
            opened.map((r) => r.openedAt), opened.map((r) => r.closed?.at ?? null),
          ],
        );
        created = new Set(inserted.map((r) => r.round_stream));
      }
      // The round closes once, at the first close the history holds (a closed round takes no BET or WIN).
      // A round created above holds its close already; the others (opened in an earlier batch, or already
      // there) are closed here unless they were closed before.
      const closed = rounds.filter((r) => r.closed && !created.has(r.roundStream));
      if (closed.length > 0) {
        await tx.query(
          `UPDATE rm_operator_rounds r SET status = c.status, closed_at = c.closed_at
           FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS c(round_stream, status, closed_at)
           WHERE r.round_stream = c.round_stream AND r.closed_at IS NULL`,
          [closed.map((r) => r.roundStream), closed.map((r) => r.closed!.status), closed.map((r) => r.closed!.at)],
        );
      }
    }
  },
  async reset(tx: PoolClient) {
    await tx.query('DELETE FROM rm_operator_transactions');
    await tx.query('DELETE FROM rm_operator_rounds');
    await tx.query('DELETE FROM rm_settlement_quarters');
  },
};
