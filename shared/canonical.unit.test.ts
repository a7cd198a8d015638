import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from './canonical.ts';

/** The first implementation, kept as the reference: content hashes and chain links already stored were computed with it. */
function reference(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(reference).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${reference(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

describe('canonicalJson', () => {
  it('writes exactly what the first implementation wrote, for any JSON value (and undefined members)', () => {
    const value = fc.letrec((tie) => ({
      leaf: fc.oneof(fc.string({ unit: 'binary' }), fc.integer(), fc.double(), fc.boolean(), fc.constant(null), fc.constant(undefined)),
      node: fc.oneof({ depthSize: 'small' }, tie('leaf'), fc.array(tie('node')), fc.dictionary(fc.string({ unit: 'binary' }), tie('node'))),
    })).node;
    fc.assert(
      fc.property(value, (v) => {
        expect(canonicalJson(v)).toBe(reference(v));
      }),
      { numRuns: 2000 },
    );
  });

  it('orders keys by UTF-16 code units at every level, without whitespace', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { z: true, y: null }], c: 'x' }, é: 2, Z: 3 })).toBe('{"Z":3,"a":{"c":"x","d":[1,{"y":null,"z":true}]},"b":1,"é":2}');
  });
});
