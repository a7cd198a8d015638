import { GENESIS, nextLink } from '../../chain/link.ts';
import { LATENCY_BUCKETS, latencyBucket, percentileMs } from '../../console/projection.ts';
import { encodeTxCursor } from '../../audit/unresolved.ts';
import { Cursors } from '../../../shared/http/cursor.ts';

/**
 * Realistic examples for every component schema, keyed by component name. Each one is a value the
 * schema it illustrates accepts (test/docs/openapi.unit.test.ts parses every one with the zod schema),
 * and a BET example is a BET: no originalTransactionId, no direction, roundComplete present.
 * They tell one story: operator op-1's player p1 plays studio-a's fruit-1 in EUR.
 */

export const GRANT_ID = '3f1c2a9e-8b7d-4c1e-9a51-2f6d7e8c9b10';
export const SESSION_TOKEN = 'JnqnB1ngQ0u2xXbVh4mYkA';
const ROUND_STREAM = 'round|studio-a|op-1|r-20261121-0001';

const bet = {
  transactionId: 'tx-bet-0001',
  sessionToken: SESSION_TOKEN,
  type: 'BET',
  roundId: 'r-20261121-0001',
  roundComplete: false,
  playerRef: 'p1',
  amount: 100,
  currency: 'EUR',
  gameId: 'fruit-1',
};
const win = { ...bet, transactionId: 'tx-win-0001', type: 'WIN', roundComplete: true, amount: 250 };
const jackpotWin = {
  ...win,
  transactionId: 'tx-win-0002',
  amount: 500000,
  metadata: { jackpot: { won: true, tier: 'major', amountMinor: 500000, poolId: 'fruit-progressive-eur' } },
};
const { roundComplete: _rc, ...betFields } = bet;
const rollback = { ...betFields, transactionId: 'tx-rb-0001', type: 'ROLLBACK', originalTransactionId: 'tx-bet-0001' };

/** Named examples of the transaction bodies, one per type (request bodies and the wallet webhook). */
export const providerTransactionExamples = {
  bet: { summary: 'BET (opens the round)', value: bet },
  win: { summary: 'WIN (closes the round)', value: win },
  jackpotWin: { summary: 'WIN with the metadata.jackpot convention', value: jackpotWin },
  rollback: { summary: 'ROLLBACK of the BET (same amount and currency)', value: rollback },
};

export const walletTransactionExamples = {
  bet: { summary: 'BET', value: bet },
  win: { summary: 'WIN', value: win },
  rollback: { summary: 'ROLLBACK (roundComplete is always present towards the wallet)', value: { ...rollback, roundComplete: false } },
  staleRollback: {
    summary: "The reconciler's ROLLBACK of a stale round's BET",
    value: { ...rollback, transactionId: 'stale-rollback:tx-bet-0001', sessionToken: 'system:stale-round-reconciler', roundComplete: false },
  },
  adjustment: {
    summary: 'ADJUSTMENT (admin balance correction)',
    value: {
      transactionId: 'adj-5b0e8f3c-1d2a-4e6f-8a9b-0c1d2e3f4a5b',
      sessionToken: 'system:admin-adjustment',
      type: 'ADJUSTMENT',
      roundId: 'adjustment:adj-5b0e8f3c-1d2a-4e6f-8a9b-0c1d2e3f4a5b',
      roundComplete: false,
      playerRef: 'p1',
      amount: 500,
      currency: 'EUR',
      gameId: '',
      direction: 'CREDIT',
      metadata: { reason: 'goodwill credit, ticket 1234' },
    },
  },
};

const game = {
  gameId: 'fruit-1',
  name: 'Fruit Fiesta',
  provider: 'studio-a',
  currencies: ['EUR', 'USD'],
  supportedLanguages: ['en', 'de'],
  launchBaseUrl: 'https://play.studio-a.test/fruit',
  replayBaseUrl: 'https://replay.studio-a.test/fruit',
};

const grant = {
  id: GRANT_ID,
  campaignId: 'welcome-10',
  operatorId: 'op-1',
  providerId: 'studio-a',
  gameId: 'fruit-1',
  playerRef: 'p1',
  spins: 10,
  betAmountMinor: 20,
  currency: 'EUR',
  externalRef: 'batch-7f3a',
  status: 'active',
  idempotencyKey: 'promo-42-p1',
  expiresAt: '2026-12-31T23:59:59Z',
  createdAt: '2026-11-21T16:20:00.000Z',
  updatedAt: '2026-11-21T16:20:00.123Z',
};

const catalogProvider = {
  id: 'studio-a',
  name: 'Studio A',
  apiBaseUrl: 'https://api.studio-a.test',
  secret: 'provider-secret',
  timeoutMs: 5000,
  currencies: ['EUR', 'USD'],
  supportedLanguages: ['en', 'de'],
  games: [{ id: 'fruit-1', name: 'Fruit Fiesta', launchBaseUrl: 'https://play.studio-a.test/fruit', replayBaseUrl: 'https://replay.studio-a.test/fruit' }],
};
const catalogOperator = {
  id: 'op-1',
  name: 'Casino One',
  secret: 'operator-secret',
  walletUrl: 'https://wallet.casino-one.test',
  walletTimeoutMs: 5000,
  rateLimit: { limit: 100, windowSeconds: 1 },
  visibleGames: ['fruit-1'],
  blockedPlayers: ['player-banned'],
};
const catalogCampaign = {
  id: 'welcome-10',
  gameId: 'fruit-1',
  spins: 10,
  betAmountMinor: 20,
  currency: 'EUR',
  active: true,
  validFrom: '2026-11-01T00:00:00Z',
  validUntil: '2026-12-31T23:59:59Z',
};

