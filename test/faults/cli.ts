// npm run test:faults -- [--duration SECONDS] [--seed N] [--store postgres|esdb] [--restart-servers]: the seeded simulator (see
// run.ts), printing its seed, what it did and what its checker found.
import { Cli } from '../../shared/cli.ts';

const USAGE = `usage: npm run test:faults -- [--seed N] [--duration SECONDS] [--store postgres|esdb] [--restart-servers]

The seeded fault simulator: two providers and two operators' wallets against the service split into its
four roles, with faults injected, then a checker over every wallet's ledger and the event history.

  --seed N            the seed (a whole number 0..2147483647); a failing run replays with the same seed.
                      Default: a random one, printed.
  --duration SECONDS  seconds of workload and faults before the checks (a whole number 5..3600; default 30).
                      Settling and checking take a while after it.
  --store STORE       the event store the service runs on: postgres (default) or esdb (the protocol-level
                      EventStoreDB test server of test/eventstore/esdb-server.ts).
  --restart-servers   also restart the local Postgres and Redis servers themselves. Only on a machine where
                      nothing else uses them.
  --help              this text.

Exit status: 0 when every invariant holds, 1 when the checker found a violation, 2 on bad usage.`;

const cli: Cli = new Cli('test:faults', USAGE);
const { values } = cli.parse({
  options: { seed: { type: 'string' }, duration: { type: 'string' }, store: { type: 'string' }, 'restart-servers': { type: 'boolean' }, help: { type: 'boolean' } },
});
const seed = values.seed !== undefined ? cli.whole('seed', values.seed, 0, 2 ** 31 - 1) : Math.floor(Math.random() * 2 ** 31);
const durationMs = (values.duration !== undefined ? cli.whole('duration', values.duration, 5, 3600) : 30) * 1000;
const restartServers = values['restart-servers'] === true;
const store = values.store ?? 'postgres';
if (store !== 'postgres' && store !== 'esdb') cli.fail(`--store must be postgres or esdb, not "${store}"`);

console.log(`fault run: seed ${seed}, ${durationMs / 1000} s of workload on the ${store} event store (replay with --seed ${seed} --store ${store})`);
// Loaded once the options are good: a bad one or --help answers without the simulator's modules.
const { runFaults } = await import('./run.ts');
const report = await runFaults({ seed, durationMs, restartServers, store, log: (l) => console.log(`  ${l}`) });
const list = (r: Record<string, number>) => Object.entries(r).map(([k, v]) => `${k} ×${v}`).join(', ') || 'none';
console.log(`requests ${report.requests}, transactions recorded ${report.transactionsRecorded}, wallet entries ${report.walletEntries}`);
console.log(`workload: ${list(report.actions)}`);
console.log(`faults injected: ${list(report.faults)}`);
console.log(`BET outcomes recorded only after their round went on (lost replies learned again): ${report.lostReplies.learned}; asks that failed on the way: ${report.lostReplies.failedAsks}`);
const t = report.tenant;
console.log(
  `tenants: operator one's failed WIN retried after ${t.retryAloneMs.join(', ')} ms alone, ${t.retryBesideHungMs.join(', ')} ms beside a hung wallet with ${t.neighbourBacklog} credits awaiting retry; its BETs answered in ${t.firstAttemptBesideHungMs.join(', ')} ms meanwhile`,
);
if (report.transactionsRecorded === 0) {
  console.log('checker: nothing was recorded, so nothing was checked');
  process.exit(1);
}
if (report.violations.length === 0) {
  console.log('checker: every invariant holds');
} else {
  console.log(`checker: ${report.violations.length} violation(s) (seed ${seed}):`);
  for (const v of report.violations.slice(0, 50)) console.log(`  - ${v}`);
}
process.exit(report.violations.length === 0 ? 0 : 1);
