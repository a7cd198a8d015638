import { z } from 'zod';
import { amountMinor, spinCount } from '../../shared/bounds.ts';
import { GRANT_STATUSES } from './decider.ts';

// Response bodies and the bodies sent to partners. The OpenAPI document (services/api/openapi) is
// generated from these, and test/docs checks real responses and outbound calls against them.

export const grantStatusSchema = z.enum(GRANT_STATUSES);

/** GrantResponseBody (API document 2.7). */
export const grantSchema = z.strictObject({
  id: z.uuid(),
  campaignId: z.string().optional(),
  operatorId: z.string(),
  providerId: z.string(),
  gameId: z.string(),
  playerRef: z.string(),
  // A grant recorded before spins were bounded (#18 part 8) may carry more than MAX_SPINS: it is still answered as recorded.
  spins: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  betAmountMinor: amountMinor(),
  currency: z.string(),
  externalRef: z.string().optional(),
  status: grantStatusSchema,
  idempotencyKey: z.string(),
  expiresAt: z.string().optional(),
  lastError: z.string().optional(),
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
});
export const grantListResponse = z.array(grantSchema);

/** POST {apiBaseUrl}/v1/free-spins/grants (contract section 6); requestRef is the grant id. */
export const providerGrantRequest = z.strictObject({
  requestRef: z.uuid(),
  operatorId: z.string(),
  playerRef: z.string(),
  gameId: z.string(),
  spins: spinCount(),
  betAmountMinor: amountMinor(),
  currency: z.string(),
  expiresAt: z.string().optional(),
});
export type ProviderGrantRequest = z.infer<typeof providerGrantRequest>;

/** The provider's answer that counts as success (status 200); other fields are ignored. */
export const providerGrantResponse = z.looseObject({ externalRef: z.string().min(1) });

/** POST {apiBaseUrl}/v1/free-spins/grants/{externalRef}/cancel. */
export const providerCancelRequest = z.strictObject({ requestRef: z.uuid() });
export type ProviderCancelRequest = z.infer<typeof providerCancelRequest>;
