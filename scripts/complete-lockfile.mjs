#!/usr/bin/env node
// npm here writes package-lock.json without registry addresses (omit-lockfile-registry-resolved), and
// the registry mirror only carries this platform's builds of native optional packages, so npm leaves
// the other platforms' optional packages out of the lock file, and `npm ci` then refuses it. This adds
// each missing one as an optional entry restricted to its os/cpu (read off its name), which npm skips on
// every other platform. Run it after `npm install` changes dependencies: `npm run lockfile`.
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const USAGE = `usage: npm run lockfile

Adds to package-lock.json, as optional entries restricted to their os and cpu, the other platforms'
builds of native optional packages that npm left out (npm ci refuses the lock file without them). Run it
after npm install changes dependencies. It writes the file only when it adds something.

  --help   this text

Exit status: 0 the lock file is complete (entries added, or none missing), 2 bad usage.`;
try {
  if (parseArgs({ options: { help: { type: 'boolean' } }, allowPositionals: false }).values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
} catch (err) {
  process.stderr.write(`lockfile: ${err.message}\n\n${USAGE}\n`);
  process.exit(2);
}

const file = new URL('../package-lock.json', import.meta.url);
const lock = JSON.parse(readFileSync(file, 'utf8'));
const platform = /-(darwin|linux|win32|freebsd|android|sunos|openbsd)-(x64|arm64|arm|ia32|ppc64|s390x|riscv64)$/;
const added = [];
for (const [path, entry] of Object.entries(lock.packages)) {
  for (const [name, range] of Object.entries(entry.optionalDependencies ?? {})) {
    const key = `${path ? `${path}/` : ''}node_modules/${name}`;
    const hoisted = `node_modules/${name}`;
    if (lock.packages[key] || lock.packages[hoisted]) continue;
    const m = platform.exec(name);
    const version = /^\d+\.\d+\.\d+/.exec(range)?.[0];
    if (!m || !version) continue;
    lock.packages[hoisted] = { version, cpu: [m[2]], optional: true, os: [m[1]] };
    added.push(`${name}@${version}`);
  }
}
const sorted = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a < b ? -1 : a > b ? 1 : 0)));
lock.packages = sorted;
if (added.length > 0) writeFileSync(file, `${JSON.stringify(lock, null, 2)}\n`);
console.log(added.length ? `added ${added.join(', ')}` : 'lock file already complete');
