import { describe, expect, it } from 'vitest';
import type { Operator, Provider } from '../../shared/catalog/schema.ts';
import { CatalogSnapshot } from '../../shared/catalog/store.ts';
import { deciderSpec } from '../../test/helpers/decider-spec.ts';
import type { SessionStarted, SessionsRevoked } from './events.ts';
import {
  activeAt,
  balanceSessionRefusal,
  openSessions,
  playerSessionsDecider,
  sessionStanding,
  transactionSessionRefusal,
  type LaunchRequest,
  type SessionCommand,
  type SessionFacts,
} from './decider.ts';

/**
 * Launch (API document 4.1.2, contract section 4), kick (4.1.3) and the use of a session by a
 * transaction or a balance call (2.9, 2.10), as given / when / then.
 */

const NOW = new Date('2026-11-24T12:00:00Z');
const TTL = 3600;
const at = (offsetSeconds: number): string => new Date(NOW.getTime() + offsetSeconds * 1000).toISOString();

const provider: Provider = {
  id: 'studio-a',
  name: 'Studio A',
  apiBaseUrl: 'https://api.studio-a.test',
  secret: 'provider-secret',
  timeoutMs: 5000,
  currencies: ['EUR', 'USD'],
  supportedLanguages: ['en', 'de'],
  games: [
    { id: 'fruit-1', name: 'Fruit', launchBaseUrl: 'https://play.studio-a.test/fruit', replayBaseUrl: '' },
    { id: 'hidden-3', name: 'Hidden', launchBaseUrl: 'https://play.studio-a.test/hidden', replayBaseUrl: '' },
  ],
};

const operator: Operator = {
  id: 'op-1',
  name: 'Operator One',
  secret: 'operator-secret',
  walletUrl: 'https://wallet.op-1.test',
  walletTimeoutMs: 5000,
  rateLimit: { limit: 100, windowSeconds: 1 },
  visibleGames: ['fruit-1'],
  // 'José' with a precomposed é (U+00E9): the NFC form.
  blockedPlayers: ['player-banned', 'Jos\u00e9'],
};

const catalog = new CatalogSnapshot([provider], [operator], []);

/** A launch of fruit-1 in EUR, REAL, by p1, with the given changes. */
function launch(changes: Partial<LaunchRequest> = {}, token = 'tok-1'): SessionCommand {
  const request: LaunchRequest = { playerRef: 'p1', gameId: 'fruit-1', currency: 'EUR', mode: 'REAL', ...changes };
  return { type: 'StartSession', token, operator, game: catalog.games.get(request.gameId), request, ttlSeconds: TTL, now: NOW };
}

const kick = (now: Date = NOW): SessionCommand => ({ type: 'RevokeSessions', operatorId: 'op-1', playerRef: 'p1', now });

/** A recorded launch of p1 on fruit-1, created `createdOffset` seconds from NOW, lasting TTL. */
function started(token: string, createdOffset = -60, extra: Partial<SessionStarted['data']> = {}): SessionStarted {
  return {
    type: 'SessionStarted',
    data: {
      token,
      operatorId: 'op-1',
      playerRef: 'p1',
      providerId: 'studio-a',
      gameId: 'fruit-1',
      currency: 'EUR',
      demo: false,
      createdAt: at(createdOffset),
      expiresAt: at(createdOffset + TTL),
      ...extra,
    },
  };
}

const revoked = (tokens: string[], revokedAt = NOW.toISOString()): SessionsRevoked => ({
  type: 'SessionsRevoked',
  data: { operatorId: 'op-1', playerRef: 'p1', tokens, revokedAt },
});

const spec = deciderSpec(playerSessionsDecider);

