import { describe, expect, it } from 'vitest';
import type { Campaign, Operator, Provider } from '../../shared/catalog/schema.ts';
import { CatalogSnapshot } from '../../shared/catalog/store.ts';
import { deciderSpec } from '../../test/helpers/decider-spec.ts';
import type { GrantActivated, GrantCancelFailed, GrantCancelled, GrantEvent, GrantFailed, GrantIssueTaken, GrantRequested } from './events.ts';
import { cancelRefusal, grantDecider, grantOf, ISSUE_MARGIN_MS, issueDeadline, strayBatch, type Grant, type GrantCommand, type GrantRequest, type ProviderOutcome } from './decider.ts';

/**
 * Free-spin grants (API document 2.7, 3.1, 4.1.5; contract section 4) as given / when / then.
 */

const NOW = new Date('2026-11-24T12:00:00Z');
const NOW_ISO = NOW.toISOString();
const LATER_ISO = '2026-11-24T12:00:05.000Z';
const LATER = new Date(LATER_ISO);
const GRANT_ID = '6f1c2a34-5b6d-5e7f-8a9b-0c1d2e3f4a5b';

const provider = (id: string, currencies: string[], gameIds: string[]): Provider => ({
  id,
  name: id,
  apiBaseUrl: `https://api.${id}.test`,
  secret: `${id}-secret`,
  timeoutMs: 5000,
  currencies,
  supportedLanguages: ['en'],
  games: gameIds.map((g) => ({ id: g, name: g, launchBaseUrl: `https://play.${id}.test/${g}`, replayBaseUrl: '' })),
});

const operator: Operator = {
  id: 'op-1',
  name: 'Operator One',
  secret: 'operator-secret',
  walletUrl: 'https://wallet.op-1.test',
  walletTimeoutMs: 5000,
  rateLimit: { limit: 100, windowSeconds: 1 },
  visibleGames: ['fruit-1', 'dice-9'],
  blockedPlayers: [],
};

const campaign = (id: string, changes: Partial<Campaign> = {}): Campaign => ({
  id,
  gameId: 'fruit-1',
  spins: 10,
  betAmountMinor: 20,
  currency: 'EUR',
  active: true,
  validFrom: '2026-01-01T00:00:00Z',
  validUntil: '2027-01-01T00:00:00Z',
  ...changes,
});

const catalog = new CatalogSnapshot(
  [provider('studio-a', ['EUR', 'USD'], ['fruit-1', 'hidden-3']), provider('studio-b', ['GBP'], ['dice-9'])],
  [operator],
  [
    campaign('welcome-10'),
    campaign('open-ended', { validFrom: undefined, validUntil: undefined }),
    campaign('paused', { active: false }),
    campaign('not-yet', { validFrom: '2026-12-01T00:00:00Z' }),
    campaign('ended', { validUntil: '2026-11-01T00:00:00Z' }),
    campaign('starts-now', { validFrom: NOW_ISO }),
    campaign('ends-now', { validUntil: NOW_ISO }),
    campaign('hidden-game', { gameId: 'hidden-3' }),
    campaign('ghost-game', { gameId: 'no-such-game' }),
    campaign('pounds-on-fruit', { currency: 'GBP' }),
  ],
);

/** p1 asks for 10 spins of fruit-1 in EUR under key-1, with the given changes. */
const request = (changes: Partial<GrantRequest> = {}): GrantRequest => ({ playerRef: 'p1', idempotencyKey: 'key-1', gameId: 'fruit-1', spins: 10, currency: 'EUR', ...changes });
const requestGrant = (changes: Partial<GrantRequest> = {}, operatorId = 'op-1'): GrantCommand => ({ type: 'RequestGrant', grantId: GRANT_ID, operatorId, request: request(changes), catalog, now: NOW });
/** A campaign grant: the request's own terms are left out unless given. */
const requestCampaign = (campaignId: string, changes: Partial<GrantRequest> = {}): GrantCommand =>
  requestGrant({ campaignId, gameId: undefined, spins: undefined, currency: undefined, ...changes });