const recordedEvent = {
  position: '1042.1042',
  streamId: ROUND_STREAM,
  revision: 0,
  id: '7d9e2c4a-5b6f-4a1d-8e3c-9f0a1b2c3d4e',
  type: 'TransactionRecorded',
  data: {
    providerId: 'studio-a',
    operatorId: 'op-1',
    origin: 'provider',
    request: bet,
    walletBody: JSON.stringify(bet),
    contentHash: '5f2b1c0e9d8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c',
    recordedAt: '2026-11-21T16:21:00.000Z',
  },
  metadata: {},
  createdAt: '2026-11-21T16:21:00.004Z',
};
const settledEvent = {
  position: '1043.1043',
  streamId: ROUND_STREAM,
  revision: 1,
  id: '8e0f3d5b-6c7a-4b2e-9f4d-0a1b2c3d4e5f',
  type: 'TransactionSettled',
  data: { transactionId: 'tx-bet-0001', outcome: 'applied', reply: { status: 'OK', balance: 9900 }, attempt: 1, settledAt: '2026-11-21T16:21:00.052Z' },
  metadata: {},
  createdAt: '2026-11-21T16:21:00.055Z',
};
/** The round after its BET was recorded (sent to the wallet, no answer yet)... */
const roundAfterRecorded = {
  completed: false,
  playerRef: 'p1',
  gameId: 'fruit-1',
  lastActivityAt: '2026-11-21T16:21:00.000Z',
  outstandingBets: ['tx-bet-0001'],
  transactions: [{ transactionId: 'tx-bet-0001', type: 'BET', amount: 100, origin: 'provider', status: 'recorded', attempts: 0, redrivable: false }],
};
/** ...and after the wallet applied it: the BET is still outstanding (the round is open). */
const roundAfterBet = {
  ...roundAfterRecorded,
  transactions: [{ transactionId: 'tx-bet-0001', type: 'BET', amount: 100, origin: 'provider', status: 'applied', attempts: 1, redrivable: false, reply: { status: 'OK', balance: 9900 } }],
};
const sessionStarted = {
  position: '1040.1040',
  streamId: 'player-sessions|op-1|p1',
  revision: 0,
  id: '6c8d1b3f-4a5e-4f0c-8d2b-8e9f0a1b2c3d',
  type: 'SessionStarted',
  data: {
    token: SESSION_TOKEN,
    operatorId: 'op-1',
    playerRef: 'p1',
    providerId: 'studio-a',
    gameId: 'fruit-1',
    currency: 'EUR',
    language: 'en',
    demo: false,
    createdAt: '2026-11-21T16:20:00.008Z',
    expiresAt: '2026-11-22T16:20:00.008Z',
  },
  metadata: {},
  createdAt: '2026-11-21T16:20:00.010Z',
};
const sessionsRevoked = {
  position: '1044.1044',
  streamId: 'player-sessions|op-1|p1',
  revision: 1,
  id: 'a2b3c4d5-e6f7-4a8b-9c0d-1e2f3a4b5c6d',
  type: 'SessionsRevoked',
  data: { operatorId: 'op-1', playerRef: 'p1', tokens: [SESSION_TOKEN], revokedAt: '2026-11-21T16:25:00.000Z' },
  metadata: {},
  createdAt: '2026-11-21T16:25:00.004Z',
};
const openSessionAfterLaunch = { openSessions: [{ token: SESSION_TOKEN, providerId: 'studio-a', expiresAt: '2026-11-22T16:20:00.008Z', demo: false }] };
const sessionRow = {
  token: SESSION_TOKEN,
  provider_id: 'studio-a',
  game_id: 'fruit-1',
  currency: 'EUR',
  language: 'en',
  demo: false,
  created_at: '2026-11-21T16:20:00.008Z',
  expires_at: '2026-11-22T16:20:00.008Z',
  revoked_at: null,
};
const grantRequested = {
  position: '1039.1039',
  streamId: `grant|${GRANT_ID}`,
  revision: 0,
  id: '5b7c0a2e-3f4d-4e9b-8c1a-7d8e9f0a1b2c',
  type: 'GrantRequested',
  // The request of the grant above, as its first event holds it.
  data: {
    grantId: GRANT_ID,
    operatorId: grant.operatorId,
    providerId: grant.providerId,
    gameId: grant.gameId,
    playerRef: grant.playerRef,
    spins: grant.spins,
    betAmountMinor: grant.betAmountMinor,
    currency: grant.currency,
    idempotencyKey: grant.idempotencyKey,
    campaignId: grant.campaignId,
    expiresAt: grant.expiresAt,
    requestedAt: grant.createdAt,
  },
  metadata: {},
  createdAt: '2026-11-21T16:20:00.003Z',
};
const grantActivated = {
  position: '1041.1041',
  streamId: `grant|${GRANT_ID}`,
  revision: 1,
  id: '9f1a4e6c-7d8b-4c3f-a05e-1b2c3d4e5f6a',
  type: 'GrantActivated',
  data: { externalRef: 'batch-7f3a', activatedAt: '2026-11-21T16:20:00.123Z' },
  metadata: {},
  createdAt: '2026-11-21T16:20:00.126Z',
};
const { externalRef: _externalRef, ...grantTerms } = grant;
/** The grant after GrantRequested: pending, before the provider answered. */
const pendingGrant = { ...grantTerms, status: 'pending', updatedAt: grant.createdAt };