describe('StartSession: launch checks (contract section 4, API document 4.1.2)', () => {
  it('refuses an unknown game with game-not-found', () => {
    spec.given().when(launch({ gameId: 'no-such-game' })).thenRefuses({ kind: 'game-not-found' });
  });

  it('refuses a REAL launch of a game not visible to the operator with game-not-found, the same answer as an unknown game', () => {
    spec.given().when(launch({ gameId: 'hidden-3' })).thenRefuses({ kind: 'game-not-found' });
  });

  it('allows a DEMO launch of a game not visible to the operator', () => {
    spec
      .given()
      .when(launch({ gameId: 'hidden-3', mode: 'DEMO' }))
      .thenMatches([{ type: 'SessionStarted', data: { gameId: 'hidden-3', demo: true } }]);
  });

  it.each(['eur', 'EURO', 'EU', '', 'E1R'])('refuses the currency %j with currency-format', (currency) => {
    spec.given().when(launch({ currency })).thenRefuses({ kind: 'currency-format' });
  });

  it('refuses a currency the provider does not list, naming it', () => {
    spec.given().when(launch({ currency: 'GBP' })).thenRefuses({ kind: 'currency-unsupported', currency: 'GBP' });
  });

  it('refuses a language the provider does not support, naming it', () => {
    spec.given().when(launch({ language: 'fr' })).thenRefuses({ kind: 'language-unsupported', language: 'fr' });
  });

  it.each(['/lobby', 'lobby.example.test', 'ftp://lobby.example.test/', 'javascript:alert(1)', 'mailto:x@example.test', ''])(
    'refuses the lobbyUrl %j with lobby-url-invalid',
    (lobbyUrl) => {
      spec.given().when(launch({ lobbyUrl })).thenRefuses({ kind: 'lobby-url-invalid' });
    },
  );

  it.each(['http://lobby.example.test/', 'https://lobby.example.test/back?x=1'])('accepts the lobbyUrl %j', (lobbyUrl) => {
    spec.given().when(launch({ lobbyUrl })).thenMatches([{ type: 'SessionStarted', data: { lobbyUrl } }]);
  });

  it('refuses a blocked player with launch-blocked', () => {
    spec.given().when(launch({ playerRef: 'player-banned' })).thenRefuses({ kind: 'launch-blocked' });
  });

  it('compares the blocklist in Unicode NFC: "José" with a precomposed é blocks "Jose" + U+0301', () => {
    const decomposed = 'Jose\u0301';
    expect(decomposed).not.toBe('Jos\u00e9');
    spec.given().when(launch({ playerRef: decomposed })).thenRefuses({ kind: 'launch-blocked' });
    spec.given().when(launch({ playerRef: 'Jos\u00e9' })).thenRefuses({ kind: 'launch-blocked' });
  });

  it('blocks a player in DEMO mode too', () => {
    spec.given().when(launch({ playerRef: 'player-banned', mode: 'DEMO' })).thenRefuses({ kind: 'launch-blocked' });
  });

  describe('checks in the contract order, shown with requests that break two rules at once', () => {
    it('game exists before currency format', () => {
      spec.given().when(launch({ gameId: 'no-such-game', currency: 'eur' })).thenRefuses({ kind: 'game-not-found' });
    });

    it('game exists even in DEMO mode, where visibility is skipped', () => {
      spec.given().when(launch({ gameId: 'no-such-game', mode: 'DEMO' })).thenRefuses({ kind: 'game-not-found' });
      spec.given().when(launch({ gameId: 'hidden-3', mode: 'DEMO', currency: 'eur' })).thenRefuses({ kind: 'currency-format' });
    });

    it('visibility before currency format', () => {
      spec.given().when(launch({ gameId: 'hidden-3', currency: 'eur' })).thenRefuses({ kind: 'game-not-found' });
    });

    it('currency format before currency supported', () => {
      spec.given().when(launch({ currency: 'gbp' })).thenRefuses({ kind: 'currency-format' });
    });

    it('currency supported before language', () => {
      spec.given().when(launch({ currency: 'GBP', language: 'fr' })).thenRefuses({ kind: 'currency-unsupported', currency: 'GBP' });
    });

    it('language before lobby URL', () => {
      spec.given().when(launch({ language: 'fr', lobbyUrl: 'not a url' })).thenRefuses({ kind: 'language-unsupported', language: 'fr' });
    });

    it('lobby URL before blocklist', () => {
      spec.given().when(launch({ playerRef: 'player-banned', lobbyUrl: 'not a url' })).thenRefuses({ kind: 'lobby-url-invalid' });
    });

    it('every 400 check before the blocklist (403)', () => {
      spec.given().when(launch({ playerRef: 'player-banned', currency: 'GBP' })).thenRefuses({ kind: 'currency-unsupported', currency: 'GBP' });
    });
  });

  it('records SessionStarted with exactly the launch data (no language/lobbyUrl when not given)', () => {
    spec
      .given()
      .when(launch())
      .then([
        {
          type: 'SessionStarted',
          data: {
            token: 'tok-1',
            operatorId: 'op-1',
            playerRef: 'p1',
            providerId: 'studio-a',
            gameId: 'fruit-1',
            currency: 'EUR',
            demo: false,
            createdAt: '2026-11-24T12:00:00.000Z',
            expiresAt: '2026-11-24T13:00:00.000Z',
          },
        },
      ]);
  });

  it('records language and lobbyUrl when given, and demo = true for a DEMO launch', () => {
    spec
      .given()
      .when(launch({ currency: 'USD', language: 'de', lobbyUrl: 'https://lobby.op-1.test/', mode: 'DEMO' }, 'tok-demo'))
      .then([
        {
          type: 'SessionStarted',
          data: {
            token: 'tok-demo',
            operatorId: 'op-1',
            playerRef: 'p1',
            providerId: 'studio-a',
            gameId: 'fruit-1',
            currency: 'USD',
            language: 'de',
            lobbyUrl: 'https://lobby.op-1.test/',
            demo: true,
            createdAt: '2026-11-24T12:00:00.000Z',
            expiresAt: '2026-11-24T13:00:00.000Z',
          },
        },
      ]);
  });

  it('keeps the playerRef as sent (the NFC form is only for the blocklist comparison)', () => {
    spec
      .given()
      .when(launch({ playerRef: 'Zoe\u0308' }))
      .thenMatches([{ type: 'SessionStarted', data: { playerRef: 'Zoe\u0308' } }]);
  });

  it('does not depend on the player history: a launch after a kick and earlier sessions is decided the same', () => {
    spec
      .given(started('tok-a'), revoked(['tok-a']), started('tok-b'))
      .when(launch({}, 'tok-c'))
      .thenMatches([{ type: 'SessionStarted', data: { token: 'tok-c', createdAt: NOW.toISOString() } }]);
  });
});