const issueOutcome = (outcome: ProviderOutcome, take = 0): GrantCommand => ({ type: 'RecordIssueOutcome', outcome, take, now: LATER });
const takeOver = (at: Date, timeoutMs = 5000): GrantCommand => ({ type: 'TakeOverIssue', timeoutMs, now: at });
const taken = (takenAt: string, timeoutMs = 5000): GrantIssueTaken => ({ type: 'GrantIssueTaken', data: { takenAt, timeoutMs } });
/** `ms` after NOW. */
const after = (ms: number): Date => new Date(NOW.getTime() + ms);
const CALL = '2026-11-24T12:00:04.000Z';
const cancelOutcome = (outcome: ProviderOutcome, call = CALL): GrantCommand => ({ type: 'RecordCancelOutcome', outcome, call, now: LATER });

const requested = (changes: Partial<GrantRequested['data']> = {}): GrantRequested => ({
  type: 'GrantRequested',
  data: {
    grantId: GRANT_ID,
    operatorId: 'op-1',
    providerId: 'studio-a',
    gameId: 'fruit-1',
    playerRef: 'p1',
    spins: 10,
    betAmountMinor: 0,
    currency: 'EUR',
    idempotencyKey: 'key-1',
    requestedAt: NOW_ISO,
    ...changes,
  },
});
const activated = (externalRef = 'batch-1', at = LATER_ISO): GrantActivated => ({ type: 'GrantActivated', data: { externalRef, activatedAt: at } });
const failed = (lastError = 'provider answered 500', at = LATER_ISO): GrantFailed => ({ type: 'GrantFailed', data: { lastError, failedAt: at } });
/** `call` null: an outcome recorded before calls were named. */
const cancelled = (at = LATER_ISO, call: string | null = CALL): GrantCancelled => ({ type: 'GrantCancelled', data: { cancelledAt: at, ...(call !== null ? { call } : {}) } });
const cancelFailed = (error = 'provider answered 503', at = LATER_ISO, call: string | null = CALL): GrantCancelFailed => ({
  type: 'GrantCancelFailed',
  data: { error, failedAt: at, ...(call !== null ? { call } : {}) },
});

/** The histories that leave a grant in each status. */
const HISTORIES: Record<'pending' | 'active' | 'failed' | 'cancelled', GrantEvent[]> = {
  pending: [requested()],
  active: [requested(), activated()],
  failed: [requested(), failed()],
  cancelled: [requested(), activated(), cancelled()],
};

const spec = deciderSpec(grantDecider);

describe('RequestGrant: the idempotency key', () => {
  it.each(Object.keys(HISTORIES) as Array<keyof typeof HISTORIES>)('a key already used (grant %s) gives nothing, whatever the request says', (status) => {
    const given = spec.given(...HISTORIES[status]);
    expect(given.state.status).toBe(status);
    given.when(requestGrant({ gameId: 'dice-9', spins: 99, currency: 'GBP' })).thenNothing();
    // Even a request that would be refused on a fresh key.
    given.when(requestCampaign('no-such-campaign')).thenNothing();
    given.when(requestGrant({ gameId: 'hidden-3' })).thenNothing();
    given.when(requestGrant({ spins: undefined })).thenNothing();
  });
});