/**
 * Operator op-1's hash chain: its first five events (the grant, the launch, the BET of the round), each
 * linked as services/chain/link.ts says, from 32 zero bytes. The links are computed here, so they are
 * the real ones; the checkpoint signatures below were made once with a throwaway Ed25519 key whose
 * public half is CHAIN_PUBLIC_KEY (test/docs/openapi.unit.test.ts verifies them).
 */
const op1Events = [grantRequested, sessionStarted, grantActivated, recordedEvent, settledEvent];
const op1History = (() => {
  let link = GENESIS;
  return op1Events.map((e, i) => {
    const chained = { stream: e.streamId, type: e.type, data: e.data, metadata: e.metadata, position: e.position, recordedAt: e.createdAt };
    link = nextLink(link, chained);
    return { count: i + 1, ...chained, link: link.toString('hex') };
  });
})();

export const CHAIN_PUBLIC_KEY = '-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAxE81Xm4hgtWqi2UybJK3mZV/MbnaWoxtRUutLij03Co=\n-----END PUBLIC KEY-----\n';
export const CHAIN_KEY_ID = 'a49b238f3a3f356a';
const op1Checkpoint = {
  operatorId: 'op-1',
  position: op1History[4]!.position,
  link: op1History[4]!.link,
  count: 5,
  signedAt: '2026-11-21T16:22:00.000Z',
  keyId: CHAIN_KEY_ID,
  signature: '88rncNKSSPkJ3dHCBenv8U1MrNqs1fdNOjdr4KgkXn/ILGuz5TTzpCRESBZ0JQK+yKFAhS/4xWMK46CRskFUDg==',
};
/** The global chain at the same place: its 1043rd event (its link depends on every event before it). */
const globalCheckpoint = {
  position: '1043.1043',
  link: '4c1f9e2a7b3d8c6e0f5a1b9d2e7c4a8f3b6d0e1c9a5f7b2d8e4c6a0f1b3d5e7a',
  count: 1043,
  signedAt: '2026-11-21T16:22:00.000Z',
  keyId: CHAIN_KEY_ID,
  signature: 'PK/g1JSSeTZmad741GYI3CWgi0DDxctjrWrPEHGTir8xB0Z2Tp7NKjm/IqmHrXAfD2RgFYeNMjbzdDcLV5SnBA==',
};
/** For the tests: the example checkpoints and the history they sign. */
export const chainExamples = { history: op1History, operatorCheckpoint: op1Checkpoint, globalCheckpoint };

/**
 * The reconciliation story: p1's round r-20261121-0001 as operator op-1 reads it back (the BET of
 * recordedEvent and settledEvent, then a WIN of 250 that completes the round), the day's statement.
 */
const betRecord = {
  transactionId: 'tx-bet-0001',
  providerId: 'studio-a',
  gameId: 'fruit-1',
  roundId: 'r-20261121-0001',
  playerRef: 'p1',
  type: 'BET',
  amount: 100,
  currency: 'EUR',
  status: 'applied',
  walletBalance: 9900,
  attempts: 1,
  recordedAt: '2026-11-21T16:21:00.000Z',
  settledAt: '2026-11-21T16:21:00.052Z',
};
const winRecord = {
  ...betRecord,
  transactionId: 'tx-win-0001',
  type: 'WIN',
  amount: 250,
  walletBalance: 10150,
  recordedAt: '2026-11-21T16:21:04.310Z',
  settledAt: '2026-11-21T16:21:04.348Z',
};
/** A WIN the wallet has not accepted yet: retried, no reply balance, no settledAt. */
const pendingWinRecord = {
  transactionId: 'tx-win-0002',
  providerId: 'studio-a',
  gameId: 'fruit-1',
  roundId: 'r-20261121-0002',
  playerRef: 'p1',
  type: 'WIN',
  amount: 40,
  currency: 'EUR',
  status: 'pending',
  attempts: 3,
  recordedAt: '2026-11-21T16:22:00.000Z',
};
const staleRollbackRecord = {
  transactionId: 'stale-rollback:tx-bet-0003',
  providerId: 'studio-a',
  gameId: 'fruit-1',
  roundId: 'r-20261121-0003',
  playerRef: 'p1',
  type: 'ROLLBACK',
  amount: 100,
  currency: 'EUR',
  originalTransactionId: 'tx-bet-0003',
  status: 'applied',
  walletBalance: 10050,
  attempts: 1,
  recordedAt: '2026-11-21T17:25:02.118Z',
  settledAt: '2026-11-21T17:25:02.161Z',
};
const adjustmentRecord = {
  transactionId: 'adj-5b0e8f3c-1d2a-4e6f-8a9b-0c1d2e3f4a5b',
  gameId: '',
  roundId: 'adjustment:adj-5b0e8f3c-1d2a-4e6f-8a9b-0c1d2e3f4a5b',
  playerRef: 'p1',
  type: 'ADJUSTMENT',
  amount: 500,
  currency: 'EUR',
  direction: 'CREDIT',
  status: 'applied',
  walletBalance: 10550,
  attempts: 1,
  recordedAt: '2026-11-21T18:02:11.540Z',
  settledAt: '2026-11-21T18:02:11.583Z',
};

