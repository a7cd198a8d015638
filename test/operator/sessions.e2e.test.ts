import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../../services/service.ts';
import { OP1, OP2, PROV_A, PROV_B, testCatalog } from '../helpers/catalog.ts';
import { startFakeProvider, startFakeWallet, type FakeProvider, type FakeWallet } from '../helpers/fakes.ts';
import { ADMIN_TOKEN, createTestEnv, startInProcess, type TestEnv } from '../helpers/service.ts';
import { sessionsOfPlayer, type SessionRow } from '../../services/sessions/queries.ts';
import { playerSessionsStream } from '../../services/sessions/events.ts';
import { sessionsProjection } from '../../services/sessions/projection.ts';
import { waitForProjection } from '../../projections/runner.ts';
import { signedRequest } from '../helpers/signing.ts';

interface Launched {
  launchUrl: string;
  sessionToken: string;
}

describe('operator API: games, launch, kick', () => {
  let env: TestEnv;
  let svc: RunningService & { url: string };
  let wallet: FakeWallet;
  let providerA: FakeProvider;
  let providerB: FakeProvider;

  beforeAll(async () => {
    env = await createTestEnv('sessions');
    [wallet, providerA, providerB] = await Promise.all([startFakeWallet(OP1.secret), startFakeProvider(PROV_A.secret), startFakeProvider(PROV_B.secret)]);
    svc = await startInProcess(env, { ROLES: 'api,projector' });
    await svc.ctx.catalog.apply(testCatalog({ walletUrl: wallet.url, providerUrl: providerA.url, provider2Url: providerB.url, providerTimeoutMs: 5000 }));
  });
  afterAll(async () => {
    await svc?.stop();
    await Promise.all([wallet?.close(), providerA?.close(), providerB?.close()]);
    await env?.cleanup();
  });

  const launch = (body: Record<string, unknown>, as = OP1) => signedRequest<Launched & { error?: string }>(svc.url, { path: '/v1/operator/games/launch', body, as });
  const kick = (playerRef: unknown, as = OP1) => signedRequest<{ revokedCount: number; error?: string }>(svc.url, { path: '/v1/operator/players/kick', body: { playerRef }, as });
  const balance = (sessionToken: string, as: typeof PROV_A = PROV_A) =>
    signedRequest<{ balance?: number; error?: string }>(svc.url, { path: '/v1/wallet/balance', body: { sessionToken }, as });
  const real = (over: Record<string, unknown> = {}) => ({ playerRef: 'p1', gameId: 'fruit-1', currency: 'EUR', mode: 'REAL', ...over });

  describe('GET /v1/operator/games', () => {
    it('lists only the games visible to the calling operator, with currencies and languages from the provider', async () => {
      const one = await signedRequest<Array<Record<string, unknown>>>(svc.url, { path: '/v1/operator/games', as: OP1 });
      expect(one.status).toBe(200);
      expect(one.json.map((g) => g.gameId)).toEqual(['fruit-1', 'gems-2', 'dice-9']);
      expect(one.json[0]).toEqual({
        gameId: 'fruit-1',
        name: 'Fruit',
        provider: 'studio-a',
        currencies: ['EUR', 'USD'],
        supportedLanguages: ['en', 'de'],
        launchBaseUrl: 'https://play.studio-a.test/fruit',
        replayBaseUrl: 'https://replay.studio-a.test/fruit',
      });
      expect(one.json[1]!.replayBaseUrl).toBe('');
      expect(one.json[2]).toMatchObject({ provider: 'studio-b', currencies: ['GBP'], supportedLanguages: ['en'] });
      const two = await signedRequest<Array<{ gameId: string }>>(svc.url, { path: '/v1/operator/games', as: OP2 });
      expect(two.json.map((g) => g.gameId)).toEqual(['fruit-1']);
    });
  });

  describe('POST /v1/operator/games/launch', () => {
    it('launches: the URL carries the token, language and lobby, and the session works at once', async () => {
      const res = await launch(real({ language: 'de', lobbyUrl: 'https://casino.test/lobby?a=1&b=2' }));
      expect(res.status).toBe(200);
      const { launchUrl, sessionToken } = res.json;
      expect(sessionToken).toMatch(/^[A-Za-z0-9_-]{22,}$/); // URL-safe, at least 128 bits
      expect(launchUrl).toBe(
        `https://play.studio-a.test/fruit?token=${sessionToken}&language=de&lobby=${encodeURIComponent('https://casino.test/lobby?a=1&b=2')}`,
      );
      const b = await balance(sessionToken);
      expect(b.status).toBe(200);
      expect(b.json).toEqual({ balance: 10_000 });
      const walletCall = wallet.calls.at(-1)!;
      expect(walletCall.target).toBe('/v1/wallet/balance?playerRef=p1');
      expect(walletCall.signatureValid).toBe(true);
    });

    it('appends with & when the launch base URL already has a query, and omits language and lobby when not given', async () => {
      const res = await launch(real({ gameId: 'gems-2' }));
      expect(res.status).toBe(200);
      expect(res.json.launchUrl).toBe(`https://play.studio-a.test/gems?skin=dark&token=${res.json.sessionToken}`);
    });

    it('gives every launch a fresh token', async () => {
      const tokens = await Promise.all(Array.from({ length: 5 }, async () => (await launch(real())).json.sessionToken));
      expect(new Set(tokens).size).toBe(5);
    });

    it.each([
      ['playerRef missing', { gameId: 'fruit-1', currency: 'EUR', mode: 'REAL' }, 'playerRef'],
      ['gameId missing', { playerRef: 'p1', currency: 'EUR', mode: 'REAL' }, 'gameId'],
      ['currency missing', { playerRef: 'p1', gameId: 'fruit-1', mode: 'REAL' }, 'currency'],
      ['mode not REAL or DEMO', real({ mode: 'FUN' }), 'mode'],
      ['playerRef not a string', real({ playerRef: 42 }), 'playerRef'],
      ['a currency the game does not support', real({ currency: 'GBP' }), 'currency'],
      ['a lower-case currency', real({ currency: 'eur' }), 'currency'],
      ['a malformed currency', real({ currency: 'EURO' }), 'currency'],
      ['a language the game does not support', real({ language: 'fr' }), 'language'],
      ['a relative lobbyUrl', real({ lobbyUrl: '/lobby' }), 'lobbyUrl'],
      ['a lobbyUrl that is not http(s)', real({ lobbyUrl: 'javascript:alert(1)' }), 'lobbyUrl'],
    ])('answers 400 for %s, naming the field', async (_label, body, field) => {
      const res = await launch(body);
      expect(res.status).toBe(400);
      expect(res.json.error).toContain(field);
    });

    it('answers 404 for a game that does not exist, and for a REAL launch of a game not visible to the operator', async () => {
      const missing = await launch(real({ gameId: 'nope' }));
      const hidden = await launch(real({ gameId: 'hidden-3' }));
      const otherTenant = await launch(real({ gameId: 'dice-9', currency: 'GBP' }), OP2);
      for (const res of [missing, hidden, otherTenant]) {
        expect(res.status).toBe(404);
        expect(res.json).toEqual({ error: 'game not found' }); // indistinguishable on purpose
      }
    });

    it('lets a DEMO launch skip only the visibility check', async () => {
      expect((await launch(real({ gameId: 'hidden-3', mode: 'DEMO' }))).status).toBe(200);
      expect((await launch(real({ gameId: 'nope', mode: 'DEMO' }))).status).toBe(404);
      expect((await launch(real({ gameId: 'hidden-3', mode: 'DEMO', currency: 'GBP' }))).status).toBe(400);
    });

    it('answers 403 with a generic body for a blocked player', async () => {
      const res = await launch(real({ playerRef: 'player-banned' }));
      expect(res.status).toBe(403);
      expect(res.json).toEqual({ error: 'launch blocked' });
    });

    it('compares the blocklist on Unicode NFC forms, both ways', async () => {
      // Blocked as 'José' (NFC): launched as 'Jose' + U+0301 (NFD). Blocked as 'Zoë' in NFD: launched in NFC.
      for (const playerRef of ['Jose\u0301', 'Jos\u00e9', 'Zo\u00eb', 'Zoe\u0308']) {
        const res = await launch(real({ playerRef }));
        expect(res.status, playerRef).toBe(403);
      }
      expect((await launch(real({ playerRef: 'Jose' }))).status).toBe(200);
    });

    it('checks in the contract order: game before currency, visibility before blocklist, currency before blocklist', async () => {
      expect((await launch(real({ gameId: 'nope', currency: 'eur' }))).status).toBe(404);
      expect((await launch(real({ gameId: 'hidden-3', playerRef: 'player-banned' }))).status).toBe(404);
      expect((await launch(real({ playerRef: 'player-banned', currency: 'GBP' }))).status).toBe(400);
      expect((await launch({ playerRef: 'player-banned', gameId: 'nope', mode: 'REAL' })).status).toBe(400);
    });
  });

  describe('POST /v1/operator/players/kick', () => {
    it('answers 400 when playerRef is missing', async () => {
      const res = await kick(undefined);
      expect(res.status).toBe(400);
      expect(res.json.error).toContain('playerRef');
    });

    it('refuses a field the body does not have, on kick and launch (a misspelt field is not silently dropped), ending and starting nothing', async () => {
      const started = await launch({ playerRef: 'typo-p', gameId: 'fruit-1', currency: 'EUR', mode: 'REAL' });
      expect(started.status).toBe(200);
      const kicked = await signedRequest<{ error?: string }>(svc.url, { path: '/v1/operator/players/kick', body: { playerRef: 'typo-p', reason: 'fraud' }, as: OP1 });
      expect([kicked.status, kicked.json.error]).toEqual([400, 'body: Unrecognized key: "reason"']);
      const launched = await launch({ playerRef: 'typo-p', gameId: 'fruit-1', currency: 'EUR', mode: 'REAL', langauge: 'de' });
      expect([launched.status, launched.json.error]).toEqual([400, 'body: Unrecognized key: "langauge"']);
      // The session launched first still stands: the refused kick ended nothing.
      expect((await kick('typo-p')).json.revokedCount).toBe(1);
    });

    it('answers revokedCount 0 for a player with no session', async () => {
      const res = await kick('nobody');
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ revokedCount: 0 });
    });

    it('ends every session of the player at once and tells each provider, signed', async () => {
      const a = (await launch(real({ playerRef: 'kickme' }))).json.sessionToken;
      const b = (await launch(real({ playerRef: 'kickme', gameId: 'dice-9', currency: 'GBP' }))).json.sessionToken;
      const demo = (await launch(real({ playerRef: 'kickme', mode: 'DEMO' }))).json.sessionToken;
      expect((await balance(a)).status).toBe(200);

      const res = await kick('kickme');
      expect(res.json).toEqual({ revokedCount: 3 });
      for (const [token, as] of [[a, PROV_A], [b, PROV_B], [demo, PROV_A]] as const) {
        const refused = await balance(token, as);
        expect(refused.status).toBe(401);
        expect(refused.json).toEqual({ error: 'invalid session' });
      }
      expect((await kick('kickme')).json).toEqual({ revokedCount: 0 });

      await svc.ctx.background.drain();
      const toA = providerA.calls.find((c) => c.target === '/v1/sessions/revoke' && (c.body as { playerRef: string }).playerRef === 'kickme');
      const toB = providerB.calls.find((c) => c.target === '/v1/sessions/revoke' && (c.body as { playerRef: string }).playerRef === 'kickme');
      expect(toA?.signatureValid).toBe(true);
      expect(toA?.body).toEqual({ operatorId: 'op-1', playerRef: 'kickme', sessionTokens: [a, demo] });
      expect(toB?.body).toEqual({ operatorId: 'op-1', playerRef: 'kickme', sessionTokens: [b] });
    });

    it('answers promptly and the same way when the provider hangs or is down', async () => {
      providerA.setDefault('/v1/sessions/revoke', { hang: true });
      const t = (await launch(real({ playerRef: 'slowprov' }))).json.sessionToken;
      const started = Date.now();
      const res = await kick('slowprov');
      const elapsed = Date.now() - started;
      expect(res.json).toEqual({ revokedCount: 1 });
      expect(elapsed).toBeLessThan(2000); // the provider's timeout is 5 s
      expect((await balance(t)).status).toBe(401);
      providerA.setDefault('/v1/sessions/revoke', { status: 500, body: { error: 'down' } });
      await launch(real({ playerRef: 'slowprov' }));
      expect((await kick('slowprov')).json).toEqual({ revokedCount: 1 });
      providerA.setDefault('/v1/sessions/revoke', { status: 200, body: {} });
    });

    it('keeps tenants apart: the same playerRef under another operator is untouched', async () => {
      const mine = (await launch(real({ playerRef: 'shared-name' }))).json.sessionToken;
      const theirs = (await launch(real({ playerRef: 'shared-name' }), OP2)).json.sessionToken;
      expect((await kick('shared-name', OP2)).json).toEqual({ revokedCount: 1 });
      expect((await balance(theirs)).status).toBe(401);
      expect((await balance(mine)).status).toBe(200);
    });

    it('records launches and kicks in the sessions read model', async () => {
      const t = (await launch(real({ playerRef: 'audited', language: 'en' }))).json.sessionToken;
      await kick('audited');
      const deadline = Date.now() + 10_000;
      let row: SessionRow | undefined;
      while (Date.now() < deadline) {
        row = (await sessionsOfPlayer(svc.ctx.pool, 'op-1', 'audited')).find((r) => r.token === t);
        if (row?.revoked_at) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(row).toMatchObject({ provider_id: 'studio-a', game_id: 'fruit-1', currency: 'EUR', language: 'en', demo: false });
      expect(row!.revoked_at).toBeInstanceOf(Date);
    });
  });

  describe('POST /v1/wallet/balance (provider)', () => {
    it("refuses another provider's token and an unknown token with 401", async () => {
      const t = (await launch(real({ playerRef: 'bal' }))).json.sessionToken;
      expect((await balance(t, PROV_B)).status).toBe(401);
      expect((await balance('not-a-token')).json).toEqual({ error: 'invalid session' });
    });

    it('answers 400 for a DEMO session: demo play never reaches the wallet', async () => {
      const t = (await launch(real({ playerRef: 'bal', mode: 'DEMO' }))).json.sessionToken;
      const before = wallet.calls.length;
      expect((await balance(t)).status).toBe(400);
      expect(wallet.calls.length).toBe(before);
    });

    it("returns the wallet's status and body verbatim, 504 on a wallet timeout, 502 when unreachable", async () => {
      const t = (await launch(real({ playerRef: 'bal' }))).json.sessionToken;
      wallet.setBalanceReply({ status: 503, body: { error: 'wallet maintenance', code: 7 } });
      const odd = await balance(t);
      expect(odd.status).toBe(503);
      expect(odd.json).toEqual({ error: 'wallet maintenance', code: 7 });
      wallet.setBalanceReply({ hang: true });
      const slow = await balance(t);
      expect(slow.status).toBe(504);
      wallet.setBalanceReply(undefined);
      await svc.ctx.catalog.apply({ operators: [{ ...testCatalog().operators[0]!, walletUrl: 'http://127.0.0.1:9' }] });
      const down = await balance(t);
      expect(down.status).toBe(502);
      await svc.ctx.catalog.apply({ operators: [{ ...testCatalog().operators[0]!, walletUrl: wallet.url }] });
    });
  });
});

