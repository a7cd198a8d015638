import { CURRENCY_PATTERN } from '../../shared/bounds.ts';
import { offersCurrency, type Operator } from '../../shared/catalog/schema.ts';
import type { GameEntry } from '../../shared/catalog/store.ts';
import type { Decider, Decision, EventMeta } from '../../shared/decider.ts';
import type { SessionEvent, SessionsRevoked, SessionStarted } from './events.ts';

/**
 * A player's sessions at one operator (one stream per player): launch (API document 4.1.2, contract
 * section 4), kick (4.1.3), and whether a session may be used for a transaction or a balance (2.9, 2.10).
 */

export interface SessionRecord {
  token: string;
  providerId: string;
  /** Stream revision of its SessionStarted: a kick after it ends the session. */
  revision: number;
  expiresAt: string;
  demo: boolean;
}

/** No session yet, or the sessions a kick has not ended (expired ones included), in start order. */
export type PlayerSessionsState = { status: 'none' } | { status: 'known'; open: SessionRecord[] };

export const openSessions = (s: PlayerSessionsState): SessionRecord[] => (s.status === 'known' ? s.open : []);

/** What an operator asks to launch, after the body's shape was checked. */
export interface LaunchRequest {
  playerRef: string;
  gameId: string;
  currency: string;
  mode: 'REAL' | 'DEMO';
  language?: string | undefined;
  lobbyUrl?: string | undefined;
}

export type SessionCommand =
  | {
      type: 'StartSession';
      token: string;
      operator: Operator;
      /** The catalog's entry of request.gameId, if any. */
      game: GameEntry | undefined;
      request: LaunchRequest;
      ttlSeconds: number;
      now: Date;
    }
  | { type: 'RevokeSessions'; operatorId: string; playerRef: string; now: Date };

export type SessionRefusal =
  | { kind: 'game-not-found' }
  | { kind: 'currency-format' }
  | { kind: 'currency-unsupported'; currency: string }
  | { kind: 'language-unsupported'; language: string }
  | { kind: 'lobby-url-invalid' }
  | { kind: 'launch-blocked' }
  | { kind: 'session-invalid' }
  | { kind: 'session-mismatch'; field: 'playerRef' | 'gameId' | 'currency' }
  | { kind: 'demo-session' };

const isHttpUrl = (v: string): boolean => {
  try {
    const u = new URL(v);
    return u.protocol === 'http:' || u.protocol === 'https:';
  } catch {
    return false;
  }
};

/**
 * A launch, checked in the contract's order (section 4): game exists, visible to the operator (REAL),
 * currency, language, lobby, blocklist. It depends on no earlier history of the player, so it is
 * decided without reading the stream and appended at any revision.
 */
export function decideLaunch(cmd: Extract<SessionCommand, { type: 'StartSession' }>): Decision<SessionStarted, SessionRefusal> {
  const { request: r, operator, game: entry } = cmd;
  if (!entry) return { kind: 'game-not-found' };
  // Another operator's game, or no game at all, look the same.
  if (r.mode === 'REAL' && !operator.visibleGames.includes(r.gameId)) return { kind: 'game-not-found' };
  const { game, provider } = entry;
  if (!CURRENCY_PATTERN.test(r.currency)) return { kind: 'currency-format' };
  if (!offersCurrency(provider, r.currency)) return { kind: 'currency-unsupported', currency: r.currency };
  if (r.language !== undefined && !provider.supportedLanguages.includes(r.language)) return { kind: 'language-unsupported', language: r.language };
  if (r.lobbyUrl !== undefined && !isHttpUrl(r.lobbyUrl)) return { kind: 'lobby-url-invalid' };
  // The reason is not disclosed to the operator's client. Compared as Unicode NFC forms (contract 8,
  // rule 11): "José" typed as e + U+0301 is the same player.
  const player = r.playerRef.normalize('NFC');
  if (operator.blockedPlayers.some((b) => b.normalize('NFC') === player)) return { kind: 'launch-blocked' };
  return [
    {
      type: 'SessionStarted',
      data: {
        token: cmd.token,
        operatorId: operator.id,
        playerRef: r.playerRef,
        providerId: provider.id,
        gameId: game.id,
        currency: r.currency,
        ...(r.language !== undefined ? { language: r.language } : {}),
        ...(r.lobbyUrl !== undefined ? { lobbyUrl: r.lobbyUrl } : {}),
        demo: r.mode === 'DEMO',
        createdAt: cmd.now.toISOString(),
        expiresAt: new Date(cmd.now.getTime() + cmd.ttlSeconds * 1000).toISOString(),
      },
    },
  ];
}

