import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OP1, PROV_A, testCatalog } from '../helpers/catalog.ts';
import { TEST_PG_ADMIN_URL } from '../helpers/db.ts';
import { startFakeProvider, startFakeWallet, type FakeProvider, type FakeWallet } from '../helpers/fakes.ts';
import { createTestEnv, spawnService, writeCatalogFile, type SpawnedService, type TestEnv } from '../helpers/service.ts';
import { signedRequest } from '../helpers/signing.ts';

/**
 * An operator sizes Postgres's max_connections from what each process says at start it may open
 * (postgresConnections in its 'service started' line, from DATABASE_POOL_SIZE; docs/operations.md,
 * Scaling out): under many more concurrent transactions than its pool holds, a process queues them, it
 * opens no more connections than it said, and it still answers every one. On both event stores (with
 * EventStoreDB the api's kick fence has connections of its own).
 */
describe('DATABASE_POOL_SIZE', () => {
  let env: TestEnv;
  let wallet: FakeWallet;
  let provider: FakeProvider;
  let api: SpawnedService;
  let admin: pg.Client;
  const POOL = 3;

  beforeAll(async () => {
    [env, wallet, provider] = await Promise.all([createTestEnv('poolsize'), startFakeWallet(OP1.secret, 1_000_000), startFakeProvider(PROV_A.secret)]);
    // Each wallet call takes a while, so transactions overlap: many more in flight than the pool holds.
    wallet.setLatency('BET', 30);
    const file = await writeCatalogFile(testCatalog({ walletUrl: wallet.url, providerUrl: provider.url, walletTimeoutMs: 5_000 }));
    api = await spawnService({ ...env.env(), CATALOG_FILE: file, ROLES: 'api', DATABASE_POOL_SIZE: String(POOL) });
    admin = new pg.Client({ connectionString: TEST_PG_ADMIN_URL });
    await admin.connect();
  });
  afterAll(async () => {
    await admin?.end();
    await api?.stop();
    await Promise.all([wallet?.close(), provider?.close()]);
    await env?.cleanup();
  });

  const connections = async (): Promise<number> => {
    const { rows } = await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1`, [env.db.name]);
    return rows[0]!.n;
  };

  it('opens at most the connections it says at start under 80 concurrent BETs, and answers every one', async () => {
    const players = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const playerRef = `pool-${i}-${randomUUID().slice(0, 6)}`;
        const res = await signedRequest<{ sessionToken: string }>(api.url, { path: '/v1/operator/games/launch', body: { playerRef, gameId: 'fruit-1', currency: 'EUR', mode: 'REAL' }, as: OP1 });
        expect(res.status, res.text).toBe(200);
        return { playerRef, token: res.json.sessionToken };
      }),
    );
    let most = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        most = Math.max(most, await connections());
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const answers = await Promise.all(
      Array.from({ length: 80 }, (_, i) => {
        const p = players[i % players.length]!;
        const roundId = `pool-r-${randomUUID()}`;
        const body = { sessionToken: p.token, playerRef: p.playerRef, roundId, currency: 'EUR', gameId: 'fruit-1', transactionId: `${roundId}-bet`, type: 'BET', roundComplete: false, amount: 10 };
        return signedRequest(api.url, { path: '/v1/wallet/transaction', body, as: PROV_A });
      }),
    );
    sampling = false;
    await sampler;
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));
    expect(wallet.movements.length).toBe(80);
    const said = /"postgresConnections":\{"total":(\d+),"parts":\{"queries":(\d+)/.exec(api.output());
    expect(said, 'the start line says how many connections the process may open').not.toBeNull();
    expect(Number(said![2])).toBe(POOL);
    // The pool was used to the full (the sampler is not counting nothing), and nothing was opened beyond what was said.
    expect(most).toBeGreaterThanOrEqual(POOL);
    expect(most).toBeLessThanOrEqual(Number(said![1]));
  });
});