/** The examples' cursors, under a key of their own (a service's key is its database's: shared/http/cursor.ts). */
const EXAMPLE_CURSORS = new Cursors(Buffer.alloc(32, 7));

/** The cursor the audit list's example page (status=unsettled, limit 1) answers: it reads on after tx-win-0001. */
export const AUDIT_TRANSACTIONS_CURSOR = encodeTxCursor(EXAMPLE_CURSORS, 'unsettled', { recordedAt: '2026-11-21 16:22:00+00', roundStream: ROUND_STREAM, transactionId: 'tx-win-0001' });

/** The query of the transactions example (from, to, playerRef p1, limit 2) and the cursor its first page answered. */
export const TRANSACTIONS_FROM = '2026-11-21T00:00:00Z';
export const TRANSACTIONS_TO = '2026-11-22T00:00:00Z';
export const TRANSACTIONS_CURSOR = EXAMPLE_CURSORS.encode({ v: 2, s: 'postgres', q: 'NbSEgGepKpU8hNa8', a: '1044.1044' });

const figure = (count: number, amountMinor: number) => ({ count, amountMinor });
const fruitEur = { bets: figure(1843, 412600), wins: figure(702, 371240), refunds: figure(3, 600), ggrMinor: 40760 };
const fruitUsd = { bets: figure(215, 43000), wins: figure(81, 39350), refunds: figure(0, 0), ggrMinor: 3650 };
const gemsEur = { bets: figure(96, 9600), wins: figure(40, 10400), refunds: figure(1, 100), ggrMinor: -900 };
const settlement = {
  from: '2026-11-21T00:00:00+01:00',
  to: '2026-11-22T00:00:00+01:00',
  lines: [
    { providerId: 'studio-a', gameId: 'fruit-1', currency: 'EUR', ...fruitEur },
    { providerId: 'studio-a', gameId: 'fruit-1', currency: 'USD', ...fruitUsd },
    { providerId: 'studio-a', gameId: 'gems-2', currency: 'EUR', ...gemsEur },
  ],
  adjustments: { EUR: { credits: figure(1, 500), debits: figure(0, 0) } },
  unsettled: { EUR: { pending: figure(1, 40), failed: figure(2, 300), dead: figure(0, 0) } },
  totals: {
    EUR: { bets: figure(1939, 422200), wins: figure(742, 381640), refunds: figure(4, 700), ggrMinor: 39860 },
    USD: fruitUsd,
  },
};
/** The same statement's lines as the CSV answer (RFC 4180, CRLF line ends). */
export const settlementCsvExample = [
  'providerId,gameId,currency,betCount,betAmountMinor,winCount,winAmountMinor,refundCount,refundAmountMinor,ggrMinor',
  ...settlement.lines.map((l) =>
    [l.providerId, l.gameId, l.currency, l.bets.count, l.bets.amountMinor, l.wins.count, l.wins.amountMinor, l.refunds.count, l.refunds.amountMinor, l.ggrMinor].join(','),
  ),
]
  .map((row) => `${row}\r\n`)
  .join('');

/**
 * The re-drive story: p1's WIN tx-win-0002 of round r-20261121-0002 (pendingWinRecord; its BET
 * tx-bet-0002 of 100 was applied) kept failing, op-1's wallet answering 503, until its retries stopped a
 * day after it was recorded (153 attempts: backoff from 1 s doubling to 10 min). Once the wallet was fixed
 * the platform team re-drove it and the wallet applied it. A round history of it would carry every one of
 * the 153 failed attempts, so the story is told by its events, a page of the log and the round's state.
 *
 * The wallet calls of these events carry durationMs; settledEvent above does not (an event recorded before
 * it existed could lack it) and cannot gain it: op-1's signed checkpoint example covers it.
 */
