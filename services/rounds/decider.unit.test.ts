import { describe, expect, it } from 'vitest';
import { decideOutcome, decideRecord, roundDecider, type RecordTransaction, type RoundState } from './decider.ts';
import type { RoundEvent, TransactionRequest } from './events.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';

/** given(events) / when(command) / then(events or refusal), for the round rules of contract sections 5 and 8. */
const NOW = new Date('2026-11-24T12:00:00Z');
const bet: TransactionRequest = { transactionId: 'b1', sessionToken: 's1', type: 'BET', roundId: 'r1', roundComplete: false, playerRef: 'p1', amount: 100, currency: 'EUR', gameId: 'g1' };
const rollback: TransactionRequest = { ...bet, transactionId: 'rb1', type: 'ROLLBACK', originalTransactionId: 'b1' };

const given = (...events: RoundEvent[]): RoundState =>
  events.reduce((s, e, i) => roundDecider.evolve(s, e, { revision: i } as RecordedEvent), roundDecider.initialState());
const recorded = (request: TransactionRequest): RoundEvent => ({
  type: 'TransactionRecorded',
  data: { providerId: 'a', operatorId: 'op', origin: 'provider', request, walletBody: JSON.stringify(request), contentHash: `h-${request.transactionId}`, recordedAt: NOW.toISOString() },
});
const settled = (transactionId: string): RoundEvent => ({
  type: 'TransactionSettled',
  data: { transactionId, outcome: 'applied', reply: { status: 'OK', balance: 1, body: '{}' }, attempt: 1, settledAt: NOW.toISOString() },
});
const when = (state: RoundState, request: TransactionRequest, over: Partial<RecordTransaction> = {}) => () =>
  decideRecord(state, { request, providerId: 'a', operatorId: 'op', origin: 'provider', contentHash: `h-${request.transactionId}`, now: NOW, sessionExpired: false, sessionRevoked: false, ...over });
const refusal = (status: number, error: string) => expect.objectContaining({ status, message: expect.stringMatching(error) });

describe('round decider', () => {
  it('refuses a ROLLBACK whose amount or currency is not its BET’s (400), before any other round rule', () => {
    const state = given(recorded(bet), settled('b1'));
    expect(when(state, { ...rollback, amount: 99_999_999 })).toThrow(refusal(400, "^amount: a ROLLBACK must carry its BET's amount \\(100\\)$"));
    expect(when(state, { ...rollback, currency: 'USD' })).toThrow(refusal(400, '^currency: '));
    expect(when(state, rollback)().kind).toBe('record');
  });

  it('refuses a transaction in another currency than the round’s first (409)', () => {
    const state = given(recorded(bet));
    expect(when(state, { ...bet, transactionId: 'w1', type: 'WIN', currency: 'USD', amount: 5000 })).toThrow(refusal(409, '^round is in another currency$'));
  });

  it('answers a kicked session’s resubmission from what was recorded, and refuses anything new with 401', () => {
    const state = given(recorded(bet), settled('b1'));
    expect(when(state, bet, { sessionRevoked: true })()).toMatchObject({ kind: 'existing', tx: { status: 'applied' } });
    expect(when(state, { ...bet, transactionId: 'w1', type: 'WIN' }, { sessionRevoked: true })).toThrow(refusal(401, '^invalid session$'));
    // A kick is refused as such even when the round would refuse it too.
    expect(when(state, { ...rollback, amount: 1 }, { sessionRevoked: true })).toThrow(refusal(401, '^invalid session$'));
  });

  it('voids a BET the wallet has not answered when its ROLLBACK is recorded, and only such a BET', () => {
    const unanswered = when(given(recorded(bet)), rollback)();
    expect(unanswered.kind === 'record' && unanswered.events.map((e) => e.type)).toEqual(['TransactionRecorded', 'TransactionVoided']);
    const answered = when(given(recorded(bet), settled('b1')), rollback)();
    expect(answered.kind === 'record' && answered.events.map((e) => e.type)).toEqual(['TransactionRecorded']);
    const state = given(recorded(bet), ...(unanswered.kind === 'record' ? unanswered.events : []));
    expect(state.txs.get('b1')?.status).toBe('voided');
  });

  it('records the reply of a voided BET’s attempt that was in flight, but not its failure', () => {
    const state = given(recorded(bet), recorded(rollback), { type: 'TransactionVoided', data: { transactionId: 'b1', rollbackTransactionId: 'rb1', voidedAt: NOW.toISOString() } });
    expect(decideOutcome(state, 'b1', 1, { kind: 'timed_out' }, NOW)).toEqual([]);
    expect(decideOutcome(state, 'b1', 1, { kind: 'reply', reply: { status: 'OK', balance: 9900, body: '{}' } }, NOW)).toMatchObject([{ type: 'TransactionSettled', data: { outcome: 'applied' } }]);
  });
});
