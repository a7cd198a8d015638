import { z } from 'zod';
import { catalogSchema } from '../../../shared/catalog/schema.ts';
import { adjustmentBody } from '../../rounds/adjustments.ts';
import { redriveBody } from '../../rounds/redrive.ts';
import { asOfQuery, eventsQuery, txQuery } from '../../audit/routes.ts';
import { checkpointsQuery, historyEventsQuery, publicKeyQuery } from '../../chain/routes.ts';
import { grantIdParam, issueGrantBody, listQuery } from '../../grants/routes.ts';
import { replayBody } from '../../rounds/replay.ts';
import { CONSOLE_CSP } from '../../console/static.ts';
import { balanceResponse, gameListResponse, kickBody, kickResponse, launchBody, launchResponse } from '../../sessions/schemas.ts';
import { grantListResponse, grantSchema } from '../../grants/schemas.ts';
import { replayResponse, transactionBody, transactionResponse } from '../../rounds/schemas.ts';
import { balanceBody, WALLET_PASSTHROUGH_HEADER } from '../../sessions/balance.ts';
import { MAX_INTERVAL_DAYS, roundDetails, roundQuery, settlementQuery, settlementStatement, transactionsPage, transactionsQuery } from '../../reconciliation/schemas.ts';
import {
  adjustmentResponse,
  adminReplayLinkBody,
  auditTransactions,
  catalogCounts,
  chainCheckpoints,
  chainPublicKeyPem,
  consoleOperators,
  consoleOverview,
  consoleOverviewQuery,
  consolePlayer,
  consoleSearchQuery,
  consoleSearchResults,
  consoleStuck,
  errorBody,
  errorOrWalletBody,
  eventsPage,
  grantHistory,
  healthResponse,
  historyEventsPage,
  metricsText,
  notReadyResponse,
  operatorCheckpoints,
  playerSessionsHistory,
  projectionsResponse,
  readyResponse,
  redriveResponse,
  roundHistory,
  sourceMap,
  streamEvents,
  walletBody,
} from '../schemas.ts';
import { openApiDocumentSchema, sharedResponses } from './components.ts';
import { AUDIT_TRANSACTIONS_CURSOR, CHAIN_KEY_ID, CHAIN_PUBLIC_KEY, providerTransactionExamples, REDRIVE_BY, REDRIVE_REASON, SESSION_TOKEN, settlementCsvExample, TRANSACTIONS_CURSOR, TRANSACTIONS_FROM, TRANSACTIONS_TO } from './examples.ts';
import { isShared, type HeaderSpec, type ResponseEntry, type ResponseSpec, type Responses, type RouteSpec } from './spec.ts';

const json = (schema: z.ZodType, description: string): ResponseSpec => ({ description, content: { 'application/json': schema } });
/**
 * An error response whose example is `example`, or else the first message quoted in the description
 * (a quoted message with a placeholder in it needs an explicit example).
 */
const error = (description: string, example?: string): ResponseSpec => {
  const message = example ?? /`([^`]+)`/.exec(description)?.[1];
  if (message === undefined || (example === undefined && /\.\.\.|</.test(message))) throw new Error(`give the error response "${description.slice(0, 60)}" an example message`);
  return { ...json(errorBody, description), examples: { 'application/json': { error: message } } };
};
const bullets = (lines: string[]): string => lines.map((l) => `- ${l}`).join('\n');

/** 400 of a signed route: the nonce check comes first, then the route's own reasons. */
const signedBadRequest = (example: string, ...reasons: string[]): ResponseSpec =>
  error(
    bullets([
      '`invalid nonce`: X-Nonce missing, empty or longer than 64 characters (checked before the signature).',
      '`request body is not valid JSON`.',
      ...reasons,
    ]),
    example,
  );

const operatorErrors: Responses = {
  401: { shared: 'OperatorUnauthorized' },
  413: { shared: 'PayloadTooLarge' },
  429: { shared: 'RateLimited' },
  500: { shared: 'InternalError' },
  503: { shared: 'Unavailable' },
};
const providerErrors: Responses = {
  401: { shared: 'ProviderUnauthorized' },
  413: { shared: 'PayloadTooLarge' },
  500: { shared: 'InternalError' },
  503: { shared: 'Unavailable' },
};
const adminErrors: Responses = { 401: { shared: 'AdminUnauthorized' }, 413: { shared: 'PayloadTooLarge' }, 500: { shared: 'InternalError' } };
const auditErrors: Responses = { 401: { shared: 'AdminUnauthorized' }, 500: { shared: 'InternalError' } };

const grantPath = z.object({ id: grantIdParam });
const grantNotFound = error('`grant not found`: no such grant under your tenant (another operator\'s grant behaves as nonexistent).');

const operatorRoutes: RouteSpec[] = [
  {
    method: 'get',
    path: '/v1/operator/games',
    audience: 'operator',
    operationId: 'listGames',
    tag: 'Operator API',
    summary: 'List the games visible to your tenant',
    description: 'The games of the catalog your operator entry lists in `visibleGames`.',
    responses: { 200: json(gameListResponse, 'GameSummary[] of the visible games.'), 400: signedBadRequest('invalid nonce'), ...operatorErrors },
  },
  {
    method: 'post',
    path: '/v1/operator/games/launch',
    audience: 'operator',
    operationId: 'launchGame',
    tag: 'Operator API',
    summary: 'Launch a game session for a player',
    description: `Creates a session and answers the URL to embed in an iframe. Checks, in this order (a failed check answers at once; docs/errors.md lists the messages):
