import { describe, expect, it } from 'vitest';
import { Cursors } from './cursor.ts';

const cursors = new Cursors(Buffer.alloc(32, 1));
const message = (f: () => unknown): string => {
  try {
    f();
  } catch (err) {
    return (err as Error).message;
  }
  return 'accepted';
};

describe('paged routes’ cursors: signed, so only a cursor the service gave is read', () => {
  it('reads back what it gave', () => {
    const body = { v: 2, s: 'postgres', q: 'abc', a: '12.34' };
    expect(cursors.decode(cursors.encode(body))).toEqual(body);
  });

  it('refuses a cursor altered, made up, or given under another database’s key', () => {
    const given = cursors.encode({ v: 2, a: '12.34' });
    const [body, mac] = given.split('.') as [string, string];
    const forged = Buffer.from(JSON.stringify({ v: 2, a: '0.0' })).toString('base64url');
    const lastChanged = `${body}.${mac.slice(0, -1)}${mac.endsWith('A') ? 'B' : 'A'}`;
    for (const bad of [`${forged}.${mac}`, `${body}.${mac.slice(0, -2)}`, `${body}.`, `${body}.${mac}x`, `${body}x.${mac}`, lastChanged, new Cursors(Buffer.alloc(32, 2)).encode({ v: 2, a: '12.34' }), '.', 'nope', '']) {
      expect(message(() => cursors.decode(bad)), bad).toMatch(/^cursor: not a cursor this service gave/);
    }
  });

  it('says so of the unsigned form the service gave before an upgrade', () => {
    const old = Buffer.from(JSON.stringify({ v: 2, a: '12.34' })).toString('base64url');
    expect(message(() => cursors.decode(old))).toMatch(/^cursor: given by an earlier version of the service/);
  });
});
