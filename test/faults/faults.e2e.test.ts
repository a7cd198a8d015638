import { describe, expect, it } from 'vitest';
import { runFaults } from './run.ts';

/**
 * A short fault run in every test run (npm run test:faults runs longer ones). A new seed each time;
 * a failure prints it, and `npm run test:faults -- --seed N` replays it.
 */
describe('fault run (short)', () => {
  it('keeps every money invariant while processes are killed, Redis is flushed, Postgres connections drop and the wallet misbehaves', async () => {
    const seed = Number(process.env.FAULT_SEED ?? Math.floor(Math.random() * 2 ** 31));
    const report = await runFaults({ seed, durationMs: Number(process.env.FAULT_SECONDS ?? 15) * 1000 });
    console.log(`fault run seed ${seed}: ${report.requests} requests, ${report.transactionsRecorded} transactions, faults ${JSON.stringify(report.faults)}`);
    expect(report.transactionsRecorded).toBeGreaterThan(50);
    expect(report.violations, `seed ${seed}`).toEqual([]);
  }, 300_000);
});
