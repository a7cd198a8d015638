import type { DomainEvent } from '../../shared/decider.ts';

export type SessionStarted = DomainEvent<
  'SessionStarted',
  {
    token: string;
    operatorId: string;
    playerRef: string;
    providerId: string;
    gameId: string;
    currency: string;
    /** Absent when the launch gave none (the game uses its default). */
    language?: string;
    lobbyUrl?: string;
    demo: boolean;
    createdAt: string;
    expiresAt: string;
  }
>;

/**
 * A kick. It ends every session of the player started before it (the fence the provider API checks);
 * `tokens` lists those that were still active, which is what the kick reports and notifies.
 */
export type SessionsRevoked = DomainEvent<
  'SessionsRevoked',
  {
    operatorId: string;
    playerRef: string;
    tokens: string[];
    revokedAt: string;
  }
>;

export type SessionEvent = SessionStarted | SessionsRevoked;

/** One stream per (operator, player): launches and kicks of that player are ordered in it. */
export function playerSessionsStream(operatorId: string, playerRef: string): string {
  return `player-sessions|${encodeURIComponent(operatorId)}|${encodeURIComponent(playerRef)}`;
}

/** The operator whose player-sessions stream this is. */
export function sessionsStreamOperator(streamId: string): string | undefined {
  const parts = streamId.split('|');
  return parts.length === 3 && parts[0] === 'player-sessions' ? decodeURIComponent(parts[1]!) : undefined;
}
