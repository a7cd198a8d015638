import type { Migration } from '../../shared/db/migrations.ts';
import { isUniqueViolation, type PoolClient } from '../../shared/db/pool.ts';
import { jsonbRows, jsonbRowsInsert, type Cell, type RowColumn } from '../../shared/db/rows.ts';
import { ROUND_EVENT_TYPES, type RoundEvent, type TransactionRequest } from './events.ts';
import { positionParts, type RecordedEvent } from '../../shared/eventstore/port.ts';
import type { Projection } from '../../projections/runner.ts';
import { completesRound, operatorStatus, statusAfterFailure, type OperatorStatus, type TxStatus } from './decider.ts';
import { foldOperatorRound, QuarterDeltas, quarterKey, reconciliationMigrations, writeQuarters, type OperatorRound } from '../reconciliation/projection.ts';

export const roundsReadModelMigrations: Migration[] = [
  {
    // A round's totals are sums of amounts of up to 2^53-1 each: numeric, since a bigint overflows after
    // about 1024 of them and would stop this read model for every operator.
    id: 'rm-rounds-baseline',
    replaces: ['rm-rounds-001', 'rm-rounds-002'],
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
        bet_amount numeric NOT NULL DEFAULT 0,
        wins int NOT NULL DEFAULT 0,
        win_amount numeric NOT NULL DEFAULT 0,
        rollbacks int NOT NULL DEFAULT 0,
        outstanding_bets int NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL,
        last_activity_at timestamptz NOT NULL
      );
      CREATE INDEX rm_rounds_stale_idx ON rm_rounds (last_activity_at) WHERE status = 'open' AND outstanding_bets > 0;
      CREATE INDEX rm_rounds_lookup_idx ON rm_rounds (operator_id, round_id);
    `,
  },
  {
    // The console's stuck money, oldest first: every status the wallet has not acknowledged, a credit it
    // refused ('invalid') included, which the index above leaves out.
    id: 'rm-rounds-002-stuck',
    sql: `CREATE INDEX rm_transactions_stuck_idx ON rm_transactions (recorded_at) WHERE status IN ('recorded', 'failed', 'timed_out', 'dead', 'invalid');`,
  },
  // The operators' rounds and settlement quarters, and their columns of rm_transactions, which this read model keeps.
  ...reconciliationMigrations,
  {
    // A round its provider completed has no outstanding bets (contract section 8): rows projected before
    // counted its played bets.
    id: 'rm-rounds-003-complete-has-none-outstanding',
    sql: `UPDATE rm_rounds SET outstanding_bets = 0 WHERE outstanding_bets > 0 AND status = 'completed' AND NOT force_closed;`,
  },
];

/**
 * The figures of the rounds named by the text[] parameter `param` (say '$1'), from their transaction rows: the same answer
 * live and on a rebuild. Every row it reads is found through the given rounds' keys, so its cost follows
 * the batch, never the table (a NOT EXISTS over rm_transactions was planned as a scan of every ROLLBACK).
 * The rows are looked up round by round (the subquery is LATERAL and kept apart by OFFSET 0, so the
 * planner cannot turn it into one scan): `round_stream = ANY(...)` was planned as a scan of the whole
 * table whenever the batch's rounds looked like a large part of it, as a few dozen of them do to a planner
 * without statistics (a new or emptied table before autovacuum's first ANALYZE), and even with
 * statistics on a table of tens of thousands of rows (500 rounds in 60,000 rows: 16 ms, 4 ms round by round).
 * Where one scan was the cheaper plan (a tiny table), it costs a little more: up to about a millisecond
 * for a thousand rounds.
 */
const figuresOf = (param: string) => `
  WITH t AS MATERIALIZED (
    SELECT x.round_stream, x.transaction_id, x.type, x.status, x.amount, x.round_complete, x.original_transaction_id
    FROM (SELECT DISTINCT unnest(${param}::text[]) AS round_stream) k
    CROSS JOIN LATERAL (
      SELECT r.round_stream, r.transaction_id, r.type, r.status, r.amount, r.round_complete, r.original_transaction_id
      FROM rm_transactions r WHERE r.round_stream = k.round_stream OFFSET 0
    ) x
  )
  SELECT
    t.round_stream,
    count(*) FILTER (WHERE t.type = 'BET') AS bets,
    coalesce(sum(t.amount) FILTER (WHERE t.type = 'BET' AND t.status = 'applied'), 0) AS bet_amount,
    count(*) FILTER (WHERE t.type = 'WIN') AS wins,
    coalesce(sum(t.amount) FILTER (WHERE t.type = 'WIN' AND t.status = 'applied'), 0) AS win_amount,
    count(*) FILTER (WHERE t.type = 'ROLLBACK') AS rollbacks,
    -- None in a round its provider completed (the decider's outstandingBets).
    CASE WHEN count(*) FILTER (WHERE t.type IN ('BET', 'WIN') AND t.round_complete) > 0 THEN 0
         ELSE count(*) FILTER (WHERE t.type = 'BET' AND t.status <> 'declined' AND rolled.round_stream IS NULL) END AS outstanding,
    count(*) FILTER (WHERE t.type IN ('BET', 'WIN') AND t.round_complete) AS completing
  FROM t
  -- DISTINCT: at most one match per BET, so the join never counts a row twice.
  LEFT JOIN (SELECT DISTINCT round_stream, original_transaction_id FROM t WHERE type = 'ROLLBACK') rolled
    ON rolled.round_stream = t.round_stream AND rolled.original_transaction_id = t.transaction_id
  GROUP BY t.round_stream`;

/**
 * A round recorded in the batch is created, or its row brought up to date, with its figures in one
 * statement: one row version a round a batch, where an upsert and then an update wrote two.
 */
const UPSERT_ROUNDS = `
  INSERT INTO rm_rounds (round_stream, provider_id, operator_id, round_id, game_id, player_ref, currency, status, created_at, last_activity_at,
    operator_status, closed_at, bets, bet_amount, wins, win_amount, rollbacks, outstanding_bets)
  SELECT x.round_stream, x.provider_id, x.operator_id, x.round_id, x.game_id, x.player_ref, x.currency,
    CASE WHEN a.completing > 0 THEN 'completed' ELSE 'open' END, x.created_at, x.last_activity_at, x.operator_status, x.closed_at,
    coalesce(a.bets, 0), coalesce(a.bet_amount, 0), coalesce(a.wins, 0), coalesce(a.win_amount, 0), coalesce(a.rollbacks, 0), coalesce(a.outstanding, 0)
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::timestamptz[], $9::timestamptz[], $10::text[], $11::timestamptz[])
    AS x(round_stream, provider_id, operator_id, round_id, game_id, player_ref, currency, created_at, last_activity_at, operator_status, closed_at)
  LEFT JOIN (${figuresOf('$1')}) a ON a.round_stream = x.round_stream
  ON CONFLICT (round_stream) DO UPDATE SET
    last_activity_at = GREATEST(rm_rounds.last_activity_at, EXCLUDED.last_activity_at),
    bets = EXCLUDED.bets, bet_amount = EXCLUDED.bet_amount, wins = EXCLUDED.wins, win_amount = EXCLUDED.win_amount,
    rollbacks = EXCLUDED.rollbacks, outstanding_bets = EXCLUDED.outstanding_bets,
    status = CASE WHEN rm_rounds.force_closed OR EXCLUDED.status = 'completed' THEN 'completed' ELSE 'open' END,
    -- As operators see it, a round closes once, at the first close of its history.
    operator_status = CASE WHEN rm_rounds.closed_at IS NULL AND EXCLUDED.closed_at IS NOT NULL THEN EXCLUDED.operator_status
                           ELSE coalesce(rm_rounds.operator_status, EXCLUDED.operator_status) END,
    closed_at = coalesce(rm_rounds.closed_at, EXCLUDED.closed_at)`;

/** The figures of rounds the batch touched without recording in them (an outcome, a force-close). */
const RECOMPUTE = `
  UPDATE rm_rounds r SET
    bets = a.bets, bet_amount = a.bet_amount, wins = a.wins, win_amount = a.win_amount, rollbacks = a.rollbacks,
    outstanding_bets = a.outstanding,
    status = CASE WHEN r.force_closed OR a.completing > 0 THEN 'completed' ELSE 'open' END
  FROM (${figuresOf('$1')}) a
  WHERE r.round_stream = a.round_stream AND r.round_stream = ANY($1::text[])`;

/**
 * Rounds with their bets, wins, rollbacks and outstanding bets; every transaction with its outcome, as
 * the ledger keeps it (status) and as operators reconcile it (operator_status, with its log position);
 * and the operators' rounds and settlement quarters (services/reconciliation/projection.ts), which are
 * counted from those rows and so move in the same transaction. A batch's events are first folded, in
 * log order, into the rows they create and the columns they set (see foldBatch), then written set-wise,
 * in a few statements whatever the batch's size. The statements are unnamed, so each is planned with its
 * real arrays (an index lookup per row).
 */
export const roundsProjection: Projection = {
  name: 'rounds',
  tables: [
    { name: 'rm_rounds', key: ['round_stream'] },
    { name: 'rm_transactions', key: ['round_stream', 'transaction_id'] },
    { name: 'rm_settlement_quarters', key: ['operator_id', 'quarter', 'provider_id', 'game_id', 'currency', 'type', 'direction', 'status'] },
  ],
  eventTypes: ROUND_EVENT_TYPES,
  // Every row is a round's or one of its transactions', but for the quarters' sums, which take deltas in key order.
  streamLocal: true,
  async apply(events: RecordedEvent[], tx: PoolClient) {
    const { inserts, rounds, updates, forceClosed, operatorRounds } = foldBatch(events);
    const quarters = new QuarterDeltas();
    if (inserts.length > 0) {
      // A row is inserted as the batch leaves it, outcome included (one write instead of an insert and
      // an update). A repeated record finds its row there already and inserts nothing: the outcome the
      // batch holds for it is then written by the update below, as for any row of an earlier batch.
      const rows = inserts.map((i) => {
        // What no event of the batch set: status recorded, no attempt, last changed when recorded.
        const o = i.outcome ?? NO_OUTCOME;
        const status: TxStatus = o.status ?? 'recorded';
        return { i, o, status, shown: operatorStatus(i.type, status) };
      });
      const inserted = await insertTransactions(
        tx,
        jsonbRows(
          rows.map(({ i, o, status, shown }) => [
            i.roundStream, i.transactionId, i.providerId, i.operatorId, i.roundId, i.origin, i.type, i.playerRef, i.gameId, i.amount,
            i.currency, i.direction, i.originalTransactionId, i.roundComplete, i.recordedAt, i.logMajor, i.logMinor,
            status, shown, o.attempts ?? 0, o.reply, o.settledAt, o.lastError, o.deadLetteredAt, o.updatedAt ?? i.recordedAt,
          ]),
        ),
      );
      for (const { i, shown } of rows) {
        if (inserted === 'all' || inserted.has(`${i.roundStream}\n${i.transactionId}`)) quarters.add(quarterKey(i, shown), 1, i.amount);
        else if (i.outcome) updates.push(i.outcome);
      }
    }
    if (updates.length > 0) {
      // The rows as they are: the status operators see depends on the type, and a change of it moves the
      // transaction between the quarters' cells.
      const { rows: current } = await tx.query<CurrentRow>(
        `SELECT t.round_stream, t.transaction_id, t.operator_id, t.provider_id, t.game_id, t.currency, t.type, t.direction, t.amount,
                t.operator_status, t.recorded_at
         FROM unnest($1::text[], $2::text[]) AS k(round_stream, transaction_id)
         JOIN rm_transactions t ON t.round_stream = k.round_stream AND t.transaction_id = k.transaction_id`,
        [updates.map((u) => u.roundStream), updates.map((u) => u.transactionId)],
      );
      const byKey = new Map(current.map((c) => [`${c.round_stream}\n${c.transaction_id}`, c]));
      const changed = updates.flatMap((u) => {
        const row = byKey.get(`${u.roundStream}\n${u.transactionId}`);
        if (!row) return []; // an outcome of a transaction this read model never saw recorded: nothing to show it on
        const shown = operatorStatus(row.type, u.status);
        if (shown !== row.operator_status) {
          const placed = { operatorId: row.operator_id, recordedAt: row.recorded_at.toISOString(), providerId: row.provider_id, gameId: row.game_id, currency: row.currency, type: row.type, direction: row.direction };
          quarters.add(quarterKey(placed, row.operator_status), -1, row.amount);
          quarters.add(quarterKey(placed, shown), 1, row.amount);
        }
        return [{ ...u, operatorStatus: shown }];
      });
      if (changed.length > 0) {
        // A column an event does not set is NULL here and keeps its value (no event sets one to NULL).
        await tx.query(
          `UPDATE rm_transactions t SET
             status = u.status, operator_status = u.operator_status, attempts = coalesce(u.attempts, t.attempts), reply = coalesce(u.reply, t.reply),
             settled_at = coalesce(u.settled_at, t.settled_at), last_error = coalesce(u.last_error, t.last_error),
             dead_lettered_at = coalesce(u.dead_lettered_at, t.dead_lettered_at), updated_at = coalesce(u.updated_at, t.updated_at)
           FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::jsonb[], $7::timestamptz[], $8::text[], $9::timestamptz[], $10::timestamptz[])
             AS u(round_stream, transaction_id, status, operator_status, attempts, reply, settled_at, last_error, dead_lettered_at, updated_at)
           WHERE t.round_stream = u.round_stream AND t.transaction_id = u.transaction_id`,
          columns(changed, ['roundStream', 'transactionId', 'status', 'operatorStatus', 'attempts', 'reply', 'settledAt', 'lastError', 'deadLetteredAt', 'updatedAt']),
        );
      }
    }
    // After the transaction rows, which the figures are counted from.
    if (rounds.length > 0) {
      // The operators' view of each round: open, or its first close in the batch (none for the platform's rounds of adjustments).
      const shown = rounds.map((r) => {
        const o = operatorRounds.get(r.roundStream);
        return { ...r, operatorStatus: o ? (o.closed?.status ?? 'open') : null, closedAt: o?.closed?.at ?? null };
      });
      await tx.query(
        UPSERT_ROUNDS,
        columns(shown, ['roundStream', 'providerId', 'operatorId', 'roundId', 'gameId', 'playerRef', 'currency', 'createdAt', 'lastActivityAt', 'operatorStatus', 'closedAt']),
      );
    }
    if (forceClosed.length > 0) {
      // Closed for the operators too, unless closed before (a round the batch recorded in holds its first close already).
      const closes = forceClosed.map((stream) => operatorRounds.get(stream)!.closed!);
      await tx.query(
        `UPDATE rm_rounds r SET force_closed = true,
           operator_status = CASE WHEN r.operator_status IS NOT NULL AND r.closed_at IS NULL THEN c.status ELSE r.operator_status END,
           closed_at = CASE WHEN r.operator_status IS NOT NULL THEN coalesce(r.closed_at, c.closed_at) END
         FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS c(round_stream, status, closed_at)
         WHERE r.round_stream = c.round_stream`,
        [forceClosed, closes.map((c) => c.status), closes.map((c) => c.at)],
      );
    }
    // Every other touched round's figures, once per batch; a force-closed one's status too.
    const upserted = new Set(rounds.map((r) => r.roundStream));
    const rest = [...new Set(events.map((e) => e.streamId))].filter((stream) => !upserted.has(stream) || forceClosed.includes(stream));
    if (rest.length > 0) await tx.query(RECOMPUTE, [rest]);
    // Last: a quarter's row is shared by every stream placed in it, so this statement locks rows another
    // transaction may wait for (a rebuild applies the rounds in two parts at once); they stay locked only
    // until the commit that follows, not through the rounds' statements.
    await writeQuarters(tx, quarters);
  },
  async reset(tx: PoolClient) {
    for (const table of ['rm_transactions', 'rm_rounds', 'rm_settlement_quarters']) await tx.query(`DELETE FROM ${table}`);
  },
};

/** A transaction row as an update finds it: what places it in the quarters. */
interface CurrentRow {
  round_stream: string;
  transaction_id: string;
  operator_id: string;
  provider_id: string;
  game_id: string;
  currency: string;
  type: TxInsert['type'];
  direction: string | null;
  amount: string;
  operator_status: OperatorStatus;
  recorded_at: Date;
}

/**
 * Inserts the batch's new transaction rows (jsonbRows of INSERT_ROW) and tells which it inserted: 'all',
 * or the keys (`round_stream\ntransaction_id`) of those inserted where a row was there already (a record
 * repeated in the log: the first stays). Nearly every batch repeats none, so a plain insert is tried
 * first, under a savepoint; only when it fails on a unique index (the key; another unique index fails the
 * retry as it failed the single statement before) is it undone and made again with ON CONFLICT DO
 * NOTHING. That insertion is speculative: it looks into the key before and after writing each row and
 * confirms each in the log, a quarter of the insert (30 µs a row against 23 with the savepoint, into a
 * table of 300,000 rows: docs/benchmarks.md, "Measured design decisions"). The savepoint is a
 * subtransaction, held until the transaction ends: the runners and the rebuild's lanes apply one batch a
 * transaction; the swap's catch-up under its lock applies the few pages appended since the last try.
 */
async function insertTransactions(tx: PoolClient, rows: string): Promise<'all' | Set<string>> {
  await tx.query('SAVEPOINT rm_transactions_insert');
  try {
    await tx.query(INSERT_TRANSACTIONS, [rows]);
    await tx.query('RELEASE SAVEPOINT rm_transactions_insert');
    return 'all';
  } catch (err) {
    if (!isUniqueViolation(err)) throw err;
    await tx.query('ROLLBACK TO SAVEPOINT rm_transactions_insert');
  }
  const { rows: created } = await tx.query<{ round_stream: string; transaction_id: string }>(
    `${INSERT_TRANSACTIONS} ON CONFLICT (round_stream, transaction_id) DO NOTHING RETURNING round_stream, transaction_id`,
    [rows],
  );
  await tx.query('RELEASE SAVEPOINT rm_transactions_insert');
  return new Set(created.map((r) => `${r.round_stream}\n${r.transaction_id}`));
}

/** A transaction row as it is inserted: the columns of jsonbRows' cells, in order. */
const INSERT_ROW: RowColumn[] = [
  ['round_stream', 'text'], ['transaction_id', 'text'], ['provider_id', 'text'], ['operator_id', 'text'], ['round_id', 'text'], ['origin', 'text'],
  ['type', 'text'], ['player_ref', 'text'], ['game_id', 'text'], ['amount', 'bigint'], ['currency', 'text'], ['direction', 'text'],
  ['original_transaction_id', 'text'], ['round_complete', 'boolean'], ['recorded_at', 'timestamptz'], ['log_major', 'bigint'], ['log_minor', 'bigint'],
  ['status', 'text'], ['operator_status', 'text'], ['attempts', 'int'], ['reply', 'jsonb'], ['settled_at', 'timestamptz'], ['last_error', 'text'], ['dead_lettered_at', 'timestamptz'], ['updated_at', 'timestamptz'],
];
/** The transaction rows of jsonbRows (INSERT_ROW's cells) as $1, inserted (insertTransactions). */
const INSERT_TRANSACTIONS = jsonbRowsInsert('rm_transactions', INSERT_ROW, '$1');

/** Row objects as one array per column, in the given order (the parameters of an unnest). */
function columns<T extends Record<K, Cell>, K extends keyof T>(rows: T[], keys: K[]): Cell[][] {
  return keys.map((k) => rows.map((r) => r[k]));
}

interface TxInsert {
  /** What the batch's later events set on the row, inserted with it (see apply). */
  outcome?: TxUpdate;
  roundStream: string;
  transactionId: string;
  providerId: string;
  operatorId: string;
  roundId: string;
  origin: string;
  type: TransactionRequest['type'];
  playerRef: string;
  gameId: string;
  amount: number;
  currency: string;
  direction: string | null;
  originalTransactionId: string | null;
  roundComplete: boolean;
  recordedAt: string;
  /** The log position of its TransactionRecorded: the order of the operators' transactions list. */
  logMajor: string;
  logMinor: string;
}

interface RoundUpsert {
  roundStream: string;
  providerId: string;
  operatorId: string;
  roundId: string;
  gameId: string;
  playerRef: string;
  currency: string;
  createdAt: string;
  lastActivityAt: string;
}

/** An inserted row no event of its batch settled (apply fills in status, attempts and updated_at). */
const NO_OUTCOME = { status: null, attempts: null, reply: null, settledAt: null, lastError: null, deadLetteredAt: null, updatedAt: null };

/** The columns a batch's outcome events set on one transaction row; null = not set by any of them. */
interface TxUpdate {
  roundStream: string;
  transactionId: string;
  status: TxStatus;
  attempts: number | null;
  reply: string | null;
  settledAt: string | null;
  lastError: string | null;
  deadLetteredAt: string | null;
  /** null: left as it was (the failed call of a BET voided meanwhile, which leaves it voided since then). */
  updatedAt: string | null;
}

/**
 * What a batch writes, as if its events were applied one by one in log order: a transaction row per
 * first record (a repeat changes nothing); a round row created by its first record, its last activity
 * the latest; per transaction, each column as the last event that sets it left it. The columns of a
 * row recorded in this same batch travel with its insert (`outcome`) rather than as an update.
 */
export function foldBatch(events: RecordedEvent[]): {
  inserts: TxInsert[];
  rounds: RoundUpsert[];
  updates: TxUpdate[];
  forceClosed: string[];
  /** The operators' view of the rounds the batch opened or closed (see foldOperatorRound). */
  operatorRounds: Map<string, OperatorRound>;
} {
  const inserts = new Map<string, TxInsert>();
  const operatorRounds = new Map<string, OperatorRound>();
  const rounds = new Map<string, RoundUpsert>();
  const updates = new Map<string, TxUpdate>();
  const forceClosed = new Set<string>();
  const update = (stream: string, transactionId: string, set: Omit<TxUpdate, 'roundStream' | 'transactionId'>) => {
    const key = `${stream}\n${transactionId}`;
    const prev = updates.get(key);
    updates.set(key, {
      roundStream: stream,
      transactionId,
      status: set.status,
      attempts: set.attempts ?? prev?.attempts ?? null,
      reply: set.reply ?? prev?.reply ?? null,
      settledAt: set.settledAt ?? prev?.settledAt ?? null,
      lastError: set.lastError ?? prev?.lastError ?? null,
      deadLetteredAt: set.deadLetteredAt ?? prev?.deadLetteredAt ?? null,
      updatedAt: set.updatedAt ?? prev?.updatedAt ?? null,
    });
  };
  for (const recorded of events) {
    const event = recorded as unknown as RoundEvent;
    const stream = recorded.streamId;
    foldOperatorRound(operatorRounds, recorded);
    switch (event.type) {
      case 'TransactionRecorded': {
        const { request: r, recordedAt, providerId, operatorId, origin } = event.data;
        const key = `${stream}\n${r.transactionId}`;
        if (!inserts.has(key)) {
          const [major, minor] = positionParts(recorded.position);
          inserts.set(key, {
            logMajor: major.toString(), logMinor: minor.toString(),
            roundStream: stream, transactionId: r.transactionId, providerId, operatorId, roundId: r.roundId, origin, type: r.type,
            playerRef: r.playerRef, gameId: r.gameId, amount: r.amount, currency: r.currency, direction: r.direction ?? null,
            originalTransactionId: r.originalTransactionId ?? null, roundComplete: completesRound(r), recordedAt,
          });
        }
        const round = rounds.get(stream);
        if (!round) {
          rounds.set(stream, {
            roundStream: stream, providerId, operatorId, roundId: r.roundId, gameId: r.gameId, playerRef: r.playerRef, currency: r.currency,
            createdAt: recordedAt, lastActivityAt: recordedAt,
          });
        } else if (Date.parse(recordedAt) > Date.parse(round.lastActivityAt)) {
          round.lastActivityAt = recordedAt;
        }
        break;
      }
      case 'TransactionSettled': {
        const d = event.data;
        const reply = JSON.stringify({ status: d.reply.status, balance: d.reply.balance });
        update(stream, d.transactionId, { status: d.outcome, attempts: d.attempt, reply, settledAt: d.settledAt, lastError: null, deadLetteredAt: null, updatedAt: d.settledAt });
        break;
      }
      case 'TransactionAttemptFailed': {
        const d = event.data;
        // The failed call of a BET voided while it was under way leaves it voided, since its voiding: the
        // time operators read as its settledAt.
        update(stream, d.transactionId, { status: statusAfterFailure(d), attempts: d.attempt, reply: null, settledAt: null, lastError: d.detail, deadLetteredAt: null, updatedAt: d.voided ? null : d.failedAt });
        break;
      }
      case 'TransactionDeadLettered': {
        const d = event.data;
        update(stream, d.transactionId, { status: 'dead', attempts: null, reply: null, settledAt: null, lastError: d.lastError, deadLetteredAt: d.deadLetteredAt, updatedAt: d.deadLetteredAt });
        break;
      }
      case 'TransactionVoided': {
        const d = event.data;
        update(stream, d.transactionId, { status: 'voided', attempts: null, reply: null, settledAt: null, lastError: null, deadLetteredAt: null, updatedAt: d.voidedAt });
        break;
      }
      case 'TransactionRedriven': {
        const d = event.data;
        update(stream, d.transactionId, { status: 'recorded', attempts: null, reply: null, settledAt: null, lastError: null, deadLetteredAt: null, updatedAt: d.redrivenAt });
        break;
      }
      case 'TransactionResent':
        // Its call is recorded as any attempt; the announcement changes no row.
        break;
      case 'RoundForceClosed':
        forceClosed.add(stream);
        break;
      default: {
        const unknown: never = event;
        return unknown;
      }
    }
  }
  const rest: TxUpdate[] = [];
  for (const [key, u] of updates) {
    const row = inserts.get(key);
    if (row) row.outcome = u;
    else rest.push(u);
  }
  return { inserts: [...inserts.values()], rounds: [...rounds.values()], updates: rest, forceClosed: [...forceClosed], operatorRounds };
}
