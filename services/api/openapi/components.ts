import { z } from 'zod';
import { campaignSchema, catalogSchema, gameSchema, operatorSchema, providerSchema } from '../../../shared/catalog/schema.ts';
import { MAX_NONCE_LENGTH } from '../../../shared/http/signature.ts';
import { adjustmentBody } from '../../rounds/adjustments.ts';
import { redriveBody } from '../../rounds/redrive.ts';
import { issueGrantBody } from '../../grants/routes.ts';
import { replayBody } from '../../rounds/replay.ts';
import { balanceResponse, gameListResponse, gameSummarySchema, kickBody, kickResponse, launchBody, launchResponse, providerRevokeRequest } from '../../sessions/schemas.ts';
import { grantListResponse, grantSchema, grantStatusSchema, providerCancelRequest, providerGrantRequest, providerGrantResponse } from '../../grants/schemas.ts';
import { replayResponse, transactionBody, transactionMetadata, transactionResponse, walletTransactionRequest } from '../../rounds/schemas.ts';
import { balanceBody } from '../../sessions/balance.ts';
import { operatorStatusSchema, roundDetails, settlementStatement, transactionRecordSchema, transactionsPage } from '../../reconciliation/schemas.ts';
import {
  adjustmentResponse,
  adminReplayLinkBody,
  auditEvent,
  auditTransactions,
  catalogCounts,
  chainCheckpoint,
  chainCheckpoints,
  consoleOperators,
  consoleOverview,
  consolePlayer,
  consoleSearchResults,
  consoleStuck,
  errorBody,
  errorOrWalletBody,
  eventsPage,
  grantHistory,
  healthResponse,
  historyEvent,
  historyEventsPage,
  invalidSignatureText,
  notReadyResponse,
  operatorCheckpoint,
  operatorCheckpoints,
  playerSessionsHistory,
  projectionsResponse,
  readyResponse,
  redriveResponse,
  roundHistory,
  roundState,
  sourceMap,
  streamEvents,
  walletBody,
} from '../schemas.ts';
import { schemaExamples } from './examples.ts';
import { schemaNames } from './json-schema.ts';
import type { ResponseSpec } from './spec.ts';

/** Just enough of /openapi.json to tell it apart; the document's own structure is tested in test/docs. */
export const openApiDocumentSchema = z.looseObject({ openapi: z.string().regex(/^3\.1\.\d+$/), info: z.looseObject({ title: z.string(), version: z.string() }) });

