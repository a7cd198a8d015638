import { describe, expect, it } from 'vitest';
import { signingLate, whyNotSign } from './checkpoints.ts';

/** The chain's links by count, as its tables hold them. */
const chain = (links: Record<number, string>) => (count: number) => links[count];

describe('whyNotSign: a head is signed only over a chain that still holds what was signed', () => {
  const links = chain({ 10: 'aa', 20: 'bb', 30: 'cc' });

  it('signs a chain never signed, and one whose checkpoints still match it', () => {
    expect(whyNotSign(undefined, undefined, links)).toBeUndefined();
    expect(whyNotSign(undefined, { count: 20, link: 'bb' }, links)).toBeUndefined();
    expect(whyNotSign({ count: 10, link: 'aa' }, { count: 20, link: 'bb' }, links)).toBeUndefined();
    expect(whyNotSign({ count: 20, link: 'bb' }, { count: 20, link: 'bb' }, links)).toBeUndefined();
  });

  it('goes by the links, not by the checkpoints left: checkpoints deleted over a chain that still holds them are no refusal; a chain shorter than what was signed is one', () => {
    expect(whyNotSign({ count: 20, link: 'bb' }, undefined, links)).toBeUndefined();
    expect(whyNotSign({ count: 30, link: 'cc' }, { count: 20, link: 'bb' }, links)).toBeUndefined();
    expect(whyNotSign({ count: 40, link: 'dd' }, { count: 30, link: 'cc' }, links)).toMatch(/link at count 40 is no longer the one signed there/);
  });

  it('refuses when the chain no longer has the link signed at a checkpoint: its own, or the latest of any signer', () => {
    expect(whyNotSign({ count: 20, link: 'b0' }, { count: 30, link: 'cc' }, links)).toMatch(/link at count 20 is no longer the one signed there/);
    expect(whyNotSign({ count: 10, link: 'aa' }, { count: 30, link: 'c0' }, links)).toMatch(/link at count 30 is no longer the one its latest checkpoint signed/);
    expect(whyNotSign(undefined, { count: 40, link: 'dd' }, links)).toMatch(/count 40/);
  });

  it("refuses a head this process linked that the tables no longer hold (a failover that lost its commit)", () => {
    expect(whyNotSign({ count: 20, link: 'bb' }, { count: 20, link: 'bb' }, links, { count: 30, link: 'cc' })).toBeUndefined();
    expect(whyNotSign({ count: 20, link: 'bb' }, { count: 20, link: 'bb' }, links, { count: 40, link: 'dd' })).toMatch(/link at count 40, this process's last, is no longer in its tables/);
    expect(whyNotSign(undefined, undefined, links, { count: 30, link: 'c0' })).toMatch(/count 30/);
  });
});

describe('signingLate (the console: a signer that stopped signing)', () => {
  const at = (s: number) => new Date(Date.UTC(2026, 11, 1, 12, 0, s));
  it('is late only with events linked past a checkpoint older than two periods and half a minute', () => {
    const last = { count: 100, signedAt: at(0) };
    expect(signingLate(120, last, at(149), 60)).toBe(false);
    expect(signingLate(120, last, at(151), 60)).toBe(true);
    // Nothing new linked: nothing to sign, however old the checkpoint.
    expect(signingLate(100, last, at(3_600), 60)).toBe(false);
    // No checkpoint yet: nothing to measure from.
    expect(signingLate(120, undefined, at(3_600), 60)).toBe(false);
  });
});
