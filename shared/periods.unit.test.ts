import { describe, expect, it } from 'vitest';
import { periodStart } from './periods.ts';

const direct = (iso: string, periodMs: number) => new Date(Math.floor(Date.parse(iso) / periodMs) * periodMs).toISOString();

describe('periodStart', () => {
  it('is the start of the minute or quarter hour a time falls in, as Date arithmetic gives it, for any spelling of the time', () => {
    const times = ['2026-11-28T04:22:09.123Z', '2026-11-28T04:29:59.999Z', '2026-11-28T04:30:00.000Z', '2026-11-28T05:22:09+01:00', '1969-12-31T23:59:30.500Z', '2026-11-28T04:22:09.123456Z'];
    for (const iso of times) {
      for (const period of [60_000, 15 * 60_000]) expect(periodStart(iso, period)).toBe(direct(iso, period));
    }
    expect(periodStart('2026-11-28T04:29:59.999Z', 15 * 60_000)).toBe('2026-11-28T04:15:00.000Z');
    expect(periodStart('1969-12-31T23:59:30.500Z', 60_000)).toBe('1969-12-31T23:59:00.000Z');
  });

  it('gives the same answers after more periods than it keeps (the kept starts are dropped and made again)', () => {
    const base = Date.parse('2026-01-01T00:00:00.000Z');
    // 6,000 minutes, each seen twice: more than the 4,096 starts it keeps.
    for (let i = 0; i < 12_000; i++) {
      const iso = new Date(base + Math.floor(i / 2) * 60_000 + (i % 2) * 59_999).toISOString();
      expect(periodStart(iso, 60_000)).toBe(direct(iso, 60_000));
    }
  });

  it('refuses a time it cannot read, as Date does, and keeps nothing for it', () => {
    expect(() => periodStart('not a time', 60_000)).toThrow(RangeError);
    expect(() => periodStart('not a time', 60_000)).toThrow(RangeError);
  });
});
