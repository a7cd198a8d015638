import type { Decider } from '../../shared/eventstore/command.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';
import type { SessionEvent, SessionsRevoked, SessionStarted } from './events.ts';

export interface SessionRecord {
  token: string;
  providerId: string;
  /** Stream revision of its SessionStarted. */
  revision: number;
  expiresAt: string;
  demo: boolean;
}

export interface PlayerSessionsState {
  /** Sessions not ended by a kick, in start order (expired ones included). */
  open: SessionRecord[];
}

export const playerSessionsDecider: Decider<PlayerSessionsState, SessionEvent> = {
  initialState: () => ({ open: [] }),
  evolve(state, event, recorded: RecordedEvent) {
    switch (event.type) {
      case 'SessionStarted': {
        const d = event.data;
        return { open: [...state.open, { token: d.token, providerId: d.providerId, revision: recorded.revision, expiresAt: d.expiresAt, demo: d.demo }] };
      }
      case 'SessionsRevoked':
        return { open: [] };
      default: {
        const unknown: never = event;
        return unknown;
      }
    }
  },
};

export interface StartSession {
  type: 'StartSession';
  data: Omit<SessionStarted['data'], 'createdAt' | 'expiresAt'>;
  now: Date;
  ttlSeconds: number;
}

export interface RevokeSessions {
  type: 'RevokeSessions';
  operatorId: string;
  playerRef: string;
  now: Date;
}

export function decideStart(cmd: StartSession): { events: SessionStarted[]; result: SessionStarted['data'] } {
  const data: SessionStarted['data'] = {
    ...cmd.data,
    createdAt: cmd.now.toISOString(),
    expiresAt: new Date(cmd.now.getTime() + cmd.ttlSeconds * 1000).toISOString(),
  };
  return { events: [{ type: 'SessionStarted', data }], result: data };
}

/**
 * A kick is always recorded (an auditor sees that it happened, even with nothing to end); it ends
 * every open session, and reports the ones not yet expired as the sessions actually ended.
 */
export function decideRevoke(state: PlayerSessionsState, cmd: RevokeSessions): { events: SessionsRevoked[]; result: SessionRecord[] } {
  const active = state.open.filter((s) => Date.parse(s.expiresAt) > cmd.now.getTime());
  return {
    events: [
      {
        type: 'SessionsRevoked',
        data: { operatorId: cmd.operatorId, playerRef: cmd.playerRef, tokens: active.map((s) => s.token), revokedAt: cmd.now.toISOString() },
      },
    ],
    result: active,
  };
}