const ROUND_2_STREAM = 'round|studio-a|op-1|r-20261121-0002';
export const REDRIVE_BY = 'ops@platform.example';
export const REDRIVE_REASON = "op-1's wallet answered 503 to WINs from 16:22 on the 21st, fixed since (incident INC-311)";
const DEAD_ATTEMPTS = 153;
const lastAttemptFailed = {
  position: '8305.8305',
  streamId: ROUND_2_STREAM,
  revision: 2 + DEAD_ATTEMPTS,
  id: 'c4d5e6f7-a8b9-4c0d-9e1f-2a3b4c5d6e7f',
  type: 'TransactionAttemptFailed',
  data: { transactionId: 'tx-win-0002', outcome: 'failed', detail: 'wallet answered 503', httpStatus: 503, attempt: DEAD_ATTEMPTS, failedAt: '2026-11-22T16:19:04.207Z', durationMs: 7 },
  metadata: {},
  createdAt: '2026-11-22T16:19:04.210Z',
};
const deadLetteredEvent = {
  position: '8312.8312',
  streamId: ROUND_2_STREAM,
  revision: 3 + DEAD_ATTEMPTS,
  id: 'd5e6f7a8-b9c0-4d1e-8f2a-3b4c5d6e7f80',
  type: 'TransactionDeadLettered',
  data: { transactionId: 'tx-win-0002', attempts: DEAD_ATTEMPTS, lastError: 'wallet answered 503', deadLetteredAt: '2026-11-22T16:29:04.262Z' },
  metadata: {},
  createdAt: '2026-11-22T16:29:04.265Z',
};
const redrivenEvent = {
  position: '8391.8391',
  streamId: ROUND_2_STREAM,
  revision: 4 + DEAD_ATTEMPTS,
  id: 'e6f7a8b9-c0d1-4e2f-9a3b-4c5d6e7f8091',
  type: 'TransactionRedriven',
  data: { transactionId: 'tx-win-0002', by: REDRIVE_BY, reason: REDRIVE_REASON, redrivenAt: '2026-11-22T16:40:12.000Z' },
  metadata: {},
  createdAt: '2026-11-22T16:40:12.004Z',
};
const settledAfterRedrive = {
  position: '8392.8392',
  streamId: ROUND_2_STREAM,
  revision: 5 + DEAD_ATTEMPTS,
  id: 'f7a8b9c0-d1e2-4f3a-8b4c-5d6e7f8091a2',
  type: 'TransactionSettled',
  data: {
    transactionId: 'tx-win-0002',
    outcome: 'applied',
    reply: { status: 'OK', balance: 10590, body: '{"status":"OK","balance":10590}' },
    attempt: DEAD_ATTEMPTS + 1,
    settledAt: '2026-11-22T16:40:12.043Z',
    durationMs: 37,
  },
  metadata: {},
  createdAt: '2026-11-22T16:40:12.046Z',
};
const bet2State = { transactionId: 'tx-bet-0002', type: 'BET', amount: 100, origin: 'provider', status: 'applied', attempts: 1, redrivable: false, reply: { status: 'OK', balance: 10050 } };
/** Round r-20261121-0002 once the WIN was re-driven: sent again, no answer yet (its attempts and last error kept). */
const round2AfterRedrive = {
  completed: true,
  playerRef: 'p1',
  gameId: 'fruit-1',
  lastActivityAt: '2026-11-21T16:22:00.000Z',
  // Complete: its bet was played out, nothing outstanding.
  outstandingBets: [],
  transactions: [bet2State, { transactionId: 'tx-win-0002', type: 'WIN', amount: 40, origin: 'provider', status: 'recorded', attempts: DEAD_ATTEMPTS, redrivable: false, lastError: 'wallet answered 503' }],
};
/** What an admin sends to re-drive it. */
const redriveRequest = { operatorId: 'op-1', providerId: 'studio-a', roundId: 'r-20261121-0002', transactionId: 'tx-win-0002', by: REDRIVE_BY, reason: REDRIVE_REASON };

/**
 * The console's overview of the last hour at 16:25:30 on the 21st, from the story's wallet calls (each with
 * its duration in ms): round r-20261121-0001, the BET of r-20261121-0002 and its WIN failing (the first
 * attempt, then retries after 1, 2, 4, 8, 16, 32 and 64 s), the BET of r-20261121-0003. The percentiles are
 * computed as the route computes them, from the same histograms.
 */
const OVERVIEW_AT = '2026-11-21T16:25:30.000Z';
const callsByMinute: Record<string, Array<{ ms: number; failed: boolean }>> = {
  '2026-11-21T16:21:00.000Z': [{ ms: 52, failed: false }, { ms: 38, failed: false }, { ms: 41, failed: false }],
  '2026-11-21T16:22:00.000Z': [9, 7, 8, 6, 7, 8].map((ms) => ({ ms, failed: true })),
  '2026-11-21T16:23:00.000Z': [{ ms: 7, failed: true }],
  '2026-11-21T16:24:00.000Z': [{ ms: 8, failed: true }, { ms: 43, failed: false }],
};
const recordedByMinute: Record<string, number> = { '2026-11-21T16:21:00.000Z': 3, '2026-11-21T16:22:00.000Z': 1, '2026-11-21T16:24:00.000Z': 1 };
const overviewMinutes = Array.from({ length: 60 }, (_, i) => new Date(Date.parse('2026-11-21T15:26:00.000Z') + i * 60_000).toISOString());
const overviewWalletBucket = (at: string) => {
  const calls = callsByMinute[at] ?? [];
  const histogram = new Array<number>(LATENCY_BUCKETS).fill(0);
  for (const c of calls) histogram[latencyBucket(c.ms)]! += 1;
  return { at, calls: calls.length, failures: calls.filter((c) => c.failed).length, p50Ms: percentileMs(histogram, 0.5), p99Ms: percentileMs(histogram, 0.99) };
};
const overview = {
  window: 'hour',
  bucketSeconds: 60,
  generatedAt: OVERVIEW_AT,
  transactions: overviewMinutes.map((at) => ({ at, count: recordedByMinute[at] ?? 0 })),
  wallet: [{ operatorId: 'op-1', buckets: overviewMinutes.map(overviewWalletBucket) }],
  unsettled: { pending: 1, failed: 0, dead: 0 },
  projections: ['sessions', 'rounds', 'grants', 'console', 'chain'].map((name) => ({ name, eventsBehind: 0, msBehind: 0 })),
  // Sampled every 10 s by the projector; the rounds read model fell 12 events behind in the retry burst at 16:22.
  lagHistory: ['sessions', 'rounds', 'grants', 'console', 'chain'].map((name) => ({
    name,
    buckets: overviewMinutes.map((at) => ({
      at,
      eventsBehind: at < '2026-11-21T16:20:00.000Z' ? null : name === 'rounds' && at === '2026-11-21T16:22:00.000Z' ? 12 : 0,
      msBehind: at < '2026-11-21T16:20:00.000Z' ? null : name === 'rounds' && at === '2026-11-21T16:22:00.000Z' ? 180 : 0,
    })),
  })),
  chain: { linked: 1044, failing: null, signingLate: false, behind: 0, lastCheckpointAt: '2026-11-21T16:22:00.000Z', lastCheckpointCount: 1043, keyId: CHAIN_KEY_ID },
};

