import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Pool } from '../../shared/db/pool.ts';
import { migratedDatabase, type MigratedDatabase } from '../../test/helpers/db.ts';
import { isClosed, roundFigures, UNSETTLED_STATUSES } from './decider.ts';
import { applyBatches, batches, record, step } from '../../test/helpers/round-histories.ts';
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

        // What the worker's sweep and the audit list as unsettled is what the decider calls unsettled.
        const unsettled = (await transactionsIn(pool, UNSETTLED_STATUSES)).map((r) => r.transaction_id).sort();
        expect(unsettled).toEqual(txs.filter((t) => UNSETTLED_STATUSES.includes(t.status)).map((t) => t.transaction_id).sort());

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
