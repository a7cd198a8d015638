import { describe, expect, it } from 'vitest';
import { preferredType } from './negotiate.ts';

const OFFERS = ['application/json', 'text/csv'] as const;

describe('preferredType (content negotiation of the settlement statement)', () => {
  it.each([
    ['text/csv', 'text/csv'],
    ['TEXT/CSV', 'text/csv'],
    ['text/*', 'text/csv'],
    // A parameter asks for a variant of the type: the type is still the one wanted.
    ['text/csv; charset=utf-8', 'text/csv'],
    ['text/csv;header=present', 'text/csv'],
    ['text/csv; charset="UTF-8"; q=0.9, application/json; q=0.5', 'text/csv'],
    ['application/json; q=0.9, text/csv; charset=utf-8; q=0.5', 'application/json'],
    ['application/json', 'application/json'],
    ['*/*', 'application/json'],
    // Ranges of equal weight: the client's order.
    ['text/csv, application/json', 'text/csv'],
  ])('Accept: %s → %s', (accept, expected) => {
    expect(preferredType(accept, OFFERS)).toBe(expected);
  });

  it('answers the first offer without an Accept header, and nothing for a range that accepts none', () => {
    expect(preferredType(undefined, OFFERS)).toBe('application/json');
    expect(preferredType('image/png', OFFERS)).toBeUndefined();
    expect(preferredType('text/csv; q=0', OFFERS)).toBeUndefined();
  });
});