describe('RequestGrant with a campaign', () => {
  it('refuses an unknown campaign with campaign-not-found', () => {
    spec.given().when(requestCampaign('no-such-campaign')).thenRefuses({ kind: 'campaign-not-found' });
  });

  it.each([
    ['an inactive campaign', 'paused'],
    ['a campaign before its validFrom', 'not-yet'],
    ['a campaign after its validUntil', 'ended'],
  ])('refuses %s with campaign-inactive', (_what, campaignId) => {
    spec.given().when(requestCampaign(campaignId)).thenRefuses({ kind: 'campaign-inactive' });
  });

  it.each(['starts-now', 'ends-now', 'open-ended'])('accepts the campaign %s (validity bounds are inclusive, and optional)', (campaignId) => {
    spec.given().when(requestCampaign(campaignId)).thenMatches([{ type: 'GrantRequested', data: { campaignId } }]);
  });

  it("uses the campaign's terms and ignores the request's", () => {
    spec
      .given()
      .when(requestCampaign('welcome-10', { gameId: 'dice-9', spins: 99, betAmountMinor: 500, currency: 'GBP' }))
      .then([
        {
          type: 'GrantRequested',
          data: {
            grantId: GRANT_ID,
            operatorId: 'op-1',
            providerId: 'studio-a',
            gameId: 'fruit-1',
            playerRef: 'p1',
            spins: 10,
            betAmountMinor: 20,
            currency: 'EUR',
            idempotencyKey: 'key-1',
            campaignId: 'welcome-10',
            requestedAt: NOW_ISO,
            issueTimeoutMs: 5000,
          },
        },
      ]);
  });

  it("ignores the request's invalid terms too (a missing or malformed term does not matter)", () => {
    spec
      .given()
      .when(requestCampaign('welcome-10', { gameId: 'no-such-game', currency: 'eur' }))
      .thenMatches([{ type: 'GrantRequested', data: { gameId: 'fruit-1', currency: 'EUR' } }]);
  });

  it("checks the campaign's game like a request's: not visible → game-not-visible, unknown → game-not-found", () => {
    spec.given().when(requestCampaign('hidden-game')).thenRefuses({ kind: 'game-not-visible' });
    spec.given().when(requestCampaign('ghost-game')).thenRefuses({ kind: 'game-not-found' });
  });

  it("checks the campaign's currency against the game's provider", () => {
    spec.given().when(requestCampaign('pounds-on-fruit')).thenRefuses({ kind: 'grant-currency-unsupported', currency: 'GBP' });
  });

  it('the campaign check comes before the game checks', () => {
    spec.given().when(requestCampaign('paused', { gameId: 'hidden-3' })).thenRefuses({ kind: 'campaign-inactive' });
  });
});

describe('RequestGrant without a campaign', () => {
  it.each(['gameId', 'spins', 'currency'] as const)('refuses a missing %s with grant-term-missing naming it', (field) => {
    spec.given().when(requestGrant({ [field]: undefined })).thenRefuses({ kind: 'grant-term-missing', field });
  });

  it('names the missing terms in the order gameId, spins, currency', () => {
    spec.given().when(requestGrant({ gameId: undefined, spins: undefined, currency: undefined })).thenRefuses({ kind: 'grant-term-missing', field: 'gameId' });
    spec.given().when(requestGrant({ spins: undefined, currency: undefined })).thenRefuses({ kind: 'grant-term-missing', field: 'spins' });
  });

  it('defaults betAmountMinor to 0 (the wallet default stake)', () => {
    spec.given().when(requestGrant()).thenMatches([{ type: 'GrantRequested', data: { betAmountMinor: 0 } }]);
  });

  it('keeps a given betAmountMinor', () => {
    spec.given().when(requestGrant({ betAmountMinor: 25 })).thenMatches([{ type: 'GrantRequested', data: { betAmountMinor: 25 } }]);
  });

  it('refuses an unknown game with game-not-found', () => {
    spec.given().when(requestGrant({ gameId: 'no-such-game' })).thenRefuses({ kind: 'game-not-found' });
  });

  it('refuses a game not visible to the operator with game-not-visible (unlike launch, a distinct answer)', () => {
    spec.given().when(requestGrant({ gameId: 'hidden-3' })).thenRefuses({ kind: 'game-not-visible' });
  });

  it('an operator missing from the catalog sees no game', () => {
    spec.given().when(requestGrant({}, 'op-gone')).thenRefuses({ kind: 'game-not-visible' });
  });

  it.each(['eur', 'EURO', 'E1R', ''])('refuses the currency %j with currency-format', (currency) => {
    spec.given().when(requestGrant({ currency })).thenRefuses({ kind: 'currency-format' });
  });

  it("refuses a currency the game's provider does not list, naming it", () => {
    spec.given().when(requestGrant({ currency: 'GBP' })).thenRefuses({ kind: 'grant-currency-unsupported', currency: 'GBP' });
    spec.given().when(requestGrant({ gameId: 'dice-9', currency: 'EUR' })).thenRefuses({ kind: 'grant-currency-unsupported', currency: 'EUR' });
  });

  describe('checks in order, shown with requests that break two rules at once', () => {
    it('missing term before the game', () => {
      spec.given().when(requestGrant({ gameId: 'no-such-game', spins: undefined })).thenRefuses({ kind: 'grant-term-missing', field: 'spins' });
    });
    it('game exists before visibility and currency', () => {
      spec.given().when(requestGrant({ gameId: 'no-such-game', currency: 'eur' })).thenRefuses({ kind: 'game-not-found' });
    });
    it('visibility before currency format', () => {
      spec.given().when(requestGrant({ gameId: 'hidden-3', currency: 'eur' })).thenRefuses({ kind: 'game-not-visible' });
    });
    it('currency format before currency supported', () => {
      spec.given().when(requestGrant({ currency: 'gbp' })).thenRefuses({ kind: 'currency-format' });
    });
  });

  it('records GrantRequested with exactly the request data (providerId from the game, no campaignId/expiresAt when not given)', () => {
    spec
      .given()
      .when(requestGrant({ gameId: 'dice-9', spins: 5, currency: 'GBP', betAmountMinor: 50 }))
      .then([
        {
          type: 'GrantRequested',
          data: {
            grantId: GRANT_ID,
            operatorId: 'op-1',
            providerId: 'studio-b',
            gameId: 'dice-9',
            playerRef: 'p1',
            spins: 5,
            betAmountMinor: 50,
            currency: 'GBP',
            idempotencyKey: 'key-1',
            requestedAt: NOW_ISO,
            // studio-b's timeoutMs: the bound of the issue call this request makes.
            issueTimeoutMs: 5000,
          },
        },
      ]);
  });

  it('records expiresAt when given (informational only: a past one is not refused)', () => {
    spec
      .given()
      .when(requestGrant({ expiresAt: '2020-01-01T00:00:00Z' }))
      .then([requested({ expiresAt: '2020-01-01T00:00:00Z', issueTimeoutMs: 5000 })]);
  });
});

