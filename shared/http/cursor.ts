import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Migration } from '../db/migrations.ts';
import type { Pool } from '../db/pool.ts';
import { badRequest } from '../errors.ts';

/**
 * A page's cursor as the paged routes give it: opaque to callers, base64url of a JSON object each route
 * shapes and checks for itself, then a dot and a MAC of that JSON under a key of the database's own
 * (cursor_key, made at its first migration and shared by every process), so that a cursor the service
 * did not give, made up or altered by hand, is refused (contract section 9) rather than read from the
 * place it names. One wire format and one refusal for all the paged routes.
 */
export const cursorKeyMigrations: Migration[] = [
  {
    id: 'cursor-key-001',
    // 244 random bits (two version 4 UUIDs: gen_random_uuid, Postgres's strong random source), hashed.
    sql: `
      CREATE TABLE cursor_key (only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row), key bytea NOT NULL);
      INSERT INTO cursor_key (key) VALUES (sha256((gen_random_uuid()::text || gen_random_uuid()::text)::bytea));
    `,
  },
];

/** The 400 for a cursor no route of this service gave (or one it can no longer read). */
export const notOurCursor = () => badRequest('cursor: not a cursor this service gave (pass nextCursor as it was answered)');

/** Bytes of the MAC a cursor carries (128 bits of HMAC-SHA256). */
const MAC_BYTES = 16;

export class Cursors {
  constructor(private readonly key: Buffer) {}

  /** The cursor of `body`. */
  encode(body: Record<string, unknown>): string {
    const json = Buffer.from(JSON.stringify(body));
    return `${json.toString('base64url')}.${this.mac(json).toString('base64url')}`;
  }

  /** The cursor's object, its fields still to be checked by the route; a cursor this service did not give (or cannot read) is notOurCursor. */
  decode(cursor: string): Record<string, unknown> {
    const dot = cursor.indexOf('.');
    if (dot < 0) {
      // The unsigned form the service gave before its cursors were signed: after an upgrade, start again.
      if (objectOf(Buffer.from(cursor, 'base64url')) !== undefined) throw badRequest('cursor: given by an earlier version of the service; start again without a cursor');
      throw notOurCursor();
    }
    const json = Buffer.from(cursor.slice(0, dot), 'base64url');
    const mac = Buffer.from(cursor.slice(dot + 1), 'base64url');
    if (mac.length !== MAC_BYTES || !timingSafeEqual(mac, this.mac(json))) throw notOurCursor();
    // Only the text it gave: base64url decoding ignores what it cannot read (a changed last character, say).
    if (cursor !== `${json.toString('base64url')}.${mac.toString('base64url')}`) throw notOurCursor();
    const body = objectOf(json);
    if (body === undefined) throw notOurCursor();
    return body;
  }

  private mac(json: Buffer): Buffer {
    return createHmac('sha256', this.key).update(json).digest().subarray(0, MAC_BYTES);
  }
}

/** The JSON object `json` holds, or undefined. */
function objectOf(json: Buffer): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = JSON.parse(json.toString('utf8'));
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The cursors of this database (its cursor_key, after the migrations). */
export async function loadCursors(pool: Pool): Promise<Cursors> {
  const { rows } = await pool.query<{ key: Buffer }>('SELECT key FROM cursor_key');
  if (!rows[0]) throw new Error('cursor_key holds no key: the database was not migrated');
  return new Cursors(rows[0].key);
}
