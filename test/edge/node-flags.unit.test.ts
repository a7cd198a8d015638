import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { NODE_FLAGS } from '../helpers/bundle.ts';

/**
 * The service runs with Node flags of its own (V8's young generation kept small: the api's memory target
 * depends on it), passed by each launcher: npm's scripts, the image, and the tests and the bench
 * (entryArgs). A launcher that dropped them would run a service measured under other settings.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
const scripts = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;

/** The flags between `node` and the bundle in a shell command line. */
function flagsIn(command: string, bundle: string): string[] | undefined {
  const m = new RegExp(`(?:^|&& |exec )node((?: --?[\\w-]+(?:=\\S+)?)*) ${bundle.replace('.', '\\.')}(?: |$)`).exec(command);
  return m ? m[1]!.trim().split(/\s+/).filter(Boolean) : undefined;
}

describe("the service's Node flags, the same in every launcher", () => {
  it('npm start and npm run audit pass the flags the tests and the bench run them with', () => {
    expect(NODE_FLAGS.main).toContain('--max-semi-space-size=16');
    expect(flagsIn(scripts.start!, 'dist/main.mjs')).toEqual(NODE_FLAGS.main);
    expect(flagsIn(scripts.audit!, 'dist/audit.mjs')).toEqual(NODE_FLAGS.audit);
    expect(flagsIn(scripts.sandbox!, 'dist/sandbox.mjs')).toEqual(NODE_FLAGS.sandbox);
    expect(flagsIn(scripts.conformance!, 'dist/conformance.mjs')).toEqual(NODE_FLAGS.conformance);
  });

  it("the image's command passes them too", () => {
    const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
    const cmd = /^CMD (\[.*\])$/m.exec(dockerfile);
    expect(cmd).not.toBeNull();
    expect(JSON.parse(cmd![1]!)).toEqual(['node', ...NODE_FLAGS.main, 'dist/main.mjs']);
  });

  it('reads a command line as the shell would pass it (the check itself)', () => {
    expect(flagsIn('node scripts/build.mjs --quiet && exec node --a=1 --b dist/main.mjs', 'dist/main.mjs')).toEqual(['--a=1', '--b']);
    expect(flagsIn('node scripts/build.mjs --quiet && exec node dist/main.mjs', 'dist/main.mjs')).toEqual([]);
    expect(flagsIn('node scripts/build.mjs --quiet', 'dist/main.mjs')).toBeUndefined();
  });
});
