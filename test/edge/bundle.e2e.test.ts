import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestEnv, type TestEnv } from '../helpers/service.ts';
import { childEnv } from '../helpers/bundle.ts';

/**
 * npm run build (scripts/build.mjs): npm start, the image and the tools run the service from one bundled
 * file. What a bundle could lose is where each source file is, so the files the service finds beside its
 * sources (the console's pages, Swagger UI and Chart.js from node_modules, package.json's version) are
 * checked, with the process started from another directory.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');

describe('the service built by npm run build', () => {
  const dist = path.join(ROOT, 'dist');
  let env: TestEnv;
  beforeAll(async () => {
    env = await createTestEnv('bundle');
    // Built again (the test run's setup built it once): each file is replaced whole, so the services
    // other test files start meanwhile read either build, never half of one.
    const built = spawnSync(process.execPath, ['scripts/build.mjs', '--force'], { cwd: ROOT, encoding: 'utf8' });
    expect(built.stderr).toBe('');
    expect(built.status).toBe(0);
    expect(built.stdout).toBe('built dist/main.mjs, dist/audit.mjs, dist/sandbox.mjs, dist/conformance.mjs\n');
  }, 60_000);
  afterAll(async () => env?.cleanup());

  it('serves the files that lie beside its sources, whatever the working directory', async () => {
    const child = spawn(process.execPath, [path.join(dist, 'main.mjs')], {
      cwd: tmpdir(),
      env: childEnv(env.env({ ROLES: 'api', LOG_LEVEL: 'info' })),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    try {
      const started = () => out.split('\n').find((line) => line.includes('"msg":"service started"'));
      await expect.poll(started, { timeout: 20_000 }).toBeDefined();
      const url = /"url":"(http:[^"]+)"/.exec(started()!)![1]!;
      // Started as `node dist/main.mjs`, without the flags npm start and the image pass: it says so, once.
      expect(out.split('\n').filter((l) => l.includes('started without --max-semi-space-size=16'))).toHaveLength(1);
      expect(out).not.toContain('running on Node.js');

      const page = await fetch(`${url}/console`);
      expect(page.status).toBe(200);
      expect(await page.text()).toBe(readFileSync(path.join(ROOT, 'services/console/public/index.html'), 'utf8'));
      const chart = await fetch(`${url}/console/vendor/chart.umd.js`);
      expect(chart.status).toBe(200);
      expect((await chart.text()).length).toBeGreaterThan(100_000);
      const swagger = await fetch(`${url}/docs/swagger-ui.css`);
      expect(swagger.status).toBe(200);
      const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
      const doc = (await (await fetch(`${url}/openapi.json`)).json()) as { info: { version: string } };
      expect(doc.info.version).toBe(pkg.version);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  });

  it("is built again only when what it is built from has changed, whatever the files' times say", () => {
    const build = () => spawnSync(process.execPath, ['scripts/build.mjs'], { cwd: ROOT, encoding: 'utf8' });
    const UP_TO_DATE = 'dist/ is up to date: nothing it is built from changed since its last build\n';
    const BUILT = 'built dist/main.mjs, dist/audit.mjs, dist/sandbox.mjs, dist/conformance.mjs\n';
    const bundleTime = () => statSync(path.join(dist, 'main.mjs')).mtimeMs;
    const before = bundleTime();
    expect(build().stdout).toBe(UP_TO_DATE);
    expect(bundleTime()).toBe(before);

    const source = path.join(ROOT, 'services/rounds/decider.ts');
    const original = readFileSync(source);
    const { atime, mtime } = statSync(source);
    try {
      // Saved again with the same text: nothing to build.
      utimesSync(source, new Date(), new Date());
      expect(build().stdout).toBe(UP_TO_DATE);
      // Changed, with its old time kept (as rsync -a or tar bring a release): built again. (A comment, which
      // the bundle leaves out: the services other test files start meanwhile are the same.)
      writeFileSync(source, Buffer.concat([original, Buffer.from('// a line the bundle test adds and removes\n')]));
      utimesSync(source, atime, mtime);
      const again = build();
      expect(again.stdout).toBe(BUILT);
      expect(again.status).toBe(0);
      expect(bundleTime()).toBeGreaterThan(before);
    } finally {
      writeFileSync(source, original);
      utimesSync(source, atime, mtime);
    }
    expect(build().stdout).toBe(BUILT);
  });

  it('maps its code back to the TypeScript sources, for a CPU profile or a debugging run under --enable-source-maps', () => {
    const map = JSON.parse(readFileSync(path.join(dist, 'main.mjs.map'), 'utf8')) as { sources: string[] };
    const sources = new Set(map.sources.map((s) => path.resolve(dist, s)));
    for (const file of ['services/main.ts', 'services/rounds/submit.ts', 'shared/eventstore/postgres.ts']) expect(sources, file).toContain(path.join(ROOT, file));
  });
});
