import { execFile } from 'node:child_process';
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../../services/service.ts';
import { OP1, PROV_A, testCatalog } from '../helpers/catalog.ts';
import { startFakeWallet, type FakeWallet } from '../helpers/fakes.ts';
import { createTestEnv, startInProcess, type TestEnv } from '../helpers/service.ts';

/**
 * What an integrator does with /openapi.json: lint it with Redocly (zero warnings, repo's redocly.yaml),
 * generate types with openapi-typescript, type-check a small openapi-fetch client whose only
 * authentication is a signing middleware, and drive a launch (operator) and a BET then WIN round
 * (provider) with it against the running service.
 */

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../..');
const bin = (name: string) => path.join(ROOT, 'node_modules', '.bin', name);

/** The client an integrator would write: nothing but the generated types, openapi-fetch and a signer. */
const clientSource = (signatureModule: string) => `import { randomUUID } from 'node:crypto';
import createClient, { type Middleware } from 'openapi-fetch';
import type { paths } from './api.ts';
import { sign } from ${JSON.stringify(signatureModule)};

export interface Credentials {
  kind: 'operator' | 'provider';
  id: string;
  secret: string;
}

/** Adds the four signature headers to every request: the generated operations take none of them. */
export function signingMiddleware(c: Credentials): Middleware {
  return {
    async onRequest({ request }) {
      const body = request.body ? await request.clone().text() : '';
      const timestamp = String(Math.floor(Date.now() / 1000));
      const nonce = randomUUID();
      const target = new URL(request.url).pathname; // calls to the service sign the path only
      request.headers.set(c.kind === 'operator' ? 'X-Operator-Id' : 'X-Provider-Id', c.id);
      request.headers.set('X-Timestamp', timestamp);
      request.headers.set('X-Nonce', nonce);
      request.headers.set('X-Signature', sign(c.secret, { timestamp, nonce, method: request.method, target, body }));
      return request;
    },
  };
}

export function apiClient(baseUrl: string, c: Credentials) {
  const client = createClient<paths>({ baseUrl });
  client.use(signingMiddleware(c));
  return client;
}

export async function playRound(baseUrl: string, operator: Credentials, provider: Credentials, playerRef: string, roundId: string) {
  const op = apiClient(baseUrl, operator);
  const games = await op.GET('/v1/operator/games');
  const launch = await op.POST('/v1/operator/games/launch', { body: { playerRef, gameId: 'fruit-1', currency: 'EUR', mode: 'REAL', language: 'en' } });
  if (!launch.data) throw new Error('launch failed: ' + JSON.stringify(launch.error));
  const sessionToken: string = launch.data.sessionToken;

  const studio = apiClient(baseUrl, provider);
  const common = { sessionToken, roundId, playerRef, currency: 'EUR', gameId: 'fruit-1' } as const;
  const bet = await studio.POST('/v1/wallet/transaction', { body: { ...common, transactionId: roundId + '-bet', type: 'BET', roundComplete: false, amount: 100 } });
  const win = await studio.POST('/v1/wallet/transaction', { body: { ...common, transactionId: roundId + '-win', type: 'WIN', roundComplete: true, amount: 250 } });
  const balance = await studio.POST('/v1/wallet/balance', { body: { sessionToken } });
  const badGrant = await op.GET('/v1/operator/free-spins/grants/{id}', { params: { path: { id: 'not-a-uuid' } } });
  // An error body is the Error object, or the text/plain 401 of a refused signature.
  const errorMessage: string | undefined = typeof badGrant.error === 'object' ? badGrant.error.error : badGrant.error;
  return {
    gameIds: (games.data ?? []).map((g) => g.gameId),
    launchUrl: launch.data.launchUrl,
    bet: { status: bet.response.status, body: bet.data },
    win: { status: win.response.status, body: win.data },
    balance: { status: balance.response.status, body: balance.data, passthrough: balance.response.headers.get('x-wallet-passthrough') },
    badGrant: { status: badGrant.response.status, error: errorMessage },
  };
}

// The generated types refuse what the server refuses, at compile time:
export function typeChecks(baseUrl: string, c: Credentials) {
  const op = apiClient(baseUrl, c);
  // @ts-expect-error currency is required
  void op.POST('/v1/operator/games/launch', { body: { playerRef: 'p1', gameId: 'fruit-1', mode: 'REAL' } });
  // @ts-expect-error mode is REAL or DEMO
  void op.POST('/v1/operator/games/launch', { body: { playerRef: 'p1', gameId: 'fruit-1', currency: 'EUR', mode: 'FUN' } });
  // @ts-expect-error the path parameter id is required
  void op.GET('/v1/operator/free-spins/grants/{id}', {});
}
`;

