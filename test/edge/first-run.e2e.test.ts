import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../shared/config.ts';
import { createLogger } from '../../shared/logger.ts';
import { startService, StartupError, type RunningService } from '../../services/service.ts';
import { entryArgs } from '../helpers/bundle.ts';
import { OP1, testCatalog } from '../helpers/catalog.ts';
import { createTestEnv, type TestEnv } from '../helpers/service.ts';
import { signedRequest } from '../helpers/signing.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

interface Line {
  level: number;
  msg: string;
  refusal?: string;
  res?: { statusCode: number };
}

/** A logger whose lines the test reads. */
function capture(level = 'info') {
  const lines: Line[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l) as Line);
      done();
    },
  });
  return { lines, logger: createLogger(level, {}, sink) };
}

const connects = (host: string, port: number) =>
  new Promise<boolean>((resolve) => {
    const s = net.connect({ host, port }, () => {
      s.destroy();
      resolve(true);
    });
    s.on('error', () => resolve(false));
  });

const freePort = () =>
  new Promise<number>((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });

describe('a first run that explains itself', () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await createTestEnv('firstrun');
  });
  afterAll(async () => env?.cleanup());

  const start = async (extra: Record<string, string>, level = 'info') => {
    const { lines, logger } = capture(level);
    const config = loadConfig(env.env({ ROLES: 'api', ...extra }));
    const svc = await startService(config, logger);
    return { svc, lines, port: Number(new URL(svc.url!).port) };
  };
  const stopping = async (svc: RunningService, fn: () => Promise<void>) => {
    try {
      await fn();
    } finally {
      await svc.stop();
    }
  };

  it('listens on loopback only unless HOST says otherwise', async () => {
    const local = await start({});
    await stopping(local.svc, async () => {
      expect(await connects('127.0.0.1', local.port)).toBe(true);
      // Another address of this machine (127.0.0.2 is loopback too, but not the address bound).
      expect(await connects('127.0.0.2', local.port)).toBe(false);
    });
    const all = await start({ HOST: '0.0.0.0' });
    await stopping(all.svc, async () => {
      expect(await connects('127.0.0.2', all.port)).toBe(true);
    });
    expect(() => loadConfig({ HOST: 'everywhere' })).toThrow(/HOST: expected an IP address/);
  });

  it('warns at start when no operator is loaded or ADMIN_TOKEN is unset, saying what to do', async () => {
    const bare = await start({ ADMIN_TOKEN: '' });
    await stopping(bare.svc, async () => {
      const warnings = bare.lines.filter((l) => l.level === 40).map((l) => l.msg);
      expect(warnings).toContainEqual(expect.stringMatching(/^no operator in the catalog yet: .*CATALOG_FILE=catalog.example.json.*PUT \/v1\/admin\/catalog/));
      expect(warnings).toContainEqual(expect.stringMatching(/^ADMIN_TOKEN is not set: .*Set ADMIN_TOKEN/));
    });
    const ready = await start({});
    await stopping(ready.svc, async () => {
      // The catalog is now in this database (ready.svc applied nothing; apply it, then start another).
      await ready.svc.ctx.catalog.apply(testCatalog());
    });
    const loaded = await start({});
    await stopping(loaded.svc, async () => {
      expect(loaded.lines.filter((l) => l.level === 40)).toEqual([]);
    });
  });

  it("logs why each 401 was refused, and tells the caller nothing more than 'invalid signature'", async () => {
    const { svc, lines } = await start({}, 'warn');
    await stopping(svc, async () => {
      await svc.ctx.catalog.apply(testCatalog());
      const cases: Array<[Parameters<typeof signedRequest>[1], RegExp]> = [
        [{ path: '/v1/operator/probe', as: { ...OP1, id: 'op-nobody' } }, /^unknown operator "op-nobody"$/],
        [{ path: '/v1/operator/probe', as: OP1, timestamp: Math.floor(Date.now() / 1000) - 1000 }, /^x-timestamp is 100[01] s behind this server's clock \(window 300 s\)$/],
        [{ path: '/v1/operator/probe', as: { ...OP1, secret: 'wrong' } }, /^signature does not match GET \/v1\/operator\/probe with this operator's secret$/],
        [{ path: '/v1/operator/probe', as: OP1, headers: { 'x-signature': undefined, 'x-timestamp': undefined } }, /^missing header x-timestamp, x-signature$/],
      ];
      for (const [request, reason] of cases) {
        const before = lines.length;
        const res = await signedRequest(svc.url!, request);
        expect(res.status).toBe(401);
        expect(res.text).toBe('invalid signature');
        const deadline = Date.now() + 5000;
        while (!lines.slice(before).some((l) => l.res?.statusCode === 401) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
        const line = lines.slice(before).find((l) => l.res?.statusCode === 401);
        expect(line?.refusal).toMatch(reason);
      }
    });
  });

  it('says at once when Postgres refuses the credentials, instead of retrying for 30 s', async () => {
    const url = new URL(env.db.url);
    url.username = 'no_such_role_here';
    const { logger } = capture();
    const started = Date.now();
    const failure = await startService(loadConfig(env.env({ ROLES: 'api', DATABASE_URL: url.toString() })), logger).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failure).toBeInstanceOf(StartupError);
    expect((failure as Error).message).toMatch(/Postgres refused: .*no_such_role_here.*DATABASE_URL/);
    expect(Date.now() - started).toBeLessThan(10_000); // not the 30 one-second retries of a server still starting
  });
});