describe('session expiry', () => {
  let env: TestEnv;
  let svc: RunningService & { url: string };
  let wallet: FakeWallet;

  beforeAll(async () => {
    env = await createTestEnv('expiry');
    wallet = await startFakeWallet(OP1.secret);
    svc = await startInProcess(env, { ROLES: 'api,projector', SESSION_TTL_SECONDS: '1' });
    await svc.ctx.catalog.apply(testCatalog({ walletUrl: wallet.url }));
  });
  afterAll(async () => {
    await svc?.stop();
    await wallet?.close();
    await env?.cleanup();
  });

  it('ends a session after SESSION_TTL_SECONDS, and a kick does not count it as ended', async () => {
    const res = await signedRequest<Launched>(svc.url, { path: '/v1/operator/games/launch', body: { playerRef: 'p', gameId: 'fruit-1', currency: 'EUR', mode: 'REAL' }, as: OP1 });
    const token = res.json.sessionToken;
    expect((await signedRequest(svc.url, { path: '/v1/wallet/balance', body: { sessionToken: token }, as: PROV_A })).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1100));
    expect((await signedRequest(svc.url, { path: '/v1/wallet/balance', body: { sessionToken: token }, as: PROV_A })).status).toBe(401);
    const kicked = await signedRequest<{ revokedCount: number }>(svc.url, { path: '/v1/operator/players/kick', body: { playerRef: 'p' }, as: OP1 });
    expect(kicked.json).toEqual({ revokedCount: 0 });
    // Support's console says the same: expired, not kicked (the kick ended nothing), once its read model has
    // the kick (the last event of the player's sessions stream; waited for by position, as the log may hold
    // it back a moment while another file's test keeps a transaction open).
    const kick = (await svc.ctx.eventStore.readStream(playerSessionsStream(OP1.id, 'p'))).at(-1)!;
    expect(kick.type).toBe('SessionsRevoked');
    expect(await waitForProjection(svc.ctx.pool, sessionsProjection.name, kick.position, 10_000)).toBe(true);
    const player = await fetch(`${svc.url}/v1/admin/console/players/${OP1.id}/p`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    const { sessions } = (await player.json()) as { sessions: Array<Record<string, unknown>> };
    expect(sessions).toEqual([expect.objectContaining({ token, status: 'expired' })]);
    expect(sessions[0]).not.toHaveProperty('revokedAt');
  });

  it('answers a failed BET resubmitted after its session expired from the record, sending nothing; its ROLLBACK still settles the round', async () => {
    const player = `exp-${Date.now()}`;
    const res = await signedRequest<Launched>(svc.url, { path: '/v1/operator/games/launch', body: { playerRef: player, gameId: 'fruit-1', currency: 'EUR', mode: 'REAL' }, as: OP1 });
    const base = { sessionToken: res.json.sessionToken, playerRef: player, currency: 'EUR', gameId: 'fruit-1', roundId: `r-${player}` };
    const bet = { ...base, transactionId: `b-${player}`, type: 'BET', roundComplete: false, amount: 100 };
    wallet.script(bet.transactionId, { status: 500, body: { error: 'down' } });
    const tx = (body: Record<string, unknown>) => signedRequest(svc.url, { path: '/v1/wallet/transaction', body, as: PROV_A });
    const first = await tx(bet);
    expect(first.status).toBe(502);
    await new Promise((r) => setTimeout(r, 1100));
    // Expired: the wallet would take it now, but a new attempt would charge a player whose session is gone.
    const again = await tx(bet);
    expect(again.status).toBe(502);
    expect(again.text).toBe(first.text);
    expect(wallet.effects.get(bet.transactionId)).toBeUndefined();
    // An expired session still settles the rounds it opened: the BET's ROLLBACK is taken.
    const rollback = await tx({ ...base, transactionId: `rb-${player}`, type: 'ROLLBACK', originalTransactionId: bet.transactionId, amount: 100 });
    expect(rollback.status, rollback.text).toBe(200);
  });
});