1. body shape (400);
2. the game exists (404);
3. REAL mode only: the game is visible to your tenant (404, indistinguishable from a missing game); DEMO skips this check;
4. currency (an upper-case ISO-4217 code supported by the game's provider), language (in supportedLanguages, when given), lobbyUrl (absolute http(s), when given) (400);
5. the player is not on your blocklist (403 \`launch blocked\`, the reason is not disclosed).

A DEMO session never reaches your wallet.`,
    body: { schema: launchBody, example: { playerRef: 'p1', gameId: 'fruit-1', currency: 'EUR', mode: 'REAL', language: 'en', lobbyUrl: 'https://casino.example/lobby' } },
    responses: {
      200: json(launchResponse, 'The session was created.'),
      400: signedBadRequest('currency: expected an upper-case ISO-4217 code', 'a field fails validation, e.g. `currency: expected an upper-case ISO-4217 code`, `language: xx is not supported by this game`, `lobbyUrl: expected an absolute http(s) URL`.'),
      403: error('`launch blocked`: the player is on your blocklist.'),
      404: error('`game not found`: no such game, or (REAL mode) not visible to your tenant.'),
      ...operatorErrors,
    },
  },
  {
    method: 'post',
    path: '/v1/operator/players/kick',
    audience: 'operator',
    operationId: 'kickPlayer',
    tag: 'Operator API',
    summary: "End all of a player's sessions",
    description:
      "Ends every active session of playerRef under your tenant, at once: the game client's next wallet call fails with 401 `invalid session`. Tell the player's browser yourself with the shell bridge event `SESSION_REVOKED`; the service pushes nothing to browsers. Each affected provider is then told (`POST /v1/sessions/revoke`, see Webhooks), best effort: its failure changes nothing.",
    body: { schema: kickBody, example: { playerRef: 'p1' } },
    responses: { 200: json(kickResponse, 'Sessions ended (0 is a success too).'), 400: signedBadRequest('playerRef: Invalid input: expected string, received undefined', '`playerRef: ...`: missing or invalid.'), ...operatorErrors },
  },
  {
    method: 'post',
    path: '/v1/operator/rounds/replay',
    audience: 'operator',
    operationId: 'roundReplayLink',
    tag: 'Operator API',
    summary: 'Get a replay link for a round',
    description:
      'A link to the provider-hosted replay page. Its token expires after `REPLAY_LINK_TTL_SECONDS` (default 900): request a fresh link every time, do not cache it.',
    body: { schema: replayBody, example: { roundId: 'r-20261121-0001', gameId: 'fruit-1' } },
    responses: {
      200: json(replayResponse, 'The replay link.'),
      400: signedBadRequest('gameId: this game does not support round replay', 'roundId or gameId missing or invalid.', "`gameId: this game does not support round replay` (the game's replayBaseUrl is empty)."),
      404: error('`round not found`: no round with this roundId and gameId under your tenant (another operator\'s or another game\'s round looks the same).'),
      ...operatorErrors,
    },
  },
  {
    method: 'post',
    path: '/v1/operator/free-spins/grants',
    audience: 'operator',
    operationId: 'issueGrant',
    tag: 'Operator API: free spins',
    summary: 'Issue a free-spin grant',
    description: `Issues a batch of free spins through the game's provider, synchronously. The game must be visible to your tenant and the currency supported by its provider, as for a launch.

**Idempotency:** the grant is identified by (your operator, idempotencyKey). A new key answers **201** with the grant \`active\`; the same key repeated answers **200** with the original grant unchanged, whatever its status (\`failed\` included), whatever the body says now, and calls the provider no second time (except to finish a grant a service process abandoned mid-call: one call with the same requestRef, which the provider deduplicates). A failed issuance consumes its key: retry with a fresh one.`,
    body: { schema: issueGrantBody, example: { playerRef: 'p1', idempotencyKey: 'promo-42-p1', campaignId: 'welcome-10' } },
    responses: {
      200: json(grantSchema, 'A repeated idempotencyKey: the original grant, unchanged.'),
      201: json(grantSchema, 'A new grant, issued at the provider: status `active` with its externalRef.'),
      400: signedBadRequest(
        'campaignId: the campaign is inactive or outside its validity window',
        'missing or invalid fields (gameId, spins and currency are required without campaignId; spins from 1 to 1,000,000, betAmountMinor from 0 to 2^53-1). With campaignId those four fields are ignored, whatever they hold, and never refused.',
        'a currency that is malformed or not supported by the provider.',
        'a campaign that is inactive or outside its validity window.',
      ),
      403: error('`game not visible to this operator`.'),
      404: error('`campaign not found` or `game not found`.'),
      502: error('`provider call failed: <reason>`, e.g. `provider answered 500`: the grant was recorded with status `failed` and lastError; its idempotencyKey is consumed.', 'provider call failed: provider answered 500'),
      ...operatorErrors,
    },
  },
  {
    method: 'get',
    path: '/v1/operator/free-spins/grants',
    audience: 'operator',
    operationId: 'listGrants',
    tag: 'Operator API: free spins',
    summary: "List your tenant's grants",
    description: 'Grants of your tenant, newest first, optionally for one player.',
    query: listQuery,
    paramDescriptions: { playerRef: 'Only this player\'s grants. Not part of the signed target.' },
    responses: { 200: json(grantListResponse, 'Grants, newest first.'), 400: signedBadRequest('playerRef: Too small: expected string to have >=1 characters', '`playerRef: ...`: empty or too long.'), ...operatorErrors },
  },
  {
    method: 'get',
    path: '/v1/operator/free-spins/grants/{id}',
    audience: 'operator',
    operationId: 'getGrant',
    tag: 'Operator API: free spins',
    summary: 'Read one grant',
    description: 'One grant of your tenant.',
    pathParams: grantPath,
    paramDescriptions: { id: 'The grant id (a UUID).' },
    responses: { 200: json(grantSchema, 'The grant.'), 400: signedBadRequest('id: expected a UUID', '`id: expected a UUID`.'), 404: grantNotFound, ...operatorErrors },
  },
  {
    method: 'post',
    path: '/v1/operator/free-spins/grants/{id}/cancel',
    audience: 'operator',
    operationId: 'cancelGrant',
    tag: 'Operator API: free spins',
    summary: 'Cancel an active grant',
    description:
      "Cancels the grant at the provider, synchronously. No body. Only an `active` grant can be cancelled. When the provider's cancel fails the grant stays `active` (502): retry the cancel.",
    pathParams: grantPath,
    paramDescriptions: { id: 'The grant id (a UUID).' },
    responses: {
      200: json(grantSchema, 'The grant, now `cancelled`.'),
      400: signedBadRequest('grant not cancellable: it is cancelled', '`id: expected a UUID`.', '`grant not cancellable: it is <status>` (pending, cancelled or failed).'),
      404: grantNotFound,
      502: error('`provider cancel failed: <reason>; the grant stays active, retry the cancel`.', 'provider cancel failed: provider answered 503; the grant stays active, retry the cancel'),
      ...operatorErrors,
    },
  },
];

const CSV_HEADER = 'providerId,gameId,currency,betCount,betAmountMinor,winCount,winAmountMinor,refundCount,refundAmountMinor,ggrMinor';
/** The statement's lines as CSV: the header row, then one row per line, each ended by CRLF. */
const settlementCsv = z
  .string()
  .regex(new RegExp(`^${CSV_HEADER}\r\n`))
  .meta({ description: `RFC 4180, CRLF line ends. The header row \`${CSV_HEADER}\`, then one row per line of the statement, in its order.` });

/**
 * The fields of the transactions query, without its either-or rule (a time range or a round), which
 * JSON Schema parameters cannot show and the description states. Each parameter has an example, and
 * the two selections' examples together would be refused.
 */
const transactionsQueryFields = z.strictObject(transactionsQuery.shape);

const notSigned = 'The query string is not part of the signed target: sign the path only.';
/** A settlement statement's answer, interval and its end, as the operator's route and the console's (one handler, sendStatement) both document them. */
const statementAnswer = {
  description: 'The statement: JSON, or its lines as CSV when `Accept: text/csv`.',
  content: { 'application/json': settlementStatement, 'text/csv': settlementCsv },
  examples: { 'text/csv': settlementCsvExample },
};
const statementInterval = { from: '2026-11-21T00:00:00+01:00', to: '2026-11-22T00:00:00+01:00' };
const statementTo = `End of the interval (excluded), at most ${MAX_INTERVAL_DAYS} days after \`from\`.`;

const interval400 = [
  '`from: must be an RFC 3339 date-time with a time zone, such as 2026-11-24T00:00:00Z` (or `to: …`): malformed, or without a time zone.',
  '`to: must be later than from (the interval is [from, to))`, `to: must be at most 31 days after from`.',
  '`from: must fall in the years 1 to 9999 in UTC` (or `to: …`).',
];
const unknownParameter = '`query: Unrecognized key: "<name>"`: a parameter the route does not take.';