describe('signals to npm start and npm run sandbox', () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await createTestEnv('signals');
  });
  afterAll(async () => env?.cleanup());

  it.each([
    ['start', 'SIGTERM', /"msg":"service started"/],
    ['start', 'SIGINT', /"msg":"service started"/],
    ['sandbox', 'SIGTERM', /Seamless-wallet sandbox/],
    ['sandbox', 'SIGINT', /Seamless-wallet sandbox/],
  ] as const)('npm %s stops cleanly on %s sent to the npm process, leaving nothing listening', async (script, signal, started) => {
    const port = await freePort();
    const npm = spawn('npm', script === 'start' ? ['start'] : ['run', 'sandbox'], {
      cwd: ROOT,
      env: { ...process.env, ...env.env({ PORT: String(port), LOG_LEVEL: 'info', ...(script === 'start' ? { ROLES: 'api' } : {}) }) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    npm.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    npm.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => npm.once('exit', (code) => resolve(code)));
    const deadline = Date.now() + 30_000;
    while (!started.test(out) && Date.now() < deadline && npm.exitCode === null) await new Promise((r) => setTimeout(r, 50));
    expect(out).toMatch(started);
    expect(await connects('127.0.0.1', port)).toBe(true);
    npm.kill(signal);
    const code = await Promise.race([exited, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 20_000))]);
    expect(code, out.slice(-2000)).not.toBe('hung');
    // The server itself is gone, not orphaned: nothing answers on its port any more.
    expect(await connects('127.0.0.1', port)).toBe(false);
    expect(out).toMatch(script === 'start' ? /"msg":"stopped"/ : new RegExp(`${signal}: stopping the sandbox`));
  }, 60_000);
});

describe('the log on a terminal', () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await createTestEnv('tty');
  });
  afterAll(async () => env?.cleanup());

  it('is pretty-printed for a person when stdout is a terminal, JSON otherwise', async () => {
    const run = async (tty: boolean) => {
      const port = await freePort();
      // As npm start runs it: the service's bundle (test/helpers/bundle.ts).
      const cmd = [process.execPath, ...entryArgs('main')].map((w) => JSON.stringify(w)).join(' ');
      // script(1) gives the service a pseudo-terminal as stdout, as a person's shell does.
      const child = tty ? spawn('script', ['-qfec', cmd, '/dev/null'], { cwd: ROOT, env: { ...process.env, ...env.env({ ROLES: 'api', PORT: String(port), LOG_LEVEL: 'info' }) } }) : spawn(process.execPath, entryArgs('main'), { cwd: ROOT, env: { ...process.env, ...env.env({ ROLES: 'api', PORT: String(port), LOG_LEVEL: 'info' }) } });
      let out = '';
      child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      const deadline = Date.now() + 30_000;
      while (!/service started/.test(out) && Date.now() < deadline && child.exitCode === null) await new Promise((r) => setTimeout(r, 50));
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      return out.split('\n').find((l) => l.includes('service started')) ?? out;
    };
    const pretty = await run(true);
    expect(pretty).toMatch(/INFO.*service started/);
    expect(pretty).not.toMatch(/^\{"level"/);
    const json = await run(false);
    expect(JSON.parse(json)).toMatchObject({ level: 30, msg: 'service started' });
  }, 60_000);
});
