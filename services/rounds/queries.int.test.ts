import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase, type MigratedDatabase } from '../../test/helpers/db.ts';
import { applyBatches } from '../../test/helpers/round-histories.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';
import { roundsProjection, roundsReadModelMigrations } from './projection.ts';
import { stuckCounts, stuckTransactions, unansweredBets } from './queries.ts';
import { operatorStatus, type TxStatus } from './decider.ts';
import type { RoundEvent, TransactionRequest, TransactionType } from './events.ts';

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

describe('BETs whose announced resubmission the worker asks for (unansweredBets, as projected)', () => {
  let env: MigratedDatabase;
  let position = 0;
  const at = '2026-11-01T00:00:00.000Z';
  const bet = (round: string, id: string): TransactionRequest => ({ transactionId: id, sessionToken: 's1', type: 'BET', roundId: round, roundComplete: false, playerRef: 'p', amount: 10, currency: 'EUR', gameId: 'fruit-1' });
  const later = (round: string, id: string, type: 'WIN' | 'ROLLBACK' = 'WIN', original?: string): TransactionRequest => ({
    ...bet(round, id),
    type,
    ...(original ? { originalTransactionId: original } : {}),
  });
  /** The events of `round`, each a batch of its own (the projector's batches vary; here the worst case, one at a time). */
  const project = async (round: string, ...events: RoundEvent[]) => {
    for (const e of events) {
      const recorded: RecordedEvent = { id: randomUUID(), streamId: `round|studio-a|op-1|${round}`, revision: position, type: e.type, data: e.data as RecordedEvent['data'], metadata: {}, position: `1.${++position}`, createdAt: new Date(at) };
      await applyBatches(env.pool, roundsProjection, [[recorded]], false);
    }
  };
  const recordedEvent = (r: TransactionRequest): RoundEvent => ({
    type: 'TransactionRecorded',
    data: { providerId: 'studio-a', operatorId: 'op-1', origin: 'provider', request: r, walletBody: JSON.stringify(r), contentHash: r.transactionId, recordedAt: at },
  });
  const failedEvent = (id: string, attempt: number, replyLost = false): RoundEvent => ({
    type: 'TransactionAttemptFailed',
    data: { transactionId: id, outcome: 'failed', detail: 'wallet answered 500', httpStatus: 500, attempt, failedAt: at, ...(replyLost ? { replyLost: true as const } : {}) },
  });
  const resentEvent = (id: string, attempt = 2): RoundEvent => ({ type: 'TransactionResent', data: { transactionId: id, attempt, resentAt: at } });
  const settledEvent = (id: string, attempt: number): RoundEvent => ({
    type: 'TransactionSettled',
    data: { transactionId: id, outcome: 'applied', reply: { status: 'OK', balance: 1, body: '{"status":"OK","balance":1}' }, attempt, settledAt: at },
  });

  beforeAll(async () => {
    env = await migratedDatabase('unansweredresent', roundsReadModelMigrations);
    // Resubmitted, then the provider went on: asked.
    await project('a', recordedEvent(bet('a', 'bet-a')), failedEvent('bet-a', 1), resentEvent('bet-a'), recordedEvent(later('a', 'win-a')));
    // Asked once, the ask failed: still asked.
    await project('b', recordedEvent(bet('b', 'bet-b')), failedEvent('bet-b', 1), resentEvent('bet-b'), recordedEvent(later('b', 'win-b')), failedEvent('bet-b', 2, true));
    // The provider went on before the resubmission, not after it: not asked.
    await project('c', recordedEvent(bet('c', 'bet-c')), failedEvent('bet-c', 1), recordedEvent(later('c', 'win-c')), resentEvent('bet-c'));
    // The resubmission's own call failed (recorded): its provider was told; not asked.
    await project('d', recordedEvent(bet('d', 'bet-d')), failedEvent('bet-d', 1), resentEvent('bet-d'), failedEvent('bet-d', 2), recordedEvent(later('d', 'win-d')));
    // Answered: not asked.
    await project('e', recordedEvent(bet('e', 'bet-e')), failedEvent('bet-e', 1), resentEvent('bet-e'), recordedEvent(later('e', 'win-e')), settledEvent('bet-e', 2));
    // Rolled back after the resubmission: never sent again.
    await project('f', recordedEvent(bet('f', 'bet-f')), failedEvent('bet-f', 1), resentEvent('bet-f'), recordedEvent(later('f', 'rb-f', 'ROLLBACK', 'bet-f')));
  });
  afterAll(() => env.close());

  it('finds a BET whose resubmission was announced, with no outcome since, once its provider went on after the announcement', async () => {
    expect((await unansweredBets(env.pool, 0)).map((t) => t.transactionId).sort()).toEqual(['bet-a', 'bet-b']);
    // What the operators see meanwhile: the failure they were told of, until the wallet's reply is learned.
    const { rows } = await env.pool.query(`SELECT transaction_id, status, operator_status FROM rm_transactions WHERE transaction_id IN ('bet-a', 'bet-b', 'bet-e') ORDER BY 1`);
    expect(rows).toEqual([
      { transaction_id: 'bet-a', status: 'failed', operator_status: 'failed' },
      { transaction_id: 'bet-b', status: 'failed', operator_status: 'failed' },
      { transaction_id: 'bet-e', status: 'applied', operator_status: 'applied' },
    ]);
  });
});
