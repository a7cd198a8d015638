import { z } from 'zod';
import { queryInstant, queryLimit } from '../../shared/http/query.ts';
import { OPERATOR_STATUSES } from '../rounds/decider.ts';
import { TRANSACTION_TYPES } from '../rounds/events.ts';

// The operator reconciliation routes (contract section 9): their queries and answers. The OpenAPI
// document is generated from these, and the tests check real answers against them.

/** The longest interval a time range or a statement may span. */
export const MAX_INTERVAL_DAYS = 31;
const MAX_INTERVAL_MS = MAX_INTERVAL_DAYS * 86_400_000;

/**
 * An RFC 3339 instant (queryInstant), whose UTC year is 1 to 9999, the years Postgres's timestamps hold
 * (year 1 at +01:00 is year 0 in UTC).
 */
const instant = () =>
  queryInstant('must be an RFC 3339 date-time with a time zone, such as 2026-11-24T00:00:00Z').refine((v) => {
    const year = new Date(Date.parse(v)).getUTCFullYear();
    return year >= 1 && year <= 9999;
  }, 'must fall in the years 1 to 9999 in UTC');

/** An instant in nanoseconds since the epoch, exact to the digits given (Date keeps milliseconds only). */
const nanos = (iso: string): bigint => {
  const fraction = /\.(\d+)/.exec(iso)?.[1] ?? '';
  return BigInt(Date.parse(iso)) * 1_000_000n + BigInt((fraction.slice(3) + '000000').slice(0, 6));
};

/** `[from, to)`: both present, from before to, at most 31 days apart. */
const interval = <T extends { from?: string | undefined; to?: string | undefined }>(q: T, ctx: z.core.$RefinementCtx<T>) => {
  // A bound that is not an instant has its own issue already (zod still runs this refinement then).
  if (q.from === undefined || q.to === undefined || Number.isNaN(Date.parse(q.from)) || Number.isNaN(Date.parse(q.to))) return;
  const span = nanos(q.to) - nanos(q.from);
  if (span <= 0n) ctx.addIssue({ code: 'custom', path: ['to'], message: 'must be later than from (the interval is [from, to))' });
  else if (span > BigInt(MAX_INTERVAL_MS) * 1_000_000n) ctx.addIssue({ code: 'custom', path: ['to'], message: `must be at most ${MAX_INTERVAL_DAYS} days after from` });
};

export const operatorStatusSchema = z.enum(OPERATOR_STATUSES);

const limit = queryLimit(1000);

export const transactionsQuery = z
  .strictObject({
    from: instant().optional(),
    to: instant().optional(),
    roundId: z.string().min(1).max(255).optional(),
    gameId: z.string().min(1).max(200).optional(),
    playerRef: z.string().min(1).max(255).optional(),
    status: z.enum(OPERATOR_STATUSES, { message: `must be one of ${OPERATOR_STATUSES.join(', ')}` }).optional(),
    limit: limit.optional(),
    cursor: z.string().min(1).max(200).optional(),
  })
  .superRefine((q, ctx) => {
    const byTime = q.from !== undefined || q.to !== undefined;
    const byRound = q.roundId !== undefined;
    if (byTime && byRound) ctx.addIssue({ code: 'custom', path: [], message: 'either from and to, or roundId with gameId, not both' });
    else if (!byTime && !byRound) ctx.addIssue({ code: 'custom', path: [], message: 'a time range (from and to) or a round (roundId with gameId) is needed' });
    else if (byTime && q.from === undefined) ctx.addIssue({ code: 'custom', path: ['from'], message: 'is needed with to' });
    else if (byTime && q.to === undefined) ctx.addIssue({ code: 'custom', path: ['to'], message: 'is needed with from' });
    else if (byRound && q.gameId === undefined) ctx.addIssue({ code: 'custom', path: ['gameId'], message: 'is needed with roundId (a roundId is unique only within its provider, which the game names)' });
    else if (!byRound && q.gameId !== undefined) ctx.addIssue({ code: 'custom', path: ['gameId'], message: 'applies only with roundId' });
    interval(q, ctx);
  });
export type TransactionsQuery = z.infer<typeof transactionsQuery>;

