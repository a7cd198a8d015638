import type { TestProject } from 'vitest/node';
import { build, ensureBuilt } from './bundle.ts';

/**
 * Once for the run: the bundles every test that starts a service or a tool as its own process runs
 * (test/helpers/bundle.ts); in watch mode, brought up to date again before each rerun.
 */
export default function setup(project: TestProject): void {
  ensureBuilt();
  project.onTestsRerun(() => build());
}