const named: Array<[z.ZodType, string, string?]> = [
  [openApiDocumentSchema, 'OpenApiDocument'],
  // Requests, exactly the schemas the routers validate with.
  [launchBody, 'LaunchGameRequest', 'Launches a game session. The currency format is checked after the game lookup (see the launch operation for the order of the checks).'],
  [kickBody, 'KickPlayerRequest'],
  [replayBody, 'RoundReplayRequest'],
  [issueGrantBody, 'IssueGrantRequest', 'With campaignId, the game, spins, stake and currency come from the campaign and the request\'s gameId, spins, betAmountMinor and currency are ignored, whatever they hold (not validated: 0, absent or of another type is fine); without it gameId, spins (1 to 1,000,000) and currency are required.'],
  [transactionBody, 'ProviderTransactionRequest', 'A transaction as a provider submits it. roundComplete is required on BET and WIN; originalTransactionId only (and always) on ROLLBACK; direction only on ADJUSTMENT, which providers may not submit (the `if`/`then` rules below say the same). The prefix `stale-rollback:` is reserved.'],
  [transactionMetadata, 'TransactionMetadata', 'Opaque to the service, stored and forwarded to the wallet verbatim. By convention a WIN that pays a jackpot carries `jackpot: {won, tier?, amountMinor?, poolId?}` (see docs/providers.md); free-spin marking is agreed between operator and provider.'],
  [balanceBody, 'BalanceRequest'],
  [catalogSchema, 'Catalog', 'The catalog: every entry is inserted or updated by its id, entries not named are left alone. URLs are absolute http(s) URLs; a game id is unique across providers. Field by field in docs/operations.md (catalog reference).'],
  [providerSchema, 'CatalogProvider', 'A provider (game studio) and its games.'],
  [gameSchema, 'CatalogGame', 'A game of a provider. replayBaseUrl may be "" (replay unsupported).'],
  [operatorSchema, 'CatalogOperator', 'An operator (casino): its credentials, wallet and what it may see.'],
  [campaignSchema, 'CatalogCampaign', 'A free-spin campaign an operator can grant by campaignId.'],
  [adjustmentBody, 'AdjustmentRequest', 'A manual balance correction. transactionId is optional: a retry with the same id is answered from the first; one is generated when omitted.'],
  [
    redriveBody,
    'RedriveRequest',
    'Re-drives a dead WIN, ROLLBACK or ADJUSTMENT: names its round (operatorId, providerId, roundId; an adjustment\'s are `platform` and `adjustment:<transactionId>`) and transactionId, and says who re-drives it and why (both kept in the round\'s history).',
  ],
  [adminReplayLinkBody, 'AdminReplayLinkRequest', 'A round of an operator, named as the operator names it (roundId with its gameId).'],
  // Responses.
  [walletBody, 'WalletBody', "The operator wallet's body, passed through verbatim: whatever it answered (JSON or not)."],
  [errorOrWalletBody, 'ErrorOrWalletBody', 'The service\'s own Error, or, when the response carries `X-Wallet-Passthrough: true`, the wallet\'s body verbatim.'],
  [errorBody, 'Error', 'Every error body except the plain-text 401 `invalid signature`. The messages are listed in docs/errors.md.'],
  [gameSummarySchema, 'GameSummary', 'A game visible to the calling operator.'],
  [gameListResponse, 'GameList'],
  [launchResponse, 'LaunchGameResponse', 'launchUrl is launchBaseUrl plus `token`, `language` and `lobby` (when given), URL-encoded. The token is opaque, URL-safe, with at least 128 random bits.'],
  [kickResponse, 'KickPlayerResponse', 'revokedCount is 0 when the player had no active session (still a success).'],
  [replayResponse, 'RoundReplayResponse', 'replayUrl is replayBaseUrl plus `token`, a short-lived HS256 JWT signed with the provider secret (see docs/providers.md, replay links).'],
  [grantStatusSchema, 'GrantStatus', '`pending` (the provider call is under way), `active`, `cancelled`, `failed`. The statuses `expired` and `completed` are reserved: nothing produces them today, but a client should accept them.'],
  [grantSchema, 'Grant', 'A free-spin grant.'],
  [grantListResponse, 'GrantList', 'Newest first.'],
  [transactionResponse, 'TransactionResponse', "The operator wallet's reply to a transaction, passed to the provider verbatim. DECLINED is valid only for a BET."],
  [balanceResponse, 'BalanceResponse', 'Balance in minor units.'],
  [healthResponse, 'Health'],
  [readyResponse, 'Ready'],
  [notReadyResponse, 'NotReady'],
  [catalogCounts, 'CatalogCounts', 'How many of each the catalog now holds.'],
  [projectionsResponse, 'ProjectionLags', 'Per read model: the events in the log it has not applied (counted up to 10,000) and the age of the oldest of them.'],
  [adjustmentResponse, 'AdjustmentResponse'],
  [auditEvent, 'AuditEvent', 'An event as recorded. position is a cursor in the global log.'],
  [eventsPage, 'EventsPage', 'Pass `next` as the following `from`.'],
  [streamEvents, 'StreamEvents'],
  [roundState, 'RoundState', 'A round as derived from its events.'],
  [roundHistory, 'RoundHistory'],
  [playerSessionsHistory, 'PlayerSessionsHistory'],
  [grantHistory, 'GrantHistory'],
  [
    chainCheckpoint,
    'ChainCheckpoint',
    'A signed checkpoint of the global hash chain: after `count` events, the last at `position`, the chain\'s link was `link` (lowercase hex of 32 bytes). `signature` is the base64 Ed25519 signature of the UTF-8 bytes of `{"count":…,"link":"…","position":"…","signedAt":"…"}`: those four fields as canonical JSON (keys in this order, no whitespace). `keyId`, the first 16 hex digits of the SHA-256 of the signing key\'s public key (SPKI DER), names the key (`GET /v1/audit/chain/public-key?keyId=`).',
  ],
  [chainCheckpoints, 'ChainCheckpoints', 'Oldest first. Pass the last `count` as `after` for the next page.'],
  [
    operatorCheckpoint,
    'OperatorCheckpoint',
    'A signed checkpoint of your hash chain: after your `count`-th event, the one at `position`, your chain\'s link was `link` (lowercase hex of 32 bytes). `signature` is the base64 Ed25519 signature of the UTF-8 bytes of the canonical JSON of `{count, link, operatorId, position, signedAt}` (keys in that order, no whitespace); `keyId` is the first 16 hex digits of the SHA-256 of the public key (SPKI DER) it verifies with. Keep every checkpoint you fetch: a history rewritten later no longer matches them.',
  ],
  [operatorCheckpoints, 'OperatorCheckpoints', 'Your checkpoints, oldest first. Pass the last `count` as `after` for the next page.'],
  [
    historyEvent,
    'HistoryEvent',
    "One event of your chain. Your chain's link of it is `link(n) = SHA-256(link(n-1) || UTF-8(canonical JSON of {stream, type, data, metadata, position, recordedAt}))`, with `link(0)` 32 zero bytes, `link(n-1)` as 32 raw bytes, and canonical JSON = keys of every object sorted by UTF-16 code units, no whitespace, strings and numbers as JavaScript's JSON.stringify writes them. Recompute it from your first event and compare with `link` and with your signed checkpoints. An event the chain linked that the event store no longer holds comes as type `(missing from the event store)`, data and metadata null, recordedAt \"\": the recomputation breaks there, as it should.",
  ],
  [historyEventsPage, 'HistoryEventsPage', 'Your events in chain order. Pass `next` (the last `count`) as `after` for the next page; a page shorter than `limit` is the end for now.'],
  [
    operatorStatusSchema,
    'TransactionStatus',
    "A transaction's status as you reconcile it against your wallet. `applied`: your wallet answered OK. `declined`: a BET your wallet answered DECLINED. `pending`: not accepted by your wallet yet and still being attempted; a WIN, ROLLBACK or ADJUSTMENT stays pending while the service retries it (up to 24 h), and so does a BET the service answered with your wallet's reply but lost the record of in a crash, while it asks your wallet for that reply again. `failed`: a BET whose only attempt failed or timed out; the service does not retry it, but the provider may resubmit it, and it then takes the status of your wallet's answer; rolled back, it becomes `voided` if no call of it ever reached your wallet (no connection could be made, within the wallet timeout or at all). `voided`: a BET rolled back before your wallet answered it, or before any call of it reached your wallet; never sent again. `dead`: never sent again without your wallet having accepted it: retries stopped after 24 h, or your wallet answered DECLINED to a WIN, ROLLBACK or ADJUSTMENT.",
  ],
  [transactionRecordSchema, 'TransactionRecord', 'A transaction bound for your wallet, as recorded, with the status to reconcile. `providerId` is absent on an ADJUSTMENT, `direction` present only on one; `originalTransactionId` only on a ROLLBACK.'],
  [transactionsPage, 'TransactionsPage', 'Transactions in the order they were recorded. Pass `nextCursor` as `cursor`, with the same other parameters, for the next page; it is null on the last one.'],
  [roundDetails, 'RoundDetails', "One round: its status, the sums of its `applied` transactions, and every transaction in recorded order."],
  [
    settlementStatement,
    'SettlementStatement',
    'The statement of the transactions recorded in `[from, to)`, by their current status. `from` and `to` as asked. Amounts are exact integers in minor units; per-currency objects are keyed by currency code in text order. Declined and voided transactions count nowhere.',
  ],
  [auditTransactions, 'AuditTransactions', 'Rows of the rm_transactions read model, column names as stored; amount is an integer in minor units (a JSON number, never a string).'],
  [redriveResponse, 'RedriveResponse', 'The re-drive is recorded in the round\'s history (`TransactionRedriven`); the worker sends the transaction to the wallet at once and retries it like any credit. Its outcome is in the round (`GET /v1/audit/rounds/…`) and the transaction lists.'],
  [
    consoleOverview,
    'ConsoleOverview',
    'The console\'s overview of the last hour (60 buckets of 60 s) or day (96 buckets of 900 s), the current bucket last: transactions recorded, and per operator its wallet calls, the calls that failed (an error status, no answer in time, unreachable) and their latency percentiles; then what the wallets have not accepted now, the lag of each read model and the state of the hash chain. Read from read models only.',
  ],
  [
    consoleSearchResults,
    'ConsoleSearchResults',
    'What the search term names, exactly (no partial match): transactions by transactionId, rounds by roundId, players by playerRef (one result per operator), and a grant by its id; at most 20 of each kind. Empty when nothing matches.',
  ],
  [consolePlayer, 'ConsolePlayer', "One operator's player: every session (with its status now), the player's latest 200 rounds with the sums of their `applied` BETs, WINs and ROLLBACKs, newest first, and the player's free-spin grants."],
  [
    consoleStuck,
    'ConsoleStuckTransactions',
    'Every transaction the wallet has not accepted, oldest first, at most 1,000, with its TransactionStatus: `pending` (a credit not answered yet or being retried; a BET not answered yet), `failed` (a BET whose attempt failed or timed out; its provider resubmits it or the reconciler rolls it back) or `dead` (a credit whose retries stopped, or that the wallet DECLINED: what a re-drive is for). `ageSeconds` counts from when it was recorded; `lastError` is the last failed attempt\'s.',
  ],
  [consoleOperators, 'ConsoleOperators', "Every operator of the catalog as the console shows it: its wallet, rate limit and visible games (each with its name and provider); never its secret nor its blocklist."],
  [sourceMap, 'SourceMap', "A source map (version 3), as Chart.js ships it beside its UMD build: what a browser's developer tools read."],
  // What partners receive and answer (webhooks).
  [walletTransactionRequest, 'WalletTransactionRequest', 'A transaction as the operator wallet receives it: roundComplete is always present (false where meaningless), originalTransactionId only and always on a ROLLBACK, direction only and always on an ADJUSTMENT. Identical bytes on every retry.'],
  [providerGrantRequest, 'ProviderGrantRequest', 'requestRef is the grant id: a repeat carries the same requestRef, deduplicate on it.'],
  [providerGrantResponse, 'ProviderGrantResponse', 'Other fields are ignored.'],
  [providerCancelRequest, 'ProviderCancelRequest'],
  [providerRevokeRequest, 'ProviderRevokeRequest'],
];
/** The zod schema behind each component name, for the tests (examples parse with their schema). */
export const namedSchemas: ReadonlyMap<string, z.ZodType> = new Map(named.map(([schema, id]) => [id, schema]));
for (const [schema, id, description] of named) {
  const examples = schemaExamples[id];
  schemaNames.add(schema, { id, ...(description !== undefined ? { description } : {}), ...(examples !== undefined ? { examples } : {}) });
}

