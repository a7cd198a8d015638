import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OP1, PROV_A, testCatalog } from '../helpers/catalog.ts';
import { startFakeProvider, startFakeWallet, type FakeProvider, type FakeWallet } from '../helpers/fakes.ts';
import { createTestEnv, spawnService, writeCatalogFile, type SpawnedService, type TestEnv } from '../helpers/service.ts';
import { signedRequest } from '../helpers/signing.ts';

/** Sessions are decided by the history of record, so two API processes agree the moment either answers. */
describe('session consistency across two API processes', () => {
  let env: TestEnv;
  let a: SpawnedService;
  let b: SpawnedService;
  let wallet: FakeWallet;
  let provider: FakeProvider;

  beforeAll(async () => {
    env = await createTestEnv('sesscons');
    [wallet, provider] = await Promise.all([startFakeWallet(OP1.secret), startFakeProvider(PROV_A.secret)]);
    const file = await writeCatalogFile(testCatalog({ walletUrl: wallet.url, providerUrl: provider.url }));
    a = await spawnService({ ...env.env(), CATALOG_FILE: file, ROLES: 'api' });
    b = await spawnService({ ...env.env(), ROLES: 'api' });
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await Promise.all([wallet?.close(), provider?.close()]);
    await env?.cleanup();
  });

  const launch = async (url: string, playerRef: string) => {
    const res = await signedRequest<{ sessionToken: string }>(url, {
      path: '/v1/operator/games/launch',
      body: { playerRef, gameId: 'fruit-1', currency: 'EUR', mode: 'REAL' },
      as: OP1,
    });
    expect(res.status).toBe(200);
    return res.json.sessionToken;
  };
  const kick = async (url: string, playerRef: string) =>
    (await signedRequest<{ revokedCount: number }>(url, { path: '/v1/operator/players/kick', body: { playerRef }, as: OP1 })).json.revokedCount;
  const usable = async (url: string, sessionToken: string) => {
    const res = await signedRequest(url, { path: '/v1/wallet/balance', body: { sessionToken }, as: PROV_A });
    expect([200, 401]).toContain(res.status);
    return res.status === 200;
  };

  it('a session launched on one process is usable on the other the moment launch answers, and refused there the moment kick answers', async () => {
    for (let i = 0; i < 10; i++) {
      const [first, second] = i % 2 === 0 ? [a, b] : [b, a];
      const player = `p-${i}`;
      const token = await launch(first.url, player);
      expect(await usable(second.url, token)).toBe(true);
      expect(await kick(second.url, player)).toBe(1);
      expect(await usable(first.url, token)).toBe(false);
      expect(await usable(second.url, token)).toBe(false);
    }
  });

  it('launches racing a kick: the kick ends exactly the sessions it counts, including every launch that answered before it was sent', async () => {
    for (let round = 0; round < 5; round++) {
      const player = `race-${round}`;
      const answeredBeforeKick: string[] = [];
      const all: string[] = [];
      let kickSent = false;
      const launches = Array.from({ length: 8 }, (_, i) =>
        launch(i % 2 === 0 ? a.url : b.url, player).then((token) => {
          if (!kickSent) answeredBeforeKick.push(token);
          all.push(token);
        }),
      );
      await new Promise((r) => setTimeout(r, round * 3));
      kickSent = true;
      const revokedCount = await kick(round % 2 === 0 ? a.url : b.url, player);
      await Promise.all(launches);

      const refused: string[] = [];
      for (const token of all) {
        const [onA, onB] = await Promise.all([usable(a.url, token), usable(b.url, token)]);
        expect(onA).toBe(onB); // both processes agree
        if (!onA) refused.push(token);
      }
      expect(refused.length).toBe(revokedCount);
      for (const token of answeredBeforeKick) expect(refused).toContain(token);
    }
  });
});