/** p1 in the console: the session launched and kicked, three rounds (newest first), the grant. */
const consolePlayer = {
  sessions: [
    {
      token: SESSION_TOKEN,
      providerId: 'studio-a',
      gameId: 'fruit-1',
      currency: 'EUR',
      status: 'kicked',
      createdAt: '2026-11-21T16:20:00.008Z',
      expiresAt: '2026-11-22T16:20:00.008Z',
      revokedAt: '2026-11-21T16:25:00.000Z',
    },
  ],
  rounds: [
    {
      providerId: 'studio-a',
      roundId: 'r-20261121-0003',
      gameId: 'fruit-1',
      currency: 'EUR',
      status: 'force-closed',
      openedAt: '2026-11-21T16:24:00.000Z',
      closedAt: '2026-11-21T17:25:02.090Z',
      betMinor: 100,
      winMinor: 0,
      refundMinor: 100,
    },
    {
      providerId: 'studio-a',
      roundId: 'r-20261121-0002',
      gameId: 'fruit-1',
      currency: 'EUR',
      status: 'complete',
      openedAt: '2026-11-21T16:21:58.000Z',
      closedAt: '2026-11-21T16:22:00.000Z',
      betMinor: 100,
      winMinor: 40,
      refundMinor: 0,
    },
    {
      providerId: 'studio-a',
      roundId: 'r-20261121-0001',
      gameId: 'fruit-1',
      currency: 'EUR',
      status: 'complete',
      openedAt: '2026-11-21T16:21:00.000Z',
      closedAt: '2026-11-21T16:21:04.310Z',
      betMinor: 100,
      winMinor: 250,
      refundMinor: 0,
    },
  ],
  roundsTotal: 3,
  adjustments: [
    {
      transactionId: 'adj-5b0e8f3c-1d2a-4e6f-8a9b-0c1d2e3f4a5b',
      direction: 'CREDIT',
      amount: 500,
      currency: 'EUR',
      status: 'applied',
      recordedAt: '2026-11-21T18:02:11.540Z',
    },
  ],
  grants: [grant],
};

/** The WIN as the console listed it after its retries stopped, before the re-drive (at 16:30 on the 22nd). */
const stuckWin = {
  operatorId: 'op-1',
  providerId: 'studio-a',
  roundId: 'r-20261121-0002',
  gameId: 'fruit-1',
  transactionId: 'tx-win-0002',
  type: 'WIN',
  amount: 40,
  currency: 'EUR',
  status: 'dead',
  recordedAt: '2026-11-21T16:22:00.000Z',
  ageSeconds: 86_880,
  attempts: DEAD_ATTEMPTS,
  lastError: 'wallet answered 503',
  redrivable: true,
};

