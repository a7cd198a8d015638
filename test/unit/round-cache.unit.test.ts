import { describe, expect, it } from 'vitest';
import { RoundCache } from '../../services/rounds/round-cache.ts';
import { roundDecider, type RoundState, type TxState } from '../../services/rounds/decider.ts';

const tx = (id: string, status: TxState['status']): TxState => ({
  request: { transactionId: id, sessionToken: 't', type: 'BET', roundId: 'r', roundComplete: false, playerRef: 'p', amount: 1, currency: 'EUR', gameId: 'g' },
  providerId: 'prov',
  operatorId: 'op',
  origin: 'provider',
  walletBody: '{}',
  contentHash: 'h',
  status,
  attempts: 1,
  recordedAt: '2026-01-01T00:00:00.000Z',
});
const state = (over: { completed?: boolean; txs?: RoundState['txs'] } = {}): RoundState =>
  over.txs ? { status: over.completed ? 'completed' : 'open', txs: over.txs, playerRef: 'p', currency: 'EUR', gameId: 'g', lastActivityAt: '2026-01-01T00:00:00.000Z' } : roundDecider.initialState();

describe('RoundCache', () => {
  it('hands out what it keeps as unverified, and never goes back to an earlier revision', () => {
    const cache = new RoundCache();
    const later = state({ txs: new Map([['a', tx('a', 'applied')], ['b', tx('b', 'recorded')]]) });
    cache.put('s', { state: later, revision: 3 });
    cache.put('s', { state: state(), revision: 1 });
    expect(cache.get('s')).toEqual({ state: later, revision: 3, unverified: true });
    expect(cache.get('unknown')).toBeUndefined();
  });

  it('lets a round go once it is complete and every transaction is settled for good', () => {
    const cache = new RoundCache();
    cache.put('s', { state: state({ txs: new Map([['a', tx('a', 'applied')]]) }), revision: 1 });
    cache.put('s', { state: state({ completed: true, txs: new Map([['a', tx('a', 'applied')], ['w', tx('w', 'failed')]]) }), revision: 3 });
    expect(cache.get('s')?.revision).toBe(3); // a credit still to retry: kept
    cache.put('s', { state: state({ completed: true, txs: new Map([['a', tx('a', 'applied')], ['w', tx('w', 'applied')]]) }), revision: 4 });
    expect(cache.get('s')).toBeUndefined();
  });

  it('keeps at most its bound, dropping the round used least recently', () => {
    const cache = new RoundCache(2);
    cache.put('a', { state: state(), revision: 0 });
    cache.put('b', { state: state(), revision: 0 });
    cache.get('a');
    cache.put('c', { state: state(), revision: 0 });
    expect(cache.size).toBe(2);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toBeDefined();
    expect(cache.get('c')).toBeDefined();
  });
});
