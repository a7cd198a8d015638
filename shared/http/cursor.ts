import { badRequest } from '../errors.ts';

/**
 * A page's cursor as the paged routes give it: opaque to callers, base64url of a JSON object each route
 * shapes and checks for itself. One wire format and one refusal for all of them.
 */
export const encodeCursor = (body: Record<string, unknown>): string => Buffer.from(JSON.stringify(body)).toString('base64url');

/** The 400 for a cursor no route of this service gave (or one it can no longer read). */
export const notOurCursor = () => badRequest('cursor: not a cursor this service gave (pass nextCursor as it was answered)');

/** The cursor's object, its fields still to be checked by the route; anything else (not base64url JSON of an object) is notOurCursor. */
export function decodeCursor(cursor: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw notOurCursor();
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw notOurCursor();
  return parsed as Record<string, unknown>;
}
