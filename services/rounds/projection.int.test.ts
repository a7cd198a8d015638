import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Pool } from '../../shared/db/pool.ts';
import { isRefusal } from '../../shared/decider.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';
import { migratedDatabase, type MigratedDatabase } from '../../test/helpers/db.ts';
import { isClosed, roundDecider, roundFigures, UNSETTLED_STATUSES, type RoundCommand, type RoundState } from './decider.ts';
import type { TransactionRequest } from './events.ts';
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

const ROUNDS = ['r0', 'r1', 'r2'];
const stream = (roundId: string) => `round|studio-a|op-1|${roundId}`;

type Step =
  | { kind: 'tx'; round: number; type: 'BET' | 'WIN' | 'ROLLBACK'; amount: number; complete: boolean; target: number; currency: string; player: string; wrongAmount: boolean }
  | { kind: 'outcome'; round: number; target: number; outcome: 'OK' | 'DECLINED' | 'failed' | 'timed_out' }
  | { kind: 'dead'; round: number; target: number }
  | { kind: 'close'; round: number }
  | { kind: 'tick'; seconds: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('tx' as const),
      round: fc.nat(ROUNDS.length - 1),
      type: fc.constantFrom('BET' as const, 'BET' as const, 'WIN' as const, 'ROLLBACK' as const),
      amount: fc.nat(10_000),
      complete: fc.boolean(),
      target: fc.nat(50),
      currency: fc.constantFrom('EUR', 'EUR', 'EUR', 'USD'),
      player: fc.constantFrom('p1', 'p1', 'p1', 'p2'),
      wrongAmount: fc.boolean(),
    }),
  },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('outcome' as const), round: fc.nat(ROUNDS.length - 1), target: fc.nat(50), outcome: fc.constantFrom('OK' as const, 'DECLINED' as const, 'failed' as const, 'timed_out' as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('dead' as const), round: fc.nat(ROUNDS.length - 1), target: fc.nat(50) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('close' as const), round: fc.nat(ROUNDS.length - 1) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('tick' as const), seconds: fc.nat(120) }) },
);

interface History {
  events: RecordedEvent[];
  states: Map<string, RoundState>;
}

/** Runs the steps through the decider: refusals append nothing, everything else is recorded as the ledger would. */
function record(steps: Step[]): History {
  let clock = Date.parse('2026-11-24T12:00:00Z');
  let n = 0;
  const states = new Map<string, RoundState>(ROUNDS.map((r) => [stream(r), roundDecider.initialState()]));
  const revisions = new Map<string, number>();
  const events: RecordedEvent[] = [];
  for (const s of steps) {
    clock += 1000;
    const now = new Date(clock);
    if (s.kind === 'tick') {
      clock += s.seconds * 1000;
      continue;
    }
    const roundId = ROUNDS[s.round]!;
    const id = stream(roundId);
    const state = states.get(id)!;
    const txs = [...state.txs.values()];
    const pick = (i: number) => (txs.length === 0 ? undefined : txs[i % txs.length]);
    let command: RoundCommand | undefined;
    switch (s.kind) {
      case 'tx': {
        const bet = s.type === 'ROLLBACK' ? pick(s.target) : undefined;
        if (s.type === 'ROLLBACK' && !bet) continue;
        const request: TransactionRequest = {
          transactionId: `tx-${n++}`,
          sessionToken: 's1',
          type: s.type,
          roundId,
          roundComplete: s.type !== 'ROLLBACK' && s.complete,
          ...(bet ? { originalTransactionId: bet.request.transactionId } : {}),
          playerRef: s.player,
          amount: bet && !s.wrongAmount ? bet.request.amount : s.amount,
          currency: bet ? bet.request.currency : s.currency,
          gameId: 'fruit-1',
        };
        command = { type: 'RecordTransaction', request, providerId: 'studio-a', operatorId: 'op-1', origin: 'provider', contentHash: request.transactionId, session: 'active', now };
        break;
      }
      case 'outcome': {
        const tx = pick(s.target);
        if (!tx) continue;
        const outcome =
          s.outcome === 'OK' || s.outcome === 'DECLINED'
            ? { kind: 'reply' as const, reply: { status: s.outcome, balance: 1000, body: '{}' } }
            : s.outcome === 'failed'
              ? { kind: 'failed' as const, detail: 'wallet answered 500', httpStatus: 500 }
              : { kind: 'timed_out' as const };
        command = { type: 'RecordOutcome', transactionId: tx.request.transactionId, attempt: tx.attempts + 1, outcome, now };
        break;
      }
      case 'dead': {
        const tx = pick(s.target);
        if (!tx) continue;
        command = { type: 'DeadLetter', transactionId: tx.request.transactionId, retryWindowSeconds: 60, now };
        break;
      }
      case 'close':
        command = { type: 'CloseStaleRound', staleAfterSeconds: 30, now };
        break;
    }
    const decision = roundDecider.decide(command, state);
    if (isRefusal(decision)) continue;
    let next = state;
    for (const e of decision) {
      const revision = (revisions.get(id) ?? -1) + 1;
      revisions.set(id, revision);
      next = roundDecider.evolve(next, e, { revision });
      events.push({ id: randomUUID(), streamId: id, revision, type: e.type, data: e.data as RecordedEvent['data'], metadata: {}, position: `1.${events.length + 1}`, createdAt: now });
    }
    states.set(id, next);
  }
  return { events, states };
}

/** The events cut into consecutive batches at the given points (the runner's batches vary with load). */
function batches(events: RecordedEvent[], cuts: number[]): RecordedEvent[][] {
  const points = [...new Set(cuts.map((c) => c % Math.max(events.length, 1)))].sort((a, b) => a - b);
  const out: RecordedEvent[][] = [];
  let from = 0;
  for (const p of [...points, events.length]) {
    if (p > from) out.push(events.slice(from, p));
    from = Math.max(from, p);
  }
  return out;
}

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
        const client = await pool.connect();
        try {
          await client.query('BEGIN');
          await roundsProjection.reset(client);
          for (const batch of batches(events, cuts)) await roundsProjection.apply(batch, client);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK');
          throw err;
        } finally {
          client.release();
        }

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
