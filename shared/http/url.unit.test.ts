import { describe, expect, it } from 'vitest';
import { withQuery } from './url.ts';

describe('withQuery (launch and replay links)', () => {
  it('adds the parameters with ? or & as the base requires, URL-encoded, leaving out undefined ones', () => {
    expect(withQuery('https://g.test/play', { token: 'a b', language: undefined })).toBe('https://g.test/play?token=a%20b');
    expect(withQuery('https://g.test/play?x=1', { token: 't' })).toBe('https://g.test/play?x=1&token=t');
    expect(withQuery('https://g.test/play?', { token: 't' })).toBe('https://g.test/play?token=t');
    expect(withQuery('https://g.test/play?x=1&', { token: 't', lobby: 'https://l.test/?a=1&b=2' })).toBe('https://g.test/play?x=1&token=t&lobby=https%3A%2F%2Fl.test%2F%3Fa%3D1%26b%3D2');
  });

  it('puts them ahead of a fragment, so the token is in the query the browser sends', () => {
    const url = new URL(withQuery('https://r.test/x#/view', { token: 'tok' }));
    expect(url.searchParams.get('token')).toBe('tok');
    expect(url.hash).toBe('#/view');
    expect(withQuery('https://r.test/x?y=2#/view?z=3', { token: 'tok' })).toBe('https://r.test/x?y=2&token=tok#/view?z=3');
  });
});