describe('RecordIssueOutcome', () => {
  it('pending + a 200 with an externalRef → GrantActivated', () => {
    spec.given(requested()).when(issueOutcome({ ok: true, externalRef: 'x' })).then([{ type: 'GrantActivated', data: { externalRef: 'x', activatedAt: LATER_ISO } }]);
  });

  it.each([
    ['without an externalRef', { ok: true } as const],
    ['with an empty externalRef', { ok: true, externalRef: '' } as const],
  ])('pending + a 200 %s → GrantFailed', (_what, outcome) => {
    spec.given(requested()).when(issueOutcome(outcome)).then([{ type: 'GrantFailed', data: { lastError: 'provider answered 200 without an externalRef', failedAt: LATER_ISO } }]);
  });

  it('pending + a failure → GrantFailed with its error', () => {
    spec
      .given(requested())
      .when(issueOutcome({ ok: false, error: 'provider did not answer in time' }))
      .then([{ type: 'GrantFailed', data: { lastError: 'provider did not answer in time', failedAt: LATER_ISO } }]);
  });

  it.each(['active', 'failed', 'cancelled'] as const)('a grant already %s gives nothing for a failure', (status) => {
    spec.given(...HISTORIES[status]).when(issueOutcome({ ok: false, error: 'late' })).thenNothing();
  });

  it.each(['active', 'failed', 'cancelled'] as const)('a grant already %s gives nothing for a success either: the first batch stands, and failed is final', (status) => {
    spec.given(...HISTORIES[status]).when(issueOutcome({ ok: true, externalRef: 'late' })).thenNothing();
  });

  it('a batch accepted that the grant does not hold is one to cancel at the provider (strayBatch): any for a failed grant, another for an active or cancelled one', () => {
    const failedAfterTake = spec.given(requested(), taken(LATER_ISO), failed()).state;
    expect(strayBatch({ ok: true, externalRef: 'stray' }, failedAfterTake)).toBe('stray');
    expect(strayBatch({ ok: true }, failedAfterTake)).toBeUndefined();
    expect(strayBatch({ ok: false, error: 'x' }, failedAfterTake)).toBeUndefined();
    for (const status of ['active', 'cancelled'] as const) {
      const holding = spec.given(...HISTORIES[status]).state;
      expect(strayBatch({ ok: true, externalRef: 'stray' }, holding)).toBe('stray');
      // Its own batch answered again (a provider that deduplicates on requestRef) is not stray.
      expect(strayBatch({ ok: true, externalRef: 'batch-1' }, holding)).toBeUndefined();
      expect(strayBatch({ ok: false, error: 'x' }, holding)).toBeUndefined();
    }
    expect(strayBatch({ ok: true, externalRef: 'stray' }, spec.given(...HISTORIES.pending).state)).toBeUndefined();
    expect(strayBatch({ ok: true, externalRef: 'stray' }, spec.given().state)).toBeUndefined();
  });

  it("a superseded call's failure gives nothing while the take-over's call is awaited; the take-over's own failure ends it", () => {
    const given = spec.given(requested(), taken(LATER_ISO));
    given.when(issueOutcome({ ok: false, error: 'provider did not answer in time' }, 0)).thenNothing();
    given.when(issueOutcome({ ok: false, error: 'provider answered 503' }, 1)).then([{ type: 'GrantFailed', data: { lastError: 'provider answered 503', failedAt: LATER_ISO } }]);
  });

  it("a superseded call's success still activates the grant (the provider accepted the batch)", () => {
    spec.given(requested(), taken(LATER_ISO)).when(issueOutcome({ ok: true, externalRef: 'slow-but-accepted' }, 0)).thenMatches([{ type: 'GrantActivated', data: { externalRef: 'slow-but-accepted' } }]);
  });

  it('no grant gives nothing', () => {
    spec.given().when(issueOutcome({ ok: true, externalRef: 'x' })).thenNothing();
  });
});

