import { ensureBuilt } from './bundle.ts';

/** Once for the run: the bundles every test that starts a service or a tool as its own process runs (test/helpers/bundle.ts). */
export default function setup(): void {
  ensureBuilt();
}
