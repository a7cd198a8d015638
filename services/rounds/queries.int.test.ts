import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase, type MigratedDatabase } from '../../test/helpers/db.ts';
import { roundsReadModelMigrations } from './projection.ts';
import { stuckCounts, stuckTransactions } from './queries.ts';
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
