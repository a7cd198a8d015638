#!/usr/bin/env node
// npm run build: the service and its command-line tools, each bundled with its dependencies into one
// file of dist/ by esbuild (the compiler tsx itself runs on every file), which `npm start`, the other npm
// scripts, the image and the tests run. Node then loads one file instead of resolving, reading and
// translating some thousand modules through tsx's loader: a service process is ready in about 0.5 s
// instead of 1.2-1.6, at about 110 MB of memory instead of 150-160, with 0.5-0.6 s of CPU instead of
// 1.6-1.9 (docs/operations.md, "Starting").
//
// The code is the same code: esbuild transforms each TypeScript file as tsx does and only puts them in
// one file. What would differ is where a module is: import.meta.url and import.meta.dirname of the
// project's own files are given their source file's location (computed from where the bundle lies), so
// the files they find beside them (the console's pages, the sandbox's catalog, package.json) are found
// as when the sources run. pino stays outside the bundle: its pretty transport starts a worker thread
// from its own files.
import * as esbuild from 'esbuild';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';

const ROOT = path.resolve(import.meta.dirname, '..');

/** What the bundles are: npm scripts and the image run dist/<name>.mjs. */
export const ENTRIES = {
  main: 'services/main.ts',
  audit: 'services/audit/cli.ts',
  sandbox: 'services/sandbox/main.ts',
  conformance: 'services/conformance/cli.ts',
};

const USAGE = `usage: npm run build [-- --quiet]

Bundles the service (main) and its tools (audit, sandbox, conformance) into dist/<name>.mjs, each with
its source map. npm start and the other npm scripts run it first.

  --quiet     print nothing when it succeeds
  -h, --help  this text`;

/** The project's own TypeScript, with import.meta pointing where the file is in the project. */
const sourceLocations = {
  name: 'source-locations',
  setup(build) {
    build.onLoad({ filter: /\.ts$/ }, async (args) => {
      if (args.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined;
      let contents = await readFile(args.path, 'utf8');
      if (contents.includes('import.meta.')) {
        const file = path.relative(ROOT, args.path).split(path.sep).join('/');
        contents = contents
          .replaceAll('import.meta.dirname', `__sourcePath(${JSON.stringify(path.posix.dirname(file))})`)
          .replaceAll('import.meta.filename', `__sourcePath(${JSON.stringify(file)})`)
          .replaceAll('import.meta.url', `__sourceUrl(${JSON.stringify(file)})`);
      }
      return { contents, loader: 'ts' };
    });
  },
};

/**
 * Builds every entry into dist/, beside node_modules (the packages left outside are found from there).
 * Each file is written beside its place and renamed into it, so a process starting meanwhile reads a
 * whole one.
 */
export async function build() {
  const dir = path.join(ROOT, 'dist');
  const result = await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: ENTRIES,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    outdir: dir,
    outExtension: { '.js': '.mjs' },
    external: ['pino', 'pino-pretty'],
    // For whoever reads a CPU profile, or debugs with node --enable-source-maps (which the scripts do
    // not pass: the first stack trace Node maps decodes the whole map, 0.25 s and some 100 MB).
    sourcemap: 'linked',
    sourcesContent: false,
    plugins: [sourceLocations],
    // Modules written for CommonJS call require(); the project's files ask where they are (above).
    banner: {
      js: [
        `import { createRequire as __createRequire } from 'node:module';`,
        `import { fileURLToPath as __fileURLToPath, pathToFileURL as __pathToFileURL } from 'node:url';`,
        `import __nodePath from 'node:path';`,
        `const require = __createRequire(import.meta.url);`,
        `const __projectRoot = __nodePath.dirname(__nodePath.dirname(__fileURLToPath(import.meta.url)));`,
        `const __sourcePath = (file) => __nodePath.join(__projectRoot, file);`,
        `const __sourceUrl = (file) => __pathToFileURL(__sourcePath(file)).href;`,
      ].join('\n'),
    },
    write: false,
    logLevel: 'silent',
  });
  await mkdir(dir, { recursive: true });
  const suffix = `.${process.pid}.tmp`;
  await Promise.all(result.outputFiles.map((f) => writeFile(f.path + suffix, f.contents)));
  await Promise.all(result.outputFiles.map((f) => rename(f.path + suffix, f.path)));
  return result.outputFiles.map((f) => f.path).filter((p) => p.endsWith('.mjs'));
}

async function main() {
  let values;
  try {
    ({ values } = parseArgs({ options: { quiet: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } }, strict: true, allowPositionals: false }));
  } catch (err) {
    process.stderr.write(`${err.message}\n${USAGE}\n`);
    process.exit(2);
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  try {
    const files = await build();
    if (!values.quiet) process.stdout.write(`built ${files.map((f) => path.relative(process.cwd(), f)).join(', ')}\n`);
  } catch (err) {
    process.stderr.write(`build failed: ${err.message}\n`);
    process.exit(1);
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === import.meta.filename) await main();
