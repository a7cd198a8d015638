#!/usr/bin/env node
// npm run build: the service and its command-line tools, each bundled with its dependencies into one
// file of dist/ by esbuild (the compiler tsx itself runs on every file), which `npm start`, the other npm
// scripts, the image and the tests run. Node then loads one file instead of resolving, reading and
// translating about a thousand modules through tsx's loader: figures in docs/operations.md, "Starting".
//
// The code is the same code: esbuild transforms each TypeScript file as tsx does and only puts them in
// one file. What would differ is where a module is: import.meta.url, .dirname and .filename of the
// project's own files are given their source file's place (found from where the bundle lies, dist/ beside
// the sources), so the files they find beside them (the console's pages, the sandbox's catalog,
// package.json) are found as when the sources run. pino stays outside the bundle: its pretty transport
// starts a worker thread from its own files. (One package behaves differently: msgpackr, which bullmq
// uses only to pack, finds no native add-on from a bundle and packs in JavaScript.)
//
// A build is skipped when its inputs (every file esbuild read, this script, tsconfig.json, the installed
// packages' lock) hold what they held at the last build: `npm start` then costs reading some thousand
// files (about 10 MB) and hashing them, not a build. By content, not by time: a release copied with its
// files' times kept (rsync -a, tar) may bring files older than the last build.
import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';

const ROOT = path.resolve(import.meta.dirname, '..');
const DIST = path.join(ROOT, 'dist');
/** What the last build read, and a digest of it (see upToDate). */
const RECORD = path.join(DIST, '.build.json');

/** What the bundles are: npm scripts and the image run dist/<name>.mjs. */
const ENTRIES = {
  main: 'services/main.ts',
  audit: 'services/audit/cli.ts',
  sandbox: 'services/sandbox/main.ts',
  conformance: 'services/conformance/cli.ts',
};
/** Inputs the metafile does not list but a build depends on: this script, the compiler's settings, and what npm installed. */
const ALSO_INPUTS = ['scripts/build.mjs', 'tsconfig.json', 'package.json', 'package-lock.json', 'node_modules/.package-lock.json'];

const USAGE = `usage: npm run build [-- --force] [--quiet]

Bundles the service (main) and its tools (audit, sandbox, conformance) into dist/<name>.mjs, each with
its source map, unless no input changed since the last build. npm start and the other npm scripts run
it first.

  --force     build even if dist/ is up to date
  --quiet     print nothing when it succeeds
  -h, --help  this text`;

const IMPORT_META = /\bimport\.meta\.(url|dirname|filename)\b/g;

/**
 * The project's own TypeScript, with import.meta pointing where the file is in the project. Only those
 * three properties are given; any other use of import.meta in the project's code stops the build, rather
 * than point at dist/ without a word.
 */