const signingSteps = (who: 'operator' | 'provider'): string => {
  const idHeader = who === 'operator' ? 'X-Operator-Id' : 'X-Provider-Id';
  return `Every request carries four headers: \`${idHeader}\` (your catalog id), \`X-Timestamp\` (Unix time in whole seconds), \`X-Nonce\` (1 to ${MAX_NONCE_LENGTH} characters, fresh for every request, retries included) and \`X-Signature\`:

    X-Signature    = lowercase hex of HMAC-SHA256(secret, signing string)
    signing string = timestamp + "\\n" + nonce + "\\n" + METHOD + "\\n" + target + "\\n" + lowercase hex of SHA-256(raw body bytes)

- \`secret\` is the ${who}'s \`secret\` from the catalog; \`METHOD\` is upper case.
- With no body, hash the empty string (\`e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\`).
- The target of a call **to** the service is the **path only**: \`GET /v1/operator/free-spins/grants?playerRef=p1\` signs \`/v1/operator/free-spins/grants\`.

The service checks, in this order, before any handler${who === 'operator' ? ' and before the rate limit' : ''}:
1. \`X-Nonce\` missing, empty or longer than ${MAX_NONCE_LENGTH} characters: **400** \`{"error":"invalid nonce"}\`.
2. Unknown or missing \`${idHeader}\`, missing or bad signature, missing timestamp, or a timestamp more than \`SIGNATURE_WINDOW_SECONDS\` (default 300) from the server's clock: **401**, \`text/plain\` body \`invalid signature\`.
3. The nonce was already used by this caller within the window: **401** \`{"error":"replayed request"}\`. A nonce is recorded only once its signature is valid, so a forged request cannot burn one.
${
  who === 'operator'
    ? '\nThen the per-operator rate limit (catalog `rateLimit`, shared by every instance): **429** `{"error":"rate limit exceeded"}` with `Retry-After` in seconds. Only requests that passed the signature check count.\n'
    : ''
}
**In Swagger UI (\`/docs\`):** Authorize with your id and, in the \`X-Signature\` box, your **secret**; \`X-Timestamp\` and \`X-Nonce\` may hold anything. The page then signs each "Try it out" request in your browser (fresh timestamp and nonce, WebCrypto: https or localhost only) and sends the signature, never the secret. Elsewhere: \`scripts/signed-curl.sh\` or your own signer.`;
};

