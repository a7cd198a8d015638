import { z } from 'zod';

/** Launch and kick bodies (API document 4.1.2, 4.1.3), as operators send them. */
export const launchBody = z.strictObject({
  playerRef: z.string().min(1).max(255),
  gameId: z.string().min(1).max(200),
  // Format is checked with the game's currencies (after the game lookup), as the contract orders the checks.
  currency: z.string(),
  mode: z.enum(['REAL', 'DEMO']),
  language: z.string().min(1).max(35).optional(),
  lobbyUrl: z.string().optional(),
});
export const kickBody = z.strictObject({
  playerRef: z.string().min(1).max(255),
});

// Response bodies and the bodies sent to partners. The OpenAPI document (services/api/openapi) is
// generated from these, and test/docs checks real responses and outbound calls against them.

export const gameSummarySchema = z.strictObject({
  gameId: z.string(),
  name: z.string(),
  provider: z.string(),
  currencies: z.array(z.string()),
  supportedLanguages: z.array(z.string()),
  launchBaseUrl: z.string(),
  replayBaseUrl: z.string(),
});
export const gameListResponse = z.array(gameSummarySchema);

export const launchResponse = z.strictObject({ launchUrl: z.string(), sessionToken: z.string() });

export const kickResponse = z.strictObject({ revokedCount: z.number().int().nonnegative() });

/** POST {apiBaseUrl}/v1/sessions/revoke, after a kick (best effort). */
export const providerRevokeRequest = z.strictObject({
  operatorId: z.string(),
  playerRef: z.string(),
  sessionTokens: z.array(z.string()).min(1),
});
export type ProviderRevokeRequest = z.infer<typeof providerRevokeRequest>;

/** The wallet's answer to GET {walletUrl}/v1/wallet/balance, which the provider receives verbatim. */
export const balanceResponse = z.looseObject({ balance: z.number().int() });
