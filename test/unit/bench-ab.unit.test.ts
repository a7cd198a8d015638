import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { otherTreeProblem } from '../bench/ab.ts';

/**
 * `npm run bench -- --ab DIR` starts the service from DIR's own bundle: DIR must be a checkout of this
 * project that can build one. Anything else is refused before a database or a process is made (exit 2
 * with this reason), rather than failing halfway through a run.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');

let made: string[] = [];
afterEach(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
  made = [];
});

/** A directory with the given files (path → content). */
function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ab-tree-'));
  made.push(dir);
  for (const [file, content] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), content);
  }
  return dir;
}

const ours = JSON.stringify({ name: 'seamless-wallet-ledger' });

describe('the other tree of an A/B run', () => {
  it('is accepted when it is a checkout of this project with its dependencies and its build script', () => {
    expect(otherTreeProblem(ROOT)).toBeUndefined();
    expect(otherTreeProblem(tree({ 'package.json': ours, 'scripts/build.mjs': '', 'node_modules/.package-lock.json': '{}' }))).toBeUndefined();
  });

  it('is refused, saying why, when it is not one', () => {
    expect(otherTreeProblem(tree({}))).toMatch(/no package.json there/);
    expect(otherTreeProblem(tree({ 'package.json': '{' }))).toMatch(/its package.json is not JSON/);
    expect(otherTreeProblem(tree({ 'package.json': JSON.stringify({ name: 'another-project' }) }))).toMatch(/names "another-project", not seamless-wallet-ledger/);
    // From before the bundles: the bench could not start it as it starts this tree.
    expect(otherTreeProblem(tree({ 'package.json': ours, 'node_modules/.package-lock.json': '{}' }))).toMatch(/no scripts\/build.mjs/);
    expect(otherTreeProblem(tree({ 'package.json': ours, 'scripts/build.mjs': '' }))).toMatch(/dependencies are not installed \(run npm ci there\)/);
  });
});