describe('RevokeSessions: kick (API document 4.1.3)', () => {
  it('always records SessionsRevoked, with no tokens when the player never had a session', () => {
    spec.given().when(kick()).then([revoked([])]);
  });

  it('lists every session started and still active, in start order', () => {
    spec.given(started('tok-a', -120), started('tok-b', -60)).when(kick()).then([revoked(['tok-a', 'tok-b'])]);
  });

  it('lists demo sessions too (they are sessions of the player)', () => {
    spec.given(started('tok-demo', -60, { demo: true })).when(kick()).then([revoked(['tok-demo'])]);
  });

  it('a second kick lists only the sessions started after the first', () => {
    spec
      .given(started('tok-a', -300), revoked(['tok-a'], at(-200)), started('tok-b', -100))
      .when(kick())
      .then([revoked(['tok-b'])]);
  });

  it('a second kick with nothing started since lists nothing', () => {
    spec.given(started('tok-a', -300), revoked(['tok-a'], at(-200))).when(kick()).then([revoked([])]);
  });

  it('does not list an expired session (it is ended all the same)', () => {
    const expired = started('tok-old', -2 * TTL);
    spec.given(expired, started('tok-new', -60)).when(kick()).then([revoked(['tok-new'])]);
  });

  it('treats a session whose expiresAt is exactly now as expired', () => {
    spec.given(started('tok-edge', -TTL)).when(kick()).then([revoked([])]);
  });

  it('ends expired sessions: after the kick nothing is open', () => {
    const { state } = spec.given(started('tok-old', -2 * TTL), started('tok-new', -60), revoked(['tok-new']));
    expect(openSessions(state)).toEqual([]);
  });
});

describe('evolve, openSessions and activeAt', () => {
  it('starts with no session', () => {
    const { state } = spec.given();
    expect(state).toEqual({ status: 'none' });
    expect(openSessions(state)).toEqual([]);
    expect(activeAt(state, NOW)).toEqual([]);
  });

  it('keeps each started session with the revision of its SessionStarted', () => {
    const { state } = spec.given(started('tok-a', -120), started('tok-b', -60, { demo: true, providerId: 'studio-b' }));
    expect(state).toEqual({
      status: 'known',
      open: [
        { token: 'tok-a', providerId: 'studio-a', revision: 0, expiresAt: at(-120 + TTL), demo: false },
        { token: 'tok-b', providerId: 'studio-b', revision: 1, expiresAt: at(-60 + TTL), demo: true },
      ],
    });
  });

  it('a kick empties the open sessions; later ones carry their own revision', () => {
    const { state } = spec.given(started('tok-a'), revoked(['tok-a']), started('tok-b'));
    expect(openSessions(state)).toEqual([{ token: 'tok-b', providerId: 'studio-a', revision: 2, expiresAt: at(-60 + TTL), demo: false }]);
  });

  it('a kick with no session still makes the player known, with nothing open', () => {
    expect(spec.given(revoked([])).state).toEqual({ status: 'known', open: [] });
  });

  it('activeAt keeps the open sessions not yet expired at that time', () => {
    const { state } = spec.given(started('tok-a', -TTL + 10), started('tok-b', -60));
    expect(activeAt(state, NOW).map((s) => s.token)).toEqual(['tok-a', 'tok-b']);
    expect(activeAt(state, new Date(NOW.getTime() + 10_000)).map((s) => s.token)).toEqual(['tok-b']);
    expect(activeAt(state, new Date(NOW.getTime() + 2 * TTL * 1000))).toEqual([]);
  });
});