describe('RecordStrayBatch: a batch the grant does not hold, kept with its cancel', () => {
  const late = (cancel: ProviderOutcome, externalRef = 'stray'): GrantCommand => ({ type: 'RecordStrayBatch', externalRef, cancel, now: LATER });

  it('failed + the cancel succeeded → GrantAcceptedAfterFailure, cancelled; the grant stays failed, unchanged', () => {
    const given = spec.given(...HISTORIES.failed);
    given.when(late({ ok: true })).then([{ type: 'GrantAcceptedAfterFailure', data: { externalRef: 'stray', cancelled: true, at: LATER_ISO } }]);
    const after = spec.given(...HISTORIES.failed, { type: 'GrantAcceptedAfterFailure', data: { externalRef: 'stray', cancelled: true, at: '2026-11-24T13:00:00.000Z' } }).state;
    expect(grantOf(after)).toEqual(grantOf(given.state));
  });

  it('failed + the cancel failed → GrantAcceptedAfterFailure with its error, and GrantActivated: the live batch shows, active, to be cancelled by its operator', () => {
    const cancelFailedOnce = spec.given(...HISTORIES.failed).when(late({ ok: false, error: 'provider answered 500' }));
    cancelFailedOnce.then([
      { type: 'GrantAcceptedAfterFailure', data: { externalRef: 'stray', cancelled: false, error: 'provider answered 500', at: LATER_ISO } },
      { type: 'GrantActivated', data: { externalRef: 'stray', activatedAt: LATER_ISO } },
    ]);
    const after = spec.given(...HISTORIES.failed, ...(cancelFailedOnce.decision as GrantEvent[])).state;
    expect(grantOf(after)).toMatchObject({ status: 'active', externalRef: 'stray' });
    expect(grantOf(after)).not.toHaveProperty('lastError');
    expect(cancelRefusal(after)).toBeUndefined();
  });

  it.each(['active', 'cancelled'] as const)('%s with another batch → GrantExtraBatch, cancelled or with its error; the grant keeps its own batch and status', (status) => {
    const given = spec.given(...HISTORIES[status]);
    given.when(late({ ok: true })).then([{ type: 'GrantExtraBatch', data: { externalRef: 'stray', cancelled: true, at: LATER_ISO } }]);
    const notCancelled = given.when(late({ ok: false, error: 'provider answered 500' }));
    notCancelled.then([{ type: 'GrantExtraBatch', data: { externalRef: 'stray', cancelled: false, error: 'provider answered 500', at: LATER_ISO } }]);
    const after = spec.given(...HISTORIES[status], ...(notCancelled.decision as GrantEvent[])).state;
    expect(grantOf(after)).toEqual(grantOf(given.state));
    expect(grantOf(after)).toMatchObject({ status, externalRef: 'batch-1' });
  });

  it.each(['active', 'cancelled'] as const)('%s, its own batch gives nothing', (status) => {
    spec.given(...HISTORIES[status]).when(late({ ok: true }, 'batch-1')).thenNothing();
  });

  it('a pending grant, or none, gives nothing', () => {
    spec.given(...HISTORIES.pending).when(late({ ok: true })).thenNothing();
    spec.given().when(late({ ok: true })).thenNothing();
  });
});

