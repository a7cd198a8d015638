import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allMigrations } from '../../services/migrations.ts';
import type { RoundEvent } from '../../services/rounds/events.ts';
import { roundsProjection } from '../../services/rounds/projection.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';
import { migratedDatabase, type MigratedDatabase } from '../helpers/db.ts';
import { applyBatches } from '../helpers/round-histories.ts';

/**
 * The read models' large inserts send a batch's rows as one jsonb document (shared/db/rows.ts). Every
 * value must come back as the events hold it: text with quotes, backslashes, braces, commas, "NULL" and
 * characters beyond the BMP; the largest amount a request may carry; a balance with decimals; absent
 * optional fields as NULL.
 */
describe('read-model rows carry awkward values through unchanged', () => {
  let env: MigratedDatabase;
  beforeAll(async () => {
    env = await migratedDatabase('awkward', allMigrations);
  });
  afterAll(async () => env?.close());

  const playerRef = 'p "quoted" \\ back{slash},NULL 😀 Ω';
  const roundId = "r-'x'\\n{1,2}";
  const stream = `round|studio-a|op-1|${roundId}`;
  let n = 0;
  const recorded = (e: RoundEvent): RecordedEvent => {
    n += 1;
    return { id: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`, streamId: stream, revision: n - 1, type: e.type, data: e.data as never, metadata: {}, position: `1000.${n}`, createdAt: new Date('2026-11-26T10:00:00Z') };
  };

  it('the rounds read model stores each cell as recorded, the operators\' columns with them', async () => {
    const request = { transactionId: 'tx "1" \\ 😀', sessionToken: 's', roundId, playerRef, currency: 'EUR', gameId: 'g,{}', type: 'BET' as const, amount: Number.MAX_SAFE_INTEGER, roundComplete: false };
    const events = [
      recorded({ type: 'TransactionRecorded', data: { providerId: 'studio-a', operatorId: 'op-1', origin: 'provider', request, walletBody: JSON.stringify(request), contentHash: 'h', recordedAt: '2026-11-26T10:00:00.123Z' } }),
      recorded({ type: 'TransactionSettled', data: { transactionId: request.transactionId, outcome: 'applied', reply: { status: 'OK', balance: 1234.56, body: '{"balance":1234.56}' }, attempt: 1, settledAt: '2026-11-26T10:00:00.456Z' } }),
    ];
    await applyBatches(env.pool, roundsProjection, [events]);

    const { rows: tx } = await env.pool.query('SELECT transaction_id, player_ref, round_id, game_id, amount, direction, original_transaction_id, status, reply, recorded_at, settled_at FROM rm_transactions');
    expect(tx).toEqual([
      {
        transaction_id: request.transactionId, player_ref: playerRef, round_id: roundId, game_id: 'g,{}', amount: String(Number.MAX_SAFE_INTEGER),
        direction: null, original_transaction_id: null, status: 'applied', reply: { status: 'OK', balance: 1234.56 },
        recorded_at: new Date('2026-11-26T10:00:00.123Z'), settled_at: new Date('2026-11-26T10:00:00.456Z'),
      },
    ]);
    const { rows: op } = await env.pool.query(`SELECT transaction_id, log_major, log_minor, operator_status, reply->>'balance' AS wallet_balance, attempts FROM rm_transactions`);
    expect(op).toEqual([
      {
        transaction_id: request.transactionId, log_major: '1000', log_minor: '1', operator_status: 'applied', wallet_balance: '1234.56', attempts: 1,
      },
    ]);
  });
});
