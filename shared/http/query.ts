import { z } from 'zod';

/**
 * A page's `limit` in a query string: decimal digits only, 1 to `max`. (z.coerce.number() would take
 * "0x10", "1e2" or " 5" as numbers: a limit is written one way.) Documented as the integer it becomes.
 */
export const queryLimit = (max: number) => {
  const message = `must be a whole number from 1 to ${max}`;
  return z.preprocess((v) => (typeof v === 'string' && /^\d{1,7}$/.test(v) ? Number(v) : v), z.number({ message }).int(message).min(1, message).max(max, message));
};

/**
 * An RFC 3339 instant with a time zone in a query string. A query string decodes an unencoded "+" as a
 * space, so "…T00:00:00 01:00" (which is no other valid form) is read as the "+01:00" the caller wrote;
 * a lowercase "t" or "z", which RFC 3339 allows, is read as the capital.
 */
export const queryInstant = (message: string) =>
  z.preprocess(
    (v) =>
      typeof v === 'string'
        ? v
            .replace(/^(\d{4}-\d{2}-\d{2})t/, '$1T')
            .replace(/z$/, 'Z')
            .replace(/^(\d{4}-\d{2}-\d{2}T[\d:.]+) (\d{2}:\d{2})$/, '$1+$2')
        : v,
    z.iso.datetime({ offset: true, message }),
  );
