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
  games: z.array(gameSchema).default([]).superRefine((games, ctx) => byId<Game>('game')(games, ctx)),
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
  visibleGames: z.array(id).default([]).superRefine(once<string>('game', (g) => g)),
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

/**
 * Each entry of a list at most once, by `keyOf` (a game id, an entry's id): a second would silently
 * replace or repeat the first. The issue names the second, at `at` within it.
 */
function once<T>(what: string, keyOf: (entry: T) => string, at: Array<string | number> = []) {
  return (entries: T[], ctx: z.core.$RefinementCtx<T[]>) => {
    const seen = new Set<string>();
    entries.forEach((e, i) => {
      const key = keyOf(e);
      if (seen.has(key)) ctx.addIssue({ code: 'custom', path: [i, ...at], message: `${what} "${key}" is listed twice` });
      seen.add(key);
    });
  };
}
const byId = <T extends { id: string }>(what: string) => once<T>(what, (e) => e.id, ['id']);

export const catalogSchema = z.strictObject({
  providers: z.array(providerSchema).default([]).superRefine(byId('provider')),
  operators: z.array(operatorSchema).default([]).superRefine(byId('operator')),
  campaigns: z.array(campaignSchema).default([]).superRefine(byId('campaign')),
});

/** Whether a campaign can no longer be granted, whatever happens: inactive, or past its validUntil. */
export function campaignOver(c: Pick<Campaign, 'active' | 'validUntil'>, now: Date): boolean {
  return !c.active || (c.validUntil !== undefined && now.getTime() > Date.parse(c.validUntil));
}

/** Whether a campaign can be granted at `now`: not over, and past its validFrom. */
export function campaignOpen(c: Pick<Campaign, 'active' | 'validFrom' | 'validUntil'>, now: Date): boolean {
  return !campaignOver(c, now) && (c.validFrom === undefined || Date.parse(c.validFrom) <= now.getTime());
}

/**
 * Whether a provider takes money in `currency`: a launch, a grant and an active campaign must be in one
 * of its currencies (all its games share them).
 */
export function offersCurrency(provider: Pick<Provider, 'currencies'>, currency: string): boolean {
  return provider.currencies.includes(currency);
}

export type Game = z.infer<typeof gameSchema>;
export type Provider = z.infer<typeof providerSchema>;
export type Operator = z.infer<typeof operatorSchema>;
export type Campaign = z.infer<typeof campaignSchema>;
export type CatalogInput = z.infer<typeof catalogSchema>;

/** "providers[0].games[1].launchBaseUrl" from a zod issue path. */
export function formatPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>((acc, key) => (typeof key === 'number' ? `${acc}[${key}]` : acc ? `${acc}.${String(key)}` : String(key)), '');
}
