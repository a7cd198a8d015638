// npm run test:faults -- [--duration SECONDS] [--seed N] [--restart-servers]: the fault run, printing its
// seed and findings. --restart-servers also restarts the local Postgres and Redis servers: only where
// nothing else uses them.
import { runFaults } from './run.ts';

const arg = (name: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
const seed = Number(arg('seed') ?? Math.floor(Math.random() * 2 ** 31));
const durationMs = Number(arg('duration') ?? 30) * 1000;
console.log(`fault run: seed ${seed}, ${durationMs / 1000} s of workload (replay with --seed ${seed})`);
const restartServers = process.argv.includes('--restart-servers');
const report = await runFaults({ seed, durationMs, restartServers, log: (l) => console.log(`  ${l}`) });
console.log(`requests ${report.requests}, transactions recorded ${report.transactionsRecorded}, wallet effects ${report.walletEffects}`);
console.log(`faults injected: ${Object.entries(report.faults).map(([k, v]) => `${k} ×${v}`).join(', ') || 'none'}`);
if (report.violations.length === 0) {
  console.log('checker: every invariant holds');
} else {
  console.log(`checker: ${report.violations.length} violation(s) (seed ${seed}):`);
  for (const v of report.violations.slice(0, 50)) console.log(`  - ${v}`);
}
process.exit(report.violations.length === 0 ? 0 : 1);