describe('TakeOverIssue: a grant abandoned mid-call', () => {
  const recordedBound = requested({ issueTimeoutMs: 300 });

  it('gives nothing while the call may still answer: before its recorded bound plus the margin', () => {
    spec.given(recordedBound).when(takeOver(after(300 + ISSUE_MARGIN_MS - 1))).thenNothing();
  });

  it('takes it at the deadline, with the provider timeoutMs now as the new call’s bound', () => {
    spec.given(recordedBound).when(takeOver(after(300 + ISSUE_MARGIN_MS), 800)).then([taken(after(300 + ISSUE_MARGIN_MS).toISOString(), 800)]);
  });

  it('keeps to the bound recorded with the call, whatever the catalog says now', () => {
    // The provider's timeout was raised to 60 s after the request: the request's call was bounded by 300 ms.
    spec.given(recordedBound).when(takeOver(after(300 + ISSUE_MARGIN_MS), 60_000)).thenMatches([{ type: 'GrantIssueTaken' }]);
    expect(issueDeadline(spec.given(recordedBound).state, 60_000)).toBe(NOW.getTime() + 300 + ISSUE_MARGIN_MS);
  });

  it('a grant requested before the bound was recorded uses the provider timeoutMs now', () => {
    spec.given(requested()).when(takeOver(after(1000 + ISSUE_MARGIN_MS - 1), 1000)).thenNothing();
    spec.given(requested()).when(takeOver(after(1000 + ISSUE_MARGIN_MS), 1000)).thenMatches([{ type: 'GrantIssueTaken' }]);
  });

  it('a take moves the deadline to its own call: a second taker waits for it', () => {
    const takenAt = after(10_000);
    const given = spec.given(recordedBound, taken(takenAt.toISOString(), 500));
    given.when(takeOver(new Date(takenAt.getTime() + 500 + ISSUE_MARGIN_MS - 1))).thenNothing();
    given.when(takeOver(new Date(takenAt.getTime() + 500 + ISSUE_MARGIN_MS))).thenMatches([{ type: 'GrantIssueTaken' }]);
  });

  it.each(['active', 'failed', 'cancelled'] as const)('a grant %s is never taken over', (status) => {
    spec.given(...HISTORIES[status]).when(takeOver(after(3_600_000))).thenNothing();
    expect(issueDeadline(spec.given(...HISTORIES[status]).state, 5000)).toBeUndefined();
  });

  it('no grant gives nothing', () => {
    spec.given().when(takeOver(after(3_600_000))).thenNothing();
  });

  it('operators never see the take: the grant stays pending, its updatedAt unmoved', () => {
    expect(grantOf(spec.given(recordedBound, taken(LATER_ISO)).state)).toEqual(grantOf(spec.given(recordedBound).state));
  });
});

describe('cancelRefusal: only an active grant can be cancelled (API document 3.1)', () => {
  it('an active grant may be cancelled', () => {
    expect(cancelRefusal(spec.given(...HISTORIES.active).state)).toBeUndefined();
  });

  it('a grant whose cancel failed is still active, so it may be cancelled again', () => {
    expect(cancelRefusal(spec.given(...HISTORIES.active, cancelFailed()).state)).toBeUndefined();
  });

  it.each(['pending', 'failed', 'cancelled'] as const)('a %s grant is not cancellable, naming its status', (status) => {
    expect(cancelRefusal(spec.given(...HISTORIES[status]).state)).toEqual({ kind: 'grant-not-cancellable', status });
  });

  it('no grant is not cancellable, with status none', () => {
    expect(cancelRefusal(spec.given().state)).toEqual({ kind: 'grant-not-cancellable', status: 'none' });
  });
});