const headerScheme = (name: string, description: string) => ({ type: 'apiKey', in: 'header', name, description }) as const;
const oneOfFour = (scheme: string) =>
  `One of the four signature headers, all required together (a security requirement of four schemes): a client that signs in a middleware passes none of them per call. How to sign: the \`${scheme}\` scheme.`;

/**
 * The signature is four headers, so each audience's security requirement names four schemes (they
 * apply together); no operation lists them as parameters. A generated client therefore needs only a
 * middleware that adds the four headers, never dummy values per call.
 */
export const securitySchemes = {
  operatorId: headerScheme('X-Operator-Id', `Your operator id in the catalog. ${oneOfFour('operatorSignature')}`),
  providerId: headerScheme('X-Provider-Id', `Your provider id in the catalog. ${oneOfFour('providerSignature')}`),
  signatureTimestamp: headerScheme(
    'X-Timestamp',
    `Unix time in whole seconds, within SIGNATURE_WINDOW_SECONDS (default 300) of the server's clock. ${oneOfFour('operatorSignature or providerSignature')}`,
  ),
  signatureNonce: headerScheme(
    'X-Nonce',
    `1 to ${MAX_NONCE_LENGTH} characters, fresh for every request, retries included; checked first (400 \`invalid nonce\`). ${oneOfFour('operatorSignature or providerSignature')}`,
  ),
  operatorSignature: headerScheme('X-Signature', `**Operator signature** (docs/signing.md), for \`/v1/operator/*\`.\n\n${signingSteps('operator')}`),
  providerSignature: headerScheme('X-Signature', `**Provider signature** (docs/signing.md), for \`/v1/wallet/*\`.\n\n${signingSteps('provider')}`),
  adminBearer: {
    type: 'http',
    scheme: 'bearer',
    description:
      '`Authorization: Bearer <ADMIN_TOKEN>` for `/v1/admin/*`, `/v1/audit/*` and `/metrics`. With `ADMIN_TOKEN` unset these routes always answer 401 `{"error":"unauthorized"}`.',
  },
  serviceSignature: headerScheme(
    'X-Signature',
    `**The service's signature** on the calls it makes to partners (docs/signing.md). Headers \`X-Timestamp\`, \`X-Nonce\` and \`X-Signature\` (each webhook lists them as parameters), no caller id; the same construction as partners use towards the service, with one difference: the target is the **path plus the query string exactly as sent** (\`/v1/wallet/balance?playerRef=p1\`).

    signing string = timestamp + "\\n" + nonce + "\\n" + METHOD + "\\n" + path?query + "\\n" + lowercase hex of SHA-256(raw body bytes)

Wallet calls are signed with the operator's catalog \`secret\`, provider calls with the provider's. Verify every call (constant-time comparison, timestamp within your window, nonce not seen before) and refuse a bad one with 401 \`text/plain\` \`invalid signature\` or a reused nonce with 401 \`{"error":"replayed request"}\`. A retry repeats the identical body with a fresh nonce, timestamp and signature.`,
  ),
} as const;

