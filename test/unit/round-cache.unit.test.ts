import { describe, expect, it } from 'vitest';
import { RoundCache, roundBytes } from '../../services/rounds/round-cache.ts';
import { roundDecider, type RoundState, type TxState } from '../../services/rounds/decider.ts';

const tx = (id: string, status: TxState['status']): TxState => ({
  request: { transactionId: id, sessionToken: 't', type: 'BET', roundId: 'r', roundComplete: false, playerRef: 'p', amount: 1, currency: 'EUR', gameId: 'g' },
  providerId: 'prov',
  operatorId: 'op',
  reachedWallet: true,
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

  /** A BET the wallet answered with a body of `size` characters (a reply may be up to 1 MiB, kept verbatim). */
  const answered = (id: string, size: number): TxState => ({ ...tx(id, 'applied'), reply: { status: 'OK', balance: 1, body: `{"status":"OK","balance":1,"pad":"${'x'.repeat(size)}"}` } });
  const MiB = 1024 * 1024;

  it('holds no more than its bound in bytes when a wallet pads its replies: the rounds used last are kept', () => {
    const cache = new RoundCache(20_000, 32 * MiB);
    for (let i = 0; i < 100; i++) cache.put(`r${i}`, { state: state({ txs: new Map([[`b${i}`, answered(`b${i}`, MiB - 40)]]) }), revision: 0 });
    expect(cache.heldBytes).toBeLessThanOrEqual(32 * MiB);
    expect(cache.size).toBe(15); // each about 2 MiB (two bytes a character, at most)
    expect(cache.get('r99')).toBeDefined();
    expect(cache.get('r84')).toBeUndefined();
    // Ordinary rounds (about 1.5 KB each) still find room, and push out the large round used least recently.
    for (let i = 0; i < 2000; i++) cache.put(`s${i}`, { state: state({ txs: new Map([[`t${i}`, tx(`t${i}`, 'applied')]]) }), revision: 0 });
    expect(cache.get('s0')).toBeDefined();
    expect(cache.get('r85')).toBeUndefined();
    expect(cache.get('r86')).toBeDefined();
    expect(cache.heldBytes).toBeLessThanOrEqual(32 * MiB);
  });

  it('does not keep a round larger than its whole bound, nor the earlier snapshot of it', () => {
    const cache = new RoundCache(100, 64 * 1024);
    cache.put('s', { state: state({ txs: new Map([['a', tx('a', 'recorded')]]) }), revision: 1 });
    cache.put('s', { state: state({ txs: new Map([['a', answered('a', 100 * 1024)]]) }), revision: 2 });
    expect(cache.get('s')).toBeUndefined();
    expect(cache.heldBytes).toBe(0);
  });

  it('counts a round once however often it is replaced, and nothing once it is let go', () => {
    const cache = new RoundCache();
    const open = state({ txs: new Map([['a', answered('a', 5000)], ['w', tx('w', 'recorded')]]) });
    for (let rev = 1; rev <= 5; rev++) cache.put('s', { state: open, revision: rev });
    expect(cache.heldBytes).toBe(roundBytes(open));
    cache.put('s', { state: state({ completed: true, txs: new Map([['a', answered('a', 5000)], ['w', tx('w', 'applied')]]) }), revision: 6 });
    expect(cache.size).toBe(0);
    expect(cache.heldBytes).toBe(0);
  });
});
