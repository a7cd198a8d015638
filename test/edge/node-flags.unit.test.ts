import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { NODE_MAJOR, runtimeWarnings, SERVICE_NODE_FLAGS } from '../../shared/runtime.ts';
import { NODE_FLAGS } from '../helpers/bundle.ts';

/**
 * The service runs with Node flags of its own (V8's young generation kept small: the api's memory target
 * depends on it), passed by each launcher: npm's scripts, the image, and the tests and the bench
 * (entryArgs). A launcher that dropped them would run a service measured under other settings; a
 * process started without them, or on another Node, says so in its log.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  scripts: Record<string, string>;
  devDependencies: Record<string, string>;
  engines: Record<string, string>;
};

/** The flags between `node` and the bundle in a shell command line. */
function flagsIn(command: string, bundle: string): string[] | undefined {
  const m = new RegExp(`(?:^|&& |exec )node((?: --?[\\w-]+(?:=\\S+)?)*) ${bundle.replace('.', '\\.')}(?: |$)`).exec(command);
  return m ? m[1]!.trim().split(/\s+/).filter(Boolean) : undefined;
}

describe("the service's Node flags, the same in every launcher", () => {
  it('npm start, npm run audit and npm run sandbox pass the flags the tests and the bench run them with', () => {
    expect(SERVICE_NODE_FLAGS).toContain('--max-semi-space-size=16');
    for (const entry of ['main', 'audit', 'sandbox'] as const) expect(NODE_FLAGS[entry]).toEqual(SERVICE_NODE_FLAGS);
    expect(flagsIn(pkg.scripts.start!, 'dist/main.mjs')).toEqual(SERVICE_NODE_FLAGS);
    expect(flagsIn(pkg.scripts.audit!, 'dist/audit.mjs')).toEqual(SERVICE_NODE_FLAGS);
    expect(flagsIn(pkg.scripts.sandbox!, 'dist/sandbox.mjs')).toEqual(SERVICE_NODE_FLAGS);
    expect(flagsIn(pkg.scripts.conformance!, 'dist/conformance.mjs')).toEqual(NODE_FLAGS.conformance);
  });

  it("the image gives them to every node process it starts, and runs the Node release npm's scripts pin", () => {
    const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
    // Docker takes the last of each.
    const last = (re: RegExp) => [...dockerfile.matchAll(re)].at(-1)?.[1];
    expect(last(/^ENV NODE_OPTIONS="([^"]*)"$/gm)?.split(/\s+/)).toEqual(SERVICE_NODE_FLAGS);
    expect(JSON.parse(last(/^CMD (\[.*\])$/gm) ?? 'null')).toEqual(['node', 'dist/main.mjs']);
    // The exact release, not the major: a rebuild of the image must not take a Node the tests never ran.
    expect(last(/^FROM (\S+)/gm)).toBe(`node:${pkg.devDependencies.node}-bookworm-slim`);
    expect(pkg.devDependencies.node!.split('.')[0]).toBe(String(NODE_MAJOR));
  });

  it("npm's scripts run on that major too (the dev dependency node, which .ci/run checks is what runs them)", () => {
    expect(pkg.devDependencies.node).toMatch(new RegExp(`^${NODE_MAJOR}\\.\\d+\\.\\d+$`));
    expect(pkg.engines.node).toBe(`>=${NODE_MAJOR}`);
  });

  it('reads a command line as the shell would pass it (the check itself)', () => {
    expect(flagsIn('node scripts/build.mjs --quiet && exec node --a=1 --b dist/main.mjs', 'dist/main.mjs')).toEqual(['--a=1', '--b']);
    expect(flagsIn('node scripts/build.mjs --quiet && exec node dist/main.mjs', 'dist/main.mjs')).toEqual([]);
    expect(flagsIn('node scripts/build.mjs --quiet', 'dist/main.mjs')).toBeUndefined();
  });
});

describe('what a process started otherwise is told', () => {
  const flags = [...SERVICE_NODE_FLAGS];
  it('nothing on the built runtime with its flags, on the command line or in NODE_OPTIONS', () => {
    expect(runtimeWarnings(`v${NODE_MAJOR}.21.0`, flags, undefined)).toEqual([]);
    expect(runtimeWarnings(`v${NODE_MAJOR}.21.0`, [], `--enable-source-maps ${flags.join(' ')}`)).toEqual([]);
    expect(runtimeWarnings(`v${NODE_MAJOR}.21.0`, [], `"${flags.join(' ')}"`)).toEqual([]);
    // Another value, or V8's underscore spelling, is someone's choice.
    expect(runtimeWarnings(`v${NODE_MAJOR}.0.0`, ['--max_semi_space_size=32'], undefined)).toEqual([]);
  });

  it('another Node major, or the flags missing, each get one line naming what to do', () => {
    const other = runtimeWarnings('v20.20.2', flags, undefined);
    expect(other).toHaveLength(1);
    expect(other[0]).toContain('running on Node.js v20.20.2');
    expect(other[0]).toContain(`Node.js ${NODE_MAJOR}`);
    const bare = runtimeWarnings(`v${NODE_MAJOR}.21.0`, ['--enable-source-maps'], '--max-old-space-size=512');
    expect(bare).toHaveLength(1);
    expect(bare[0]).toContain('started without --max-semi-space-size=16');
    expect(runtimeWarnings('v22.1.0', [], undefined)).toHaveLength(2);
  });
});