const headerParam = (name: string, description: string, schema: Record<string, unknown>, example: string) => ({ name, in: 'header', required: true, description, schema, example });

/** The signature headers of the calls the service makes (webhooks), as typed parameters. */
export const parameters = {
  Timestamp: headerParam('X-Timestamp', 'Unix time in whole seconds when the service signed the call; refuse it outside your window (e.g. 300 s).', {
    type: 'string',
    pattern: '^[0-9]{1,12}$',
  }, '1795357200'),
  Nonce: headerParam('X-Nonce', 'Fresh for every call, retries included: refuse one you have seen within your window (401 `{"error":"replayed request"}`).', {
    type: 'string',
    minLength: 1,
    maxLength: MAX_NONCE_LENGTH,
  }, 'c5e0b7f2-3a41-4d8e-9b6a-1f2e3d4c5b6a'),
  Signature: headerParam(
    'X-Signature',
    'Lowercase hex HMAC-SHA256 with your catalog secret over timestamp, nonce, METHOD, path plus query and the body\'s SHA-256, joined by "\\n" (the `serviceSignature` scheme). Compare in constant time.',
    { type: 'string', pattern: '^[0-9a-f]{64}$' },
    '9b2f4c0d1e6a8b3c5d7e9f0a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4',
  ),
} as const;

