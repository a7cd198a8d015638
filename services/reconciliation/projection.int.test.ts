import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Pool } from '../../shared/db/pool.ts';
import { migratedDatabase, type MigratedDatabase } from '../../test/helpers/db.ts';
import { applyBatches, batches, record, step } from '../../test/helpers/round-histories.ts';
import { isClosed, operatorStatus } from '../rounds/decider.ts';
import { roundsProjection, roundsReadModelMigrations } from '../rounds/projection.ts';
import { quarterOf } from './projection.ts';
import { roundOf, settlementCells, transactionsPage, type After } from './queries.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';

/**
 * The operators' reconciliation view (kept by the rounds read model) says what folding the streams with the rounds decider says, however
 * the runner cuts the history into batches: each transaction's operator status (operatorStatus), each
 * round's status, and quarter-hour sums equal to the sums of the rows; and a statement's cells over any
 * interval are the same whether read from the sums or row by row.
 */
describe('the operators\' reconciliation view: what the decider says, batch by batch', () => {
  let env: MigratedDatabase;
  let pool: Pool;
  beforeAll(async () => {
    env = await migratedDatabase('reconprop', roundsReadModelMigrations);
    pool = env.pool;
  });
  afterAll(() => env.close());

  it('for random histories in random batches: statuses, rounds, quarter sums and statements over random intervals', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(step, { minLength: 1, maxLength: 60 }),
        fc.array(fc.nat(200), { maxLength: 6 }),
        fc.tuple(fc.nat(3 * 3_600_000), fc.nat(3 * 3_600_000)),
        async (steps, cuts, [a, b]) => {
          const { events, states } = record(steps);
          await applyBatches(pool, roundsProjection, batches(events, cuts));

          const want = [...states].flatMap(([id, s]) =>
            [...s.txs.values()].map((t) => ({
              round_stream: id,
              transaction_id: t.request.transactionId,
              status: operatorStatus(t.request.type, t.status),
              attempts: t.attempts,
              recorded_at: t.recordedAt,
            })),
          );
          const { rows } = await pool.query<{ round_stream: string; transaction_id: string; status: string; attempts: number; recorded_at: Date }>(
            'SELECT round_stream, transaction_id, operator_status AS status, attempts, recorded_at FROM rm_transactions',
          );
          const byKey = (x: { round_stream: string; transaction_id: string }) => `${x.round_stream}|${x.transaction_id}`;
          expect(rows.map((r) => ({ ...r, recorded_at: r.recorded_at.toISOString() })).sort((x, y) => byKey(x).localeCompare(byKey(y)))).toEqual(
            want.sort((x, y) => byKey(x).localeCompare(byKey(y))),
          );

          // Rounds: open until a completing BET or WIN or the reconciler closes them.
          const { rows: rounds } = await pool.query<{ round_stream: string; status: string; closed_at: Date | null }>('SELECT round_stream, operator_status AS status, closed_at FROM rm_rounds WHERE operator_status IS NOT NULL');
          const wantRounds = [...states]
            .filter(([, s]) => s.status !== 'new')
            .map(([id, s]) => ({ round_stream: id, status: s.status === 'force-closed' ? 'force-closed' : isClosed(s) ? 'complete' : 'open' }));
          expect(rounds.map((r) => ({ round_stream: r.round_stream, status: r.status })).sort((x, y) => x.round_stream.localeCompare(y.round_stream))).toEqual(
            wantRounds.sort((x, y) => x.round_stream.localeCompare(y.round_stream)),
          );
          for (const r of rounds) expect(r.closed_at === null, r.round_stream).toBe(r.status === 'open');

          // The quarter sums are the rows' sums, and no quarter keeps an empty row.
          const { rows: quarters } = await pool.query<{ quarter: Date; status: string; type: string; currency: string; count: string; amount: string }>(
            'SELECT quarter, status, type, currency, count::text, amount::text FROM rm_settlement_quarters',
          );
          const sums = new Map<string, { count: number; amount: number }>();
          for (const [, s] of states) {
            for (const t of s.txs.values()) {
              const k = `${quarterOf(t.recordedAt)}|${operatorStatus(t.request.type, t.status)}|${t.request.type}|${t.request.currency}`;
              const v = sums.get(k) ?? { count: 0, amount: 0 };
              v.count += 1;
              v.amount += t.request.amount;
              sums.set(k, v);
            }
          }
          expect(new Map(quarters.map((q) => [`${q.quarter.toISOString()}|${q.status}|${q.type}|${q.currency}`, { count: Number(q.count), amount: Number(q.amount) }]))).toEqual(sums);

          // A statement's cells over a random interval: from the sums and the ends, as from every row.
          const base = Date.parse('2026-11-24T12:00:00Z');
          const from = new Date(base + Math.min(a, b)).toISOString();
          const to = new Date(base + Math.max(a, b) + 1).toISOString();
          const cells = await settlementCells(pool, 'op-1', from, to);
          const { rows: raw } = await pool.query<{ type: string; status: string; currency: string; count: string; amount: string }>(
            `SELECT type, operator_status AS status, currency, count(*)::text AS count, sum(amount)::text AS amount FROM rm_transactions
             WHERE recorded_at >= $1 AND recorded_at < $2 GROUP BY type, operator_status, currency`,
            [from, to],
          );
          const cellMap = new Map(cells.map((c) => [`${c.type}|${c.status}|${c.currency}`, `${c.count}/${c.amount}`]));
          expect(cellMap).toEqual(new Map(raw.map((r) => [`${r.type}|${r.status}|${r.currency}`, `${r.count}/${r.amount}`])));
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe('the transactions list pages in recorded (log) order', () => {
  let env: MigratedDatabase;
  beforeAll(async () => {
    env = await migratedDatabase('reconpage', roundsReadModelMigrations);
  });
  afterAll(() => env.close());

  /** A BET recorded at log position `n` with the given recording time (a clock of another process may lag). */
  const bet = (n: number, recordedAt: string): RecordedEvent => ({
    id: randomUUID(),
    streamId: `round|studio-a|op-1|r${n}`,
    revision: 0,
    type: 'TransactionRecorded',
    data: {
      providerId: 'studio-a',
      operatorId: 'op-1',
      origin: 'provider',
      request: { transactionId: `t${n}`, sessionToken: 's', type: 'BET', roundId: `r${n}`, roundComplete: false, playerRef: 'p', amount: 1, currency: 'EUR', gameId: 'fruit-1' },
      walletBody: '{}',
      contentHash: 'h',
      recordedAt,
    },
    metadata: {},
    position: `7.${n}`,
    createdAt: new Date(recordedAt),
  });
  const apply = (events: RecordedEvent[]) => applyBatches(env.pool, roundsProjection, [events], false);

  it('yields each transaction once when ones recorded later carry earlier recording times', async () => {
    // Recording times run backwards against the log: a later record may come from a process whose clock is behind.
    await apply([1, 2, 3, 4, 5].map((n) => bet(n, new Date(Date.parse('2026-11-24T12:00:10Z') - n * 1000).toISOString())));
    const filter = { from: '2026-11-24T00:00:00Z', to: '2026-11-25T00:00:00Z' };
    const seen: string[] = [];
    let after: After | undefined;
    let n = 5;
    do {
      const page = await transactionsPage(env.pool, 'op-1', filter, 2, after);
      seen.push(...page.transactions.map((t) => t.transactionId));
      after = page.last;
      // Recorded while the operator pages, with a recording time before everything seen so far.
      if (n < 8) {
        n += 1;
        await apply([bet(n, new Date(Date.parse('2026-11-24T12:00:00Z') - n * 1000).toISOString())]);
      }
    } while (after);
    expect(seen).toEqual(['t1', 't2', 't3', 't4', 't5', 't6', 't7', 't8'].slice(0, seen.length));
    expect(seen.length).toBeGreaterThanOrEqual(6);
  });
});

describe('a re-driven transaction in the operators\' reconciliation view', () => {
  let env: MigratedDatabase;
  beforeAll(async () => {
    env = await migratedDatabase('reconredrive', roundsReadModelMigrations);
  });
  afterAll(() => env.close());

  const ev = (n: number, type: string, data: Record<string, unknown>, at: string): RecordedEvent => ({
    id: randomUUID(), streamId: 'round|studio-a|op-1|r1', revision: n, type, data: data as RecordedEvent['data'], metadata: {}, position: `9.${n + 1}`, createdAt: new Date(at),
  });
  const request = (transactionId: string, type: 'BET' | 'WIN', amount: number) => ({ transactionId, sessionToken: 's', type, roundId: 'r1', roundComplete: type === 'WIN', playerRef: 'p', amount, currency: 'EUR', gameId: 'fruit-1' });
  const recorded = (n: number, r: ReturnType<typeof request>, at: string) => ev(n, 'TransactionRecorded', { providerId: 'studio-a', operatorId: 'op-1', origin: 'provider', request: r, walletBody: '{}', contentHash: 'h', recordedAt: at }, at);
  const history = [
    recorded(0, request('b', 'BET', 10), '2026-11-24T12:00:00.000Z'),
    ev(1, 'TransactionSettled', { transactionId: 'b', outcome: 'applied', reply: { status: 'OK', balance: 90, body: '{}' }, attempt: 1, settledAt: '2026-11-24T12:00:00.100Z' }, '2026-11-24T12:00:00.100Z'),
    recorded(2, request('w', 'WIN', 30), '2026-11-24T12:00:01.000Z'),
    ev(3, 'TransactionAttemptFailed', { transactionId: 'w', outcome: 'failed', detail: '503', attempt: 1, failedAt: '2026-11-24T12:00:01.100Z' }, '2026-11-24T12:00:01.100Z'),
    ev(4, 'TransactionDeadLettered', { transactionId: 'w', attempts: 1, lastError: '503', deadLetteredAt: '2026-11-25T12:00:01.000Z' }, '2026-11-25T12:00:01.000Z'),
    ev(5, 'TransactionRedriven', { transactionId: 'w', by: 'ops', reason: 'fixed', redrivenAt: '2026-11-25T13:00:00.000Z' }, '2026-11-25T13:00:00.000Z'),
    ev(6, 'TransactionSettled', { transactionId: 'w', outcome: 'applied', reply: { status: 'OK', balance: 120, body: '{}' }, attempt: 2, settledAt: '2026-11-25T13:00:00.200Z' }, '2026-11-25T13:00:00.200Z'),
  ];

  it('goes dead, pending again when re-driven, applied when the wallet answers: the same rows and sums however the history is cut', async () => {
    const states: Array<{ upTo: number; win: string; settled: string | null; sums: string }> = [];
    for (const cut of [1, 3, 5, 6, 7]) {
      for (const split of [1, 2, 7]) {
        const events = history.slice(0, cut);
        await applyBatches(env.pool, roundsProjection, Array.from({ length: Math.ceil(events.length / split) }, (_, i) => events.slice(i * split, (i + 1) * split)));
        const win = (await roundOf(env.pool, 'op-1', 'r1', 'fruit-1'))?.transactions.find((t) => t.transactionId === 'w');
        const { rows: sums } = await env.pool.query<{ s: string }>(`SELECT string_agg(type || ':' || status || ':' || count || ':' || amount, ',' ORDER BY type, status) AS s FROM rm_settlement_quarters`);
        states.push({ upTo: cut, win: win?.status ?? 'none', settled: win?.settledAt ?? null, sums: sums[0]!.s });
      }
    }
    const at = (cut: number) => states.filter((x) => x.upTo === cut);
    for (const cut of [1, 3, 5, 6, 7]) expect(new Set(at(cut).map((x) => JSON.stringify(x))).size, `cut ${cut}`).toBe(1);
    expect(at(1)[0]).toMatchObject({ win: 'none' });
    expect(at(3)[0]).toMatchObject({ win: 'pending', settled: null, sums: 'BET:applied:1:10,WIN:pending:1:30' });
    expect(at(5)[0]).toMatchObject({ win: 'dead', settled: '2026-11-25T12:00:01.000Z', sums: 'BET:applied:1:10,WIN:dead:1:30' });
    expect(at(6)[0]).toMatchObject({ win: 'pending', settled: null, sums: 'BET:applied:1:10,WIN:pending:1:30' });
    expect(at(7)[0]).toMatchObject({ win: 'applied', settled: '2026-11-25T13:00:00.200Z', sums: 'BET:applied:1:10,WIN:applied:1:30' });
  });
});