const reconciliationRoutes: RouteSpec[] = [
  {
    method: 'get',
    path: '/v1/operator/transactions',
    audience: 'operator',
    operationId: 'listTransactions',
    tag: 'Operator API: reconciliation',
    summary: 'List your transactions with the status to reconcile',
    description: `Every transaction bound for your wallet: the providers' BET, WIN and ROLLBACK, the reconciler's rollbacks (\`stale-rollback:<bet id>\`) and the platform team's ADJUSTMENTs, each with its TransactionStatus.

- **Select** either a time range, \`from\` and \`to\` (RFC 3339 with a time zone; the half-open interval \`[from, to)\` of \`recordedAt\`, at most ${MAX_INTERVAL_DAYS} days), or a round, \`roundId\` with \`gameId\`; not both. Narrow with \`playerRef\` and \`status\`. Recording times are whole milliseconds, so a bound with more digits selects exactly what it says.
- **Order:** the order in which the transactions were recorded.
- **Paging:** pass \`nextCursor\` as \`cursor\`, with the other parameters unchanged, until it is null: every transaction of the query comes exactly once, even while new ones are being recorded. A cursor is opaque; it belongs to its query (other filters: 400) and to the event store that gave it (after the history moved to another store: 400, start again without a cursor).
- Served from a read model: a new transaction, or a new status, shows a moment after it is recorded (normally milliseconds).

${notSigned}`,
    query: transactionsQueryFields,
    paramDescriptions: {
      from: 'Start of the time range (included), RFC 3339 with a time zone. With `to`; not with `roundId`.',
      to: `End of the time range (excluded), at most ${MAX_INTERVAL_DAYS} days after \`from\`.`,
      roundId: 'One round, with `gameId`; not with a time range.',
      gameId: "The round's game (a roundId is unique only within its provider, which the game names). Only with `roundId`.",
      playerRef: "Only this player's transactions.",
      status: 'Only transactions in this status.',
      limit: 'Transactions per page, 1 to 1000; 100 when omitted.',
      cursor: "`nextCursor` of the previous page, as it was answered, with this page's other parameters unchanged.",
    },
    paramExamples: { from: TRANSACTIONS_FROM, to: TRANSACTIONS_TO, status: 'applied', limit: 2, cursor: TRANSACTIONS_CURSOR },
    responses: {
      200: json(transactionsPage, 'A page of transactions, in recorded order.'),
      400: signedBadRequest(
        `to: must be at most ${MAX_INTERVAL_DAYS} days after from`,
        '`query: a time range (from and to) or a round (roundId with gameId) is needed`, `query: either from and to, or roundId with gameId, not both`, `from: is needed with to`, `to: is needed with from`, `gameId: is needed with roundId (a roundId is unique only within its provider, which the game names)`, `gameId: applies only with roundId`.',
        ...interval400,
        '`status: must be one of applied, declined, pending, failed, voided, dead`, `limit: must be a whole number from 1 to 1000`.',
        '`cursor: not a cursor this service gave (pass nextCursor as it was answered)`, `cursor: it belongs to another query (keep from, to, roundId, gameId, playerRef and status as they were, and ask as the operator it was given to)`, `cursor: given by an earlier version of the service; start again without a cursor`, `cursor: the history has moved to another event store since it was given; start again without a cursor`.',
        unknownParameter,
      ),
      ...operatorErrors,
    },
  },
  {
    method: 'get',
    path: '/v1/operator/rounds/{roundId}',
    audience: 'operator',
    operationId: 'getRound',
    tag: 'Operator API: reconciliation',
    summary: 'Read one round with its transactions',
    description: `One round of yours: its player, provider and currency, its status, when it opened and closed, the sums of its \`applied\` BETs, WINs and ROLLBACKs, and every transaction with its TransactionStatus, in recorded order. A roundId is unique only within its provider, which the game names: \`gameId\` is required. Served from a read model, like the transactions list.

${notSigned}`,
    pathParams: z.object({ roundId: z.string().min(1).max(255) }),
    query: roundQuery,
    paramDescriptions: { roundId: "The provider's roundId, URL-encoded.", gameId: "The round's game." },
    responses: {
      200: json(roundDetails, 'The round.'),
      400: signedBadRequest(
        'gameId: is needed (a roundId is unique only within its provider, which the game names)',
        '`gameId: is needed (a roundId is unique only within its provider, which the game names)`.',
        '`roundId: expected at most 255 characters`.',
        unknownParameter,
      ),
      404: error('`round not found`: no round with this roundId and gameId under your tenant (another operator\'s or another game\'s round looks the same).'),
      ...operatorErrors,
    },
  },
  {
    method: 'get',
    path: '/v1/operator/reports/settlement',
    audience: 'operator',
    operationId: 'settlementStatement',
    tag: 'Operator API: reconciliation',
    summary: 'Your settlement statement for an interval, as JSON or CSV',
    description: `The statement of your transactions recorded in \`[from, to)\` (RFC 3339 with a time zone, at most ${MAX_INTERVAL_DAYS} days), from each one's current TransactionStatus:

- \`lines\`: per provider, game and currency, the \`applied\` BETs (\`bets\`), WINs (\`wins\`) and ROLLBACKs (\`refunds\`, the reconciler's included), each \`{count, amountMinor}\`, and \`ggrMinor\` = bets − wins − refunds (may be negative). Sorted by providerId, gameId, currency.
- \`adjustments\`: per currency, the \`applied\` ADJUSTMENTs: \`credits\` and \`debits\`.
- \`unsettled\`: per currency, what your wallet has not accepted: the \`pending\`, \`failed\` and \`dead\` transactions of every type, adjustments included.
- \`totals\`: per currency, the lines added up.

Declined and voided transactions moved no money and count nowhere; a ROLLBACK counts in \`refunds\` once applied, even when its BET is \`failed\`, \`voided\` or \`declined\` and so not in \`bets\`. The figures are the sums over \`GET /v1/operator/transactions\` for the same interval. Asked again, a past interval gives the same statement, unless one of its unsettled transactions settles meanwhile: a \`pending\` one then moves from \`unsettled\` into the lines, and a \`failed\` BET that never reached your wallet leaves \`unsettled\` once rolled back (\`voided\`). Amounts are exact JSON integers.

**CSV:** with \`Accept: text/csv\` (or any Accept that prefers it to \`application/json\`) the answer is the lines only, as CSV (RFC 4180, CRLF line ends) under the header row \`${CSV_HEADER}\`; adjustments, unsettled and totals are in the JSON only. Otherwise the answer is JSON.

${notSigned}`,
    query: settlementQuery,
    paramDescriptions: {
      from: 'Start of the interval (included), RFC 3339 with a time zone, e.g. your midnight: `2026-11-21T00:00:00+01:00`.',
      to: statementTo,
    },
    paramExamples: statementInterval,
    responses: {
      200: statementAnswer,
      400: signedBadRequest(`to: must be at most ${MAX_INTERVAL_DAYS} days after from`, ...interval400, unknownParameter),
      ...operatorErrors,
    },
  },
];

