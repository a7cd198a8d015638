import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoProvider, type DemoProvider } from '../../services/sandbox/demo-provider.ts';
import { signedCall } from '../../shared/http/outbound.ts';
import { sign } from '../../shared/http/signature.ts';
import type { CatalogInput } from '../../shared/catalog/schema.ts';
import { ADMIN_TOKEN, createTestEnv, startInProcess, writeCatalogFile, type TestEnv } from '../helpers/service.ts';
import { childEnv, entryArgs } from '../helpers/bundle.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** Runs the sandbox as `npm run sandbox` does (its bundle), and resolves with its exit code and output. */
function runSandbox(args: string[], env: Record<string, string>, timeoutMs = 50_000): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, [...entryArgs('sandbox'), ...args], {
    cwd: ROOT,
    env: childEnv({ HOME: process.env.HOME ?? '/tmp', ...env }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const killer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  return new Promise((resolve) =>
    child.once('exit', (code) => {
      clearTimeout(killer);
      resolve({ code, out });
    }),
  );
}

describe('npm run sandbox', () => {
  let env: TestEnv;
  let run: { code: number | null; out: string };
  beforeAll(async () => {
    env = await createTestEnv('sandbox');
    // Something already in the given database and Redis db, which the sandbox must leave alone.
    const db = new pg.Client({ connectionString: env.db.url });
    await db.connect();
    await db.query('CREATE TABLE keep_me (id int)');
    await db.end();
    const redis = new Redis(env.redis.url);
    await redis.set('keep-me', '1');
    redis.disconnect();
    run = await runSandbox(['--exit'], { DATABASE_URL: env.db.url, REDIS_URL: env.redis.url, PORT: '0', EVENT_STORE: env.env().EVENT_STORE ?? 'postgres' });
  }, 60_000);
  afterAll(async () => env?.cleanup());

  it('plays the whole story and exits 0 when every step behaved as expected', () => {
    expect(run.code, run.out).toBe(0);
    expect(run.out).not.toMatch(/^\s+FAIL\b/m);
    expect(run.out).toMatch(/^Story complete: 14 steps, \d+ checks, all as expected\.$/m);
  });

  it('reports each step with what was sent and what came back', () => {
    const steps = [...run.out.matchAll(/^\[(\d+)\] (.*)$/gm)].map((m) => m[2]);
    expect(steps).toEqual([
      expect.stringContaining('loads the demo catalog'),
      expect.stringContaining('list their games'),
      expect.stringContaining('launches demo-fruit'),
      expect.stringContaining('reads the balance'),
      expect.stringContaining('BET 500, then WIN 1200'),
      expect.stringContaining('jackpot'),
      expect.stringContaining('ROLLBACK'),
      expect.stringContaining('round left open'),
      expect.stringContaining('Free spins'),
      expect.stringContaining('replay link'),
      expect.stringContaining('kicks'),
      expect.stringContaining('reconciler force-closes'),
      'Balances add up',
      expect.stringContaining('reconciles: its transactions and a settlement statement'),
    ]);
    const out = run.out;
    // Statuses and balances from the demo wallet (it funds a new player with 100000).
    expect(out).toMatch(/BET 500 {2}-> {2}200 \{"status":"OK","balance":99500\}/);
    expect(out).toMatch(/wallet demo-casino\/ana-\w+: 99500 -> 100700/);
    expect(out).toMatch(/launch for blocked-player {2}-> {2}403/);
    expect(out).toMatch(/BET 100 on the completed round {2}-> {2}409/);
    expect(out).toMatch(/ROLLBACK of \w+-bet-3 {2}-> {2}200/);
    expect(out).toMatch(/issue grant, key \S+ {2}-> {2}201 grant [0-9a-f-]{36} active, externalRef fs-/);
    expect(out).toMatch(/received POST \/v1\/free-spins\/grants: 5 spins of 20 EUR/);
    expect(out).toMatch(/replay round-\w+-1 {2}-> {2}200 \{"replayUrl":"https:\/\/replay\.demo-studio\.test\/fruit\?token=/);
    expect(out).toMatch(/other-casino {2}replay round-\w+-1 {2}-> {2}404/);
    expect(out).toMatch(/kick {2}-> {2}200 \{"revokedCount":1\}/);
    expect(out).toMatch(/received POST \/v1\/sessions\/revoke: yes/);
    expect(out).toMatch(/BET 100 with the kicked session {2}-> {2}401 \{"error":"invalid session"\}/);
    expect(out).toMatch(/wallet received ROLLBACK stale-rollback:\w+-bet-4: OK/);
    expect(out).toMatch(/started with 100000, \d+ wallet movements, net \+25650, balance 125650/);
  });

  it('ends with the operator\'s settlement statement of the story\'s own traffic, equal to what the story sent and saw', () => {
    const last = run.out.slice(run.out.search(/^\[14\] /m));
    expect(last).toMatch(/^\[14\] /);
    // The transactions list, polled until the read model had caught up: the story's 10 applied transactions.
    expect(last).toMatch(/GET \/v1\/operator\/transactions\?from=\S+Z&to=\S+Z {2}-> {2}200 10 transaction\(s\) in 1 page\(s\)/);
    expect(last).toMatch(/^ {6}[\d:.]+ {2}ROLLBACK +400 EUR {2}applied +round-\w+-4 +stale-rollback:\w+-bet-4$/m);
    // The statement over [story start, just after its last transaction), printed, and its figures checked.
    const interval = /GET \/v1\/operator\/reports\/settlement\?from=(\S+)&to=(\S+) {2}-> {2}200 a statement of 1 line\(s\)/.exec(last);
    expect(interval, last).not.toBeNull();
    expect(Date.parse(interval![1]!)).toBeLessThan(Date.parse(interval![2]!));
    const figures = 'bets 5 \\(1400\\), wins 3 \\(26350\\), refunds 2 \\(700\\), GGR -25650';
    expect(last).toMatch(new RegExp(`^ {6}line {9}demo-studio/demo-fruit EUR: ${figures}$`, 'm'));
    expect(last).toMatch(/^ {6}unsettled {4}none$/m);
    expect(last).toMatch(/^ {6}adjustments {2}none$/m);
    expect(last).toMatch(new RegExp(`^ {6}totals {7}EUR: ${figures}$`, 'm'));
    expect(last).toMatch(new RegExp(`the story's own tally: ${figures}$`, 'm'));
    for (const ok of [
      'the list shows all 10 transactions the story saw applied, as applied',
      'and nothing else: no other transaction of the operator in the interval',
      'one line, demo-studio/demo-fruit EUR, whose bets, wins and refunds are the BETs, WINs and ROLLBACKs the story saw applied',
      'the totals equal them: GGR = bets - wins - refunds = -25650',
      'the operator\'s GGR is what ana-',
      'nothing unsettled (pending, failed or dead) and no adjustments',
      'as CSV: a header row and the same line',
    ]) {
      expect(last).toContain(`    ok    ${ok}`);
    }
    expect(last).toContain('      demo-studio,demo-fruit,EUR,5,1400,3,26350,2,700,-25650\n');
  });

  it('then says where to look, with commands ready to paste, for a sandbox left running (this one, run with --exit, stops)', () => {
    expect(run.out).toMatch(/^Where to look next, in a sandbox left running \(npm run sandbox, without --exit: this one stops now\)$/m);
    const url = /^ {2}service +(http:\/\/127\.0\.0\.1:\d+)/m.exec(run.out)?.[1];
    expect(url).toBeDefined();
    expect(run.out).toContain(`${url}/docs`);
    expect(run.out).toContain(`${url}/openapi.json`);
    expect(run.out).toMatch(new RegExp(`curl -s -H "Authorization: Bearer \\$ADMIN_TOKEN" ${url}/metrics`));
    expect(run.out).toMatch(new RegExp(`'${url}/v1/audit/rounds/demo-studio/demo-casino/round-\\w+-1'`));
    expect(run.out).toContain(`'${url}/v1/audit/events?limit=50'`);
    expect(run.out).toMatch(/^ {4}scripts\/signed-curl\.sh GET '\/v1\/operator\/reports\/settlement\?from=\S+Z&to=\S+Z' -H 'Accept: text\/csv'$/m);
    expect(run.out).toMatch(/^ {2}export ADMIN_TOKEN=sandbox-[0-9a-f]+$/m);
  });

  it('used the given DATABASE_URL and REDIS_URL as they were, without emptying them', async () => {
    const db = new pg.Client({ connectionString: env.db.url });
    await db.connect();
    try {
      expect((await db.query(`SELECT to_regclass('keep_me') IS NOT NULL AS kept`)).rows[0]).toEqual({ kept: true });
      // The story's history is in this database.
      const { rows } = await db.query<{ n: string }>(`SELECT count(*) AS n FROM rm_rounds WHERE operator_id = 'demo-casino'`);
      expect(Number(rows[0]!.n)).toBeGreaterThanOrEqual(5);
    } finally {
      await db.end();
    }
    const redis = new Redis(env.redis.url);
    expect(await redis.get('keep-me')).toBe('1');
    redis.disconnect();
    expect(run.out).toContain('(from DATABASE_URL, left as it was)');
  });

  it('refuses an unknown option with exit 2', async () => {
    const bad = await runSandbox(['--bogus'], { DATABASE_URL: env.db.url, REDIS_URL: env.redis.url, PORT: '0' });
    expect(bad.code).toBe(2);
    expect(bad.out).toContain('usage: npm run sandbox');
  });
});

describe('the demo provider', () => {
  const secret = 'demo-studio-secret';
  let provider: DemoProvider;
  beforeAll(async () => {
    provider = await startDemoProvider({ providerId: 'demo-studio', secret });
  });
  afterAll(async () => provider?.close());

  const grant = { requestRef: '0b6f3c1e-2d4a-5b6c-8d7e-9f0a1b2c3d4e', operatorId: 'demo-casino', playerRef: 'p1', gameId: 'demo-fruit', spins: 5, betAmountMinor: 20, currency: 'EUR' };
  const send = (headers: Record<string, string>, body: string) =>
    fetch(`${provider.url}/v1/free-spins/grants`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });

  it('refuses calls that are not signed with its secret over what was sent', async () => {
    const grantsBefore = provider.grants().length;
    // Signed as the service signs, but with another secret.
    const wrongSecret = await signedCall({ baseUrl: provider.url, pathAndQuery: '/v1/free-spins/grants', method: 'POST', body: grant, secret: 'not-the-secret', timeoutMs: 2000 });
    expect(wrongSecret).toMatchObject({ kind: 'response', status: 401, body: 'invalid signature' });

    // A correctly signed request whose body is changed on the way.
    const ts = String(Math.floor(Date.now() / 1000));
    const body = JSON.stringify(grant);
    const headers = { 'x-timestamp': ts, 'x-nonce': 'n-tamper-1', 'x-signature': sign(secret, { timestamp: ts, nonce: 'n-tamper-1', method: 'POST', target: '/v1/free-spins/grants', body }) };
    const tampered = await send(headers, body.replace('"spins":5', '"spins":500'));
    expect(tampered.status).toBe(401);
    expect(tampered.headers.get('content-type')).toContain('text/plain');
    expect(await tampered.text()).toBe('invalid signature');

    // An old timestamp, correctly signed.
    const old = String(Math.floor(Date.now() / 1000) - 3600);
    const stale = await send({ 'x-timestamp': old, 'x-nonce': 'n-old-1', 'x-signature': sign(secret, { timestamp: old, nonce: 'n-old-1', method: 'POST', target: '/v1/free-spins/grants', body }) }, body);
    expect(stale.status).toBe(401);

    const noNonce = await send({ 'x-timestamp': ts, 'x-signature': headers['x-signature'] }, body);
    expect(noNonce.status).toBe(400);
    expect(await noNonce.json()).toEqual({ error: 'invalid nonce' });

    expect(provider.grants().length).toBe(grantsBefore);
    expect(provider.received().slice(-4).map((c) => c.status)).toEqual([401, 401, 401, 400]);

    // The untampered request is accepted once; the same nonce again is a replay.
    const accepted = await send(headers, body);
    expect(accepted.status).toBe(200);
    expect((await accepted.json()) as unknown).toEqual({ externalRef: expect.stringMatching(/^fs-/) });
    const replayed = await send(headers, body);
    expect(replayed.status).toBe(401);
    expect(await replayed.json()).toEqual({ error: 'replayed request' });
    expect(provider.grants().map((g) => g.requestRef)).toEqual([grant.requestRef]);
  });

  it('answers a repeated requestRef with the same externalRef, and cancels by externalRef', async () => {
    const call = (pathAndQuery: string, body: unknown) => signedCall({ baseUrl: provider.url, pathAndQuery, method: 'POST', body, secret, timeoutMs: 2000 });
    const first = await call('/v1/free-spins/grants', grant);
    const again = await call('/v1/free-spins/grants', grant);
    expect(first.kind === 'response' && again.kind === 'response' && first.body === again.body).toBe(true);
    const externalRef = (JSON.parse((first as { body: string }).body) as { externalRef: string }).externalRef;
    expect(await call(`/v1/free-spins/grants/${externalRef}/cancel`, { requestRef: '1c7d4e2f-3e5b-4c7d-9e8f-0a1b2c3d4e5f' })).toMatchObject({ status: 404 });
    expect(await call(`/v1/free-spins/grants/${externalRef}/cancel`, { requestRef: grant.requestRef })).toMatchObject({ status: 200 });
    expect(provider.grants().find((g) => g.externalRef === externalRef)?.status).toBe('cancelled');
  });
});

/**
 * `docker compose run sandbox` (#20): the story against a stack that is already running, with only the demo
 * partners served by the sandbox, where the stack's catalog says they are.
 */
// Once, on Postgres: what it tests is the sandbox's own serving of the partners, not the store.
describe.skipIf(process.env.TEST_EVENT_STORE === 'esdb')('npm run sandbox -- --against URL --catalog FILE', () => {
  let env: TestEnv;
  let stack: Awaited<ReturnType<typeof startInProcess>>;
  let catalogFile: string;
  const settings = { STALE_ROUND_AFTER_SECONDS: '5', RECONCILE_INTERVAL_SECONDS: '1' };
  beforeAll(async () => {
    env = await createTestEnv('sandboxagainst');
    const [wallet1, wallet2, provider] = await Promise.all([freePort(), freePort(), freePort()]);
    const catalog = JSON.parse(await readFile(path.join(ROOT, 'services/sandbox/catalog.json'), 'utf8')) as CatalogInput;
    catalog.operators[0]!.walletUrl = `http://127.0.0.1:${wallet1}`;
    catalog.operators[1]!.walletUrl = `http://127.0.0.1:${wallet2}`;
    catalog.providers[0]!.apiBaseUrl = `http://127.0.0.1:${provider}`;
    catalogFile = await writeCatalogFile(catalog);
    stack = await startInProcess(env, { ...settings, CATALOG_FILE: catalogFile });
  }, 60_000);
  afterAll(async () => {
    await stack?.stop();
    await env?.cleanup();
  });

  it('serves the demo partners where the catalog names them and plays the whole story through the stack', async () => {
    const run = await runSandbox(['--against', stack.url, '--catalog', catalogFile, '--exit'], { ADMIN_TOKEN, HOST: '127.0.0.1', LOG_LEVEL: 'silent', ...settings });
    expect(run.code, run.out).toBe(0);
    expect(run.out).toMatch(/^Story complete: 14 steps, \d+ checks, all as expected\.$/m);
  }, 60_000);

  it('refuses --against without the stack\'s catalog, and --catalog alone, with exit 2', async () => {
    expect((await runSandbox(['--against', stack.url], {})).code).toBe(2);
    expect((await runSandbox(['--catalog', catalogFile], {})).code).toBe(2);
    expect((await runSandbox(['--against', 'api:8080', '--catalog', catalogFile], {})).code).toBe(2);
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
