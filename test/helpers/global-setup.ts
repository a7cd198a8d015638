import type { TestProject } from 'vitest/node';
import { build, ensureBuilt } from './bundle.ts';
import { migratedTemplate } from './db.ts';

/**
 * Once for the run: the bundles every test that starts a service or a tool as its own process runs
 * (test/helpers/bundle.ts); in watch mode, brought up to date again before each rerun. And the template
 * database the test files' migrated databases are copied from (test/helpers/db.ts), dropped at the end.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  ensureBuilt();
  project.onTestsRerun(() => build());
  return await migratedTemplate();
}