const TSCONFIG = {
  compilerOptions: {
    target: 'ES2022',
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    strict: true,
    noUncheckedIndexedAccess: true,
    noUnusedLocals: true,
    verbatimModuleSyntax: true,
    allowImportingTsExtensions: true,
    noEmit: true,
    // Only node_modules' declarations are skipped: the generated types are a .ts file, so they are checked.
    skipLibCheck: true,
    types: ['node'],
  },
  files: ['client.ts'],
};

describe('a client generated from /openapi.json', () => {
  let env: TestEnv;
  let svc: RunningService & { url: string };
  let wallet: FakeWallet;
  let dir: string;
  let documentFile: string;

  beforeAll(async () => {
    env = await createTestEnv('openapi-client');
    wallet = await startFakeWallet(OP1.secret);
    svc = await startInProcess(env, { ROLES: 'api' });
    await svc.ctx.catalog.apply(testCatalog({ walletUrl: wallet.url }));
    dir = await mkdtemp(path.join(tmpdir(), 'openapi-client-'));
    await symlink(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
    documentFile = path.join(dir, 'openapi.json');
    await writeFile(documentFile, await (await fetch(`${svc.url}/openapi.json`)).text());
  });
  afterAll(async () => {
    await svc?.stop();
    await wallet?.close();
    await env?.cleanup();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('lints with zero errors and zero warnings under @redocly/cli (recommended rules, redocly.yaml)', async () => {
    const { stdout } = await run(bin('redocly'), ['lint', documentFile, '--config', path.join(ROOT, 'redocly.yaml'), '--format', 'json'], {
      cwd: dir,
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
      maxBuffer: 64 * 1024 * 1024,
    }).catch((err: { stdout?: string; stderr?: string }) => {
      throw new Error(`redocly lint failed:\n${err.stdout ?? ''}\n${err.stderr ?? ''}`);
    });
    const report = JSON.parse(stdout.slice(stdout.indexOf('{'))) as { totals: { errors: number; warnings: number }; problems: Array<{ ruleId: string; message: string; location?: unknown }> };
    const problems = report.problems.map((p) => `${p.ruleId}: ${p.message} ${JSON.stringify(p.location ?? '')}`);
    expect(problems).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
  }, 120_000);

  it('generates types with openapi-typescript that type-check with a signing-middleware client, which drives a launch and a BET/WIN round', async () => {
    await run(bin('openapi-typescript'), [documentFile, '--output', path.join(dir, 'api.ts')], { cwd: dir });
    await writeFile(path.join(dir, 'client.ts'), clientSource(path.join(ROOT, 'shared/http/signature.ts')));
    await writeFile(path.join(dir, 'tsconfig.json'), JSON.stringify(TSCONFIG, null, 2));
    await writeFile(path.join(dir, 'package.json'), JSON.stringify({ name: 'generated-client', private: true, type: 'module' }));
    await run(bin('tsc'), ['-p', dir], { cwd: dir }).catch((err: { stdout?: string; stderr?: string }) => {
      throw new Error(`the generated client does not type-check:\n${err.stdout ?? ''}${err.stderr ?? ''}`);
    });

    const client = (await import(pathToFileURL(path.join(dir, 'client.ts')).href)) as {
      playRound: (baseUrl: string, operator: typeof OP1, provider: typeof PROV_A, playerRef: string, roundId: string) => Promise<Record<string, unknown>>;
    };
    const result = await client.playRound(svc.url, OP1, PROV_A, 'client-p1', `client-r-${Date.now()}`);
    expect(result.gameIds).toContain('fruit-1');
    expect(result.launchUrl).toMatch(/^https:\/\/play\.studio-a\.test\/fruit\?token=/);
    expect(result.bet).toEqual({ status: 200, body: { status: 'OK', balance: 9900 } });
    expect(result.win).toEqual({ status: 200, body: { status: 'OK', balance: 10150 } });
    expect(result.balance).toEqual({ status: 200, body: { balance: 10150 }, passthrough: 'true' });
    expect(result.badGrant).toEqual({ status: 400, error: 'id: expected a UUID' });
    const sent = wallet.calls.filter((c) => c.method === 'POST').map((c) => (c.body as { type: string }).type);
    expect(sent).toEqual(['BET', 'WIN']);
  }, 120_000);
});
