import { describe, expect, it } from 'vitest';
import { sentAfterToldFailed } from '../faults/run.ts';

/**
 * The fault simulator's check that a BET its provider was told failed (and closed its round on) is never
 * sent again. A CI run under load (seed 2034170204, 2026-12-01) flagged three timed-out BETs whose one
 * call reached the wallet after the 504: the call timed out before the wallet read it, which is no call
 * made after the answer. A call signed after the answer's second always counts.
 */
describe('sentAfterToldFailed', () => {
  const told = 10_400; // the answer, 400 ms into the second that starts at 10,000
  const call = (at: number, signedAt = 10_000) => ({ at, signedAt });
  it('does not count the BET’s own call reaching the wallet late, when it is the only call made and signed no later than the answer', () => {
    expect(sentAfterToldFailed([call(10_900)], told, 1)).toBe(0);
    expect(sentAfterToldFailed([call(10_300)], told, 1)).toBe(0);
  });
  it('counts a call signed in a later second than the answer, whatever else', () => {
    expect(sentAfterToldFailed([call(11_200, 11_000)], told, 1)).toBe(1);
    expect(sentAfterToldFailed([call(11_200, 11_000)], told, 0)).toBe(1);
  });
  it('counts every arrival after the answer once there was more than one call', () => {
    expect(sentAfterToldFailed([call(10_300), call(10_500)], told, 1)).toBe(1);
    expect(sentAfterToldFailed([call(10_500), call(10_600)], told, 2)).toBe(2);
    expect(sentAfterToldFailed([call(10_500)], told, 2)).toBe(1);
    expect(sentAfterToldFailed([call(10_100), call(10_200)], told, 2)).toBe(0);
  });
});