const historyRoutes: RouteSpec[] = [
  {
    method: 'get',
    path: '/v1/operator/history/events',
    audience: 'operator',
    operationId: 'historyEvents',
    tag: 'Operator API: history',
    summary: 'Your events in chain order, each with its link',
    description: `The events of your streams (your rounds, adjustments included; your players' session streams; your grants), in the order of the global log, numbered from 1 (\`count\`), each with the link of your hash chain after it:

    link(n) = SHA-256(link(n-1) || UTF-8(canonical JSON of {stream, type, data, metadata, position, recordedAt}))

with \`link(0)\` 32 zero bytes and \`link(n-1)\` as 32 raw bytes; canonical JSON sorts the keys of every object by UTF-16 code units, has no whitespace, and writes strings and numbers as JavaScript's \`JSON.stringify\` does. Recompute it from your first event, compare each link, and check it against your signed checkpoints (\`GET /v1/operator/history/checkpoints\`): \`scripts/verify-history.mjs\` does all of it (docs/operators.md, verifying your own history). You see only your own events.

- **Paging:** \`after\` is a count: pass \`next\` (the last event's \`count\`) for the next page; a page shorter than \`limit\` is the end for now.
- The chain is written by the service a moment after each event (normally milliseconds): the newest events appear shortly after they happen.

${notSigned}`,
    query: historyEventsQuery,
    paramDescriptions: { after: 'Only your events after your `after`-th (a count; 0, the default, starts at your first).', limit: 'Events per page, 1 to 1000; 100 when omitted.' },
    paramExamples: { after: '0', limit: 100 },
    responses: {
      200: json(historyEventsPage, 'A page of your events.'),
      400: signedBadRequest(
        'after: must be a whole number (a count of events)',
        '`after: must be a whole number (a count of events)`, `limit: must be a whole number from 1 to 1000`.',
        unknownParameter,
      ),
      ...operatorErrors,
    },
  },
  {
    method: 'get',
    path: '/v1/operator/history/checkpoints',
    audience: 'operator',
    operationId: 'historyCheckpoints',
    tag: 'Operator API: history',
    summary: 'Your signed checkpoints',
    description: `Every \`CHAIN_CHECKPOINT_SECONDS\` (60 by default) while your chain grew, the service signs a checkpoint of its head with its Ed25519 key: \`signature\` is the base64 Ed25519 signature of the UTF-8 bytes of the canonical JSON of \`{count, link, operatorId, position, signedAt}\` (keys in that order, no whitespace). Verify it with the public key the platform team gives you (its \`keyId\`: the first 16 hex digits of the SHA-256 of the key's SPKI DER), and check that your event number \`count\` makes \`link\`. Oldest first.

**Keep the checkpoints you fetch.** Signed by a key you hold the public half of, they show later that your history was not rewritten: a history changed afterwards, even re-signed, no longer matches them.

${notSigned}`,
    query: checkpointsQuery,
    paramDescriptions: { after: 'Only checkpoints after this count (0, the default, starts at the first).', limit: 'How many, 1 to 1000; 1000 when omitted.' },
    paramExamples: { after: '0', limit: 1000 },
    responses: {
      200: json(operatorCheckpoints, 'Your checkpoints, oldest first.'),
      400: signedBadRequest(
        'limit: must be a whole number from 1 to 1000',
        '`after: must be a whole number (a count of events)`, `limit: must be a whole number from 1 to 1000`.',
        unknownParameter,
      ),
      ...operatorErrors,
    },
  },
];

const passthroughHeader = (required: boolean): Record<string, HeaderSpec> => ({
  [WALLET_PASSTHROUGH_HEADER]: {
    description: "`true` when the status and body are the operator wallet's, passed through verbatim; absent on the service's own answers.",
    schema: z.literal('true'),
    required,
    example: 'true',
  },
});

/**
 * POST /v1/wallet/balance passes the wallet's status and body through, so any status it lists may be
 * the wallet's: each one says so, with a body that is ours (Error) or the wallet's (anything), told
 * apart by X-Wallet-Passthrough.
 */
function orTheWallets(responses: Responses): Responses {
  const out: Responses = {};
  for (const [status, entry] of Object.entries(responses) as Array<[string, ResponseEntry]>) {
    if (status === '200' || status === 'default') {
      out[status as 'default'] = entry;
      continue;
    }
    const ours = isShared(entry) ? sharedResponses[entry.shared]! : entry;
    out[Number(status)] = {
      description: `The service's own answer: ${ours.description}\n\n**Or the wallet's own ${status}**, passed through verbatim with \`X-Wallet-Passthrough: true\`: the body is then the wallet's, in the content type it chose. The service's own answers never carry that header.`,
      content: { 'application/json': errorOrWalletBody, ...(ours.content?.['text/plain'] ? { 'text/plain': z.string() } : {}) },
      headers: { ...ours.headers, ...passthroughHeader(false) },
      ...(ours.examples ? { examples: ours.examples } : {}),
    };
  }
  return out;
}

const providerRoutes: RouteSpec[] = [
  {
    method: 'post',
    path: '/v1/wallet/transaction',
    audience: 'provider',
    operationId: 'submitTransaction',
    tag: 'Provider API',
    summary: "Submit a BET, WIN or ROLLBACK to the player's operator wallet",
    description: `The service records the transaction, forwards it to the operator's wallet (\`POST {walletUrl}/v1/wallet/transaction\`, see Webhooks) and answers **200** with the wallet's TransactionResponse **verbatim**, DECLINED included. The rules of a round are in docs/providers.md.

- **Idempotent on transactionId:** resubmitting identical content gets the stored reply without a second wallet call, even after the round completed or the session was kicked. Different content under a used transactionId is 409: an id names one transaction for its provider (under any operator) and for the operator's player (whoever sends it), because the wallet deduplicates on (playerRef, transactionId).
- A ROLLBACK carries exactly its BET's amount and currency. A round belongs to the player and currency of its first transaction.
- playerRef, gameId and currency must equal the session's; a DEMO session is refused.
- A failed or timed-out **WIN or ROLLBACK** is retried by the service until the wallet answers 200 (exponential backoff, up to 24 h); resubmit to learn its outcome. A **BET** that failed or timed out is not retried; if its round stays incomplete the reconciler rolls it back. (A BET answered with the wallet's reply whose record was then lost in a crash is asked for again, same body, once you go on with its round: the wallet answers from its record. So is a BET you went on without waiting for: it is then applied, as you assumed.)`,
    body: { schema: transactionBody, examples: providerTransactionExamples },
    responses: {
      200: json(transactionResponse, "The operator wallet's reply, verbatim (status OK or DECLINED, balance in minor units)."),
      400: signedBadRequest(
        'roundComplete: required for a BET',
        'a field fails validation: amount not a non-negative safe integer, currency not `^[A-Z]{3}$`, metadata not a JSON object or over 8 KiB, ROLLBACK without originalTransactionId, roundComplete missing on a BET or WIN, direction on anything but ADJUSTMENT.',
        '`type: ADJUSTMENT is platform-internal ...`.',
        'playerRef, gameId or currency differing from the session.',
        "a ROLLBACK whose originalTransactionId is not a BET of that round, or whose amount or currency is not that BET's.",
        'a DEMO session.',
      ),
      409: error(
        'transactionId already used with different content (by this provider, or by anyone for this operator player); a BET or WIN on a round already completed; a second ROLLBACK of a BET already rolled back; `round belongs to another player`; `round is in another currency`; `bet was rolled back` (a BET whose ROLLBACK came before the wallet answered it, or before any call of it reached the wallet: never sent again).',
        'round already completed',
      ),
      502: error('`wallet call failed` (the wallet answered non-200, over 1 MiB, or could not be reached), `wallet answered DECLINED to a WIN` (or ROLLBACK), or `wallet never accepted the transaction; retries stopped`. A WIN or ROLLBACK stays queued for retry.'),
      504: error('`wallet timeout`: the wallet did not answer within `walletTimeoutMs`; or `transaction still in progress; resubmit to get its outcome`.'),
      ...providerErrors,
    },
  },
  {
    method: 'post',
    path: '/v1/wallet/balance',
    audience: 'provider',
    operationId: 'readBalance',
    tag: 'Provider API',
    summary: "Read a player's balance from the operator wallet",
    description:
      "Forwarded live to the operator's wallet (`GET {walletUrl}/v1/wallet/balance?playerRef=...`, see Webhooks); the wallet's status and body come back **verbatim**, with `X-Wallet-Passthrough: true`. The service's own answers (a refused signature or session, a DEMO session, an unreachable or slow wallet) never carry that header: that is how a wallet 401 is told from the service's.",
    body: { schema: balanceBody, example: { sessionToken: SESSION_TOKEN } },
    responses: orTheWallets({
      200: { ...json(balanceResponse, "The wallet's 200 reply, verbatim."), headers: passthroughHeader(true) },
      400: signedBadRequest('demo session: demo play never reaches the operator wallet', '`sessionToken: ...`: missing or invalid.', 'a DEMO session.'),
      502: error('`wallet unreachable`, or `wallet reply over 1 MiB` (such a reply is never passed on).'),
      504: error('`wallet timeout`.'),
      ...providerErrors,
      default: {
        description: "Any other status the wallet answered, with the wallet's body, verbatim (`X-Wallet-Passthrough: true`).",
        content: { 'application/json': walletBody },
        headers: passthroughHeader(true),
      },
    }),
  },
];

