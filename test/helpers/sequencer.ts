import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The suite's longest files, longest first (seconds of a clean-clone CI run, 2026-12-01 21:05, a slow
 * hour, both projects' runs of a file added). On a clean checkout vitest has no record of earlier
 * durations and starts larger files first, so a long file that is small started late and ran alone at
 * the end: the fault simulator (80 s) once made 735 s of tests take 468 s. Started first, they run beside
 * the rest, and the short files fill the workers at the end.
 */
const LONGEST = [
  'test/cli/bench-interrupt.e2e.test.ts', // 133 s
  'test/money/chain.e2e.test.ts', // 75 + 40 s
  'test/faults/faults.e2e.test.ts', // 101 s
  'test/operator/grants.e2e.test.ts', // 35 + 51 s
  'test/money/write-behind.e2e.test.ts', // 77 s
  'test/cli/options.e2e.test.ts', // 67 s
  'test/console/console.e2e.test.ts', // 62 s
  'test/money/audit-verify.e2e.test.ts', // 28 + 30 s
  'test/money/reconciler.e2e.test.ts', // 25 + 26 s
  'test/edge/bundle.e2e.test.ts', // 39 s
  'test/edge/process.e2e.test.ts', // 35 s
  'test/eventstore/esdb.int.test.ts', // 32 s
  'test/sandbox/sandbox.e2e.test.ts', // 30 s
  'test/conformance/conformance.e2e.test.ts', // 28 s
];

const rank = (spec: TestSpecification): number => {
  const i = LONGEST.findIndex((file) => spec.moduleId.endsWith(file));
  return i < 0 ? LONGEST.length : i;
};

/** Vitest's own order (failed first, then longest first when it remembers a run), with the files above ahead. */
export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    return [...(await super.sort(files))].sort((a, b) => rank(a) - rank(b));
  }
}