const sourceLocations = {
  name: 'source-locations',
  setup(build) {
    build.onLoad({ filter: /\.[cm]?[jt]s$/ }, async (args) => {
      if (args.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined;
      const source = await readFile(args.path, 'utf8');
      if (!source.includes('import.meta')) return undefined;
      const file = path.relative(ROOT, args.path).split(path.sep).join('/');
      const contents = source.replace(IMPORT_META, (_m, prop) =>
        prop === 'url' ? `__sourceUrl(${JSON.stringify(file)})` : `__sourcePath(${JSON.stringify(prop === 'dirname' ? path.posix.dirname(file) : file)})`,
      );
      const left = contents.indexOf('import.meta');
      if (left >= 0) {
        const line = contents.slice(0, left).split('\n').length;
        return { errors: [{ text: `only import.meta.url, .dirname and .filename are given their source's place in a bundle (${file}:${line})` }] };
      }
      return { contents, loader: path.extname(args.path).includes('t') ? 'ts' : 'js' };
    });
  },
};

/** A digest of the files' names and contents (undefined if one of them cannot be read). */
async function digestOf(files) {
  const sorted = [...new Set(files)].sort();
  const contents = await Promise.all(sorted.map((f) => readFile(path.join(ROOT, f)).catch(() => undefined)));
  if (contents.some((c) => c === undefined)) return undefined;
  const digest = createHash('sha256');
  sorted.forEach((f, i) => digest.update(`${f}\0`).update(createHash('sha256').update(contents[i]).digest()));
  return digest.digest('hex');
}

/** Whether dist/ holds every bundle, built from inputs that still hold what they held then. */
async function upToDate() {
  let record;
  try {
    record = JSON.parse(await readFile(RECORD, 'utf8'));
  } catch {
    return false;
  }
  if (typeof record?.digest !== 'string' || !Array.isArray(record.inputs) || JSON.stringify(record.entries) !== JSON.stringify(ENTRIES)) return false;
  const outputs = await Promise.all(Object.keys(ENTRIES).map((name) => stat(path.join(DIST, `${name}.mjs`)).then(() => true, () => false)));
  return outputs.every(Boolean) && (await digestOf([...record.inputs, ...ALSO_INPUTS])) === record.digest;
}

/** Builds every entry into dist/. Each file is written beside its place and renamed into it, so a process starting meanwhile reads a whole one. */
async function build() {
  const startedAt = Date.now();
  // Loaded only to build (an up-to-date dist/ is the usual case of npm start).
  const esbuild = await import('esbuild');
  const result = await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: ENTRIES,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node24',
    outdir: DIST,
    outExtension: { '.js': '.mjs' },
    external: ['pino', 'pino-pretty'],
    // For whoever reads a CPU profile, or debugs with node --enable-source-maps (which the scripts do
    // not pass: the first stack trace Node maps decodes the whole map, 0.25 s and some 100 MB).
    sourcemap: 'linked',
    sourcesContent: false,
    metafile: true,
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
  for (const warning of await esbuild.formatMessages(result.warnings, { kind: 'warning' })) process.stderr.write(warning);
  await mkdir(DIST, { recursive: true });
  const suffix = `.${process.pid}.${startedAt}.tmp`;
  const outputs = result.outputFiles;
  try {
    await Promise.all(outputs.map((f) => writeFile(f.path + suffix, f.contents)));
    await Promise.all(outputs.map((f) => rename(f.path + suffix, f.path)));
  } catch (err) {
    await Promise.all(outputs.map((f) => rm(f.path + suffix, { force: true })));
    throw err;
  }
  const inputs = Object.keys(result.metafile.inputs).filter((f) => !f.includes(':'));
  // Read after the build: an input saved while esbuild ran (its time from startedAt on) may differ from
  // what went into the bundle, so the record then matches nothing and the next run builds again.
  const sources = [...inputs, ...ALSO_INPUTS];
  const times = await Promise.all(sources.map((f) => stat(path.join(ROOT, f)).then((st) => st.mtimeMs, () => Infinity)));
  const digest = times.every((t) => t < startedAt) ? await digestOf(sources) : null;
  await writeFile(RECORD + suffix, JSON.stringify({ entries: ENTRIES, inputs, digest }));
  await rename(RECORD + suffix, RECORD);
  return outputs.map((f) => f.path).filter((p) => p.endsWith('.mjs'));
}

let values;
try {
  ({ values } = parseArgs({ options: { force: { type: 'boolean' }, quiet: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } }, strict: true, allowPositionals: false }));
} catch (err) {
  process.stderr.write(`${err.message}\n${USAGE}\n`);
  process.exit(2);
}
if (values.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
try {
  if (!values.force && (await upToDate())) {
    if (!values.quiet) process.stdout.write('dist/ is up to date: nothing it is built from changed since its last build\n');
  } else {
    const files = await build();
    if (!values.quiet) process.stdout.write(`built ${files.map((f) => path.relative(process.cwd(), f)).join(', ')}\n`);
  }
} catch (err) {
  process.stderr.write(`npm run build failed: ${err.message}\n`);
  process.exit(1);
}