const adminRoutes: RouteSpec[] = [
  {
    method: 'put',
    path: '/v1/admin/catalog',
    audience: 'admin',
    operationId: 'loadCatalog',
    tag: 'Admin',
    summary: 'Load a catalog',
    description:
      'Inserts or updates every provider, game, operator and campaign of the body, in one transaction (field reference: docs/operations.md); entries not in the body stay. Every running instance picks the change up.',
    body: { schema: catalogSchema },
    responses: {
      200: json(catalogCounts, 'Applied; the counts the catalog now holds.'),
      400: error('The body does not match the catalog shape (the message names the field, e.g. `catalog: operators[0].walletUrl: expected an absolute http(s) URL`), a game id already belongs to another provider, or a visible game or campaign game is unknown. Nothing was applied.'),
      ...adminErrors,
    },
  },
  {
    method: 'get',
    path: '/v1/admin/projections',
    audience: 'admin',
    operationId: 'projectionLag',
    tag: 'Admin',
    summary: 'How far each read model is behind the event log',
    description: 'Per read model: its checkpoint, the events not applied yet (counted up to 10,000) and the age of the oldest of them.',
    responses: { 200: json(projectionsResponse, 'Lag per read model.'), ...adminErrors },
  },
  {
    method: 'post',
    path: '/v1/admin/adjustments',
    audience: 'admin',
    operationId: 'issueAdjustment',
    tag: 'Admin',
    summary: "Issue an ADJUSTMENT to an operator's player",
    description:
      "A manual balance correction, sent to the operator's wallet as an ADJUSTMENT (`sessionToken` `system:admin-adjustment`, `metadata.reason`) and retried like a WIN until the wallet accepts it. Idempotent on transactionId.",
    body: { schema: adjustmentBody, example: { operatorId: 'op-1', playerRef: 'p1', amount: 500, currency: 'EUR', direction: 'CREDIT', reason: 'goodwill credit, ticket 1234' } },
    responses: {
      200: json(adjustmentResponse, 'The wallet applied it (status `applied`).'),
      202: {
        ...json(adjustmentResponse, 'Recorded, not accepted by the wallet yet; `retrying: true` while the service keeps retrying (it stops after 24 h: status `dead`).'),
        examples: { 'application/json': { transactionId: 'adj-5b0e8f3c-1d2a-4e6f-8a9b-0c1d2e3f4a5b', status: 'failed', attempts: 1, lastError: 'wallet answered 503', retrying: true } },
      },
      400: error('A field fails validation (amount must be a positive safe integer, currency `^[A-Z]{3}$`, reason required) or the body is not JSON.', 'amount: expected a positive integer'),
      404: error('`operator not found`.'),
      409: error('`transactionId already used with different content`.'),
      502: {
        ...json(adjustmentResponse, 'The wallet answered DECLINED, which is invalid for an ADJUSTMENT (status `invalid`).'),
        examples: {
          'application/json': { transactionId: 'adj-5b0e8f3c-1d2a-4e6f-8a9b-0c1d2e3f4a5b', status: 'invalid', attempts: 1, reply: { status: 'DECLINED', balance: 10000 }, retrying: false },
        },
      },
      504: error('`transaction still in progress; resubmit to get its outcome`: another request is attempting it.'),
      ...adminErrors,
    },
  },
  {
    method: 'post',
    path: '/v1/admin/transactions/redrive',
    audience: 'admin',
    operationId: 'redriveTransaction',
    tag: 'Admin',
    summary: 'Re-drive a dead transaction: send it to the wallet again',
    description: `For a WIN, ROLLBACK or ADJUSTMENT whose TransactionStatus is \`dead\`: retried until its retry window closed (\`DISPATCH_RETRY_WINDOW_SECONDS\`, 24 h) without the wallet accepting it, or answered DECLINED by the wallet, which a credit may not be. Once the wallet is fixed, this sends it again **with the same transactionId and the same body**, which the wallet deduplicates on.

- The re-drive is recorded in the round's history as \`TransactionRedriven\`, with \`by\` and \`reason\` (\`GET /v1/audit/rounds/{providerId}/{operatorId}/{roundId}\`). The transaction is then pending again and the worker sends it at once, then retries it like any credit, in a retry window of its own that starts at the re-drive; it is dead again if that window closes too.
- A **BET is never re-driven**: a BET the wallet never accepted is its provider's to resubmit, or the reconciler's to roll back.
- A credit the wallet answered DECLINED comes back DECLINED from a wallet that keeps its replies (it must return the stored reply for a known transactionId): re-drive it only once the wallet has dropped that reply.
- The answer says the re-drive was recorded, not that the wallet accepted it: its outcome is in the round and in the transaction lists.

The console's list of stuck transactions (\`GET /v1/admin/console/stuck\`) shows which ones are \`dead\`, with the names this body needs.`,
    body: { schema: redriveBody, example: { operatorId: 'op-1', providerId: 'studio-a', roundId: 'r-20261121-0002', transactionId: 'tx-win-0002', by: REDRIVE_BY, reason: REDRIVE_REASON } },
    responses: {
      202: json(redriveResponse, 'Recorded (`TransactionRedriven`); the worker sends the transaction now.'),
      400: error(
        bullets([
          '`request body is not valid JSON`.',
          '`by: say who re-drives it`, `reason: say why`: missing, empty or only spaces.',
          'a field missing or out of bounds, e.g. `transactionId: Invalid input: expected string, received undefined`; `body: Unrecognized key: "<name>"` for a field the body does not have.',
        ]),
        'by: say who re-drives it',
      ),
      404: error('`transaction not found`: no transaction with this id in the round named by operatorId, providerId and roundId (or no such round).'),
      409: error(
        bullets([
          '`only a dead transaction is re-driven: this one is <status>`: its TransactionStatus is `applied`, or `pending` (still being retried, or re-driven already and not answered yet).',
          '`a BET is never re-driven: its provider resubmits it or rolls it back`.',
        ]),
        'only a dead transaction is re-driven: this one is applied',
      ),
      ...adminErrors,
    },
  },
];

const consoleTag = 'Admin: console';
const playerPath = z.object({ operatorId: z.string(), playerRef: z.string() });
const adminSettlementPath = z.object({ operatorId: z.string() });
const fromReadModels = 'Served from the read models: what was just recorded shows a moment later (normally milliseconds).';