describe('RecordCancelOutcome', () => {
  it('active + success → GrantCancelled', () => {
    spec.given(...HISTORIES.active).when(cancelOutcome({ ok: true })).then([cancelled(LATER_ISO)]);
  });

  it('active + failure → GrantCancelFailed, and the grant stays active with its externalRef', () => {
    const decision = spec.given(...HISTORIES.active).when(cancelOutcome({ ok: false, error: 'provider answered 503' }));
    decision.then([cancelFailed('provider answered 503', LATER_ISO)]);
    const { state } = spec.given(...HISTORIES.active, cancelFailed('provider answered 503', LATER_ISO));
    expect(state).toMatchObject({ status: 'active', externalRef: 'batch-1', updatedAt: LATER_ISO });
    expect(state).not.toHaveProperty('lastError');
  });

  it('a retried cancel after a failed one can succeed', () => {
    spec.given(...HISTORIES.active, cancelFailed()).when(cancelOutcome({ ok: true })).then([cancelled(LATER_ISO)]);
  });

  it.each(['pending', 'failed', 'cancelled'] as const)('a %s grant gives nothing, whatever the outcome', (status) => {
    spec.given(...HISTORIES[status]).when(cancelOutcome({ ok: true })).thenNothing();
    spec.given(...HISTORIES[status]).when(cancelOutcome({ ok: false, error: 'x' })).thenNothing();
  });

  it('no grant gives nothing', () => {
    spec.given().when(cancelOutcome({ ok: true })).thenNothing();
  });
});

describe('evolve: the Grant view (API document 2.7)', () => {
  const pendingView: Grant = {
    id: GRANT_ID,
    operatorId: 'op-1',
    providerId: 'studio-a',
    gameId: 'fruit-1',
    playerRef: 'p1',
    spins: 10,
    betAmountMinor: 0,
    currency: 'EUR',
    status: 'pending',
    idempotencyKey: 'key-1',
    createdAt: NOW_ISO,
    updatedAt: NOW_ISO,
  };

  it('starts with no grant', () => {
    const { state } = spec.given();
    expect(state).toEqual({ status: 'none' });
    expect(grantOf(state)).toBeUndefined();
  });

  it('GrantRequested → pending, createdAt = updatedAt = requestedAt, no externalRef, lastError, campaignId or expiresAt', () => {
    const { state } = spec.given(requested());
    expect(grantOf(state)).toEqual(pendingView);
  });

  it('keeps campaignId and expiresAt when recorded', () => {
    const { state } = spec.given(requested({ campaignId: 'welcome-10', expiresAt: '2026-12-31T00:00:00Z', betAmountMinor: 20 }));
    expect(grantOf(state)).toEqual({ ...pendingView, campaignId: 'welcome-10', expiresAt: '2026-12-31T00:00:00Z', betAmountMinor: 20 });
  });

  it('GrantActivated → active with the externalRef', () => {
    expect(spec.given(requested(), activated('batch-7')).state).toEqual({ ...pendingView, status: 'active', externalRef: 'batch-7', updatedAt: LATER_ISO });
  });

  it('GrantFailed → failed with lastError', () => {
    expect(spec.given(requested(), failed('provider answered 500')).state).toEqual({ ...pendingView, status: 'failed', lastError: 'provider answered 500', updatedAt: LATER_ISO });
  });

  it('GrantCancelled → cancelled, externalRef kept', () => {
    const cancelledAt = '2026-11-24T13:00:00.000Z';
    expect(spec.given(requested(), activated('batch-7'), cancelled(cancelledAt)).state).toEqual({
      ...pendingView,
      status: 'cancelled',
      externalRef: 'batch-7',
      updatedAt: cancelledAt,
    });
  });

  it('GrantCancelFailed → still active, only updatedAt moves', () => {
    const failedAt = '2026-11-24T13:00:00.000Z';
    expect(spec.given(requested(), activated('batch-7'), cancelFailed('boom', failedAt)).state).toEqual({
      ...pendingView,
      status: 'active',
      externalRef: 'batch-7',
      updatedAt: failedAt,
    });
  });

  it('ignores outcome events with no grant', () => {
    expect(spec.given(activated()).state).toEqual({ status: 'none' });
  });

  it('the decided events fold into the view the API answers', () => {
    const first = spec.given().when(requestGrant({ campaignId: 'welcome-10' }));
    const events = first.decision as GrantEvent[];
    const second = spec.given(...events).when(issueOutcome({ ok: true, externalRef: 'batch-9' }));
    const all = [...events, ...(second.decision as GrantEvent[])];
    expect(grantOf(spec.given(...all).state)).toEqual({
      ...pendingView,
      campaignId: 'welcome-10',
      betAmountMinor: 20,
      status: 'active',
      externalRef: 'batch-9',
      updatedAt: LATER.toISOString(),
    });
  });
});

