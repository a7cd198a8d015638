import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Pool } from '../../shared/db/pool.ts';
import { isRefusal } from '../../shared/decider.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';
import { migratedDatabase, type MigratedDatabase } from '../../test/helpers/db.ts';
import { isClosed, roundDecider, roundFigures, UNSETTLED_STATUSES } from './decider.ts';
import type { TransactionRequest } from './events.ts';
import { applyBatches, batches, record, step, stream } from '../../test/helpers/round-histories.ts';
import { roundsProjection, roundsReadModelMigrations } from './projection.ts';
import { staleRoundCandidates, transactionsIn } from './queries.ts';

/**
 * The projection computes a round's figures and its transactions' statuses in SQL, a batch at a time;
 * the decider defines them (roundFigures, isOutstanding, UNSETTLED_STATUSES, isClosed). For random
 * histories (made by the decider itself from random commands, so they are histories the ledger can
 * record) applied in random batches, the read model must say what folding the streams says, and the
 * reconciler's candidates must be exactly the rounds the decider would look at: if the two drifted, a
 * stale round would be silently skipped.
 */

describe('rounds read model: the SQL figures are the decider’s', () => {
  let env: MigratedDatabase;
  let pool: Pool;
  beforeAll(async () => {
    env = await migratedDatabase('roundsprop', roundsReadModelMigrations);
    pool = env.pool;
  });
  afterAll(() => env.close());

  it('for random histories in random batches: figures, statuses, unsettled transactions and stale-round candidates', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 60 }), fc.array(fc.nat(200), { maxLength: 6 }), async (steps, cuts) => {
        const { events, states } = record(steps);
        await applyBatches(pool, roundsProjection, batches(events, cuts));

        const { rows: rounds } = await pool.query<Record<string, string | number | boolean | Date>>('SELECT * FROM rm_rounds ORDER BY round_stream');
        const expected = [...states].filter(([, s]) => s.status !== 'new').sort(([a], [b]) => a.localeCompare(b));
        expect(rounds.map((r) => r.round_stream)).toEqual(expected.map(([id]) => id));
        for (const [id, s] of expected) {
          const row = rounds.find((r) => r.round_stream === id)!;
          expect({
            bets: Number(row.bets),
            betAmount: Number(row.bet_amount),
            wins: Number(row.wins),
            winAmount: Number(row.win_amount),
            rollbacks: Number(row.rollbacks),
            outstandingBets: Number(row.outstanding_bets),
            status: row.status,
            forceClosed: row.force_closed,
          }).toEqual({ ...roundFigures(s), status: isClosed(s) ? 'completed' : 'open', forceClosed: s.status === 'force-closed' });
          expect((row.last_activity_at as Date).toISOString()).toBe(s.status === 'new' ? undefined : s.lastActivityAt);
        }

        const { rows: txRows } = await pool.query<{ round_stream: string; transaction_id: string; status: string; attempts: number }>(
          'SELECT round_stream, transaction_id, status, attempts FROM rm_transactions ORDER BY round_stream, transaction_id',
        );
        const txs = [...states].flatMap(([id, s]) => [...s.txs.values()].map((t) => ({ round_stream: id, transaction_id: t.request.transactionId, status: t.status, attempts: t.attempts })));
        expect(txRows).toEqual(txs.sort((a, b) => a.round_stream.localeCompare(b.round_stream) || a.transaction_id.localeCompare(b.transaction_id)));

        // What the worker's sweep and the audit list as unsettled is what the decider calls unsettled, and
        // the BETs a ROLLBACK names are those the decider knows rolled back.
        const listed = await transactionsIn(pool, UNSETTLED_STATUSES, { limit: 100_000 });
        expect(listed.map(({ row }) => row.transaction_id).sort()).toEqual(txs.filter((t) => UNSETTLED_STATUSES.includes(t.status)).map((t) => t.transaction_id).sort());
        const rolledBack = new Set([...states.values()].flatMap((s) => [...s.txs.values()].filter((t) => t.rolledBackBy !== undefined).map((t) => t.request.transactionId)));
        expect(listed.filter((l) => l.row.type === 'BET' && l.rolledBack).map(({ row }) => row.transaction_id).sort()).toEqual(
          listed.filter((l) => l.row.type === 'BET' && rolledBack.has(String(l.row.transaction_id))).map(({ row }) => row.transaction_id).sort(),
        );

        // The reconciler's candidates (history from 2026-11-24, so every open round is idle long enough):
        // every round the decider would close, or finish closing, and no other.
        const candidates = (await staleRoundCandidates(pool, 0, 500)).map((c) => c.roundStream).sort();
        const wanted = [...states]
          .filter(([, s]) => (s.status === 'open' || s.status === 'force-closed') && roundFigures(s).outstandingBets > 0)
          .map(([id]) => id)
          .sort();
        expect(candidates).toEqual(wanted);
      }),
      { numRuns: 60 },
    );
  });
});