const consoleRoutes: RouteSpec[] = [
  {
    method: 'get',
    path: '/v1/admin/console/overview',
    audience: 'admin',
    operationId: 'consoleOverview',
    tag: consoleTag,
    summary: 'Overview: transactions, wallet calls, unsettled money, read-model lag, the chain',
    description: `The console's first page, for the last hour (60 buckets of a minute) or the last day (96 buckets of 15 minutes), the bucket now running last: transactions recorded per bucket; per operator its wallet transaction calls, failures and p50/p99 latency per bucket (from the \`durationMs\` of each call's event: calls recorded before that field existed count in no chart); the transactions whose TransactionStatus is \`pending\`, \`failed\` or \`dead\` now; how far each read model is behind the log; the hash chain's progress and latest checkpoint. ${fromReadModels}`,
    query: consoleOverviewQuery,
    paramDescriptions: { window: '`hour` (the default) or `day`.' },
    responses: {
      200: json(consoleOverview, 'The overview.'),
      400: error(bullets(['`window: must be hour or day`.', unknownParameter]), 'window: must be hour or day'),
      ...adminErrors,
    },
  },
  {
    method: 'get',
    path: '/v1/admin/console/search',
    audience: 'admin',
    operationId: 'consoleSearch',
    tag: consoleTag,
    summary: 'Find a transaction, a round, a player or a grant by its id',
    description: `The term is matched exactly (after trimming), at once against transactionIds, roundIds, playerRefs (a player with only sessions too) and grant ids, across all operators; every kind that matches is answered, each result with the ids that open it (\`/v1/audit/rounds/…\`, \`/v1/admin/console/players/…\`, \`/v1/audit/grants/…\`). ${fromReadModels}`,
    query: consoleSearchQuery,
    paramDescriptions: { q: 'A transactionId, roundId, playerRef or grant id, 1 to 300 characters once trimmed.' },
    responses: {
      200: json(consoleSearchResults, 'What matched; `results` is empty when nothing did.'),
      400: error(
        bullets([
          '`q: type a transaction id, round id, player ref or grant id`: empty or only spaces; `q: Invalid input: expected string, received undefined` when missing.',
          '`q: Too big: expected string to have <=300 characters`.',
          unknownParameter,
        ]),
        'q: type a transaction id, round id, player ref or grant id',
      ),
      ...adminErrors,
    },
  },
  {
    method: 'get',
    path: '/v1/admin/console/players/{operatorId}/{playerRef}',
    audience: 'admin',
    operationId: 'consolePlayer',
    tag: consoleTag,
    summary: "One player: sessions, rounds with their sums, grants",
    description: `An operator's player: every session launched (\`active\`, \`expired\` or \`kicked\`), the latest 200 rounds, newest first, with the sums of their \`applied\` BETs, WINs and ROLLBACKs, and the player's free-spin grants, newest first. The player's full session history with events is \`GET /v1/audit/players/{operatorId}/{playerRef}/sessions\`. ${fromReadModels}`,
    pathParams: playerPath,
    paramDescriptions: { operatorId: 'The operator id.', playerRef: "The operator's playerRef, URL-encoded." },
    responses: {
      200: json(consolePlayer, 'The player.'),
      404: error('`player not found`: no session, round or grant of this playerRef under this operator.'),
      ...adminErrors,
    },
  },
  {
    method: 'get',
    path: '/v1/admin/console/stuck',
    audience: 'admin',
    operationId: 'consoleStuck',
    tag: consoleTag,
    summary: 'Transactions the wallets have not accepted',
    description: `Every transaction of every operator that its wallet has not accepted, oldest first (at most 1,000), with its age, attempts and last error. A \`dead\` WIN, ROLLBACK or ADJUSTMENT is re-driven with \`POST /v1/admin/transactions/redrive\` (its operatorId, providerId, roundId and transactionId are in the row). ${fromReadModels}`,
    responses: {
      200: json(consoleStuck, 'The transactions, oldest first.'),
      ...adminErrors,
    },
  },
  {
    method: 'get',
    path: '/v1/admin/console/operators',
    audience: 'admin',
    operationId: 'consoleOperators',
    tag: consoleTag,
    summary: 'The operators of the catalog, without their secrets',
    description: "Every operator of the catalog: its name, wallet URL and timeout, rate limit, and the games it sees (with their names and providers). Secrets and blocklists are not shown. Read from the catalog this process holds.",
    responses: {
      200: json(consoleOperators, 'The operators.'),
      ...adminErrors,
    },
  },
  {
    method: 'get',
    path: '/v1/admin/operators/{operatorId}/settlement',
    audience: 'admin',
    operationId: 'adminSettlementStatement',
    tag: consoleTag,
    summary: "An operator's settlement statement, as JSON or CSV",
    description: `The statement the operator reads itself with \`GET /v1/operator/reports/settlement\`, byte for byte, for any operator: the transactions recorded in \`[from, to)\` (RFC 3339 with a time zone, at most ${MAX_INTERVAL_DAYS} days), by provider, game and currency, with adjustments, what is unsettled and the totals (see that operation). With \`Accept: text/csv\` the lines only, as CSV (RFC 4180, CRLF line ends) under the header row \`${CSV_HEADER}\`. The operator is looked up first: an unknown one is 404 whatever the query. ${fromReadModels}`,
    pathParams: adminSettlementPath,
    query: settlementQuery,
    paramDescriptions: {
      operatorId: 'The operator id.',
      from: 'Start of the interval (included), RFC 3339 with a time zone, e.g. the operator\'s midnight: `2026-11-21T00:00:00+01:00`.',
      to: statementTo,
    },
    paramExamples: statementInterval,
    responses: {
      200: statementAnswer,
      400: error(bullets([...interval400, unknownParameter]), `to: must be at most ${MAX_INTERVAL_DAYS} days after from`),
      404: error('`operator not found`: no operator with this id in the catalog.'),
      ...adminErrors,
    },
  },
  {
    method: 'post',
    path: '/v1/admin/rounds/replay-link',
    audience: 'admin',
    operationId: 'adminRoundReplayLink',
    tag: consoleTag,
    summary: "Get a replay link for an operator's round",
    description:
      "The link the operator gets with `POST /v1/operator/rounds/replay`, for any operator's round: the provider-hosted replay page, with a token that expires after `REPLAY_LINK_TTL_SECONDS` (default 900). Read from the round's own stream, so a round just played is found at once.",
    body: { schema: adminReplayLinkBody, example: { operatorId: 'op-1', roundId: 'r-20261121-0001', gameId: 'fruit-1' } },
    responses: {
      200: json(replayResponse, 'The replay link.'),
      400: error(
        bullets([
          '`request body is not valid JSON`.',
          'operatorId, roundId or gameId missing or invalid, e.g. `operatorId: Invalid input: expected string, received undefined`.',
          "`gameId: this game does not support round replay` (the game's replayBaseUrl is empty).",
        ]),
        'gameId: this game does not support round replay',
      ),
      404: error("`round not found`: no round with this roundId and gameId under this operator (an unknown game, another operator's round or another game's round looks the same)."),
      ...adminErrors,
    },
  },
  {
    method: 'get',
    path: '/console',
    audience: 'public',
    operationId: 'consolePage',
    tag: consoleTag,
    summary: 'The console (a page)',
    description:
      "The platform team's back-office console: a single page whose data all comes from the bearer routes (`/v1/admin/*`, `/v1/audit/*`). The page holds no data and is served without authentication; the admin token is typed into it, kept in the tab and sent as `Authorization: Bearer`, never in a URL. Its modules and style sheet are under `/console/assets/`, Chart.js under `/console/vendor/`; it loads nothing from elsewhere. Guide: docs/console.md.",
    responses: {
      200: {
        description: 'An HTML page.',
        content: { 'text/html': z.string() },
        examples: { 'text/html': '<!doctype html>\n<html lang="en">…</html>\n' },
        headers: {
          'Content-Security-Policy': {
            description: 'The page loads nothing from elsewhere, runs no inline script or style, and is never framed.',
            schema: z.literal(CONSOLE_CSP),
            required: true,
            example: CONSOLE_CSP,
          },
        },
      },
    },
  },
  {
    method: 'get',
    path: '/console/vendor/{file}',
    audience: 'public',
    operationId: 'consoleVendorFile',
    tag: consoleTag,
    summary: 'Chart.js, as the console loads it',
    description: "Chart.js's UMD build and its source map, from the service's own installation (the console's charts; no CDN). Any other file is 404.",
    pathParams: z.object({ file: z.enum(['chart.umd.js', 'chart.umd.js.map']) }),
    paramDescriptions: { file: '`chart.umd.js`, or its source map `chart.umd.js.map`.' },
    paramExamples: { file: 'chart.umd.js' },
    responses: {
      200: {
        description: 'The file: JavaScript, or the source map as JSON.',
        content: { 'text/javascript': z.string(), 'application/json': sourceMap },
        examples: { 'text/javascript': '/*!\n * Chart.js v4.6.1\n * https://www.chartjs.org\n * (c) 2026 Chart.js Contributors\n * Released under the MIT License\n */\n!function(t,e){…}(this,(function(){…}));\n' },
      },
      404: error('`not found`: a file other than these two.'),
      500: {
        description: "`chart.js is not installed: run npm ci` (text/plain): the service was installed without its dependencies. `{\"error\":\"internal error\"}` when the file could not be read.",
        content: { 'text/plain': z.literal('chart.js is not installed: run npm ci'), 'application/json': errorBody },
        examples: { 'text/plain': 'chart.js is not installed: run npm ci', 'application/json': { error: 'internal error' } },
      },
    },
  },
];