export const roundQuery = z.strictObject({
  gameId: z
    .string({
      // (A parameter given twice is refused before this schema: parseOr400.)
      error: (issue) => (issue.input === undefined ? 'is needed (a roundId is unique only within its provider, which the game names)' : 'expected a string'),
    })
    .min(1, 'expected 1 to 200 characters')
    .max(200, 'expected 1 to 200 characters'),
});

export const settlementQuery = z
  .strictObject({ from: instant(), to: instant() })
  .superRefine((q, ctx) => interval(q, ctx));

/** A TransactionRecord (contract section 9). */
export const transactionRecordSchema = z.strictObject({
  transactionId: z.string(),
  providerId: z.string().optional().meta({ description: 'The provider that sent it; absent for an ADJUSTMENT.' }),
  gameId: z.string(),
  roundId: z.string(),
  playerRef: z.string(),
  type: z.enum(TRANSACTION_TYPES),
  amount: z.number().int().min(0),
  currency: z.string(),
  direction: z.enum(['DEBIT', 'CREDIT']).optional().meta({ description: 'ADJUSTMENT only.' }),
  originalTransactionId: z.string().optional().meta({ description: 'ROLLBACK only: the BET it reverses.' }),
  status: operatorStatusSchema,
  walletBalance: z.number().optional().meta({ description: "The balance in the wallet's last reply, when there is one." }),
  attempts: z.number().int().min(0).meta({ description: 'Wallet calls made for it.' }),
  recordedAt: z.iso.datetime(),
  settledAt: z.iso.datetime().optional().meta({ description: 'When its status became final; absent while pending.' }),
});
export type TransactionRecord = z.infer<typeof transactionRecordSchema>;

export const transactionsPage = z.strictObject({
  transactions: z.array(transactionRecordSchema),
  nextCursor: z.string().nullable().meta({ description: 'Pass it as cursor for the next page; null on the last one.' }),
});

export const roundDetails = z.strictObject({
  roundId: z.string(),
  gameId: z.string(),
  providerId: z.string(),
  playerRef: z.string(),
  currency: z.string(),
  status: z.enum(['open', 'complete', 'force-closed']),
  openedAt: z.iso.datetime(),
  closedAt: z.iso.datetime().optional(),
  betMinor: z.number().int().min(0),
  winMinor: z.number().int().min(0),
  refundMinor: z.number().int().min(0),
  transactions: z.array(transactionRecordSchema),
});

const figure = z.strictObject({ count: z.number().int().min(0), amountMinor: z.number().int().min(0) });
const lineFigures = { bets: figure, wins: figure, refunds: figure, ggrMinor: z.number().int().meta({ description: 'bets − wins − refunds (may be negative).' }) };

export const settlementStatement = z.strictObject({
  from: z.iso.datetime({ offset: true }),
  to: z.iso.datetime({ offset: true }),
  lines: z.array(z.strictObject({ providerId: z.string(), gameId: z.string(), currency: z.string(), ...lineFigures })),
  adjustments: z.record(z.string(), z.strictObject({ credits: figure, debits: figure })).meta({ description: 'Per currency.' }),
  unsettled: z.record(z.string(), z.strictObject({ pending: figure, failed: figure, dead: figure })).meta({ description: 'Per currency.' }),
  totals: z.record(z.string(), z.strictObject(lineFigures)).meta({ description: 'Per currency, over all lines.' }),
});
export type SettlementStatement = z.infer<typeof settlementStatement>;

/**
 * An RFC 3339 instant as the first whole millisecond at or after it. Recording times are whole
 * milliseconds, so `t >= from` and `t < to` hold for the given instants exactly when they hold for these.
 */
export function ceilMs(iso: string): number {
  const ms = Date.parse(iso);
  const fraction = /\.(\d+)/.exec(iso)?.[1] ?? '';
  return /[1-9]/.test(fraction.slice(3)) ? ms + 1 : ms;
}

/**
 * The bound as the queries take it: ceilMs, as an ISO string. Past year 9999 (the first millisecond at or
 * after an instant of its last one) JavaScript writes the year with a sign and six digits, which Postgres
 * reads as a time zone: the year is written plainly.
 */
export const bound = (iso: string): string => new Date(ceilMs(iso)).toISOString().replace(/^\+0*/, '');
