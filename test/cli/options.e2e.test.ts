import { execFile, spawnSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../shared/db/migrations.ts';
import { createPool } from '../../shared/db/pool.ts';
import { allMigrations } from '../../services/migrations.ts';
import { childEnv, entryArgs, type Entry } from '../helpers/bundle.ts';
import { createTestDatabase, TEST_PG_ADMIN_URL, type TestDatabase } from '../helpers/db.ts';

/**
 * Issue #24: every command-line tool has --help (exit 0), refuses unknown options, stray words and bad
 * values with exit 2 and a message naming them, before doing any work; and never reports success for a
 * run that did nothing. (test:faults: test/faults/faults.e2e.test.ts.)
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
/** The tools npm runs from their bundle (package.json), run the same way here. */
const BUNDLED: Readonly<Record<string, Entry>> = { 'services/main.ts': 'main', 'services/audit/cli.ts': 'audit', 'services/conformance/cli.ts': 'conformance', 'services/sandbox/main.ts': 'sandbox' };
const nodeArgs = (file: string): string[] => {
  const entry = BUNDLED[file];
  if (entry) return entryArgs(entry);
  return file.endsWith('.ts') ? ['--import', 'tsx', file] : [file];
};
const run = (file: string, args: string[], env: Record<string, string> = {}) => {
  const r = spawnSync(process.execPath, [...nodeArgs(file), ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 60_000,
    // A Postgres nobody listens on: a tool that tried to do its work anyway would fail differently.
    env: childEnv({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/nothing', REDIS_URL: 'redis://127.0.0.1:1/0', LOG_LEVEL: 'silent', ...env }),
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
};

interface Tool {
  name: string;
  file: string;
  usage: string;
  bad: Array<[string[], string]>;
}

const TOOLS: Tool[] = [
  {
    // The service itself: neither "--help" nor a stray argument starts it (nothing listens on the
    // DATABASE_URL run gives, so a service that started would say so on stderr and keep retrying).
    name: 'start',
    file: 'services/main.ts',
    usage: 'usage: npm start',
    bad: [
      [['--bogus'], 'unknown option --bogus'],
      [['api'], "Unexpected argument 'api'"],
      [['--help=yes'], "Option '--help' does not take an argument"],
    ],
  },
  {
    name: 'audit',
    file: 'services/audit/cli.ts',
    usage: 'usage: npm run audit',
    bad: [
      [['verify', '--bogus'], 'audit: unknown option --bogus\n'],
      [['verify', 'everything'], "Unexpected argument 'everything'"],
      [['verify', '--projection'], "Option '--projection <value>' argument missing"],
      [['verify', '--projection', 'nope'], 'no projection named "nope"'],
      [['check'], 'unknown command "check"'],
      [[], 'a command is needed'],
      [['verify-chain', '--projection', 'rounds'], '--projection does not apply to verify-chain'],
      [['verify-chain', '--to', 'postgres'], '--to applies only to migrate-events'],
      [['verify', '--projection', 'rounds', '--projection', 'sessions'], '--projection given more than once'],
      [['migrate-events', '--to', ''], '--to must not be empty'],
      [['migrate-events', '--to='], '--to must not be empty'],
    ],
  },
  {
    name: 'build',
    file: 'scripts/build.mjs',
    usage: 'usage: npm run build',
    bad: [
      [['--bogus'], "Unknown option '--bogus'"],
      [['extra'], "Unexpected argument 'extra'"],
      [['--quiet=yes'], "Option '--quiet' does not take an argument"],
    ],
  },
  {
    name: 'screenshots',
    file: 'scripts/screenshots.ts',
    usage: 'usage: npm run screenshots',
    bad: [
      [['--bogus'], 'unknown option --bogus'],
      [['extra'], "Unexpected argument 'extra'"],
      [['--out'], "Option '--out <value>' argument missing"],
      [['--out', 'package.json'], '--out package.json: a file is there, not a folder'],
    ],
  },
  {
    name: 'conformance',
    file: 'services/conformance/cli.ts',
    usage: 'usage: npm run conformance',
    bad: [
      [['--wallet-url', 'http://127.0.0.1:1', '--operator-secret', 's', '--bogus'], 'unknown option --bogus'],
      [['--wallet-url', 'http://127.0.0.1:1', '--operator-secret', 's', 'extra'], "Unexpected argument 'extra'"],
      [['--wallet-url', 'http://127.0.0.1:1', '--operator-secret', 's', '--timeout-ms', 'abc'], '--timeout-ms must be a whole number'],
      [['--wallet-url', 'not a url', '--operator-secret', 's'], '--wallet-url is not a URL'],
      [['--operator-secret', 's'], '--wallet-url is required'],
    ],
  },
  {
    name: 'sandbox',
    file: 'services/sandbox/main.ts',
    usage: 'usage: npm run sandbox',
    bad: [
      [['--bogus'], 'unknown option --bogus'],
      [['exit'], "Unexpected argument 'exit'"],
      [['--against', 'http://a b', '--catalog', 'catalog.example.json'], '--against must be the service\'s http(s) URL'],
      [['--against', 'ftp://api:8080', '--catalog', 'catalog.example.json'], '--against must be the service\'s http(s) URL'],
    ],
  },
  {
    name: 'bench',
    file: 'test/bench/bench.ts',
    usage: 'usage: npm run bench',
    bad: [
      [['--bogus'], 'unknown option --bogus'],
      [['fast'], "Unexpected argument 'fast'"],
      [['--seconds', 'abc'], '--seconds must be a whole number'],
      [['--seconds', '0'], '--seconds must be a whole number'],
      [['--rates', '100,x'], '--rates must be'],
      [['--repeat', '-1'], "Option '--repeat' argument is ambiguous"],
      [['--repeat=-1'], '--repeat must be a whole number from 0 to 100'],
      [['--samples', '3'], '--samples applies only with --isolation'],
      [['--warm-up', '601'], '--warm-up must be a whole number from 0 to 600'],
      [['--chain', '--warm-up', '0'], '--warm-up does not apply to --chain'],
      [['--isolation', '--backlog', '1.5'], '--backlog must be a whole number'],
      [['--isolation', '--seconds', '3'], '--seconds does not apply to --isolation'],
      [['--isolation', '--reconciliation'], 'one at a time'],
      [['--events', '5000'], '--events applies only with --chain or --rebuild'],
      [['--rebuild', '--events', '10'], '--events must be a whole number from 1000'],
      [['--rebuild', '--seconds', '3'], '--seconds does not apply to --rebuild'],
      [['--rebuild', '--chain'], 'one at a time'],
      [['--soak', '--rates', '100,200'], '--soak runs at one offered rate'],
      [['--soak', '--repeat', '2'], '--repeat does not apply to --soak'],
      [['--floor', '--ledger-only'], '--floor is measured against the forwarder'],
      [['--pause-read-models', '--one-process'], '--pause-read-models pauses the worker and projector'],
      [['--soak', '--pause-read-models', '--one-process'], '--pause-read-models pauses the worker and projector'],
      [['--rebuild', '--pause-read-models'], '--pause-read-models does not apply to --rebuild'],
      [['--ab', '.', '--pause-read-models'], '--pause-read-models does not apply to --ab'],
      [['--soak', '--floor'], '--floor does not apply to --soak'],
      [['--reply-bytes', '4096'], '--reply-bytes applies only with --soak or --rebuild'],
      [['--chain', '--reply-bytes', '4096'], '--reply-bytes applies only with --soak or --rebuild'],
      [['--rebuild', '--reply-bytes', '63'], '--reply-bytes must be a whole number from 64 to 1048576'],
      [['--soak', '--reply-bytes', '63'], '--reply-bytes must be a whole number from 64 to 1048576'],
      [['--soak', '--reply-bytes', '1048577'], '--reply-bytes must be a whole number from 64 to 1048576'],
      [['--rebuild', '--floor'], '--floor does not apply to --rebuild'],
      [['--chain', '--events', 'x'], '--events must be a whole number'],
      [['--transactions', '5000'], '--transactions applies only with --reconciliation'],
      [['--reconciliation', '--transactions', '1999'], '--transactions must be a whole number from 2000'],
      [['--reconciliation', '--rates', '100'], '--rates does not apply to --reconciliation'],
      [['--ab', '/nonexistent/checkout'], '--ab /nonexistent/checkout: no package.json there'],
      [['--ab='], '--ab must not be empty'],
      [['--seconds', '5', '--seconds', '6'], '--seconds given more than once'],
      [['--ab', '.', '--floor'], '--floor does not apply to --ab'],
      [['--ab', '.', '--soak'], 'one at a time'],
      [['--ab', '.', '--repeat', '3'], '--repeat must be even with --ab'],
      [['--ab', '.', '--repeat', '0'], '--repeat must be a whole number from 2 to 100'],
    ],
  },
];

describe.each(TOOLS)('npm run $name options', ({ file, usage, bad }) => {
  it('--help prints the usage and exits 0', () => {
    const r = run(file, ['--help']);
    expect(r.stderr).toBe('');
    expect(r.stdout).toContain(usage);
    expect(r.code).toBe(0);
  });

  it.each(bad)('refuses %j with exit 2, naming it, before doing anything', (args, message) => {
    const r = run(file, [...args]);
    expect(r.stderr).toContain(message);
    expect(r.stderr).toContain(usage);
    expect(r.stdout).toBe('');
    expect(r.code).toBe(2);
  });
});

describe('npm run bench options beside its environment', () => {
  it('refuses --pause-read-models with BENCH_NO_BACKGROUND=1 (no worker and projector to pause), exit 2, before doing anything', () => {
    for (const args of [['--pause-read-models'], ['--soak', '--pause-read-models']]) {
      const r = run('test/bench/bench.ts', args, { BENCH_NO_BACKGROUND: '1' });
      expect(r.stderr, args.join(' ')).toContain('not with BENCH_NO_BACKGROUND=1');
      expect(r.stdout).toBe('');
      expect(r.code).toBe(2);
    }
  });
});

describe('npm run audit never creates a database, and never passes a history it did not check', () => {
  const exists = async (name: string) => {
    const admin = new pg.Client({ connectionString: TEST_PG_ADMIN_URL });
    await admin.connect();
    try {
      return (await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount === 1;
    } finally {
      await admin.end();
    }
  };
  const urlOf = (name: string) => {
    const url = new URL(TEST_PG_ADMIN_URL);
    url.pathname = `/${name}`;
    return url.toString();
  };
  let empty: TestDatabase;
  let migrated: TestDatabase;
  beforeAll(async () => {
    empty = await createTestDatabase('auditempty');
    migrated = await createTestDatabase('auditnohistory');
    const pool = createPool(migrated.url, 2);
    await migrate(pool, allMigrations);
    await pool.end();
  });
  afterAll(async () => {
    await empty?.drop();
    await migrated?.drop();
  });

  it.each(['verify', 'rebuild'])('%s against a database that does not exist: says so, exit 2, and the database still does not exist', async (command) => {
    const name = `t_audit_missing_${randomBytes(5).toString('hex')}`;
    const r = run('services/audit/cli.ts', [command], { DATABASE_URL: urlOf(name) });
    expect(r.stderr).toContain(`database "${name}" does not exist`);
    expect(r.stdout).not.toContain('matches');
    expect(r.code).toBe(2);
    expect(await exists(name)).toBe(false);
  });

  it('verify when Postgres cannot be reached: says so in a line, exit 2', () => {
    const r = run('services/audit/cli.ts', ['verify']);
    expect(r.stderr).toBe('audit: cannot connect to database "nothing" on 127.0.0.1:1: connect ECONNREFUSED 127.0.0.1:1\n');
    expect(r.code).toBe(2);
  });

  it('verify against a database that holds no ledger: says so, exit 2, and creates no table there', async () => {
    const r = run('services/audit/cli.ts', ['verify'], { DATABASE_URL: empty.url });
    expect(r.stderr).toContain('holds no ledger');
    expect(r.stdout).not.toContain('matches');
    expect(r.code).toBe(2);
    const c = new pg.Client({ connectionString: empty.url });
    await c.connect();
    const { rows } = await c.query(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'`);
    await c.end();
    expect(rows[0].n).toBe(0);
  });

  it("verify against a database whose schema_migrations is another tool's: holds no ledger, exit 2, and no table is created there", async () => {
    const foreign = await createTestDatabase('auditforeign');
    try {
      const c = new pg.Client({ connectionString: foreign.url });
      await c.connect();
      try {
        // As Rails or golang-migrate leave it: the same name, none of the service's migrations.
        await c.query('CREATE TABLE schema_migrations (version text PRIMARY KEY)');
        await c.query(`INSERT INTO schema_migrations VALUES ('20260101000000')`);
        const r = run('services/audit/cli.ts', ['verify'], { DATABASE_URL: foreign.url });
        expect(r.stderr).toContain('holds no ledger');
        expect(r.code).toBe(2);
        const { rows } = await c.query(`SELECT string_agg(tablename, ',') AS t FROM pg_tables WHERE schemaname = 'public'`);
        expect(rows[0].t).toBe('schema_migrations');
      } finally {
        await c.end();
      }
    } finally {
      await foreign.drop();
    }
  });

  it('verify of an empty history: nothing was verified, exit 2 (not "matches")', async () => {
    const r = run('services/audit/cli.ts', ['verify'], { DATABASE_URL: migrated.url });
    expect(r.stderr).toContain('the history is empty: nothing to verify');
    expect(r.stdout).not.toContain('matches');
    expect(r.code).toBe(2);
  });

  it('rebuild of an empty history: nothing was rebuilt, exit 2 (not "rebuilt from the history")', async () => {
    const r = run('services/audit/cli.ts', ['rebuild'], { DATABASE_URL: migrated.url });
    expect(r.stderr).toContain('the history is empty: nothing to rebuild');
    expect(r.stdout).not.toContain('rebuilt');
    expect(r.code).toBe(2);
  });
});

describe('scripts/verify-history.mjs reports nothing verified (exit 2) rather than a crash or success', () => {
  let server: Server;
  let url: string;
  /** What the stand-in answers each path with: a page of the history, or what no aggregator answers. */
  let answer: (path: string) => { status: number; body: string } = () => ({ status: 200, body: '{}' });
  const dir = mkdtempSync(path.join(tmpdir(), 'verify-history-'));
  const keyFile = path.join(dir, 'key.pem');
  writeFileSync(keyFile, generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }).toString());
  beforeAll(async () => {
    server = createServer((req, res) => {
      const { status, body } = answer(req.url ?? '');
      res.writeHead(status, { 'content-type': 'application/json' }).end(body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  });
  const verifyHistory = (...extra: string[]) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = execFile(process.execPath, ['scripts/verify-history.mjs', '--url', url, '--operator-id', 'op-1', '--public-key', keyFile, ...extra], {
        cwd: ROOT,
        env: childEnv({ OPERATOR_SECRET: 's' }),
      });
      let stdout = '';
      let stderr = '';
      child.stdout?.on('data', (d: Buffer) => (stdout += String(d)));
      child.stderr?.on('data', (d: Buffer) => (stderr += String(d)));
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });

  it('a server that answers 200 with what is not JSON, or JSON of another shape', async () => {
    answer = () => ({ status: 200, body: '<html>a login page</html>' });
    const html = await verifyHistory();
    expect(html.stderr).toContain('answered 200 with what is not JSON');
    expect(html.code).toBe(2);
    answer = () => ({ status: 200, body: '{"items":[]}' });
    const other = await verifyHistory();
    expect(other.stderr).toContain('without the list "checkpoints"');
    expect(other.code).toBe(2);
  });

  it('no events and no checkpoints: nothing to verify', async () => {
    answer = (p) => ({ status: 200, body: p.startsWith('/v1/operator/history/checkpoints') ? '{"checkpoints":[]}' : '{"events":[]}' });
    const r = await verifyHistory();
    expect(r.stderr).toContain('nothing to verify');
    expect(r.stdout).not.toContain('intact');
    expect(r.code).toBe(2);
  });

  it('a --save file that cannot be written: refused before anything is fetched', async () => {
    let asked = 0;
    answer = () => {
      asked++;
      return { status: 200, body: '{"checkpoints":[],"events":[]}' };
    };
    const r = await verifyHistory('--save', path.join(dir, 'no-such-dir', 'kept.json'));
    expect(r.stderr).toContain('--save');
    expect(r.stderr).toContain('cannot be written');
    expect(r.code).toBe(2);
    expect(asked).toBe(0);
  });
});

describe('npm run lockfile and npm run setup:browser options', () => {
  const sh = (cmd: string, args: string[]) => {
    const r = spawnSync(cmd, args, { cwd: ROOT, encoding: 'utf8', timeout: 60_000, env: childEnv() });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  };

  it('lockfile: --help prints the usage, a stray option is refused (exit 2); neither writes package-lock.json', () => {
    const lock = path.join(ROOT, 'package-lock.json');
    const before = statSync(lock).mtimeMs;
    const help = sh(process.execPath, ['scripts/complete-lockfile.mjs', '--help']);
    expect(help.stdout).toContain('usage: npm run lockfile');
    expect(help.code).toBe(0);
    const bad = sh(process.execPath, ['scripts/complete-lockfile.mjs', '--bogus']);
    expect(bad.stderr).toContain("Unknown option '--bogus'");
    expect(bad.code).toBe(2);
    expect(statSync(lock).mtimeMs).toBe(before);
  });

  it('setup:browser: --help prints the usage, a stray argument is refused (exit 2), before anything is installed', () => {
    const help = sh('bash', ['scripts/install-browser.sh', '--help']);
    expect(help.stdout).toContain('usage: npm run setup:browser');
    expect(help.code).toBe(0);
    const bad = sh('bash', ['scripts/install-browser.sh', '--bogus']);
    expect(bad.stderr).toContain('unexpected argument --bogus');
    expect(bad.code).toBe(2);
  });
});

describe('npm run sandbox -- --against, with a catalog the story cannot be played with', () => {
  it('says what the story needs and exits 2 at once, before waiting for the service or serving anything', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'sandbox-catalog-'));
    try {
      const file = path.join(dir, 'catalog.json');
      writeFileSync(file, '{}');
      // (Without the check it waited 120 s for /readyz: run's 60 s timeout would end it, with no exit code.)
      const r = run('services/sandbox/main.ts', ['--against', 'http://127.0.0.1:1', '--catalog', file, '--exit'], { ADMIN_TOKEN: 'admin-token-of-the-stack' });
      expect(r.stderr).toContain('the story needs a catalog with a provider that has a game, two operators and an active campaign');
      expect(r.code).toBe(2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