const eventLink = 'Events are shown as AuditEvent.';
const timeTravel = (what: string) =>
  `**Time travel:** with \`asOf\` (an RFC 3339 instant with a time zone) the answer is ${what} as it was then: folded from the events recorded at or before \`asOf\` (an event's time is its \`createdAt\`, in milliseconds; one at exactly \`asOf\` counts), with \`asOf\` echoed, \`position\` (the last event folded, null when none was recorded by then) and \`state\`; \`history\` then stops at that event. Without \`asOf\` the answer is as always, without those three fields.`;
const asOfDescription =
  'An RFC 3339 instant with a time zone (`Z` or an offset), e.g. `2026-11-21T16:21:00.030Z`. Percent-encode a `+` offset (`%2B01:00`); an unencoded `+`, which a query string reads as a space, is understood too.';
const asOf400 = '`asOf: not an RFC 3339 date-time with a time zone, such as 2026-11-24T10:00:00.000Z`: malformed, empty, or without a time zone; or a parameter the route does not take (a misspelt `asOf`).';
const asOfError = 'asOf: not an RFC 3339 date-time with a time zone, such as 2026-11-24T10:00:00.000Z';

const chainPage = (what: string) => ({
  after: `Only ${what} after the \`after\`-th (a count; 0, the default, starts at the first).`,
  limit: 'How many, 1 to 1000; 1000 when omitted.',
});
const auditRoutes: RouteSpec[] = [
  {
    method: 'get',
    path: '/v1/audit/events',
    audience: 'admin',
    operationId: 'readEventLog',
    tag: 'Audit',
    summary: 'Read the global event log in order',
    description: `The log in commit order, strictly after \`from\` (omit it to start at the beginning). It is complete but eventually consistent: an event appears once every older transaction on the server has ended, and a page holds at most \`limit\` events and about 8 MiB of their text (always one event, however large: an outcome keeps its wallet's reply, up to 1 MiB), so a short page means "nothing more yet" or "the rest did not fit"; page again from \`next\` (an empty page: nothing more yet). ${eventLink}`,
    query: eventsQuery,
    paramDescriptions: { from: 'A position from an earlier page (`next`, or an event\'s `position`).', limit: 'Events per page.' },
    responses: { 200: json(eventsPage, 'A page of the log.'), 400: error('`limit` out of range, `from: not a position of this log`, or a parameter the route does not take.', 'limit: Too big: expected number to be <=1000'), ...auditErrors },
  },
  {
    method: 'get',
    path: '/v1/audit/streams/{streamId}',
    audience: 'admin',
    operationId: 'readStream',
    tag: 'Audit',
    summary: 'Read one stream',
    description: `Every event of one stream, e.g. \`player-sessions|op-1|p1\`, \`round|studio-a|op-1|r-1\`, \`grant|<id>\`. ${eventLink}`,
    pathParams: z.object({ streamId: z.string() }),
    paramDescriptions: { streamId: 'The stream id, URL-encoded (`|` is `%7C`).' },
    query: z.strictObject({}),
    responses: { 200: json(streamEvents, 'The stream.'), 400: error('a query parameter: the route takes none (`asOf` is taken by the rounds, sessions and grants routes).', 'query: Unrecognized key: "asOf"'), 404: error('`stream not found`: the stream has no events.'), ...auditErrors },
  },
  {
    method: 'get',
    path: '/v1/audit/rounds/{providerId}/{operatorId}/{roundId}',
    audience: 'admin',
    operationId: 'readRoundHistory',
    tag: 'Audit',
    summary: "Read one round's full history",
    description: `Each event of the round with the round as derived after it: completion, outstanding bets, and every transaction with its status, attempts, origin (provider, reconciler, admin), rollback and wallet reply. Each wallet call is an event (\`TransactionSettled\` or \`TransactionAttemptFailed\`, with its \`durationMs\`); an admin's re-drive is \`TransactionRedriven\`, with who (\`by\`) and why (\`reason\`). A roundId is unique only within (provider, operator). ${eventLink}

${timeTravel('the round')}`,
    pathParams: z.object({ providerId: z.string(), operatorId: z.string(), roundId: z.string() }),
    query: asOfQuery,
    paramDescriptions: { asOf: asOfDescription },
    responses: { 200: json(roundHistory, 'The history; with `asOf`, as it was then.'), 400: error(asOf400, asOfError), 404: error('`round not found`: the stream has no events at all (with `asOf` too).'), ...auditErrors },
  },
  {
    method: 'get',
    path: '/v1/audit/players/{operatorId}/{playerRef}/sessions',
    audience: 'admin',
    operationId: 'readPlayerSessions',
    tag: 'Audit',
    summary: "Read a player's sessions: launches and kicks",
    description: `The player's session stream with the open sessions after each event, and the rows of the sessions read model (with \`revoked_at\`). ${eventLink}

${timeTravel('the open sessions')} The \`sessions\` rows are then those as they stood at \`asOf\` (a session launched later is absent, a kick recorded later has not set \`revoked_at\`), derived from the events rather than read from the read model.`,
    pathParams: z.object({ operatorId: z.string(), playerRef: z.string() }),
    query: asOfQuery,
    paramDescriptions: { asOf: asOfDescription },
    responses: {
      200: json(playerSessionsHistory, 'The history; with `asOf`, as it was then.'),
      400: error(asOf400, asOfError),
      404: error('`no sessions for this player`: the stream has no events at all (with `asOf` too).'),
      ...auditErrors,
    },
  },
  {
    method: 'get',
    path: '/v1/audit/grants/{id}',
    audience: 'admin',
    operationId: 'readGrantHistory',
    tag: 'Audit',
    summary: "Read one grant's history",
    description: `Each event of the grant with the grant after it. ${eventLink}

${timeTravel('the grant')} Before the grant's first event, \`state\` is \`{"status":"none"}\`.`,
    pathParams: z.object({ id: z.string() }),
    query: asOfQuery,
    paramDescriptions: { id: 'The grant id.', asOf: asOfDescription },
    responses: { 200: json(grantHistory, 'The history; with `asOf`, as it was then.'), 400: error(asOf400, asOfError), 404: error('`grant not found`: the stream has no events at all (with `asOf` too).'), ...auditErrors },
  },
  {
    method: 'get',
    path: '/v1/audit/chain/public-key',
    audience: 'admin',
    operationId: 'chainPublicKey',
    tag: 'Audit',
    summary: 'The public key the chain checkpoints are signed with',
    description: `The Ed25519 public key (SPKI PEM) that verifies the checkpoints: the key of the latest checkpoint (before the first one, the newest key). With \`keyId\`, the key of that id: every key that ever signed stays available after a rotation, so old checkpoints stay verifiable. \`X-Key-Id\` names the key answered. Give this file to operators for \`scripts/verify-history.mjs\` (docs/auditors.md, the hash chain).`,
    query: publicKeyQuery,
    paramDescriptions: { keyId: 'A `keyId` as checkpoints name it (16 lowercase hex digits): that key, current or former.' },
    responses: {
      200: {
        description: 'The public key, PEM.',
        content: { 'application/x-pem-file': chainPublicKeyPem },
        examples: { 'application/x-pem-file': CHAIN_PUBLIC_KEY },
        headers: { 'X-Key-Id': { description: 'The id of the key answered (what checkpoints carry as `keyId`).', schema: z.string().regex(/^[0-9a-f]{16}$/), required: true, example: CHAIN_KEY_ID } },
      },
      400: error('`keyId: must be a key id as checkpoints name it (16 hex digits)`.'),
      404: error('`no key with this id`, or, without `keyId`, `no signing key yet: the projector role creates it at its first start`.', 'no key with this id'),
      ...auditErrors,
    },
  },
  {
    method: 'get',
    path: '/v1/audit/chain/checkpoints',
    audience: 'admin',
    operationId: 'chainCheckpoints',
    tag: 'Audit',
    summary: "The global hash chain's signed checkpoints",
    description:
      "The hash chain links every event of the history, in log order: `link(n) = SHA-256(link(n-1) || UTF-8(canonical JSON of {stream, type, data, metadata, position, recordedAt}))`, `link(0)` 32 zero bytes (docs/auditors.md gives the canonical form exactly). Every `CHAIN_CHECKPOINT_SECONDS` (default 60) while new events were linked, the projector role signs a checkpoint of the chain's head with the Ed25519 key of `GET /v1/audit/chain/public-key`. Oldest first. `npm run audit -- verify-chain` checks the chain and every checkpoint against the stored events.",
    query: checkpointsQuery,
    paramDescriptions: chainPage('the checkpoints'),
    paramExamples: { after: '0', limit: 1000 },
    responses: {
      200: json(chainCheckpoints, 'The checkpoints, oldest first.'),
      400: error('`after: must be a whole number (a count of events)`, `limit: must be a whole number from 1 to 1000`, or `query: Unrecognized key: "<name>"`.', 'limit: must be a whole number from 1 to 1000'),
      ...auditErrors,
    },
  },
  {
    method: 'get',
    path: '/v1/audit/transactions',
    audience: 'admin',
    operationId: 'listUnsettledTransactions',
    tag: 'Audit',
    summary: 'List dead-lettered and unsettled transactions',
    description:
      '`dead`: transactions the wallet never accepted before retries stopped (24 h), kept for auditors. `unsettled`: recorded, failed or timed out, not yet settled. `unresolved` (the default): both. Settled transactions are in none of these lists (see the round\'s audit history). Oldest first (by when each was first recorded), `limit` to a page (1 to 1,000, default 1,000); follow `nextCursor`, with the same `status`, until it is null. A transaction that joins the list behind a page already read (recorded earlier, failing only now) is on the next walk.',
    query: txQuery,
    paramExamples: { status: 'unsettled', limit: 1, cursor: AUDIT_TRANSACTIONS_CURSOR },
    responses: { 200: json(auditTransactions, 'The transactions.'), 400: error('`status: ...`: not dead, unsettled or unresolved (`all` was renamed `unresolved`); `limit: ...`; `cursor: ...`: not one this service gave (altered or made up, or given before cursors were signed), or given for another `status`; or a parameter the route does not take.', 'status: not dead, unsettled or unresolved'), ...auditErrors },
  },
];