/** Examples per component schema name (components.ts attaches them; each is parsed by its schema in the tests). */
export const schemaExamples: Record<string, unknown[]> = {
  OpenApiDocument: [{ openapi: '3.1.1', info: { title: 'Seamless-wallet ledger API', version: '1.0.0' }, paths: {} }],
  LaunchGameRequest: [{ playerRef: 'p1', gameId: 'fruit-1', currency: 'EUR', mode: 'REAL', language: 'en', lobbyUrl: 'https://casino.example/lobby' }],
  KickPlayerRequest: [{ playerRef: 'p1' }],
  RoundReplayRequest: [{ roundId: 'r-20261121-0001', gameId: 'fruit-1' }],
  IssueGrantRequest: [
    { playerRef: 'p1', idempotencyKey: 'promo-42-p1', campaignId: 'welcome-10' },
    { playerRef: 'p1', idempotencyKey: 'promo-43-p1', gameId: 'fruit-1', spins: 5, betAmountMinor: 20, currency: 'EUR', expiresAt: '2026-12-31T23:59:59Z' },
  ],
  ProviderTransactionRequest: [bet, win, rollback],
  TransactionMetadata: [{ jackpot: { won: true, tier: 'major', amountMinor: 500000, poolId: 'fruit-progressive-eur' } }],
  BalanceRequest: [{ sessionToken: SESSION_TOKEN }],
  Catalog: [{ providers: [catalogProvider], operators: [catalogOperator], campaigns: [catalogCampaign] }],
  CatalogProvider: [catalogProvider],
  CatalogGame: [catalogProvider.games[0], { id: 'gems-2', name: 'Gems', launchBaseUrl: 'https://play.studio-a.test/gems', replayBaseUrl: '' }],
  CatalogOperator: [catalogOperator],
  CatalogCampaign: [catalogCampaign],
  AdjustmentRequest: [{ operatorId: 'op-1', playerRef: 'p1', amount: 500, currency: 'EUR', direction: 'CREDIT', reason: 'goodwill credit, ticket 1234' }],
  Error: [{ error: 'game not found' }],
  WalletBody: [{ error: 'wallet maintenance' }],
  ErrorOrWalletBody: [{ error: 'invalid session' }, { code: 'MAINTENANCE', message: 'wallet maintenance until 04:00 UTC' }],
  GameSummary: [game],
  GameList: [[game]],
  LaunchGameResponse: [
    { launchUrl: `https://play.studio-a.test/fruit?token=${SESSION_TOKEN}&language=en&lobby=https%3A%2F%2Fcasino.example%2Flobby`, sessionToken: SESSION_TOKEN },
  ],
  KickPlayerResponse: [{ revokedCount: 1 }],
  RoundReplayResponse: [
    {
      replayUrl:
        'https://replay.studio-a.test/fruit?token=eyJhbGciOiJIUzI1NiJ9.eyJyb3VuZElkIjoici0yMDI2MTEyMS0wMDAxIiwiZ2FtZUlkIjoiZnJ1aXQtMSJ9.q3J9x0Zt0m1fQbYw8R4n5dLk2sVv6uA7eHcI1oPjKgU',
    },
  ],
  GrantStatus: ['active'],
  Grant: [grant],
  GrantList: [[grant]],
  TransactionResponse: [{ status: 'OK', balance: 9900 }, { status: 'DECLINED', balance: 50 }],
  BalanceResponse: [{ balance: 10000 }],
  Health: [{ status: 'ok' }],
  Ready: [
    { status: 'ready' },
    {
      status: 'degraded',
      failingProjections: [
        { name: 'rounds', position: '1043.1043', eventType: 'TransactionSettled', streamId: ROUND_STREAM, error: 'duplicate key value', since: '2026-11-21T16:25:00.000Z' },
      ],
    },
  ],
  NotReady: [{ error: 'not ready', down: ['redis'] }],
  CatalogCounts: [{ providers: 2, games: 5, operators: 2, campaigns: 3 }],
  ProjectionLags: [{ projections: [{ name: 'rounds', position: '1043.1043', eventsBehind: 0, msBehind: 0, owned: true }] }],
  AdjustmentResponse: [
    { transactionId: 'adj-5b0e8f3c-1d2a-4e6f-8a9b-0c1d2e3f4a5b', status: 'applied', attempts: 1, reply: { status: 'OK', balance: 10500 }, retrying: false },
  ],
  AuditEvent: [recordedEvent, lastAttemptFailed, deadLetteredEvent, redrivenEvent, settledAfterRedrive],
  EventsPage: [
    { events: [recordedEvent, settledEvent], next: '1043.1043' },
    { events: [redrivenEvent, settledAfterRedrive], next: settledAfterRedrive.position },
  ],
  StreamEvents: [{ streamId: ROUND_STREAM, events: [recordedEvent, settledEvent] }],
  RoundState: [roundAfterBet, round2AfterRedrive],
  RoundHistory: [
    {
      streamId: ROUND_STREAM,
      history: [
        { event: recordedEvent, stateAfter: roundAfterRecorded },
        { event: settledEvent, stateAfter: roundAfterBet },
      ],
    },
    {
      streamId: ROUND_STREAM,
      asOf: '2026-11-21T16:21:00.030Z',
      position: recordedEvent.position,
      state: roundAfterRecorded,
      history: [{ event: recordedEvent, stateAfter: roundAfterRecorded }],
    },
  ],
  PlayerSessionsHistory: [
    {
      history: [
        { event: sessionStarted, stateAfter: openSessionAfterLaunch },
        { event: sessionsRevoked, stateAfter: { openSessions: [] } },
      ],
      sessions: [{ ...sessionRow, revoked_at: '2026-11-21T16:25:00.000Z' }],
    },
    {
      asOf: '2026-11-21T16:24:00Z',
      position: sessionStarted.position,
      state: openSessionAfterLaunch,
      history: [{ event: sessionStarted, stateAfter: openSessionAfterLaunch }],
      sessions: [sessionRow],
    },
  ],
  GrantHistory: [
    {
      history: [
        { event: grantRequested, stateAfter: pendingGrant },
        { event: grantActivated, stateAfter: grant },
      ],
    },
    { asOf: '2026-11-21T16:20:00.050Z', position: grantRequested.position, state: pendingGrant, history: [{ event: grantRequested, stateAfter: pendingGrant }] },
    { asOf: '2026-11-21T16:00:00Z', position: null, state: { status: 'none' }, history: [] },
  ],
  AuditTransactions: [
    {
      transactions: [
        {
          provider_id: 'studio-a',
          operator_id: 'op-1',
          round_id: 'r-20261121-0001',
          round_stream: ROUND_STREAM,
          transaction_id: 'tx-win-0001',
          type: 'WIN',
          player_ref: 'p1',
          amount: 250,
          currency: 'EUR',
          status: 'failed',
          attempts: 3,
          last_error: 'wallet answered 500',
          recorded_at: '2026-11-21T16:22:00.000Z',
          dead_lettered_at: null,
          updated_at: '2026-11-21T16:22:07.000Z',
        },
      ],
      nextCursor: AUDIT_TRANSACTIONS_CURSOR,
    },
  ],
  ChainCheckpoint: [globalCheckpoint],
  ChainCheckpoints: [{ checkpoints: [globalCheckpoint] }],
  OperatorCheckpoint: [op1Checkpoint],
  OperatorCheckpoints: [{ checkpoints: [op1Checkpoint] }],
  HistoryEvent: [op1History[0]],
  HistoryEventsPage: [{ events: op1History, next: 5 }],
  TransactionStatus: ['applied', 'pending'],
  TransactionRecord: [betRecord, winRecord, pendingWinRecord, staleRollbackRecord, adjustmentRecord],
  TransactionsPage: [{ transactions: [betRecord, winRecord], nextCursor: TRANSACTIONS_CURSOR }, { transactions: [pendingWinRecord, staleRollbackRecord, adjustmentRecord], nextCursor: null }],
  RoundDetails: [
    {
      roundId: 'r-20261121-0001',
      gameId: 'fruit-1',
      providerId: 'studio-a',
      playerRef: 'p1',
      currency: 'EUR',
      status: 'complete',
      openedAt: betRecord.recordedAt,
      closedAt: winRecord.recordedAt,
      betMinor: 100,
      winMinor: 250,
      refundMinor: 0,
      transactions: [betRecord, winRecord],
    },
  ],
  SettlementStatement: [settlement],
  RedriveRequest: [redriveRequest],
  RedriveResponse: [{ transactionId: 'tx-win-0002', status: 'redriven' }],
  ConsoleOverview: [overview],
  ConsoleSearchResults: [
    {
      results: [
        {
          kind: 'transaction',
          label: 'WIN tx-win-0002 (round r-20261121-0002, op-1)',
          operatorId: 'op-1',
          providerId: 'studio-a',
          roundId: 'r-20261121-0002',
          gameId: 'fruit-1',
          transactionId: 'tx-win-0002',
        },
      ],
    },
    { results: [{ kind: 'round', label: 'round r-20261121-0002 (fruit-1, studio-a, op-1)', operatorId: 'op-1', providerId: 'studio-a', roundId: 'r-20261121-0002', gameId: 'fruit-1' }] },
    { results: [{ kind: 'player', label: 'player p1 (op-1)', operatorId: 'op-1', playerRef: 'p1' }] },
    { results: [{ kind: 'grant', label: `grant ${GRANT_ID} (player p1, op-1)`, operatorId: 'op-1', grantId: GRANT_ID, playerRef: 'p1' }] },
    { results: [] },
  ],
  ConsolePlayer: [consolePlayer],
  ConsoleStuckTransactions: [{ transactions: [stuckWin], total: 1 }],
  ConsoleOperators: [
    {
      operators: [
        {
          id: catalogOperator.id,
          name: catalogOperator.name,
          walletUrl: catalogOperator.walletUrl,
          walletTimeoutMs: catalogOperator.walletTimeoutMs,
          rateLimit: catalogOperator.rateLimit,
          visibleGames: [{ id: 'fruit-1', name: 'Fruit Fiesta', providerId: 'studio-a' }],
        },
      ],
    },
  ],
  AdminReplayLinkRequest: [{ operatorId: 'op-1', roundId: 'r-20261121-0001', gameId: 'fruit-1' }],
  SourceMap: [{ version: 3, file: 'chart.umd.js', sources: ['../src/helpers/helpers.core.ts', '../src/core/core.animator.js'], names: ['isNullOrUndef'], mappings: ';;;;;;AAAA' }],
  WalletTransactionRequest: Object.values(walletTransactionExamples).map((e) => e.value),
  ProviderGrantRequest: [
    { requestRef: GRANT_ID, operatorId: 'op-1', playerRef: 'p1', gameId: 'fruit-1', spins: 10, betAmountMinor: 20, currency: 'EUR', expiresAt: '2026-12-31T23:59:59Z' },
  ],
  ProviderGrantResponse: [{ externalRef: 'batch-7f3a' }],
  ProviderCancelRequest: [{ requestRef: GRANT_ID }],
  ProviderRevokeRequest: [{ operatorId: 'op-1', playerRef: 'p1', sessionTokens: [SESSION_TOKEN] }],
};

/** An example for each path and query parameter, by name (the same name means the same thing everywhere). */
export const parameterExamples: Record<string, unknown> = {
  id: GRANT_ID,
  streamId: ROUND_STREAM,
  providerId: 'studio-a',
  operatorId: 'op-1',
  roundId: 'r-20261121-0001',
  gameId: 'fruit-1',
  playerRef: 'p1',
  from: '1043.1043',
  limit: 100,
  status: 'unresolved',
  asOf: '2026-11-21T16:21:00.030Z',
  keyId: CHAIN_KEY_ID,
  window: 'hour',
  q: 'tx-win-0002',
};
