import type { Decider } from '../../shared/eventstore/command.ts';
import type { GrantEvent, GrantRequested } from './events.ts';

export type GrantStatus = 'pending' | 'active' | 'cancelled' | 'failed';

/** The grant as operators see it (API document 2.7, GrantResponseBody). */
export interface Grant {
  id: string;
  campaignId?: string;
  operatorId: string;
  providerId: string;
  gameId: string;
  playerRef: string;
  spins: number;
  betAmountMinor: number;
  currency: string;
  externalRef?: string;
  status: GrantStatus;
  idempotencyKey: string;
  expiresAt?: string;
  lastError?: string;
  createdAt: string;
  updatedAt: string;
}

export type GrantState = Grant | undefined;

export const grantDecider: Decider<GrantState, GrantEvent> = {
  initialState: () => undefined,
  evolve(state, event) {
    switch (event.type) {
      case 'GrantRequested': {
        const d = event.data;
        return {
          id: d.grantId,
          ...(d.campaignId !== undefined ? { campaignId: d.campaignId } : {}),
          operatorId: d.operatorId,
          providerId: d.providerId,
          gameId: d.gameId,
          playerRef: d.playerRef,
          spins: d.spins,
          betAmountMinor: d.betAmountMinor,
          currency: d.currency,
          status: 'pending',
          idempotencyKey: d.idempotencyKey,
          ...(d.expiresAt !== undefined ? { expiresAt: d.expiresAt } : {}),
          createdAt: d.requestedAt,
          updatedAt: d.requestedAt,
        };
      }
      case 'GrantActivated':
        return state && { ...state, status: 'active', externalRef: event.data.externalRef, updatedAt: event.data.activatedAt };
      case 'GrantFailed':
        return state && { ...state, status: 'failed', lastError: event.data.lastError, updatedAt: event.data.failedAt };
      case 'GrantCancelled':
        return state && { ...state, status: 'cancelled', updatedAt: event.data.cancelledAt };
      case 'GrantCancelFailed':
        // The grant stays active (API document 3.1); the failure is kept in the history.
        return state && { ...state, updatedAt: event.data.failedAt };
      default: {
        const unknown: never = event;
        return unknown;
      }
    }
  },
};

export function decideIssue(state: GrantState, data: GrantRequested['data']): GrantEvent[] {
  return state ? [] : [{ type: 'GrantRequested', data }];
}

/** The outcome of the issuing provider call; nothing if the grant already left pending. */
export function decideIssueOutcome(state: GrantState, outcome: { externalRef: string } | { error: string }, now: Date): GrantEvent[] {
  if (!state || state.status !== 'pending') return [];
  return 'externalRef' in outcome
    ? [{ type: 'GrantActivated', data: { externalRef: outcome.externalRef, activatedAt: now.toISOString() } }]
    : [{ type: 'GrantFailed', data: { lastError: outcome.error, failedAt: now.toISOString() } }];
}

export function decideCancelOutcome(state: GrantState, outcome: { ok: true } | { error: string }, now: Date): GrantEvent[] {
  if (!state || state.status !== 'active') return [];
  return 'ok' in outcome
    ? [{ type: 'GrantCancelled', data: { cancelledAt: now.toISOString() } }]
    : [{ type: 'GrantCancelFailed', data: { error: outcome.error, failedAt: now.toISOString() } }];
}