const publicRoutes: RouteSpec[] = [
  {
    method: 'get',
    path: '/healthz',
    audience: 'public',
    operationId: 'health',
    tag: 'Health',
    summary: 'Liveness',
    description: 'Answers 200 while the process lives.',
    responses: { 200: json(healthResponse, 'The process lives.') },
  },
  {
    method: 'get',
    path: '/readyz',
    audience: 'public',
    operationId: 'ready',
    tag: 'Health',
    summary: 'Readiness',
    description:
      'Answers 200 only when Postgres, Redis and the event store answer (each within 2 s). The body is `{"status":"ready"}`, or `{"status":"degraded","failingProjections":[…]}` while a read model is stuck on an event it cannot apply (database-wide: any process answers the same): the money path reads no read model, so the process stays in rotation, and each entry names the projection, the event (position, type, stream), the error and since when. The runner retries the event with backoff.',
    responses: {
      200: json(readyResponse, 'Ready, or degraded (a read model stuck on an event).'),
      503: json(notReadyResponse, 'Not ready: `down` names what did not answer.'),
    },
  },
  {
    method: 'get',
    path: '/metrics',
    audience: 'admin',
    operationId: 'metrics',
    tag: 'Health',
    summary: 'Prometheus metrics',
    description: 'Prometheus text exposition. Bearer ADMIN_TOKEN: its labels name operators.',
    responses: {
      200: {
        description: 'Metrics in the Prometheus text format.',
        content: { 'text/plain': metricsText },
        examples: { 'text/plain': '# HELP wallet_retries_total Wallet transaction calls after the first for the same transaction (worker retries and resubmissions)\n# TYPE wallet_retries_total counter\nwallet_retries_total{operator="op-1"} 3\n' },
      },
      401: { shared: 'AdminUnauthorized' },
      500: { shared: 'InternalError' },
    },
  },
  {
    method: 'get',
    path: '/openapi.json',
    audience: 'public',
    operationId: 'openApiDocument',
    tag: 'Documentation',
    summary: 'This document',
    description: 'The OpenAPI 3.1 document, generated from the schemas the service validates with. Feed it to a client generator.',
    responses: { 200: json(openApiDocumentSchema, 'The OpenAPI document.') },
  },
  {
    method: 'get',
    path: '/docs',
    audience: 'public',
    operationId: 'docsPage',
    tag: 'Documentation',
    summary: 'This page',
    description: 'Swagger UI over /openapi.json, served by the service itself (no external resources).',
    responses: { 200: { description: 'An HTML page.', content: { 'text/html': z.string() }, examples: { 'text/html': '<!doctype html>\n<html lang="en">…</html>\n' } } },
  },
];

/** Every route the API serves, in the order the document lists them. */
export const routes: RouteSpec[] = [...operatorRoutes, ...reconciliationRoutes, ...historyRoutes, ...providerRoutes, ...adminRoutes, ...consoleRoutes, ...auditRoutes, ...publicRoutes];
