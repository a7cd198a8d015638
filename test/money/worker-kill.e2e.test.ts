import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OP1, PROV_A, testCatalog } from '../helpers/catalog.ts';
import { startFakeWallet, type FakeWallet } from '../helpers/fakes.ts';
import { createTestEnv, spawnService, writeCatalogFile, type SpawnedService, type TestEnv } from '../helpers/service.ts';
import { signedRequest } from '../helpers/signing.ts';

describe('a worker killed with SIGKILL while retrying a WIN', () => {
  let env: TestEnv;
  let wallet: FakeWallet;
  let api: SpawnedService;
  let worker: SpawnedService | undefined;
  const common = () => ({ ...env.env(), DISPATCH_BACKOFF_BASE_MS: '200', DISPATCH_BACKOFF_MAX_MS: '500', RECOVERY_SWEEP_SECONDS: '1' });

  beforeAll(async () => {
    env = await createTestEnv('workerkill');
    wallet = await startFakeWallet(OP1.secret);
    const file = await writeCatalogFile(testCatalog({ walletUrl: wallet.url, walletTimeoutMs: 5000 }));
    api = await spawnService({ ...common(), CATALOG_FILE: file, ROLES: 'api,projector' });
    worker = await spawnService({ ...common(), ROLES: 'worker' });
  });
  afterAll(async () => {
    await Promise.all([api?.stop(), worker?.stop()]);
    await wallet?.close();
    await env?.cleanup();
  });

  const until = async (check: () => boolean | Promise<boolean>, timeoutMs = 40_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error('condition not met in time');
      await new Promise((r) => setTimeout(r, 25));
    }
  };

  it('applies the WIN exactly once after the worker is restarted', async () => {
    const launched = await signedRequest<{ sessionToken: string }>(api.url, {
      path: '/v1/operator/games/launch',
      body: { playerRef: 'kp', gameId: 'fruit-1', currency: 'EUR', mode: 'REAL' },
      as: OP1,
    });
    const base = { sessionToken: launched.json.sessionToken, roundId: 'kill-round', playerRef: 'kp', currency: 'EUR', gameId: 'fruit-1' };
    expect((await signedRequest(api.url, { path: '/v1/wallet/transaction', body: { ...base, transactionId: 'k-bet', type: 'BET', roundComplete: false, amount: 10 }, as: PROV_A })).status).toBe(200);

    // First attempt (by the API) fails; the worker's retry is slow at the wallet, which still applies it.
    wallet.script('k-win', { status: 500, body: {} });
    wallet.setLatency('WIN', 2000);
    const win = { ...base, transactionId: 'k-win', type: 'WIN', roundComplete: true, amount: 70 };
    expect((await signedRequest(api.url, { path: '/v1/wallet/transaction', body: win, as: PROV_A })).status).toBe(502);
    const winCalls = () => wallet.calls.filter((c) => (c.body as { transactionId?: string }).transactionId === 'k-win').length;
    await until(() => winCalls() === 2);
    expect(await worker!.stop('SIGKILL')).toBe(null); // killed mid-call, before it could record the outcome
    await until(() => wallet.effects.get('k-win') === 1); // the wallet applied it anyway
    wallet.setLatency('WIN', 0);

    worker = await spawnService({ ...common(), ROLES: 'worker' });
    const pool = (await import('pg')).default;
    const client = new pool.Client({ connectionString: env.db.url });
    await client.connect();
    try {
      await until(async () => (await client.query(`SELECT status FROM rm_transactions WHERE transaction_id = 'k-win'`)).rows[0]?.status === 'applied');
    } finally {
      await client.end();
    }
    expect(wallet.effects.get('k-win')).toBe(1);
    expect(winCalls()).toBeGreaterThanOrEqual(3);
    expect(wallet.balances.get('kp')).toBe(10_060);
    const resubmitted = await signedRequest(api.url, { path: '/v1/wallet/transaction', body: win, as: PROV_A });
    expect(resubmitted.json).toEqual({ status: 'OK', balance: 10_060 });
  }, 90_000);
});
