import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../../services/service.ts';
import { testCatalog } from '../helpers/catalog.ts';
import { ADMIN_TOKEN, createTestEnv, startInProcess, type TestEnv } from '../helpers/service.ts';
import { toTestResponse } from '../helpers/signing.ts';

describe('catalog through PUT /v1/admin/catalog (contract section 2)', () => {
  let env: TestEnv;
  let a: RunningService & { url: string };
  let b: RunningService & { url: string };

  const put = async (svc: { url: string }, body: unknown, token: string | null = ADMIN_TOKEN) =>
    toTestResponse<{ error?: string }>(
      await fetch(`${svc.url}/v1/admin/catalog`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      }),
    );

  beforeAll(async () => {
    env = await createTestEnv('catalog');
    a = await startInProcess(env, { ROLES: 'api' });
    b = await startInProcess(env, { ROLES: 'api' });
  });
  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    await env?.cleanup();
  });

  it('refuses a missing or wrong bearer token with 401', async () => {
    expect((await put(a, testCatalog(), null)).status).toBe(401);
    const wrong = await put(a, testCatalog(), 'nope');
    expect(wrong.status).toBe(401);
    expect(wrong.json).toEqual({ error: 'unauthorized' });
    // The scheme's name is case-insensitive (RFC 9110): "bearer" is Bearer.
    const lower = await fetch(`${a.url}/v1/admin/catalog`, { method: 'PUT', headers: { 'content-type': 'application/json', authorization: `bearer ${ADMIN_TOKEN}` }, body: JSON.stringify(testCatalog()) });
    expect(lower.status).toBe(200);
  });

  it('applies a catalog with defaults filled in, and another API process sees it', async () => {
    const catalog = testCatalog();
    const minimal = { id: 'op-min', name: 'Minimal', secret: 's', walletUrl: 'http://127.0.0.1:9100' };
    const res = await put(a, { ...catalog, operators: [...catalog.operators, minimal] });
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ providers: 2, games: 4, operators: 3, campaigns: 3 });
    expect(a.ctx.catalog.snapshot().operators.get('op-min')).toMatchObject({
      walletTimeoutMs: 5000,
      rateLimit: { limit: 100, windowSeconds: 1 },
      visibleGames: [],
      blockedPlayers: [],
    });
    const deadline = Date.now() + 5000;
    while (!b.ctx.catalog.snapshot().operators.has('op-min') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(b.ctx.catalog.snapshot().operators.get('op-min')?.name).toBe('Minimal');
  });

  it('updates entries in place and leaves entries the document does not name', async () => {
    const res = await put(a, { operators: [{ id: 'op-min', name: 'Renamed', secret: 's2', walletUrl: 'http://127.0.0.1:9101' }] });
    expect(res.status).toBe(200);
    const snap = a.ctx.catalog.snapshot();
    expect(snap.operators.get('op-min')?.name).toBe('Renamed');
    expect(snap.operators.get('op-1')?.name).toBe('Operator One');
    expect(snap.games.get('fruit-1')?.provider.id).toBe('studio-a');
  });

  it.each([
    ['a currency in lower case', (c: ReturnType<typeof testCatalog>) => void (c.providers[0]!.currencies = ['eur']), 'providers[0].currencies[0]'],
    ['a relative launch URL', (c: ReturnType<typeof testCatalog>) => void (c.providers[0]!.games[1]!.launchBaseUrl = '/fruit'), 'providers[0].games[1].launchBaseUrl'],
    ['a missing operator secret', (c: ReturnType<typeof testCatalog>) => void delete (c.operators[1] as { secret?: string }).secret, 'operators[1].secret'],
    ['a misspelt field', (c: ReturnType<typeof testCatalog>) => void ((c.operators[0] as Record<string, unknown>).blockedPlayer = ['x']), 'operators[0]'],
    ['a fractional rate limit', (c: ReturnType<typeof testCatalog>) => void (c.operators[0]!.rateLimit = { limit: 1.5, windowSeconds: 1 }), 'operators[0].rateLimit.limit'],
    ['a visible game that does not exist', (c: ReturnType<typeof testCatalog>) => void c.operators[0]!.visibleGames.push('nope'), 'operators[0].visibleGames[3]'],
    ['a campaign of an unknown game', (c: ReturnType<typeof testCatalog>) => void (c.campaigns[0]!.gameId = 'nope'), 'campaigns[0].gameId'],
    ['a campaign date that is not RFC 3339', (c: ReturnType<typeof testCatalog>) => void (c.campaigns[0]!.validFrom = 'tomorrow'), 'campaigns[0].validFrom'],
    ['a game id claimed by a second provider', (c: ReturnType<typeof testCatalog>) => void c.providers[1]!.games.push({ ...c.providers[0]!.games[0]! }), 'providers[1].games[1].id'],
    // The platform's adjustments are recorded under provider "platform": a provider of that id would share their ids and rounds.
    ['a provider with the reserved id "platform"', (c: ReturnType<typeof testCatalog>) => void (c.providers[1]!.id = 'platform'), 'providers[1].id'],
    // Twice in one document: the second would silently replace the first.
    ['an operator twice', (c: ReturnType<typeof testCatalog>) => void c.operators.push({ ...c.operators[0]!, name: 'Second' }), 'operators[2].id'],
    ['a provider twice', (c: ReturnType<typeof testCatalog>) => void c.providers.push({ ...c.providers[0]!, games: [] }), 'providers[2].id'],
    ['a game twice in its provider', (c: ReturnType<typeof testCatalog>) => void c.providers[0]!.games.push({ ...c.providers[0]!.games[0]!, name: 'Second' }), 'providers[0].games[3].id'],
    ['a game in two providers of the document', (c: ReturnType<typeof testCatalog>) => void c.providers[1]!.games.push({ ...c.providers[0]!.games[0]! }), 'providers[1].games[1].id'],
    ['a campaign twice', (c: ReturnType<typeof testCatalog>) => void c.campaigns.push({ ...c.campaigns[0]! }), `campaigns[${testCatalog().campaigns.length}].id`],
    ['a visible game listed twice', (c: ReturnType<typeof testCatalog>) => void c.operators[0]!.visibleGames.push(c.operators[0]!.visibleGames[0]!), 'operators[0].visibleGames[3]'],
    // Its grants would all be refused (contract section 7): the game's provider takes EUR and USD only.
    ['an active campaign in a currency its provider does not offer', (c: ReturnType<typeof testCatalog>) => void (c.campaigns[0]!.currency = 'GBP'), 'campaigns[0].currency'],
    ['a provider dropping the currency of an active campaign the document names', (c: ReturnType<typeof testCatalog>) => void (c.providers[0]!.currencies = ['USD']), 'campaigns[0].currency'],
    ['a campaign that ends before it starts', (c: ReturnType<typeof testCatalog>) => void Object.assign(c.campaigns[0]!, { validFrom: '2026-12-02T00:00:00Z', validUntil: '2026-12-01T00:00:00Z' }), 'campaigns[0].validUntil'],
  ])('refuses %s with 400 naming the field, applying nothing of the document', async (_label, mutate, field) => {
    const catalog = testCatalog();
    catalog.operators[0]!.name = 'Must Not Be Applied';
    mutate(catalog);
    const res = await put(a, catalog);
    expect(res.status).toBe(400);
    expect(res.json.error).toContain(field);
    expect(a.ctx.catalog.snapshot().operators.get('op-1')?.name).toBe('Operator One');
  });

  it('refuses a provider update that drops the currency of a stored active campaign, and takes it once the campaign is paused', async () => {
    expect((await put(a, testCatalog())).status).toBe(200);
    const provider = { ...testCatalog().providers[0]!, currencies: ['USD'] };
    const dropped = await put(a, { providers: [provider] });
    expect(dropped.status).toBe(400);
    expect(dropped.json.error).toBe(
      'catalog: providers[0].currencies: active campaign "welcome-10" grants in "EUR", which this list drops; keep the currency or deactivate the campaign in the same document',
    );
    expect(a.ctx.catalog.snapshot().providers.get('studio-a')?.currencies).toEqual(['EUR', 'USD']);
    // Paused in the same document, and the other EUR campaigns ("paused", "expired"): taken.
    const campaigns = testCatalog().campaigns.map((c) => ({ ...c, active: false }));
    const res = await put(a, { providers: [provider], campaigns });
    expect(res.status).toBe(200);
    expect(a.ctx.catalog.snapshot().providers.get('studio-a')?.currencies).toEqual(['USD']);
    // An inactive campaign cannot be granted, so it may stay in EUR; turned on again, it is refused.
    const again = await put(a, { campaigns: [{ ...campaigns[0]!, active: true }] });
    expect(again.status).toBe(400);
    expect(again.json.error).toContain('campaigns[0].currency: "EUR" is not a currency of game "fruit-1" (provider "studio-a" offers USD)');
    expect((await put(a, testCatalog())).status).toBe(200);
    // A campaign past its validUntil can never be granted again: its currency is not held against it.
    expect((await put(a, { campaigns: [{ ...testCatalog().campaigns[2]!, currency: 'GBP' }] })).status).toBe(200);
    expect((await put(a, testCatalog())).status).toBe(200);
  });

  it('applies a catalog larger than the 64 KiB of other bodies (5,000 blocked players, about 100 KB); other admin bodies stay bounded (413)', async () => {
    const catalog = testCatalog();
    const blocked = Array.from({ length: 5_000 }, (_, i) => `blocked-player-number-${i}`);
    catalog.operators[1]!.blockedPlayers = blocked;
    const body = JSON.stringify(catalog);
    expect(body.length).toBeGreaterThan(100_000);
    const res = await put(a, body);
    expect(res.status, res.text).toBe(200);
    expect(a.ctx.catalog.snapshot().operators.get(catalog.operators[1]!.id)?.blockedPlayers).toHaveLength(5_000);
    const adjustment = await fetch(`${a.url}/v1/admin/adjustments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ operatorId: 'op-1', playerRef: 'p', amount: 1, currency: 'EUR', direction: 'CREDIT', reason: 'x'.repeat(70_000) }),
    });
    expect(adjustment.status).toBe(413);
  });

  it('refuses a body that is not JSON with 400', async () => {
    const res = await put(a, '{"providers": [');
    expect(res.status).toBe(400);
    expect(res.json.error).toMatch(/JSON/);
  });
});
