import { describe, expect, it } from 'vitest';
import { repeatedTopLevelName } from './json-keys.ts';

const NAMES = ['status', 'balance'];

describe('repeatedTopLevelName', () => {
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
  ])('%s -> %s', (text, repeated) => {
    JSON.parse(text);
    expect(repeatedTopLevelName(text, NAMES)).toBe(repeated);
  });
});
