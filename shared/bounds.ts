import { z } from 'zod';

/**
 * The ranges of the numbers the service accepts (#18 part 8: no poison input). Every one fits where it
 * is stored and projected; the OpenAPI document shows the same minimum and maximum, because it is
 * generated from the schemas below.
 *
 * - Amounts in minor units: 0 to 2^53-1 (Number.MAX_SAFE_INTEGER), exact in a JSON number and in JS,
 *   stored in bigint columns (sums of amounts in numeric ones).
 * - Free spins per grant or campaign: 1 to 1,000,000. A batch larger than that is a typo or an attack,
 *   not a promotion; providers keep spin counts in 32-bit integers.
 * - Timeouts of outbound calls: 1 to 60,000 ms (a wallet or provider call longer than a minute is a
 *   failed call; Node's timers overflow past 2^31-1 ms and would fire at once).
 * - Rate limit: 1 to 1,000,000 requests per window of 1 to 86,400 seconds (one day).
 */
export const MAX_AMOUNT_MINOR = Number.MAX_SAFE_INTEGER;
export const MAX_SPINS = 1_000_000;
export const MAX_TIMEOUT_MS = 60_000;
export const MAX_RATE_LIMIT = 1_000_000;
export const MAX_RATE_WINDOW_SECONDS = 86_400;

/** An amount in minor units, >= 0. */
export const amountMinor = () => z.number().int().min(0, 'expected a non-negative integer').max(MAX_AMOUNT_MINOR, `expected at most ${MAX_AMOUNT_MINOR}`);

/** A number of free spins, > 0. */
export const spinCount = () => z.number().int().min(1, 'expected a positive integer').max(MAX_SPINS, `expected at most ${MAX_SPINS}`);

/** A timeout of an outbound call, in ms. */
export const timeoutMs = () => z.number().int().min(1).max(MAX_TIMEOUT_MS, `expected at most ${MAX_TIMEOUT_MS} (ms)`);

/**
 * A bigint column read through pg (a decimal string) as a number: only a safe integer, or it throws
 * rather than answer a rounded figure.
 */
export function safeIntegerFrom(value: string | number, what: string): number {
  const n = typeof value === 'number' ? value : Number(value);
  if (!Number.isSafeInteger(n) || (typeof value === 'string' && String(n) !== value)) throw new Error(`${what}: ${String(value)} is not a safe integer`);
  return n;
}

/** A currency: an upper-case ISO-4217 code. The one definition every schema and rule uses. */
export const CURRENCY_PATTERN = /^[A-Z]{3}$/;
export const CURRENCY_MESSAGE = 'expected an upper-case ISO-4217 code';
export const currencyCode = (message = CURRENCY_MESSAGE) => z.string().regex(CURRENCY_PATTERN, message);
