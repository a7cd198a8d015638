import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The suite's longest files, longest first (seconds of a clean-clone CI run, 2026-11-29 09:08). On
 * a clean checkout vitest has no record of earlier durations and starts larger files first, so the fault
 * simulator (a small file, 80 s) started last and ran alone on one worker for its whole length:
 * 735 s of tests took 468 s. Started first, it runs beside the rest.
 */
const LONGEST = [
  'test/faults/faults.e2e.test.ts', // 65 s
  'test/cli/bench-interrupt.e2e.test.ts', // 55 s (with the --pause-read-models run)
  'test/console/console.e2e.test.ts', // 18 s
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