const errorJson = { 'application/json': errorBody };

/** Responses many routes share, under components.responses; the tests resolve them through this map. */
export const sharedResponses: Record<string, ResponseSpec> = {
  OperatorUnauthorized: {
    description:
      'Signature refused (docs/signing.md): `text/plain` `invalid signature` for an unknown caller, a missing or bad signature, or a timestamp outside the window; JSON `{"error":"replayed request"}` for a nonce already used.',
    content: { 'text/plain': invalidSignatureText, ...errorJson },
    examples: { 'text/plain': 'invalid signature', 'application/json': { error: 'replayed request' } },
  },
  ProviderUnauthorized: {
    description:
      'Signature refused (docs/signing.md): `text/plain` `invalid signature`, or JSON `{"error":"replayed request"}`. Also JSON `{"error":"invalid session"}`: the session token is unknown, revoked by a kick, belongs to another provider, or has expired (an expired session still settles the rounds it opened: WIN and ROLLBACK are accepted, a BET is not).',
    content: { 'text/plain': invalidSignatureText, ...errorJson },
    examples: { 'text/plain': 'invalid signature', 'application/json': { error: 'invalid session' } },
  },
  AdminUnauthorized: {
    description: 'Missing or wrong bearer token, or `ADMIN_TOKEN` unset: `{"error":"unauthorized"}`.',
    content: errorJson,
    examples: { 'application/json': { error: 'unauthorized' } },
  },
  RateLimited: {
    description: "The operator's rate limit is exceeded: `{\"error\":\"rate limit exceeded\"}`. Wait `Retry-After` seconds before retrying.",
    content: errorJson,
    examples: { 'application/json': { error: 'rate limit exceeded' } },
    headers: { 'Retry-After': { description: 'Seconds to wait before retrying (at least 1).', schema: z.string().regex(/^[1-9][0-9]*$/), required: true, example: '1' } },
  },
  PayloadTooLarge: {
    description: 'The body is over 64 KiB: `{"error":"request body too large"}`.',
    content: errorJson,
    examples: { 'application/json': { error: 'request body too large' } },
  },
  InternalError: {
    description: 'Unexpected failure: `{"error":"internal error"}`; nothing more is revealed (the log has it, under the response\'s X-Request-Id).',
    content: errorJson,
    examples: { 'application/json': { error: 'internal error' } },
  },
  Unavailable: {
    description:
      '`{"error":"service unavailable"}`: Redis could not record the nonce, confirm it (the connection dropped before its reply) or count the request, and the ledger did nothing with it; or, with `Retry-After: 1`, the database connection was lost under the request (what it recorded stays recorded and is answered on resubmission), or a provider\'s new transaction found no room for 5 s behind the wallet replies still waiting to be recorded, its operator\'s share of them or all (nothing recorded, the id stays free; a transaction recorded before is answered from its record instead). Retry identically with a fresh nonce.',
    content: errorJson,
    examples: { 'application/json': { error: 'service unavailable' } },
  },
};
