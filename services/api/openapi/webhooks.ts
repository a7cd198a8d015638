import { z } from 'zod';
import { providerCancelRequest, providerGrantRequest, providerGrantResponse } from '../../grants/schemas.ts';
import { balanceResponse, providerRevokeRequest } from '../../sessions/schemas.ts';
import { transactionResponse, walletTransactionRequest } from '../../rounds/schemas.ts';
import { walletTransactionExamples } from './examples.ts';
import type { WebhookSpec } from './spec.ts';

/** The calls the service makes to partners (docs/operators.md, docs/providers.md). */
export const webhooks: WebhookSpec[] = [
  {
    name: 'operatorWalletTransaction',
    method: 'post',
    partner: 'operator',
    operationId: 'walletTransaction',
    summary: '{walletUrl}/v1/wallet/transaction',
    description: `The service settles every BET, WIN, ROLLBACK and ADJUSTMENT against your wallet with this call, signed with your operator secret over path plus query (docs/operators.md, the wallet you implement).

- **Idempotency (required):** store the reply for every transactionId you process; on a repeat return the stored reply verbatim without applying the change again. The service resends the identical body after a timeout, an error or a non-200.
- **ROLLBACK:** originalTransactionId is the BET to refund.
- **Stale rounds:** the reconciler rolls back outstanding bets of a stale round with transactionId \`stale-rollback:<bet transactionId>\` and sessionToken \`system:stale-round-reconciler\`. Adjustments carry sessionToken \`system:admin-adjustment\` and a direction.
- **DECLINED** is valid only for a BET. When you cannot apply a WIN, ROLLBACK or ADJUSTMENT, answer non-200.
- Each call is bounded by your \`walletTimeoutMs\` (default 5000). A WIN, ROLLBACK or ADJUSTMENT that failed is retried with exponential backoff from 1 s for 24 hours, then dead-lettered (kept, visible to auditors).`,
    body: { schema: walletTransactionRequest, examples: walletTransactionExamples },
    responses: {
      200: { description: 'Applied (OK) or, for a BET only, declined (DECLINED).', content: { 'application/json': transactionResponse } },
      default: { description: 'Any other status, a reply body over 1 MiB, or no answer in time is a failed attempt: the provider gets 502 (504 on a timeout) and a WIN, ROLLBACK or ADJUSTMENT is retried.' },
    },
  },
  {
    name: 'operatorWalletBalance',
    method: 'get',
    partner: 'operator',
    operationId: 'walletBalance',
    summary: '{walletUrl}/v1/wallet/balance?playerRef=...',
    description:
      "A player's balance. Called when a provider asks (`POST /v1/wallet/balance`; your status and body are passed to it verbatim, so keep this endpoint reliable) and, best effort, before the reconciler rolls back a stale bet. The query string is part of the signed target, so playerRef cannot be altered in flight.",
    query: z.object({ playerRef: z.string().min(1) }),
    paramDescriptions: { playerRef: 'Your player identifier, URL-encoded.' },
    responses: {
      200: { description: 'The balance in minor units.', content: { 'application/json': balanceResponse } },
      default: { description: 'Passed to the provider verbatim; the reconciler ignores a failure.' },
    },
  },
  {
    name: 'providerIssueFreeSpins',
    method: 'post',
    partner: 'provider',
    operationId: 'providerIssueFreeSpins',
    summary: '{apiBaseUrl}/v1/free-spins/grants',
    description:
      'Issues a free-spin batch when an operator creates a grant, signed with your provider secret, bounded by your `timeoutMs`. requestRef is the grant id: a repeat (after a crash mid-call) carries the same requestRef, so issue the batch once and answer the same externalRef.',
    body: { schema: providerGrantRequest },
    responses: {
      200: { description: 'Issued: the grant becomes `active` with this externalRef.', content: { 'application/json': providerGrantResponse } },
      default: { description: 'Any other status, a 200 without externalRef, or no answer in time: the grant becomes `failed` and the operator gets 502.' },
    },
  },
  {
    name: 'providerCancelFreeSpins',
    method: 'post',
    partner: 'provider',
    operationId: 'providerCancelFreeSpins',
    summary: '{apiBaseUrl}/v1/free-spins/grants/{externalRef}/cancel',
    description:
      'Voids the remaining spins of a batch when an operator cancels an active grant. `{externalRef}` in the path is the externalRef you answered at issue, URL-encoded.',
    body: { schema: providerCancelRequest },
    responses: {
      200: { description: 'Cancelled: the grant becomes `cancelled`. The body is ignored.' },
      default: { description: 'Any other status or no answer in time: the grant stays `active` and the operator gets 502 (and may retry).' },
    },
  },
  {
    name: 'providerRevokeSessions',
    method: 'post',
    partner: 'provider',
    operationId: 'providerRevokeSessions',
    summary: '{apiBaseUrl}/v1/sessions/revoke',
    description:
      "Sent after an operator kicks a player, listing the player's sessions with you that the kick ended, so an open game client can close early. Best effort: the tokens are already refused whatever you answer.",
    body: { schema: providerRevokeRequest },
    responses: {
      200: { description: 'Noted. The body is ignored.' },
      default: { description: 'Ignored (logged).' },
    },
  },
];