describe('RequestCancel: one provider call at a time', () => {
  const requestCancel = (now: Date, timeoutMs = 1000): GrantCommand => ({ type: 'RequestCancel', timeoutMs, now });
  const cancelRequested = (at: Date, timeoutMs = 1000): GrantEvent => ({ type: 'GrantCancelRequested', data: { requestedAt: at.toISOString(), timeoutMs } });
  const at = (ms: number) => new Date(NOW.getTime() + ms);

  it('records the call before it is made, for an active grant only', () => {
    spec.given(requested(), activated()).when(requestCancel(at(0))).then([cancelRequested(at(0))]);
    spec.given(requested()).when(requestCancel(at(0))).thenRefuses({ kind: 'grant-not-cancellable', status: 'pending' });
    spec.given(requested(), activated(), cancelled()).when(requestCancel(at(0))).thenRefuses({ kind: 'grant-not-cancellable', status: 'cancelled' });
  });

  it('records nothing while another call may still answer (the caller waits for it); after its bound and margin, or once it answered, a new call', () => {
    const calling = [requested(), activated(), cancelRequested(at(0), 1000)];
    spec.given(...calling).when(requestCancel(at(1000 + ISSUE_MARGIN_MS))).thenNothing();
    spec.given(...calling).when(requestCancel(at(1000 + ISSUE_MARGIN_MS + 1))).then([cancelRequested(at(1000 + ISSUE_MARGIN_MS + 1))]);
    spec.given(...calling, cancelFailed('provider answered 503', LATER_ISO, at(0).toISOString())).when(requestCancel(at(10))).then([cancelRequested(at(10))]);
  });

  it("a late failure of a call given up as abandoned leaves the marker of the call made since: a third cancel still waits for that one", () => {
    const first = at(0);
    const second = at(1000 + ISSUE_MARGIN_MS + 1);
    const history = [requested(), activated(), cancelRequested(first), cancelRequested(second), cancelFailed('provider answered 503', LATER_ISO, first.toISOString())];
    spec.given(...history).when(requestCancel(at(1000 + ISSUE_MARGIN_MS + 10))).thenNothing();
    // Its own outcome clears it; so does a failure recorded before calls were named (history from before).
    spec.given(...history, cancelFailed('provider answered 503', LATER_ISO, second.toISOString())).when(requestCancel(at(1000 + ISSUE_MARGIN_MS + 10))).thenMatches([{ type: 'GrantCancelRequested' }]);
    spec.given(requested(), activated(), cancelRequested(second), cancelFailed('x', LATER_ISO, null)).when(requestCancel(at(1000 + ISSUE_MARGIN_MS + 10))).thenMatches([{ type: 'GrantCancelRequested' }]);
  });

  it('leaves the grant as operators read it unchanged', () => {
    const before = grantOf(spec.given(requested(), activated()).state);
    expect(grantOf(spec.given(requested(), activated(), cancelRequested(at(0))).state)).toEqual(before);
  });
});