/** Whether a session that expires at `expiresAt` has expired at `at` (its last valid instant is just before). */
export const expiredAt = (expiresAt: Date | string, at: Date): boolean => at.getTime() >= new Date(expiresAt).getTime();

/** The sessions a kick at `now` ends and reports: those not ended before, and not yet expired. */
export const activeAt = (state: PlayerSessionsState, now: Date): SessionRecord[] => openSessions(state).filter((s) => !expiredAt(s.expiresAt, now));

/**
 * A session as support reads it: `kicked` when a kick ended it while it was still valid, `expired` once
 * its time ran out (a kick after that ended nothing: it is not among the kick's tokens), else `active`.
 */
export function sessionStanding(s: { expiresAt: Date; revokedAt: Date | null }, now: Date): 'active' | 'kicked' | 'expired' {
  if (s.revokedAt !== null && !expiredAt(s.expiresAt, s.revokedAt)) return 'kicked';
  return expiredAt(s.expiresAt, now) || s.revokedAt !== null ? 'expired' : 'active';
}

/**
 * A kick is always recorded (an auditor sees that it happened, even with nothing to end); it ends
 * every open session, and lists the ones not yet expired as the sessions actually ended.
 */
function decideKick(cmd: Extract<SessionCommand, { type: 'RevokeSessions' }>, state: PlayerSessionsState): SessionsRevoked[] {
  return [
    {
      type: 'SessionsRevoked',
      data: { operatorId: cmd.operatorId, playerRef: cmd.playerRef, tokens: activeAt(state, cmd.now).map((s) => s.token), revokedAt: cmd.now.toISOString() },
    },
  ];
}

/** A launched session as the provider API sees it. */
export interface SessionFacts {
  playerRef: string;
  gameId: string;
  currency: string;
  demo: boolean;
  expired: boolean;
}

/**
 * Whether a transaction may use this session: its player, game and currency must be the session's, and
 * demo play never reaches the wallet. (A kick and expiry are the round's to decide: what was recorded
 * before them is still answered, and an expired session still settles its own rounds.)
 */
export function transactionSessionRefusal(session: SessionFacts, use: { playerRef: string; gameId: string; currency: string }): SessionRefusal | undefined {
  const field = (['playerRef', 'gameId', 'currency'] as const).find((f) => use[f] !== session[f]);
  if (field) return { kind: 'session-mismatch', field };
  if (session.demo) return { kind: 'demo-session' };
  return undefined;
}

/** Whether a balance may be asked with this session: it must be valid now (not kicked, not expired), and real play. */
export function balanceSessionRefusal(session: SessionFacts | undefined, revoked: boolean): SessionRefusal | undefined {
  if (!session || revoked || session.expired) return { kind: 'session-invalid' };
  if (session.demo) return { kind: 'demo-session' };
  return undefined;
}

function evolve(state: PlayerSessionsState, event: SessionEvent, meta: EventMeta): PlayerSessionsState {
  switch (event.type) {
    case 'SessionStarted': {
      const d = event.data;
      return { status: 'known', open: [...openSessions(state), { token: d.token, providerId: d.providerId, revision: meta.revision, expiresAt: d.expiresAt, demo: d.demo }] };
    }
    case 'SessionsRevoked':
      return { status: 'known', open: [] };
    default: {
      const unknown: never = event;
      return unknown;
    }
  }
}

export const playerSessionsDecider: Decider<SessionCommand, PlayerSessionsState, SessionEvent, SessionRefusal> = {
  initialState: () => ({ status: 'none' }),
  evolve,
  decide(command, state) {
    switch (command.type) {
      case 'StartSession':
        return decideLaunch(command);
      case 'RevokeSessions':
        return decideKick(command, state);
      default: {
        const unknown: never = command;
        return unknown;
      }
    }
  },
};
