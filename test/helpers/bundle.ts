import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SERVICE_NODE_FLAGS } from '../../shared/runtime.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** The entry points scripts/build.mjs bundles into dist/<name>.mjs. */
export type Entry = 'main' | 'audit' | 'sandbox' | 'conformance';

/**
 * Node's own flags for each entry point, as package.json's scripts and the Dockerfile pass them (a test,
 * test/edge/node-flags.unit.test.ts, holds them to this list): the service's flags (shared/runtime.ts)
 * for the service, the sandbox (the whole service in one process) and the audit tool, whose rebuild they
 * keep some 100 MiB smaller.
 */
export const NODE_FLAGS: Record<Entry, readonly string[]> = {
  main: SERVICE_NODE_FLAGS,
  audit: SERVICE_NODE_FLAGS,
  sandbox: SERVICE_NODE_FLAGS,
  conformance: [],
};

/**
 * Node's arguments that run an entry point as npm's scripts and the image do (package.json): its flags
 * and its bundle of dist/. The bundles are brought up to date once for a test run (vitest's global setup,
 * test/helpers/global-setup.ts, again before each rerun in watch mode) and, outside vitest (the bench, the
 * fault simulator), by the first call in the process.
 */
export function entryArgs(entry: Entry): string[] {
  ensureBuilt();
  return [...NODE_FLAGS[entry], path.join(ROOT, 'dist', `${entry}.mjs`)];
}

/** Runs `npm run build` (scripts/build.mjs) unless this process, or the one that started it, has. */
export function ensureBuilt(): void {
  if (process.env.LEDGER_BUNDLES_BUILT === '1') return;
  build();
  process.env.LEDGER_BUNDLES_BUILT = '1';
}

/** `npm run build`: builds dist/ unless it is up to date. */
export function build(): void {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'scripts/build.mjs'), '--quiet'], { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`npm run build failed (${r.error ? r.error.message : `exit ${r.status ?? r.signal}`}):\n${r.stdout ?? ''}${r.stderr ?? ''}`);
}

/**
 * Node's compile cache (V8's code, kept on disk and keyed by each module's content) for the processes
 * tests start: a service's start then compiles little of the 8 MB bundle again, about 0.2 s of CPU less
 * each (1.1 s against 0.9 s to "service started", 2026-12-02), and a tool refusing its options about
 * 15 % less (npm run's tools in test/cli/options.e2e.test.ts: 16.6 s of CPU against 19.8), some hundreds
 * of starts a run on a machine the suite keeps busy. What runs is the same code; only its compilation is
 * cached.
 */
const COMPILE_CACHE = path.join(tmpdir(), 'seamless-wallet-test-compile-cache');

/** The whole environment of a process a test starts: PATH, Node's compile cache, and what it names. */
export const childEnv = (env: Record<string, string> = {}): Record<string, string> => ({ PATH: process.env.PATH ?? '', NODE_COMPILE_CACHE: COMPILE_CACHE, ...env });
