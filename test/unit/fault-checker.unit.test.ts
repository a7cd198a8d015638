import { describe, expect, it } from 'vitest';
import { sentAfterToldFailed } from '../faults/run.ts';

/**
 * The fault simulator's check that a BET its provider was told failed (and closed its round on) is never
 * sent again. A CI run under load (seed 2034170204, 2026-12-01) flagged three timed-out BETs whose one
 * call reached the wallet after the 504: the call timed out before the wallet read it, which is no call
 * made after the answer.
 */
describe('sentAfterToldFailed', () => {
  const told = 1_000;
  it('does not count the BET’s own call reaching the wallet late, when it is the only call made', () => {
    expect(sentAfterToldFailed([1_200], told, 1)).toBe(0);
    expect(sentAfterToldFailed([900], told, 1)).toBe(0);
  });
  it('counts every arrival after the answer once there was more than one call', () => {
    expect(sentAfterToldFailed([900, 1_200], told, 1)).toBe(1);
    expect(sentAfterToldFailed([1_100, 1_200], told, 2)).toBe(2);
    expect(sentAfterToldFailed([1_200], told, 2)).toBe(1);
    expect(sentAfterToldFailed([900, 950], told, 2)).toBe(0);
  });
});
