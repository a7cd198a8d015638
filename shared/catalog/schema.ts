import { z } from 'zod';
import { amountMinor, CURRENCY_MESSAGE, currencyCode, MAX_RATE_LIMIT, MAX_RATE_WINDOW_SECONDS, spinCount, timeoutMs } from '../bounds.ts';

const id = z.string().min(1).max(200);

/** The provider id the platform's own transactions (adjustments) are recorded under; no provider may have it. */
export const PLATFORM_PROVIDER = 'platform';
const currency = currencyCode(`${CURRENCY_MESSAGE} such as "EUR"`);
const httpUrl = z
  .string()
  .refine((v) => /^https?:$/.test(safeProtocol(v)), 'expected an absolute http(s) URL');

function safeProtocol(v: string): string {
  try {
    return new URL(v).protocol;
  } catch {
    return '';
  }
}

export const gameSchema = z.strictObject({
  id,
  name: z.string().min(1),
  launchBaseUrl: httpUrl,
  replayBaseUrl: z.union([z.literal(''), httpUrl]),
});

export const providerSchema = z.strictObject({
  // The platform's own transactions (adjustments) are recorded under this provider id: a provider of
  // that name would share their transactionIds and rounds.
  id: id.refine((v) => v !== PLATFORM_PROVIDER, `"${PLATFORM_PROVIDER}" is reserved for the platform's own transactions (adjustments)`),
  name: z.string().min(1),
  apiBaseUrl: httpUrl,
  secret: z.string().min(1),
  timeoutMs: timeoutMs().default(5000),
  currencies: z.array(currency).min(1),
  supportedLanguages: z.array(z.string().min(1)).default([]),
  games: z.array(gameSchema).default([]),
});

export const operatorSchema = z.strictObject({
  id,
  name: z.string().min(1),
  secret: z.string().min(1),
  walletUrl: httpUrl,
  walletTimeoutMs: timeoutMs().default(5000),
  rateLimit: z
    .strictObject({ limit: z.number().int().min(1).max(MAX_RATE_LIMIT), windowSeconds: z.number().int().min(1).max(MAX_RATE_WINDOW_SECONDS) })
    .default({ limit: 100, windowSeconds: 1 }),
  visibleGames: z.array(id).default([]).superRefine(unique('game')),
  blockedPlayers: z.array(z.string().min(1)).default([]),
});

export const campaignSchema = z.strictObject({
  id,
  gameId: id,
  spins: spinCount(),
  betAmountMinor: amountMinor(),
  currency,
  active: z.boolean(),
  validFrom: z.iso.datetime({ offset: true }).optional(),
  validUntil: z.iso.datetime({ offset: true }).optional(),
}).refine((c) => c.validFrom === undefined || c.validUntil === undefined || Date.parse(c.validFrom) < Date.parse(c.validUntil), {
  path: ['validUntil'],
  message: 'must be later than validFrom (a campaign valid at no moment could never be granted)',
});

/** Each value (an id) at most once in an array: a second entry would silently replace or repeat the first. */
function unique(what: string) {
  return (values: string[], ctx: z.core.$RefinementCtx<string[]>) => {
    const seen = new Set<string>();
    values.forEach((v, i) => {
      if (seen.has(v)) ctx.addIssue({ code: 'custom', path: [i], message: `${what} "${v}" is listed twice` });
      seen.add(v);
    });
  };
}

/** The ids of a list of entries, each at most once in one document. */
const uniqueIds = (what: string) => (entries: Array<{ id: string }>, ctx: z.core.$RefinementCtx<Array<{ id: string }>>) => {
  const seen = new Set<string>();
  entries.forEach((e, i) => {
    if (seen.has(e.id)) ctx.addIssue({ code: 'custom', path: [i, 'id'], message: `${what} "${e.id}" is in the document twice` });
    seen.add(e.id);
  });
};

export const catalogSchema = z.strictObject({
  providers: z.array(providerSchema).default([]).superRefine(uniqueIds('provider')),
  operators: z.array(operatorSchema).default([]).superRefine(uniqueIds('operator')),
  campaigns: z.array(campaignSchema).default([]).superRefine(uniqueIds('campaign')),
});

export type Game = z.infer<typeof gameSchema>;
export type Provider = z.infer<typeof providerSchema>;
export type Operator = z.infer<typeof operatorSchema>;
export type Campaign = z.infer<typeof campaignSchema>;
export type CatalogInput = z.infer<typeof catalogSchema>;

/** "providers[0].games[1].launchBaseUrl" from a zod issue path. */
export function formatPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>((acc, key) => (typeof key === 'number' ? `${acc}[${key}]` : acc ? `${acc}.${String(key)}` : String(key)), '');
}
