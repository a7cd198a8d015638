import { randomUUID } from 'node:crypto';

/**
 * JSON text in which every bigint is written as its bare digits: a sum of amounts (each up to 2^53 - 1)
 * may pass 2^53, which a JSON number holds exactly but a JavaScript number does not.
 */
export function bigJson(value: unknown): string {
  // A marker no value can hold (a fresh random id), replaced by the bare digits once serialized.
  const mark = `bigint:${randomUUID()}:`;
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? `${mark}${v.toString()}` : v)).replace(new RegExp(`"${mark}(-?\\d+)"`, 'g'), '$1');
}
