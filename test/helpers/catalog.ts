/** A small catalog for tests: two providers, two operators, one campaign; URLs point at fakes. */
export interface TestCatalogOptions {
  walletUrl?: string;
  wallet2Url?: string;
  providerUrl?: string;
  provider2Url?: string;
  rateLimit?: { limit: number; windowSeconds: number };
  walletTimeoutMs?: number;
  providerTimeoutMs?: number;
}

export const OP1 = { kind: 'operator' as const, id: 'op-1', secret: 'operator-secret' };
export const OP2 = { kind: 'operator' as const, id: 'op-2', secret: 'operator-two-secret' };
export const PROV_A = { kind: 'provider' as const, id: 'studio-a', secret: 'provider-secret' };
export const PROV_B = { kind: 'provider' as const, id: 'studio-b', secret: 'provider-b-secret' };

export function testCatalog(o: TestCatalogOptions = {}) {
  const rateLimit = o.rateLimit ?? { limit: 10_000, windowSeconds: 1 };
  return {
    providers: [
      {
        id: PROV_A.id,
        name: 'Studio A',
        apiBaseUrl: o.providerUrl ?? 'http://127.0.0.1:9',
        secret: PROV_A.secret,
        timeoutMs: o.providerTimeoutMs ?? 1000,
        currencies: ['EUR', 'USD'],
        supportedLanguages: ['en', 'de'],
        games: [
          { id: 'fruit-1', name: 'Fruit', launchBaseUrl: 'https://play.studio-a.test/fruit', replayBaseUrl: 'https://replay.studio-a.test/fruit' },
          { id: 'gems-2', name: 'Gems', launchBaseUrl: 'https://play.studio-a.test/gems?skin=dark', replayBaseUrl: '' },
          { id: 'hidden-3', name: 'Hidden', launchBaseUrl: 'https://play.studio-a.test/hidden', replayBaseUrl: 'https://replay.studio-a.test/hidden?v=2' },
        ],
      },
      {
        id: PROV_B.id,
        name: 'Studio B',
        apiBaseUrl: o.provider2Url ?? 'http://127.0.0.1:9',
        secret: PROV_B.secret,
        timeoutMs: o.providerTimeoutMs ?? 1000,
        currencies: ['GBP'],
        supportedLanguages: ['en'],
        games: [{ id: 'dice-9', name: 'Dice', launchBaseUrl: 'https://b.test/dice', replayBaseUrl: 'https://b.test/replay' }],
      },
    ],
    operators: [
      {
        id: OP1.id,
        name: 'Operator One',
        secret: OP1.secret,
        walletUrl: o.walletUrl ?? 'http://127.0.0.1:9',
        walletTimeoutMs: o.walletTimeoutMs ?? 1000,
        rateLimit,
        visibleGames: ['fruit-1', 'gems-2', 'dice-9'],
        // 'Jos\u00e9' in NFC and 'Zoe\u0308' in NFD: the blocklist compares NFC forms.
        blockedPlayers: ['player-banned', 'Jos\u00e9', 'Zoe\u0308'],
      },
      {
        id: OP2.id,
        name: 'Operator Two',
        secret: OP2.secret,
        walletUrl: o.wallet2Url ?? o.walletUrl ?? 'http://127.0.0.1:9',
        walletTimeoutMs: o.walletTimeoutMs ?? 1000,
        rateLimit,
        visibleGames: ['fruit-1'],
        blockedPlayers: [],
      },
    ],
    campaigns: [
      { id: 'welcome-10', gameId: 'fruit-1', spins: 10, betAmountMinor: 20, currency: 'EUR', active: true, validFrom: '2026-01-01T00:00:00Z', validUntil: '2099-01-01T00:00:00Z' },
      { id: 'paused', gameId: 'fruit-1', spins: 5, betAmountMinor: 10, currency: 'EUR', active: false },
      { id: 'expired', gameId: 'fruit-1', spins: 5, betAmountMinor: 10, currency: 'EUR', active: true, validUntil: '2020-01-01T00:00:00Z' },
    ],
  };
}
