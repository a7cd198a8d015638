import { createHash } from 'node:crypto';

/**
 * JSON with object keys sorted at every level: equal values give equal text, whatever the key order.
 * Keys in ascending order of their UTF-16 code units (what Array.prototype.sort does to strings), a key
 * whose value is undefined left out, no whitespace, every leaf as JSON.stringify writes it. The chain's
 * links and the transaction content hashes are computed over it: its output must never change.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out += ',';
      // As Array.prototype.join writes an element with no JSON form (undefined): nothing.
      out += canonicalJson(value[i]) ?? '';
    }
    return `${out}]`;
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record).sort();
  let out = '{';
  let first = true;
  for (const k of keys) {
    const v = record[k];
    if (v === undefined) continue;
    if (!first) out += ',';
    first = false;
    out += `${JSON.stringify(k)}:${canonicalJson(v)}`;
  }
  return `${out}}`;
}

export function contentHash(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex');
}
