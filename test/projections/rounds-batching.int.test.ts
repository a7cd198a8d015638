import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { roundsProjection, roundsReadModelMigrations } from '../../services/rounds/projection.ts';
import { createScratch, dropScratch } from '../../services/audit/rebuild.ts';
import type { Pool } from '../../shared/db/pool.ts';
import type { RoundEvent, TransactionRequest } from '../../services/rounds/events.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';
import { migratedDatabase, type MigratedDatabase } from '../helpers/db.ts';

/**
 * The rounds projection folds a batch into a few set-wise statements. Whatever the batching, the rows
 * must be those of applying the events one at a time: the live runner gathers small batches, a rebuild
 * large ones, and the audit compares the two.
 */
describe('rounds projection: the same rows whatever the batch size', () => {
  let env: MigratedDatabase;
  let pool: Pool;
  beforeAll(async () => {
    env = await migratedDatabase('roundsbatch', roundsReadModelMigrations);
    pool = env.pool;
  });
  afterAll(() => env.close());

  /** A deterministic, shuffled-between-rounds history: every event type, repeats of one transaction's outcomes. */
  function history(seed: number): RecordedEvent[] {
    let state = seed;
    const rand = () => ((state = (state * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const at = (n: number) => new Date(Date.UTC(2026, 10, 21, 12, 0, 0) + n * 1000).toISOString();
    const rounds = Array.from({ length: 6 }, (_, i) => ({ stream: `round|studio-a|op-1|r${seed}-${i}`, roundId: `r${seed}-${i}`, n: 0 }));
    const out: RecordedEvent[] = [];
    let clock = 0;
    const push = (stream: string, event: RoundEvent) =>
      out.push({ id: randomUUID(), streamId: stream, revision: out.filter((e) => e.streamId === stream).length, type: event.type, data: event.data, metadata: {}, position: `1.${out.length + 1}`, createdAt: new Date() });
    for (let step = 0; step < 60; step++) {
      const round = rounds[Math.floor(rand() * rounds.length)]!;
      const txId = `tx-${round.roundId}-${round.n++}`;
      const type = round.n === 1 ? 'BET' : (['BET', 'WIN', 'ROLLBACK'] as const)[Math.floor(rand() * 3)]!;
      const request = {
        transactionId: txId, sessionToken: 's', type, roundId: round.roundId, roundComplete: type === 'WIN' && rand() < 0.3,
        ...(type === 'ROLLBACK' ? { originalTransactionId: `tx-${round.roundId}-0` } : {}),
        playerRef: 'p1', amount: 100 + step, currency: 'EUR', gameId: 'fruit-1',
      };
      // Out of order timestamps on purpose: last activity is the latest, not the last seen.
      const recordedAt = at(clock++ + (rand() < 0.2 ? -30 : 0));
      push(round.stream, { type: 'TransactionRecorded', data: { providerId: 'studio-a', operatorId: 'op-1', origin: 'provider', request, walletBody: '{}', contentHash: 'h', recordedAt } });
      const fate = rand();
      if (fate < 0.3) push(round.stream, { type: 'TransactionAttemptFailed', data: { transactionId: txId, outcome: 'failed', detail: `500 at ${step}`, httpStatus: 500, attempt: 1, failedAt: at(clock++) } });
      if (fate < 0.15) push(round.stream, { type: 'TransactionAttemptFailed', data: { transactionId: txId, outcome: 'timed_out', detail: 'timeout', attempt: 2, failedAt: at(clock++) } });
      if (fate < 0.05) push(round.stream, { type: 'TransactionDeadLettered', data: { transactionId: txId, attempts: 2, lastError: 'timeout', deadLetteredAt: at(clock++) } });
      else if (fate < 0.9) {
        const outcome = fate < 0.8 ? 'applied' : type === 'BET' ? 'declined' : 'invalid';
        push(round.stream, { type: 'TransactionSettled', data: { transactionId: txId, outcome, reply: { status: outcome === 'applied' ? 'OK' : 'DECLINED', balance: 1000 - step, body: '{}' }, attempt: fate < 0.3 ? 3 : 1, settledAt: at(clock++) } });
      }
      if (rand() < 0.04) push(round.stream, { type: 'RoundForceClosed', data: { closedAt: at(clock++), rolledBack: [] } });
    }
    return out;
  }

  async function rowsAfter(events: RecordedEvent[], chunks: (events: RecordedEvent[]) => RecordedEvent[][]): Promise<unknown> {
    const schema = await createScratch(pool, [roundsProjection]);
    try {
      const client = await pool.connect();
      try {
        await client.query(`SET search_path TO ${schema}, public`);
        for (const chunk of chunks(events)) {
          await client.query('BEGIN');
          await roundsProjection.apply(chunk, client).catch(async (err: unknown) => {
            await client.query('ROLLBACK');
            throw err;
          });
          await client.query('COMMIT');
        }
        const rounds = await client.query('SELECT * FROM rm_rounds ORDER BY round_stream');
        const txs = await client.query('SELECT * FROM rm_transactions ORDER BY round_stream, transaction_id');
        const quarters = await client.query(
          'SELECT * FROM rm_settlement_quarters WHERE count <> 0 ORDER BY operator_id, quarter, provider_id, game_id, currency, type, direction, status',
        );
        await client.query('SET search_path TO public');
        return { rounds: rounds.rows, txs: txs.rows, quarters: quarters.rows };
      } finally {
        client.release();
      }
    } finally {
      await dropScratch(pool, schema);
    }
  }

  it('one event at a time, all at once and in random chunks give identical rows', async () => {
    for (const seed of [1, 2, 3]) {
      const events = history(seed);
      const oneByOne = await rowsAfter(events, (e) => e.map((x) => [x]));
      const whole = await rowsAfter(events, (e) => [e]);
      const random = await rowsAfter(events, (e) => {
        const out: RecordedEvent[][] = [];
        for (let i = 0; i < e.length; ) {
          const n = 1 + ((i * 7 + seed) % 9);
          out.push(e.slice(i, i + n));
          i += n;
        }
        return out;
      });
      expect(whole).toEqual(oneByOne);
      expect(random).toEqual(oneByOne);
      const { rounds, txs } = oneByOne as { rounds: Array<Record<string, unknown>>; txs: Array<Record<string, unknown>> };
      // The history really covers what it claims to: every status and a force-closed round.
      expect(new Set(txs.map((t) => t.status))).toEqual(new Set(['applied', 'declined', 'invalid', 'failed', 'timed_out', 'dead', 'recorded'].filter((s) => txs.some((t) => t.status === s))));
      expect(txs.length).toBe(60);
      expect(rounds.length).toBeGreaterThan(3);
      // And the figures are right: worked out here from the transaction rows, independently of the SQL.
      for (const r of rounds) {
        const own = txs.filter((t) => t.round_stream === r.round_stream);
        const of = (type: string) => own.filter((t) => t.type === type);
        const applied = (type: string) => of(type).filter((t) => t.status === 'applied').reduce((sum, t) => sum + Number(t.amount), 0);
        const rolledBack = new Set(of('ROLLBACK').map((t) => t.original_transaction_id));
        // (These histories are not the decider's: one may force-close a round its provider completed.)
        const completedByProvider = own.some((t) => (t.type === 'BET' || t.type === 'WIN') && t.round_complete);
        expect(r).toMatchObject({
          bets: of('BET').length,
          bet_amount: String(applied('BET')),
          wins: of('WIN').length,
          win_amount: String(applied('WIN')),
          rollbacks: of('ROLLBACK').length,
          // None in a round its provider completed (contract section 8).
          outstanding_bets: completedByProvider ? 0 : of('BET').filter((t) => t.status !== 'declined' && !rolledBack.has(t.transaction_id)).length,
          status: r.force_closed || own.some((t) => (t.type === 'BET' || t.type === 'WIN') && t.round_complete) ? 'completed' : 'open',
        });
      }
      // The histories hold what those figures turn on: a BET rolled back twice over, and one left outstanding.
      const rollbacksOfOneBet = txs.filter((t) => t.type === 'ROLLBACK').map((t) => `${String(t.round_stream)} ${String(t.original_transaction_id)}`);
      expect(new Set(rollbacksOfOneBet).size).toBeLessThan(rollbacksOfOneBet.length);
      expect(rounds.some((r) => Number(r.outstanding_bets) > 0)).toBe(true);
    }
  });

  it('a BET voided while its call was under way keeps the time of its voiding when that call then fails (settledAt: when it became voided), in one batch or several', async () => {
    const stream = 'round|studio-a|op-1|voided';
    const request = { transactionId: 'tx-bet', sessionToken: 's', type: 'BET', roundId: 'voided', roundComplete: false, playerRef: 'p1', amount: 250, currency: 'EUR', gameId: 'fruit-1' } as const;
    const rollback = { ...request, transactionId: 'tx-rb', type: 'ROLLBACK', originalTransactionId: 'tx-bet' } as const;
    const event = (n: number, e: RoundEvent): RecordedEvent => ({ id: randomUUID(), streamId: stream, revision: n, type: e.type, data: e.data, metadata: {}, position: `1.${n + 1}`, createdAt: new Date() });
    const recorded = (n: number, r: TransactionRequest, at: string) =>
      event(n, { type: 'TransactionRecorded', data: { providerId: 'studio-a', operatorId: 'op-1', origin: 'provider', request: r, walletBody: '{}', contentHash: r.transactionId, recordedAt: at } });
    const events = [
      recorded(0, request, '2026-11-21T12:00:00.000Z'),
      recorded(1, rollback, '2026-11-21T12:00:01.000Z'),
      event(2, { type: 'TransactionVoided', data: { transactionId: 'tx-bet', rollbackTransactionId: 'tx-rb', voidedAt: '2026-11-21T12:00:01.000Z' } }),
      event(3, { type: 'TransactionAttemptFailed', data: { transactionId: 'tx-bet', outcome: 'timed_out', detail: 'no reply within the wallet timeout', attempt: 1, failedAt: '2026-11-21T12:00:05.000Z', voided: true } }),
    ];
    for (const chunks of [(e: RecordedEvent[]) => [e], (e: RecordedEvent[]) => e.map((x) => [x]), (e: RecordedEvent[]) => [e.slice(0, 3), e.slice(3)]]) {
      const { txs } = (await rowsAfter(events, chunks)) as { txs: Array<Record<string, unknown>> };
      expect(txs.find((t) => t.transaction_id === 'tx-bet')).toMatchObject({ status: 'voided', operator_status: 'voided', attempts: 1, updated_at: new Date('2026-11-21T12:00:01.000Z') });
    }
  });

  it('a record repeated in a later batch with its outcome: the row is settled, though its insert found the row there, and the batch\'s new rows are inserted', async () => {
    const stream = 'round|studio-a|op-1|again';
    const request = { transactionId: 'tx-again', sessionToken: 's', type: 'BET', roundId: 'again', roundComplete: false, playerRef: 'p1', amount: 250, currency: 'EUR', gameId: 'fruit-1' } as const;
    const win = { ...request, transactionId: 'tx-win', type: 'WIN', amount: 400 } as const;
    const event = (n: number, e: RoundEvent): RecordedEvent => ({ id: randomUUID(), streamId: stream, revision: n, type: e.type, data: e.data, metadata: {}, position: `1.${n + 1}`, createdAt: new Date() });
    const recorded = (n: number, r: TransactionRequest = request) =>
      event(n, { type: 'TransactionRecorded', data: { providerId: 'studio-a', operatorId: 'op-1', origin: 'provider', request: r, walletBody: '{}', contentHash: 'h', recordedAt: '2026-11-21T12:00:00.000Z' } });
    const settled = event(2, { type: 'TransactionSettled', data: { transactionId: 'tx-again', outcome: 'applied', reply: { status: 'OK', balance: 750, body: '{}' }, attempt: 1, settledAt: '2026-11-21T12:00:01.000Z' } });
    // The second batch repeats the BET's record beside a new WIN: the repeat inserts nothing, the WIN is inserted.
    const events = [recorded(0), recorded(1), settled, recorded(3, win)];
    const twoBatches = (await rowsAfter(events, (e) => [[e[0]!], e.slice(1)])) as {
      txs: Array<Record<string, unknown>>;
      rounds: Array<Record<string, unknown>>;
      quarters: Array<Record<string, unknown>>;
    };
    const { txs, rounds, quarters } = twoBatches;
    expect(txs.map((t) => t.transaction_id)).toEqual(['tx-again', 'tx-win']);
    expect(txs[0]).toMatchObject({ status: 'applied', attempts: 1, reply: { status: 'OK', balance: 750 }, settled_at: new Date('2026-11-21T12:00:01.000Z') });
    expect(txs[1]).toMatchObject({ type: 'WIN', status: 'recorded', amount: '400' });
    expect(rounds[0]).toMatchObject({ bets: 1, bet_amount: '250', wins: 1, outstanding_bets: 1 });
    // Each transaction counted once in the operators' quarters, in the cell of its status as it stands.
    expect(quarters.map((q) => [q.type, q.status, q.count, q.amount])).toEqual([
      ['BET', 'applied', '1', '250'],
      ['WIN', 'pending', '1', '400'],
    ]);
    expect(await rowsAfter(events, (e) => e.map((x) => [x]))).toEqual(twoBatches);
  });
  it('leaves no savepoint of its own open in the batch\'s transaction, whichever way its rows went in', async () => {
    const stream = 'round|studio-a|op-1|savepoints';
    const request = { transactionId: 'tx-sp', sessionToken: 's', type: 'BET', roundId: 'savepoints', roundComplete: false, playerRef: 'p1', amount: 5, currency: 'EUR', gameId: 'fruit-1' } as const;
    const recorded = (n: number): RecordedEvent => ({
      id: randomUUID(), streamId: stream, revision: n, type: 'TransactionRecorded', metadata: {}, position: `1.${n + 1}`, createdAt: new Date(),
      data: { providerId: 'studio-a', operatorId: 'op-1', origin: 'provider', request, walletBody: '{}', contentHash: 'h', recordedAt: '2026-11-21T12:00:00.000Z' },
    });
    const schema = await createScratch(pool, [roundsProjection]);
    const client = await pool.connect();
    try {
      await client.query(`BEGIN; SET LOCAL search_path TO ${schema}, public`);
      // The first inserts plainly; the second repeats the record, so its plain insert fails and is made again.
      for (const batch of [[recorded(0)], [recorded(1)]]) {
        await roundsProjection.apply(batch, client);
        await expect(client.query('SAVEPOINT probe; RELEASE SAVEPOINT rm_transactions_insert')).rejects.toThrow(/savepoint "rm_transactions_insert" does not exist/);
        await client.query('ROLLBACK TO SAVEPOINT probe');
      }
      await client.query('COMMIT');
    } finally {
      await client.query('ROLLBACK').catch(() => undefined);
      client.release();
      await dropScratch(pool, schema);
    }
  });

  it('totals a round whose applied amounts sum past a bigint (1100 BETs and WINs of 2^53-1 each) exactly (#18 part 8)', async () => {
    const max = Number.MAX_SAFE_INTEGER;
    const stream = 'round|studio-a|op-1|r-huge';
    const events: RecordedEvent[] = [];
    const push = (event: RoundEvent) =>
      events.push({ id: randomUUID(), streamId: stream, revision: events.length, type: event.type, data: event.data, metadata: {}, position: `1.${events.length + 1}`, createdAt: new Date() });
    const at = new Date(Date.UTC(2026, 10, 21, 12)).toISOString();
    for (let i = 0; i < 1100; i++) {
      for (const type of ['BET', 'WIN'] as const) {
        const transactionId = `${type}-${i}`;
        const request = { transactionId, sessionToken: 's', type, roundId: 'r-huge', roundComplete: false, playerRef: 'p1', amount: max, currency: 'EUR', gameId: 'fruit-1' };
        push({ type: 'TransactionRecorded', data: { providerId: 'studio-a', operatorId: 'op-1', origin: 'provider', request, walletBody: '{}', contentHash: 'h', recordedAt: at } });
        push({ type: 'TransactionSettled', data: { transactionId, outcome: 'applied', reply: { status: 'OK', balance: type === 'BET' ? 0 : max, body: '{}' }, attempt: 1, settledAt: at } });
      }
    }
    const { rounds } = (await rowsAfter(events, (all) => [all])) as { rounds: Array<Record<string, unknown>> };
    const total = String(BigInt(max) * 1100n);
    expect(rounds[0]).toMatchObject({ bets: 1100, wins: 1100, bet_amount: total, win_amount: total });
  });
});
