import { describe, expect, it } from 'vitest';
import { repeatedName } from './json-keys.ts';

const REPLY = ['status', 'balance'];

describe('repeatedName', () => {
  it.each([
    ['{"status":"OK","balance":1}', undefined],
    ['{"status":"OK","balance":1,"status":"DECLINED"}', 'status'],
    ['{ "balance" : 1 , "status":"OK", "balance" :2 }', 'balance'],
    // Written with an escape, the name is the same.
    ['{"status":"OK","balance":1,"st\\u0061tus":"DECLINED"}', 'status'],
    // Nested or as a value, it is not the reply's own field.
    ['{"status":"OK","balance":1,"detail":{"status":"x","balance":2}}', undefined],
    ['{"status":"OK","balance":1,"notes":["status","balance"],"why":"status"}', undefined],
    ['{"status":"OK","balance":1,"q":"a \\" \\"status\\": b"}', undefined],
    ['{"status":"OK","balance":1,"other":1,"other":2}', undefined],
  ])('of a wallet reply\'s own fields: %s -> %s', (text, repeated) => {
    JSON.parse(text);
    expect(repeatedName(text, REPLY)).toBe(repeated);
  });

  it.each([
    ['{"amount":100,"type":"BET"}', undefined],
    ['{"amount":100,"type":"BET","amount":5}', 'amount'],
    // In a nested object, and only within one object: two objects may share names.
    ['{"metadata":{"id":1,"id":2}}', 'id'],
    ['{"a":{"id":1},"b":{"id":2},"c":[{"id":1},{"id":2}]}', undefined],
    ['{"a":[{"x":1,"y":{"x":2}}],"x":3}', undefined],
    ['{"list":[{"k":1,"k":2}]}', 'k'],
    ['{"a\\u0062":1,"ab":2}', 'ab'],
    ['{"s":"{\\"x\\":1,\\"x\\":2}"}', undefined],
    ['[1,2,{"z":1}]', undefined],
  ])('anywhere: %s -> %s', (text, repeated) => {
    JSON.parse(text);
    expect(repeatedName(text)).toBe(repeated);
  });

  it('ends on text that is not JSON after all (an unterminated string), whatever it answers', () => {
    expect(() => repeatedName('{"a":"never closed')).not.toThrow();
  });
});
