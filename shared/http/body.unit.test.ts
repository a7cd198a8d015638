import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseJson, sameDecimal } from './body.ts';

describe('numbers in a request body', () => {
  it('compares number texts by their decimal value', () => {
    expect(sameDecimal('1.50', '1.5')).toBe(true);
    expect(sameDecimal('1e2', '100')).toBe(true);
    expect(sameDecimal('-0', '0')).toBe(true);
    expect(sameDecimal('0.000001', '0.000001')).toBe(true);
    expect(sameDecimal('1E-7', '1e-7')).toBe(true);
    expect(sameDecimal('100.0000000000000001', '100')).toBe(false);
    expect(sameDecimal('12345678901234567891', '12345678901234567000')).toBe(false);
    expect(sameDecimal('-1', '1')).toBe(false);
    expect(sameDecimal('1e400', 'Infinity')).toBe(false);
  });

  it('refuses a number exactly when a double would change its value, wherever it stands and however it is written', () => {
    const digits = (min: number, max: number) => fc.string({ unit: fc.constantFrom(...'0123456789'), minLength: min, maxLength: max });
    const numberText = fc
      .tuple(fc.boolean(), digits(1, 22), fc.option(digits(1, 22)), fc.option(fc.integer({ min: -400, max: 400 })))
      .map(([negative, int, fraction, exponent]) => `${negative ? '-' : ''}${int.replace(/^0+(?=\d)/, '')}${fraction !== null ? `.${fraction}` : ''}${exponent !== null ? `e${exponent}` : ''}`);
    fc.assert(
      fc.property(numberText, fc.constantFrom((n: string) => `{"a":${n}}`, (n: string) => `{"a": [1, ${n}]}`, (n: string) => `{"m":{"x":true,"b":\n ${n}}}`), (n, wrap) => {
        const changed = !sameDecimal(n, String(Number(n)));
        let refused = false;
        try {
          parseJson(wrap(n));
        } catch (err) {
          refused = true;
          expect((err as Error).message).toContain(`the number ${n.slice(0, 40)}`);
        }
        expect(refused, n).toBe(changed);
      }),
      { numRuns: 2000 },
    );
  });

  it('leaves strings alone, whatever digits they hold', () => {
    expect(parseJson('{"id":"12345678901234567891","e":"1e400"}')).toEqual({ id: '12345678901234567891', e: '1e400' });
  });
});
