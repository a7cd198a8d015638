/** A JSON Schema object, as the OpenAPI document carries it. */
export type JsonSchema = Record<string, unknown>;

/**
 * What the OpenAPI layer adds to the schemas zod generates: descriptions of properties (zod's registry
 * here names whole schemas only) and the per-type rules of the transaction bodies, which zod checks in
 * a superRefine that JSON Schema output cannot show. The rules are written as `if`/`then`/`else` so a
 * validating client refuses what the server refuses; test/docs/openapi.unit.test.ts checks them against
 * the zod schemas, body by body.
 */

/**
 * `required` of a field the subschema itself declares (as `{}`: its type is the parent's), so linters
 * that look for required fields among a schema's own properties find it. `unevaluatedProperties: true`
 * says outright that this subschema closes nothing (the parent's additionalProperties does); without it
 * Redocly's example check treats a subschema with properties as closed and refuses every example.
 */
const has = (...fields: string[]): JsonSchema => ({
  properties: Object.fromEntries(fields.map((f) => [f, {}])),
  required: fields,
  unevaluatedProperties: true,
});

const typeIs = (...types: string[]): JsonSchema => ({
  properties: { type: types.length === 1 ? { const: types[0] } : { enum: types } },
  required: ['type'],
});

export const schemaConditionals: Record<string, JsonSchema[]> = {
  ProviderTransactionRequest: [
    { description: 'roundComplete is required on a BET and a WIN.', if: typeIs('BET', 'WIN'), then: has('roundComplete') },
    {
      description: 'originalTransactionId is required on a ROLLBACK and refused on anything else.',
      if: typeIs('ROLLBACK'),
      then: has('originalTransactionId'),
      else: { not: has('originalTransactionId') },
    },
    { description: 'direction is refused on anything but an ADJUSTMENT.', if: { not: typeIs('ADJUSTMENT') }, then: { not: has('direction') } },
    { description: 'ADJUSTMENT is platform-internal: the route refuses it from providers (400).', not: typeIs('ADJUSTMENT') },
  ],
  WalletTransactionRequest: [
    {
      description: 'originalTransactionId is present on every ROLLBACK and on nothing else.',
      if: typeIs('ROLLBACK'),
      then: has('originalTransactionId'),
      else: { not: has('originalTransactionId') },
    },
    {
      description: 'direction is present on every ADJUSTMENT and on nothing else.',
      if: typeIs('ADJUSTMENT'),
      then: has('direction'),
      else: { not: has('direction') },
    },
  ],
};

/** The fields time travel (`asOf`) adds to an audit history. */
const timeTravel = (what: string, initial = 'the state before any event when none was recorded by then'): Record<string, string> => ({
  asOf: 'With `asOf` only: the instant asked, as given.',
  position: 'With `asOf` only: the position of the last event recorded at or before `asOf` (null when none was).',
  state: `With \`asOf\` only: ${what} as it was then, folded from the events recorded at or before \`asOf\` (${initial}).`,
});

const chainCheckpointFields: Record<string, string> = {
  position: 'Position (in the global log) of the last event the checkpoint covers.',
  link: 'Lowercase hex of the chain\'s link after that event (32 bytes).',
  count: 'How many events of the chain the checkpoint covers.',
  signedAt: 'When it was signed, ISO 8601 UTC with milliseconds (part of what is signed).',
  keyId: 'The first 16 hex digits of the SHA-256 of the public key (SPKI DER) the signature verifies with.',
  signature: 'Base64 of the 64-byte Ed25519 signature of the canonical JSON of the other fields but keyId.',
};

const catalogId = (who: string) => `1 to 200 characters; the \`${who}\` it signs with.`;