/** One recorded BET in each of `count` new rounds, numbered from `from`. */
function betsInNewRounds(from: number, count: number): RecordedEvent[] {
  const now = new Date('2026-11-24T12:00:00Z');
  return Array.from({ length: count }, (_, i) => {
    const n = from + i;
    const request: TransactionRequest = { transactionId: `bet-${n}`, sessionToken: 's1', type: 'BET', roundId: `round-${n}`, roundComplete: false, playerRef: 'p1', amount: 100, currency: 'EUR', gameId: 'fruit-1' };
    const decision = roundDecider.decide(
      { type: 'RecordTransaction', request, providerId: 'studio-a', operatorId: 'op-1', origin: 'provider', contentHash: request.transactionId, session: 'active', now },
      roundDecider.initialState(),
    );
    if (isRefusal(decision)) throw new Error(`refused: ${decision.kind}`);
    return decision.map((e, revision): RecordedEvent => ({ id: randomUUID(), streamId: stream(request.roundId), revision, type: e.type, data: e.data as RecordedEvent['data'], metadata: {}, position: `1.${n + 1}`, createdAt: now }));
  }).flat();
}

describe('rounds read model: the cost of a batch follows the batch, not the table', () => {
  let env: MigratedDatabase;
  beforeAll(async () => {
    env = await migratedDatabase('roundsscan', roundsReadModelMigrations);
  });
  afterAll(() => env.close());

  // A live projector writes into tables the planner may know nothing of yet (a new database, or one
  // emptied for a rebuild, before autovacuum's first ANALYZE), and at saturation a batch names hundreds
  // of rounds. Its round figures were then read by scanning every transaction row of every batch.
  it('a batch of 300 new rounds over 20,000 transaction rows reads none of the others, before and after ANALYZE', async () => {
    const TABLE = 20_000;
    // Never analyzed until the test says so (autovacuum could otherwise analyze it first).
    await env.pool.query('ALTER TABLE rm_transactions SET (autovacuum_enabled = false)');
    await applyBatches(env.pool, roundsProjection, Array.from({ length: TABLE / 2_000 }, (_, b) => betsInNewRounds(b * 2_000, 2_000)));
    const scanned = async (): Promise<number> => {
      const client = await env.pool.connect();
      try {
        await client.query('BEGIN');
        await roundsProjection.apply(betsInNewRounds(TABLE, 300), client);
        const { rows } = await client.query<{ read: string }>(`SELECT seq_tup_read AS read FROM pg_stat_xact_user_tables WHERE relname = 'rm_transactions'`);
        return Number(rows[0]!.read);
      } finally {
        await client.query('ROLLBACK');
        client.release();
      }
    };
    expect((await env.pool.query<{ n: number }>(`SELECT reltuples AS n FROM pg_class WHERE relname = 'rm_transactions'`)).rows[0]!.n).toBeLessThan(0);
    expect(await scanned()).toBeLessThan(TABLE / 100);
    await env.pool.query('ANALYZE rm_transactions');
    expect(await scanned()).toBeLessThan(TABLE / 100);
  });
});
