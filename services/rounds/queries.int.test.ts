import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase, type MigratedDatabase } from '../../test/helpers/db.ts';
import { migrate } from '../../shared/db/migrations.ts';
import { roundsReadModelMigrations } from './projection.ts';
import { stuckCounts, stuckTransactions, unansweredBets } from './queries.ts';
import { operatorStatus, type TxStatus } from './decider.ts';
import type { TransactionType } from './events.ts';

const STUCK: TxStatus[] = ['recorded', 'failed', 'timed_out', 'dead', 'invalid'];

describe('stuck money (the console)', () => {
  let env: MigratedDatabase;
  beforeAll(async () => {
    env = await migratedDatabase('stuckq', roundsReadModelMigrations);
    let position = 0;
    const row = (stream: string, id: string, type: TransactionType, status: TxStatus, at: string, original: string | null = null) =>
      env.pool.query(
        `INSERT INTO rm_transactions (round_stream, transaction_id, provider_id, operator_id, round_id, origin, type, player_ref, game_id, amount, currency,
           original_transaction_id, round_complete, status, operator_status, attempts, recorded_at, updated_at, log_major, log_minor)
         VALUES ($1, $2, 'studio-a', 'op-1', $1, 'provider', $3, 'p', 'fruit-1', 10, 'EUR', $6, false, $4, $7, 1, $5, $5, 1, $8)`,
        [stream, id, type, status, at, original, operatorStatus(type, status), ++position],
      );
    // Many old BETs that failed and were refunded by their ROLLBACK, then one dead WIN after them all.
    for (let i = 0; i < 30; i++) {
      await row(`r${i}`, `bet-${i}`, 'BET', i % 2 ? 'failed' : 'timed_out', `2026-11-01T00:00:${String(i).padStart(2, '0')}Z`);
      await row(`r${i}`, `rb-${i}`, 'ROLLBACK', 'applied', `2026-11-01T00:01:${String(i).padStart(2, '0')}Z`, `bet-${i}`);
    }
    await row('rw', 'win-dead', 'WIN', 'dead', '2026-11-02T00:00:00Z');
    await row('rb', 'bet-failed', 'BET', 'failed', '2026-11-02T00:00:01Z');
  });
  afterAll(() => env.close());

  it('lists what is stuck however many refunded BETs are older, and counts the same', async () => {
    expect((await stuckTransactions(env.pool, STUCK, 5)).map((t) => t.transactionId)).toEqual(['win-dead', 'bet-failed']);
    expect(Object.fromEntries(await stuckCounts(env.pool, STUCK))).toEqual({ dead: 1, failed: 1 });
  });
});

describe('BETs whose lost reply the worker asks for (unansweredBets)', () => {
  let env: MigratedDatabase;
  beforeAll(async () => {
    env = await migratedDatabase('unanswered', roundsReadModelMigrations);
    const row = (stream: string, id: string, type: TransactionType, status: TxStatus, attempts: number, at: string, logMinor: number) =>
      env.pool.query(
        `INSERT INTO rm_transactions (round_stream, transaction_id, provider_id, operator_id, round_id, origin, type, player_ref, game_id, amount, currency,
           round_complete, status, operator_status, attempts, recorded_at, updated_at, log_major, log_minor)
         VALUES ($1, $2, 'studio-a', 'op-1', $1, 'provider', $3, 'p', 'fruit-1', 10, 'EUR', false, $4, $5, $6, $7, $7, 1, $8)`,
        [stream, id, type, status, operatorStatus(type, status), attempts, at, logMinor],
      );
    // The WIN after the BET in the log was recorded by an api whose clock ran 2 s behind.
    await row('skew', 'bet-skew', 'BET', 'recorded', 0, '2026-11-01T00:00:02Z', 1);
    await row('skew', 'win-skew', 'WIN', 'applied', 1, '2026-11-01T00:00:00Z', 2);
    // Asked once, the ask failed: still recorded, with an attempt.
    await row('asked', 'bet-asked', 'BET', 'recorded', 1, '2026-11-01T00:00:00Z', 3);
    await row('asked', 'win-asked', 'WIN', 'applied', 1, '2026-11-01T00:00:01Z', 4);
    // Nothing after it in the log (the later clock of an earlier record does not count): not asked.
    await row('last', 'win-first', 'WIN', 'applied', 1, '2026-11-01T00:00:05Z', 5);
    await row('last', 'bet-last', 'BET', 'recorded', 0, '2026-11-01T00:00:00Z', 6);
    // Its own attempt failed: its provider's to resubmit or roll back.
    await row('own', 'bet-own', 'BET', 'failed', 1, '2026-11-01T00:00:00Z', 7);
    await row('own', 'win-own', 'WIN', 'applied', 1, '2026-11-01T00:00:01Z', 8);
  });
  afterAll(() => env.close());

  it('finds a recorded BET with a transaction after it in the log, asked before or not, whatever the api clocks said', async () => {
    expect((await unansweredBets(env.pool, 0)).map((t) => t.transactionId).sort()).toEqual(['bet-asked', 'bet-skew']);
  });
});

describe('rounds read model upgrade: a completed round has no outstanding bets (rm-rounds-003)', () => {
  it('clears the played bets rows projected before it counted in completed rounds, and leaves open and force-closed rounds as they were', async () => {
    const before = roundsReadModelMigrations.filter((m) => m.id !== 'rm-rounds-003-complete-has-none-outstanding');
    expect(before.length).toBe(roundsReadModelMigrations.length - 1);
    const env = await migratedDatabase('outstandingupgrade', before);
    try {
      const round = (stream: string, status: string, forceClosed: boolean, outstanding: number) =>
        env.pool.query(
          `INSERT INTO rm_rounds (round_stream, provider_id, operator_id, round_id, game_id, player_ref, currency, status, force_closed, outstanding_bets, created_at, last_activity_at)
           VALUES ($1, 'studio-a', 'op-1', $1, 'fruit-1', 'p', 'EUR', $2, $3, $4, now(), now())`,
          [stream, status, forceClosed, outstanding],
        );
      await round('completed', 'completed', false, 2);
      await round('open', 'open', false, 1);
      await round('force-closed', 'completed', true, 1);
      await migrate(env.pool, roundsReadModelMigrations);
      const { rows } = await env.pool.query('SELECT round_stream, outstanding_bets FROM rm_rounds ORDER BY round_stream');
      expect(rows).toEqual([
        { round_stream: 'completed', outstanding_bets: 0 },
        { round_stream: 'force-closed', outstanding_bets: 1 },
        { round_stream: 'open', outstanding_bets: 1 },
      ]);
    } finally {
      await env.close();
    }
  });
});