export const propertyDescriptions: Record<string, Record<string, string>> = {
  Catalog: {
    providers: 'Providers to insert or update, each with its games.',
    operators: 'Operators to insert or update.',
    campaigns: 'Free-spin campaigns to insert or update.',
  },
  CatalogProvider: {
    id: catalogId('X-Provider-Id'),
    name: 'Display name.',
    apiBaseUrl: 'Absolute http(s) URL where the service calls the provider (free spins, session revoke). A path prefix is kept and signed.',
    secret: 'Shared HMAC secret: signs the provider\'s calls to the service and the service\'s calls to the provider.',
    timeoutMs: 'Limit of each call to the provider, 1 to 60,000 ms.',
    currencies: 'Upper-case ISO-4217 codes, shared by all its games; checked at launch and grant.',
    supportedLanguages: 'Language tags a launch may ask for.',
    games: "The provider's games.",
  },
  CatalogGame: {
    id: '1 to 200 characters, unique across all providers: a game another provider owns is refused.',
    name: 'Display name.',
    launchBaseUrl: 'Absolute http(s) URL; a launch appends `token`, `language` and `lobby`.',
    replayBaseUrl: 'Absolute http(s) URL of the replay page, or "" when the game has no replay.',
  },
  CatalogOperator: {
    id: catalogId('X-Operator-Id'),
    name: 'Display name.',
    secret: "Shared HMAC secret: signs the operator's calls to the service and the service's calls to the wallet.",
    walletUrl: 'Absolute http(s) URL of the wallet the service calls (a path prefix is kept and signed).',
    walletTimeoutMs: 'Limit of each wallet call, 1 to 60,000 ms.',
    rateLimit: 'At most `limit` accepted requests in any `windowSeconds`: a sliding window shared by all API processes.',
    visibleGames: 'Game ids the operator may list, launch in REAL mode and grant; each must exist.',
    blockedPlayers: 'playerRefs refused at launch with 403 `launch blocked`; compared in Unicode NFC.',
  },
  CatalogCampaign: {
    id: '1 to 200 characters; what an operator passes as campaignId.',
    gameId: 'An existing game.',
    spins: 'Free spins per grant, 1 to 1,000,000.',
    betAmountMinor: 'Stake per spin in minor units; 0 means the wallet\'s default stake.',
    currency: "Upper-case ISO-4217 code; for an active campaign, one of its game's provider's currencies.",
    active: 'An inactive campaign cannot be granted.',
    validFrom: 'Grants are refused before this instant (RFC 3339 with offset).',
    validUntil: 'Grants are refused after this instant (RFC 3339 with offset).',
  },
  ProviderTransactionRequest: {
    transactionId: 'Yours, the same on every resubmission; must not start with `stale-rollback:`.',
    sessionToken: 'From the launch.',
    roundId: "Groups the round's transactions; unique per (provider, operator).",
    roundComplete: 'Required on BET and WIN; `true` on the one that ends the round.',
    originalTransactionId: 'ROLLBACK only (and required there): the BET it reverses.',
    amount: 'Integer in minor units.',
    direction: 'ADJUSTMENT only; providers cannot submit one.',
    metadata: 'Forwarded to the wallet untouched; by convention `jackpot` on a WIN.',
  },
  TransactionRecord: {
    transactionId: "The id your wallet received (a provider's own, `stale-rollback:<bet id>` for the reconciler's rollbacks, `adj-…` for adjustments).",
    gameId: '"" on an adjustment not tied to a game.',
    roundId: '`adjustment:<transactionId>` on an adjustment.',
    amount: 'Integer in minor units.',
    recordedAt: 'When the service first recorded it (whole milliseconds): what a time range selects on.',
  },
  RoundDetails: {
    status: '`open`; `complete` once a BET or WIN said `roundComplete`; `force-closed` when the reconciler closed it as stale (its open bets are then rolled back).',
    openedAt: 'When its first transaction was recorded.',
    closedAt: 'When it was completed or force-closed; absent while open.',
    betMinor: 'Sum of its `applied` BETs.',
    winMinor: 'Sum of its `applied` WINs.',
    refundMinor: "Sum of its `applied` ROLLBACKs, the reconciler's included.",
    transactions: 'Every transaction of the round, in the order they were recorded.',
  },
  SettlementStatement: {
    from: 'Start of the interval (included), as asked.',
    to: 'End of the interval (excluded), as asked.',
    lines: "One per provider, game and currency with any `applied` BET, WIN or ROLLBACK (the reconciler's included) recorded in the interval; sorted by providerId, gameId, currency.",
  },
  RoundHistory: { ...timeTravel('the round'), history: 'Each event with the round after it (with `asOf`: the events recorded by then).' },
  PlayerSessionsHistory: {
    ...timeTravel('the open sessions'),
    history: 'Each event with the open sessions after it (with `asOf`: the events recorded by then).',
    sessions: 'Every session launched, with `revoked_at` set by a kick. Without `asOf`: the rows of the sessions read model. With it: the same rows as they stood then, derived from the events recorded by then.',
  },
  GrantHistory: {
    ...timeTravel('the grant', '`{"status":"none"}` when no event of the grant was recorded by then'),
    history: 'Each event with the grant after it (with `asOf`: the events recorded by then).',
  },
  ChainCheckpoint: chainCheckpointFields,
  OperatorCheckpoint: { operatorId: 'Your operator id (part of what is signed).', ...chainCheckpointFields },
  HistoryEvent: {
    count: "The event's place in your chain: 1 for your first event.",
    stream: 'The stream the event belongs to (a round, a player\'s sessions, a grant).',
    type: 'The event type.',
    data: 'The event data, as stored.',
    metadata: 'The event metadata, as stored.',
    position: 'Its position in the global log, as the event store gives it (what the link hashes).',
    recordedAt: "The event store's time of the append, ISO 8601 UTC with milliseconds (what the link hashes).",
    link: 'Lowercase hex of your chain\'s link after this event (32 bytes).',
  },
  RedriveRequest: {
    operatorId: 'The operator of the round.',
    providerId: "The round's provider; `platform` for an adjustment.",
    roundId: 'The round; `adjustment:<transactionId>` for an adjustment.',
    transactionId: 'The dead WIN, ROLLBACK or ADJUSTMENT. It is sent to the wallet again under this same id, with the same body.',
    by: 'Who re-drives it (a name or an email), 1 to 200 characters once trimmed. Kept in the round\'s history.',
    reason: 'Why, 1 to 1000 characters once trimmed. Kept in the round\'s history.',
  },
  AdminReplayLinkRequest: {
    operatorId: 'The operator whose round it is.',
    roundId: "The provider's roundId.",
    gameId: "The round's game (a roundId is unique only within its provider, which the game names).",
  },
  ConsoleOverview: {
    window: 'As asked: `hour` (the default) or `day`.',
    bucketSeconds: '60 for an hour, 900 for a day.',
    generatedAt: "The service's time of the answer; the last bucket is the one it falls in.",
    transactions: 'Per bucket (named by its start): the transactions recorded, all operators together.',
    wallet: "Per operator with a wallet transaction call in the window, per bucket: the calls (each attempt counts, retries included; balance calls do not), the failed ones (an error status, no answer in time, unreachable; a DECLINED is an answer), and the p50 and p99 of their durations in ms, each the upper bound of its histogram bucket (buckets 25 % wide), null without calls.",
    unsettled: 'All operators, now: the transactions whose TransactionStatus is `pending`, `failed` or `dead`.',
    projections: "Per read model, the chain's included: the events not applied yet (counted up to 10,000) and the age in ms of the oldest of them.",
    chain: 'The hash chain: `linked` events, the events not linked yet (`behind`), and the latest signed checkpoint of the global chain (its time, its count, its key; null before the first).',
  },
  WalletTransactionRequest: {
    transactionId: 'Deduplicate on (playerRef, transactionId): a repeat must get the stored reply.',
    sessionToken: 'The session\'s token, or `system:stale-round-reconciler` / `system:admin-adjustment`.',
    roundComplete: "Always present. On a BET or WIN, `true` on the one that ends the round; on a provider's ROLLBACK, as the provider sent it (`false` when it sent none), and ignored: a ROLLBACK never ends a round; `false` on an ADJUSTMENT and on the reconciler's rollbacks.",
    originalTransactionId: 'On every ROLLBACK: the BET to refund.',
    direction: 'On every ADJUSTMENT: DEBIT takes from the balance, CREDIT adds to it.',
    gameId: '"" on an adjustment not tied to a game.',
    metadata: 'As the provider sent it; `reason` on an adjustment.',
  },
};