/** A REAL session of p1 on fruit-1 in EUR, valid. */
const session = (changes: Partial<SessionFacts> = {}): SessionFacts => ({ playerRef: 'p1', gameId: 'fruit-1', currency: 'EUR', demo: false, expired: false, ...changes });
const use = (changes: Partial<{ playerRef: string; gameId: string; currency: string }> = {}) => ({ playerRef: 'p1', gameId: 'fruit-1', currency: 'EUR', ...changes });

describe('transactionSessionRefusal (API document 2.10)', () => {
  it('accepts a transaction matching a real session', () => {
    expect(transactionSessionRefusal(session(), use())).toBeUndefined();
  });

  it.each(['playerRef', 'gameId', 'currency'] as const)('refuses a different %s with session-mismatch naming it', (field) => {
    expect(transactionSessionRefusal(session(), use({ [field]: 'other' }))).toEqual({ kind: 'session-mismatch', field });
  });

  it('names the first mismatching field in the order playerRef, gameId, currency', () => {
    expect(transactionSessionRefusal(session(), use({ playerRef: 'p2', gameId: 'g2', currency: 'USD' }))).toEqual({ kind: 'session-mismatch', field: 'playerRef' });
    expect(transactionSessionRefusal(session(), use({ gameId: 'g2', currency: 'USD' }))).toEqual({ kind: 'session-mismatch', field: 'gameId' });
  });

  it('refuses a demo session with demo-session', () => {
    expect(transactionSessionRefusal(session({ demo: true }), use())).toEqual({ kind: 'demo-session' });
  });

  it('reports a mismatch before the demo refusal', () => {
    expect(transactionSessionRefusal(session({ demo: true }), use({ currency: 'USD' }))).toEqual({ kind: 'session-mismatch', field: 'currency' });
  });

  it('leaves expiry to the round rules (an expired session still settles its rounds)', () => {
    expect(transactionSessionRefusal(session({ expired: true }), use())).toBeUndefined();
  });
});

describe('balanceSessionRefusal', () => {
  it('accepts a valid real session', () => {
    expect(balanceSessionRefusal(session(), false)).toBeUndefined();
  });

  it('refuses an unknown session with session-invalid', () => {
    expect(balanceSessionRefusal(undefined, false)).toEqual({ kind: 'session-invalid' });
  });

  it('refuses a revoked session with session-invalid', () => {
    expect(balanceSessionRefusal(session(), true)).toEqual({ kind: 'session-invalid' });
  });

  it('refuses an expired session with session-invalid', () => {
    expect(balanceSessionRefusal(session({ expired: true }), false)).toEqual({ kind: 'session-invalid' });
  });

  it('refuses a demo session with demo-session', () => {
    expect(balanceSessionRefusal(session({ demo: true }), false)).toEqual({ kind: 'demo-session' });
  });

  it('a revoked or expired demo session is session-invalid (validity first)', () => {
    expect(balanceSessionRefusal(session({ demo: true }), true)).toEqual({ kind: 'session-invalid' });
    expect(balanceSessionRefusal(session({ demo: true, expired: true }), false)).toEqual({ kind: 'session-invalid' });
  });
});

describe('sessionStanding (what support reads in the console)', () => {
  const expiresAt = new Date('2026-11-21T10:00:00Z');
  const at = (iso: string) => new Date(iso);
  it('is kicked only when a kick ended it while it was valid; expired when its time ran out first', () => {
    expect(sessionStanding({ expiresAt, revokedAt: null }, at('2026-11-21T09:59:59.999Z'))).toBe('active');
    expect(sessionStanding({ expiresAt, revokedAt: null }, at('2026-11-21T10:00:00Z'))).toBe('expired');
    expect(sessionStanding({ expiresAt, revokedAt: at('2026-11-21T09:00:00Z') }, at('2026-11-21T09:30:00Z'))).toBe('kicked');
    expect(sessionStanding({ expiresAt, revokedAt: at('2026-11-21T09:00:00Z') }, at('2026-11-21T11:00:00Z'))).toBe('kicked');
    // A kick at or after its expiry ended nothing (it is not among the kick's tokens).
    expect(sessionStanding({ expiresAt, revokedAt: at('2026-11-21T10:00:00Z') }, at('2026-11-21T11:00:00Z'))).toBe('expired');
    expect(sessionStanding({ expiresAt, revokedAt: at('2026-11-21T11:00:00Z') }, at('2026-11-21T11:00:00Z'))).toBe('expired');
  });
});
