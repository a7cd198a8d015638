import { describe, expect, it } from 'vitest';
import { adjustmentAnswer } from './answers.ts';
import type { TxState, TxStatus } from './decider.ts';
import { ADMIN_SESSION } from './events.ts';

const adjustment = (status: TxStatus): TxState => ({
  request: { transactionId: 'adj-1', type: 'ADJUSTMENT', direction: 'CREDIT', amount: 5, currency: 'EUR', playerRef: 'p', roundId: 'adjustment:adj-1', roundComplete: false, gameId: '', sessionToken: ADMIN_SESSION },
  providerId: 'platform',
  operatorId: 'op-1',
  reachedWallet: true,
  origin: 'admin',
  walletBody: '{}',
  contentHash: '',
  status,
  attempts: 1,
  recordedAt: '2026-11-21T16:00:00.000Z',
});

describe('adjustmentAnswer', () => {
  it.each<[TxStatus, number, boolean]>([
    ['applied', 200, false],
    ['invalid', 502, false],
    ['dead', 202, false],
    ['failed', 202, true],
    ['timed_out', 202, true],
    // Held by another attempt past the wait: the worker still attempts it.
    ['recorded', 202, true],
  ])('%s: %i, retrying %s', (status, code, retrying) => {
    const answer = adjustmentAnswer(adjustment(status));
    expect([answer.status, answer.body.status, answer.body.retrying]).toEqual([code, status, retrying]);
  });
});
