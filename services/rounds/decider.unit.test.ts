import { describe, expect, it } from 'vitest';
import { deciderSpec } from '../../test/helpers/decider-spec.ts';
import {
  mayRedrive,
  TX_STATUSES,
  betToAwaitBefore,
  isOutstanding,
  isStale,
  mayAttempt,
  outstandingBets,
  roundFigures,
  replyLearnableAgain,
  workerAttempts,
  operatorStatus,
  completesRound,
  isStuck,
  retriesExhausted,
  roundDecider,
  staleRollbacks,
  UNSETTLED_STATUSES,
  type AttemptBy,
  type RoundCommand,
  type SessionStanding,
  type TxState,
  type WalletOutcome,
} from './decider.ts';
import {
  ADMIN_SESSION,
  RECONCILER_SESSION,
  type Origin,
  type RoundEvent,
  type TransactionRecorded,
  type TransactionRequest,
  type WalletReply,
} from './events.ts';

/**
 * The round's rules (contract sections 5 and 8, API document 2.10-2.12, 3.3 and 4.2), each as
 * given(what the round recorded) / when(command) / then(what it records, or why it refuses).
 */

const spec = deciderSpec(roundDecider);

const NOW = new Date('2026-11-24T12:00:00Z');
const NOW_ISO = '2026-11-24T12:00:00.000Z';
/** The instant `seconds` before NOW, as stored. */
const ago = (seconds: number): string => new Date(NOW.getTime() - seconds * 1000).toISOString();
const AN_HOUR_AGO = ago(3600);
const DAY = 86_400;

// --- Requests (API document 2.10): one round of player-1, in EUR, on game-1, opened by session-1 ---

type Over = Partial<TransactionRequest>;
const request = (type: TransactionRequest['type'], transactionId: string, over: Over): TransactionRequest => ({
  transactionId,
  sessionToken: 'session-1',
  type,
  roundId: 'round-1',
  roundComplete: false,
  playerRef: 'player-1',
  amount: 500,
  currency: 'EUR',
  gameId: 'game-1',
  ...over,
});
const bet = (id: string, over: Over = {}) => request('BET', id, over);
const win = (id: string, over: Over = {}) => request('WIN', id, { amount: 1200, ...over });
/** A ROLLBACK mirroring a default BET (same amount and currency). */
const rollback = (id: string, betId: string, over: Over = {}) => request('ROLLBACK', id, { originalTransactionId: betId, ...over });
const adjustment = (id: string, over: Over = {}) =>
  request('ADJUSTMENT', id, { sessionToken: ADMIN_SESSION, roundId: `adjustment:${id}`, direction: 'CREDIT', gameId: '', metadata: { reason: 'goodwill' }, ...over });

/** A stand-in for the content hash: equal for equal content, different otherwise. */
const hashOf = (r: TransactionRequest): string => `hash:${JSON.stringify(r)}`;

// --- Wallet replies (API document 2.12) ---

const reply = (status: WalletReply['status'], balance = 10_000): WalletReply => ({ status, balance, body: JSON.stringify({ status, balance }) });
const OK = reply('OK');
const DECLINED = reply('DECLINED');

// --- Events ---

const recorded = (r: TransactionRequest, recordedAt = AN_HOUR_AGO, origin: Origin = 'provider'): TransactionRecorded => ({
  type: 'TransactionRecorded',
  data: { providerId: 'provider-1', operatorId: 'operator-1', origin, request: r, walletBody: JSON.stringify(r), contentHash: hashOf(r), recordedAt },
});
const settled = (id: string, outcome: 'applied' | 'declined' | 'invalid' = 'applied', attempt = 1): RoundEvent => ({
  type: 'TransactionSettled',
  data: { transactionId: id, outcome, reply: outcome === 'applied' ? OK : DECLINED, attempt, settledAt: AN_HOUR_AGO },
});
const failed = (id: string, attempt = 1, detail = 'wallet answered 503'): RoundEvent => ({
  type: 'TransactionAttemptFailed',
  data: { transactionId: id, outcome: 'failed', detail, httpStatus: 503, attempt, failedAt: AN_HOUR_AGO },
});
const timedOut = (id: string, attempt = 1): RoundEvent => ({
  type: 'TransactionAttemptFailed',
  data: { transactionId: id, outcome: 'timed_out', detail: 'no reply within the wallet timeout', attempt, failedAt: AN_HOUR_AGO },
});
/** A call of `id` that failed before reaching the wallet (no connection was made). */
const unsent = (id: string, attempt = 1): RoundEvent => ({
  type: 'TransactionAttemptFailed',
  data: { transactionId: id, outcome: 'failed', detail: 'wallet unreachable: connect ECONNREFUSED 127.0.0.1:1', notSent: true, attempt, failedAt: AN_HOUR_AGO },
});
/** A call of `id` that timed out before a connection to the wallet was made (a host that drops packets). */
const unconnected = (id: string, attempt = 1): RoundEvent => ({
  type: 'TransactionAttemptFailed',
  data: { transactionId: id, outcome: 'timed_out', detail: 'no connection to the wallet within the wallet timeout', notSent: true, attempt, failedAt: AN_HOUR_AGO },
});
/** The worker's ask for a BET's lost reply, failed: the BET stays recorded. */
const askFailed = (id: string, attempt = 1): RoundEvent => ({
  type: 'TransactionAttemptFailed',
  data: { transactionId: id, outcome: 'timed_out', detail: 'no reply within the wallet timeout', attempt, failedAt: AN_HOUR_AGO, replyLost: true },
});
const deadLettered = (id: string): RoundEvent => ({
  type: 'TransactionDeadLettered',
  data: { transactionId: id, attempts: 3, lastError: 'wallet answered 503', deadLetteredAt: AN_HOUR_AGO },
});
const voided = (betId: string, rollbackId: string, voidedAt = AN_HOUR_AGO): RoundEvent => ({
  type: 'TransactionVoided',
  data: { transactionId: betId, rollbackTransactionId: rollbackId, voidedAt },
});
const forceClosed = (...betIds: string[]): RoundEvent => ({ type: 'RoundForceClosed', data: { closedAt: AN_HOUR_AGO, rolledBack: betIds } });

// --- Commands ---

const record = (r: TransactionRequest, session: SessionStanding = 'active', origin: Origin = 'provider'): RoundCommand => ({
  type: 'RecordTransaction',
  request: r,
  providerId: 'provider-1',
  operatorId: 'operator-1',
  origin,
  contentHash: hashOf(r),
  session,
  now: NOW,
});
const outcome = (id: string, o: WalletOutcome, attempt = 1, by: AttemptBy = 'submission'): RoundCommand => ({ type: 'RecordOutcome', transactionId: id, attempt, outcome: o, by, now: NOW });
const deadLetter = (id: string, retryWindowSeconds = DAY): RoundCommand => ({ type: 'DeadLetter', transactionId: id, retryWindowSeconds, now: NOW });
const closeStale = (staleAfterSeconds = 1800): RoundCommand => ({ type: 'CloseStaleRound', staleAfterSeconds, callsUnderWay: [], now: NOW });

/** The transaction `id` as the round knows it after `events`. */
const txAfter = (id: string, ...events: RoundEvent[]): TxState => {
  const tx = spec.given(...events).state.txs.get(id);
  if (!tx) throw new Error(`no transaction ${id}`);
  return tx;
};

describe('rounds decider: recording a transaction (RecordTransaction)', () => {
  it('records a new BET as submitted: the wallet body is its JSON text, stamped with the time of recording', () => {
    const b = bet('bet-1');
    spec
      .given()
      .when(record(b))
      .then([
        {
          type: 'TransactionRecorded',
          data: {
            providerId: 'provider-1',
            operatorId: 'operator-1',
            origin: 'provider',
            request: b,
            walletBody: JSON.stringify(b),
            contentHash: hashOf(b),
            recordedAt: NOW_ISO,
          },
        },
      ]);
  });

  it('records a WIN and a further BET on an open round', () => {
    spec.given(recorded(bet('bet-1'))).when(record(win('win-1'))).then([recorded(win('win-1'), NOW_ISO)]);
    spec.given(recorded(bet('bet-1')), recorded(win('win-1'))).when(record(bet('bet-2'))).then([recorded(bet('bet-2'), NOW_ISO)]);
  });

  it('records a platform ADJUSTMENT with its direction and metadata in the wallet body', () => {
    const adj = adjustment('adj-1', { direction: 'DEBIT', amount: 2500 });
    const recording = spec.given().when(record(adj, 'active', 'admin'));
    recording.then([recorded(adj, NOW_ISO, 'admin')]);
    const [event] = recording.decision as TransactionRecorded[];
    expect(JSON.parse(event!.data.walletBody)).toMatchObject({ type: 'ADJUSTMENT', direction: 'DEBIT', metadata: { reason: 'goodwill' } });
  });

  describe('idempotency comes first', () => {
    it('records nothing for an identical resubmission', () => {
      spec.given(recorded(bet('bet-1'))).when(record(bet('bet-1'))).thenNothing();
      spec.given(recorded(bet('bet-1')), settled('bet-1')).when(record(bet('bet-1'))).thenNothing();
    });

    it('records nothing for an identical resubmission even after a kick or an expiry of its session', () => {
      const history = [recorded(bet('bet-1')), settled('bet-1'), recorded(win('win-1'))];
      spec.given(...history).when(record(bet('bet-1'), 'revoked')).thenNothing();
      spec.given(...history).when(record(win('win-1'), 'revoked')).thenNothing();
      spec.given(...history).when(record(bet('bet-1'), 'expired')).thenNothing();
    });

    it('records nothing for an identical resubmission even after its round completed or was force-closed', () => {
      spec.given(recorded(bet('bet-1')), recorded(win('win-1', { roundComplete: true }))).when(record(bet('bet-1'))).thenNothing();
      spec.given(recorded(bet('bet-1')), recorded(win('win-1', { roundComplete: true }))).when(record(win('win-1', { roundComplete: true }))).thenNothing();
      spec.given(recorded(bet('bet-1')), forceClosed('bet-1')).when(record(bet('bet-1'))).thenNothing();
    });

    it('records nothing for an identical resubmission of a BET voided by its ROLLBACK (it is answered from what was recorded)', () => {
      spec.given(recorded(bet('bet-1')), recorded(rollback('rb-1', 'bet-1')), voided('bet-1', 'rb-1')).when(record(bet('bet-1'))).thenNothing();
    });

    it('refuses a transactionId already used with other content, even under a kicked session', () => {
      spec.given(recorded(bet('bet-1'))).when(record(bet('bet-1', { amount: 501 }))).thenRefuses({ kind: 'transaction-id-reused' });
      spec.given(recorded(bet('bet-1'))).when(record(win('bet-1'))).thenRefuses('transaction-id-reused');
      spec.given(recorded(bet('bet-1'))).when(record(bet('bet-1', { amount: 501 }), 'revoked')).thenRefuses('transaction-id-reused');
    });
  });

  describe('a kicked (revoked) session', () => {
    it('refuses every new transaction as session-invalid', () => {
      spec.given().when(record(bet('bet-1'), 'revoked')).thenRefuses({ kind: 'session-invalid' });
      spec.given(recorded(bet('bet-1'))).when(record(win('win-1'), 'revoked')).thenRefuses('session-invalid');
      spec.given(recorded(bet('bet-1'))).when(record(rollback('rb-1', 'bet-1'), 'revoked')).thenRefuses('session-invalid');
    });

    it('is refused as such whatever else is wrong with the transaction', () => {
      const round = [recorded(bet('bet-1'))];
      spec.given(...round).when(record(rollback('rb-1', 'bet-1', { amount: 1 }), 'revoked')).thenRefuses('session-invalid');
      spec.given(...round).when(record(rollback('rb-1', 'bet-1', { currency: 'USD' }), 'revoked')).thenRefuses('session-invalid');
      spec.given(...round).when(record(rollback('rb-1', 'missing'), 'revoked')).thenRefuses('session-invalid');
      spec.given(...round).when(record(win('win-1', { playerRef: 'player-2' }), 'revoked')).thenRefuses('session-invalid');
      spec.given(...round).when(record(win('win-1', { currency: 'USD' }), 'revoked')).thenRefuses('session-invalid');
      spec.given(...round, recorded(rollback('rb-1', 'bet-1'))).when(record(rollback('rb-2', 'bet-1'), 'revoked')).thenRefuses('session-invalid');
      spec.given(recorded(bet('bet-1', { roundComplete: true }))).when(record(win('win-1'), 'revoked')).thenRefuses('session-invalid');
    });
  });

  it('refuses a BET, WIN or ROLLBACK of another player than the round\'s first transaction', () => {
    const round = [recorded(bet('bet-1'))];
    spec.given(...round).when(record(bet('bet-2', { playerRef: 'player-2' }))).thenRefuses({ kind: 'round-of-another-player' });
    spec.given(...round).when(record(win('win-1', { playerRef: 'player-2' }))).thenRefuses('round-of-another-player');
    spec.given(...round).when(record(rollback('rb-1', 'bet-1', { playerRef: 'player-2' }))).thenRefuses('round-of-another-player');
  });

  describe('a ROLLBACK is its BET\'s mirror', () => {
    it('refuses a ROLLBACK whose originalTransactionId is not a BET of the round', () => {
      spec.given().when(record(rollback('rb-1', 'bet-1'))).thenRefuses({ kind: 'rollback-target-not-a-bet' });
      spec.given(recorded(bet('bet-1'))).when(record(rollback('rb-1', 'bet-elsewhere'))).thenRefuses('rollback-target-not-a-bet');
      spec.given(recorded(bet('bet-1')), recorded(win('win-1'))).when(record(rollback('rb-1', 'win-1', { amount: 1200 }))).thenRefuses('rollback-target-not-a-bet');
      spec.given(recorded(bet('bet-1')), recorded(rollback('rb-1', 'bet-1'))).when(record(rollback('rb-2', 'rb-1'))).thenRefuses('rollback-target-not-a-bet');
    });

    it('refuses a ROLLBACK without originalTransactionId as not naming a BET', () => {
      const { originalTransactionId: _omitted, ...withoutTarget } = rollback('rb-1', 'bet-1');
      spec.given(recorded(bet('bet-1'))).when(record(withoutTarget)).thenRefuses('rollback-target-not-a-bet');
    });

    it('refuses a ROLLBACK of another amount than its BET\'s, naming the BET\'s amount', () => {
      spec.given(recorded(bet('bet-1'))).when(record(rollback('rb-1', 'bet-1', { amount: 499 }))).thenRefuses({ kind: 'rollback-amount-mismatch', betAmount: 500 });
      spec.given(recorded(bet('bet-1'))).when(record(rollback('rb-1', 'bet-1', { amount: 0 }))).thenRefuses({ kind: 'rollback-amount-mismatch', betAmount: 500 });
    });

    it('refuses a ROLLBACK in another currency than its BET\'s, naming the BET\'s currency (before the round\'s currency rule)', () => {
      spec.given(recorded(bet('bet-1'))).when(record(rollback('rb-1', 'bet-1', { currency: 'USD' }))).thenRefuses({ kind: 'rollback-currency-mismatch', betCurrency: 'EUR' });
    });

    it('checks the amount before the currency', () => {
      spec
        .given(recorded(bet('bet-1')))
        .when(record(rollback('rb-1', 'bet-1', { amount: 1, currency: 'USD' })))
        .thenRefuses({ kind: 'rollback-amount-mismatch', betAmount: 500 });
    });

    it('refuses a second ROLLBACK of a BET already rolled back under another transactionId', () => {
      spec.given(recorded(bet('bet-1')), settled('bet-1'), recorded(rollback('rb-1', 'bet-1'))).when(record(rollback('rb-2', 'bet-1'))).thenRefuses({ kind: 'bet-already-rolled-back' });
      spec.given(recorded(bet('bet-1')), recorded(rollback('rb-1', 'bet-1')), voided('bet-1', 'rb-1')).when(record(rollback('rb-2', 'bet-1'))).thenRefuses('bet-already-rolled-back');
      // The reconciler's ROLLBACK after the provider's is refused the same way.
      spec
        .given(recorded(bet('bet-1')), settled('bet-1'), recorded(rollback('rb-1', 'bet-1')))
        .when(record(staleRollbacksOf(bet('bet-1'))[0]!, 'active', 'reconciler'))
        .thenRefuses('bet-already-rolled-back');
    });

    it('checks amount and currency before whether the BET was already rolled back', () => {
      const rolledBack = [recorded(bet('bet-1')), settled('bet-1'), recorded(rollback('rb-1', 'bet-1'))];
      spec.given(...rolledBack).when(record(rollback('rb-2', 'bet-1', { amount: 7 }))).thenRefuses({ kind: 'rollback-amount-mismatch', betAmount: 500 });
      spec.given(...rolledBack).when(record(rollback('rb-2', 'bet-1', { currency: 'GBP' }))).thenRefuses({ kind: 'rollback-currency-mismatch', betCurrency: 'EUR' });
    });
  });

  it('refuses a transaction in another currency than the round\'s first', () => {
    spec.given(recorded(bet('bet-1'))).when(record(win('win-1', { currency: 'USD' }))).thenRefuses({ kind: 'round-in-another-currency' });
    spec.given(recorded(bet('bet-1'))).when(record(bet('bet-2', { currency: 'USD' }))).thenRefuses('round-in-another-currency');
  });

  describe('a completed round', () => {
    const completedByWin = [recorded(bet('bet-1')), settled('bet-1'), recorded(win('win-1', { roundComplete: true }))];
    const completedByBet = [recorded(bet('bet-1', { roundComplete: true })), settled('bet-1')];

    it('refuses a BET or WIN after a BET or WIN said roundComplete', () => {
      spec.given(...completedByWin).when(record(bet('bet-2'))).thenRefuses({ kind: 'round-completed' });
      spec.given(...completedByWin).when(record(win('win-2'))).thenRefuses('round-completed');
      spec.given(...completedByBet).when(record(win('win-1'))).thenRefuses('round-completed');
      spec.given(...completedByBet).when(record(bet('bet-2'))).thenRefuses('round-completed');
    });

    it('still records a ROLLBACK after completion', () => {
      spec.given(...completedByWin).when(record(rollback('rb-1', 'bet-1'))).then([recorded(rollback('rb-1', 'bet-1'), NOW_ISO)]);
      spec.given(...completedByBet).when(record(rollback('rb-1', 'bet-1'))).then([recorded(rollback('rb-1', 'bet-1'), NOW_ISO)]);
    });

    it('refuses a BET or WIN after the round was force-closed as stale, but records the reconciler\'s ROLLBACK', () => {
      const closed = [recorded(bet('bet-1')), timedOut('bet-1'), forceClosed('bet-1')];
      spec.given(...closed).when(record(bet('bet-2'))).thenRefuses('round-completed');
      spec.given(...closed).when(record(win('win-1', { roundComplete: true }))).thenRefuses('round-completed');
      const refund = staleRollbacksOf(bet('bet-1'))[0]!;
      spec.given(...closed).when(record(refund, 'active', 'reconciler')).then([recorded(refund, NOW_ISO, 'reconciler')]);
    });
  });

  describe('an expired session settles the rounds it opened, but opens nothing new', () => {
    it('refuses a BET, even on a round it opened', () => {
      spec.given().when(record(bet('bet-1'), 'expired')).thenRefuses({ kind: 'session-invalid' });
      spec.given(recorded(bet('bet-1'))).when(record(bet('bet-2'), 'expired')).thenRefuses('session-invalid');
    });

    it('records a WIN or ROLLBACK of a round holding a BET of that session', () => {
      spec.given(recorded(bet('bet-1')), settled('bet-1')).when(record(win('win-1', { roundComplete: true }), 'expired')).then([recorded(win('win-1', { roundComplete: true }), NOW_ISO)]);
      spec.given(recorded(bet('bet-1')), settled('bet-1')).when(record(rollback('rb-1', 'bet-1'), 'expired')).then([recorded(rollback('rb-1', 'bet-1'), NOW_ISO)]);
      // Any BET of the session counts, not only the round's first.
      const mixed = [recorded(bet('bet-1', { sessionToken: 'session-0' })), recorded(bet('bet-2'))];
      spec.given(...mixed).when(record(win('win-1'), 'expired')).then([recorded(win('win-1'), NOW_ISO)]);
    });

    it('refuses a WIN or ROLLBACK of a round it did not open', () => {
      const openedByAnother = [recorded(bet('bet-1', { sessionToken: 'session-0' })), settled('bet-1')];
      spec.given(...openedByAnother).when(record(win('win-1'), 'expired')).thenRefuses('session-invalid');
      spec.given(...openedByAnother).when(record(rollback('rb-1', 'bet-1'), 'expired')).thenRefuses('session-invalid');
      spec.given().when(record(win('win-1'), 'expired')).thenRefuses('session-invalid');
      // A WIN of that session is not a BET of it: it does not make the round its own.
      spec.given(...openedByAnother, recorded(win('win-1'))).when(record(win('win-2'), 'expired')).thenRefuses('session-invalid');
    });
  });

  describe('every recorded transaction reaches a final answer (contract 8, rule 5)', () => {
    it('voids a BET the wallet has not answered when its ROLLBACK is recorded', () => {
      spec
        .given(recorded(bet('bet-1')))
        .when(record(rollback('rb-1', 'bet-1')))
        .then([recorded(rollback('rb-1', 'bet-1'), NOW_ISO), { type: 'TransactionVoided', data: { transactionId: 'bet-1', rollbackTransactionId: 'rb-1', voidedAt: NOW_ISO } }]);
      expect(txAfter('bet-1', recorded(bet('bet-1')), recorded(rollback('rb-1', 'bet-1')), voided('bet-1', 'rb-1'))).toMatchObject({ status: 'voided', rolledBackBy: 'rb-1' });
    });

    it('does not void a BET the wallet answered, or may have seen (failed, timed out)', () => {
      const rb = rollback('rb-1', 'bet-1');
      spec.given(recorded(bet('bet-1')), settled('bet-1')).when(record(rb)).then([recorded(rb, NOW_ISO)]);
      spec.given(recorded(bet('bet-1')), failed('bet-1')).when(record(rb)).then([recorded(rb, NOW_ISO)]);
      spec.given(recorded(bet('bet-1')), timedOut('bet-1')).when(record(rb)).then([recorded(rb, NOW_ISO)]);
      expect(txAfter('bet-1', recorded(bet('bet-1')), settled('bet-1'), recorded(rb))).toMatchObject({ status: 'applied', rolledBackBy: 'rb-1' });
    });

    it('voids a BET whose every call failed before reaching the wallet (no connection made) when its ROLLBACK is recorded', () => {
      const rb = rollback('rb-1', 'bet-1');
      const voids: RoundEvent[] = [recorded(rb, NOW_ISO), { type: 'TransactionVoided', data: { transactionId: 'bet-1', rollbackTransactionId: 'rb-1', voidedAt: NOW_ISO } }];
      spec.given(recorded(bet('bet-1')), unsent('bet-1')).when(record(rb)).then(voids);
      spec.given(recorded(bet('bet-1')), unsent('bet-1'), unsent('bet-1', 2)).when(record(rb)).then(voids);
      // A resubmission's call announced, its outcome not recorded (its process died, or the record failed): it may have reached the wallet.
      const resent: RoundEvent = { type: 'TransactionResent', data: { transactionId: 'bet-1', attempt: 2, resentAt: NOW_ISO } };
      spec.given(recorded(bet('bet-1')), unsent('bet-1'), resent).when(record(rb)).then([recorded(rb, NOW_ISO)]);
      // Its outcome recorded as not sent either: voided.
      spec.given(recorded(bet('bet-1')), unsent('bet-1'), resent, unsent('bet-1', 2)).when(record(rb)).then(voids);
      // One call that may have reached it, before or after the unsent one: not voided.
      spec.given(recorded(bet('bet-1')), failed('bet-1'), unsent('bet-1', 2)).when(record(rb)).then([recorded(rb, NOW_ISO)]);
      spec.given(recorded(bet('bet-1')), unsent('bet-1'), timedOut('bet-1', 2)).when(record(rb)).then([recorded(rb, NOW_ISO)]);
      expect(txAfter('bet-1', recorded(bet('bet-1')), unsent('bet-1'), ...voids)).toMatchObject({ status: 'voided', attempts: 1, rolledBackBy: 'rb-1' });
      // The wallet's outcome of that attempt says whether it reached the wallet.
      spec
        .given(recorded(bet('bet-1')))
        .when(outcome('bet-1', { kind: 'failed', detail: 'wallet unreachable: connect ECONNREFUSED 127.0.0.1:1', notSent: true }))
        .then([{ type: 'TransactionAttemptFailed', data: { transactionId: 'bet-1', outcome: 'failed', detail: 'wallet unreachable: connect ECONNREFUSED 127.0.0.1:1', notSent: true, attempt: 1, failedAt: NOW_ISO } }]);
    });

    it('voids a rolled-back BET once the resubmission\'s call announced when its ROLLBACK came turns out not to have reached the wallet either', () => {
      const rb = rollback('rb-1', 'bet-1');
      const resent: RoundEvent = { type: 'TransactionResent', data: { transactionId: 'bet-1', attempt: 2, resentAt: NOW_ISO } };
      // The ROLLBACK came while the resubmission's call was under way: not voided then (it might reach the wallet).
      const rolledBack = [recorded(bet('bet-1')), unconnected('bet-1'), resent, recorded(rb)];
      expect(txAfter('bet-1', ...rolledBack)).toMatchObject({ status: 'timed_out', rolledBackBy: 'rb-1' });
      // That call did not reach it either: voided with its outcome, final.
      spec
        .given(...rolledBack)
        .when(outcome('bet-1', { kind: 'timed_out', notSent: true }, 2))
        .then([
          { type: 'TransactionAttemptFailed', data: { transactionId: 'bet-1', outcome: 'timed_out', detail: 'no connection to the wallet within the wallet timeout', notSent: true, attempt: 2, failedAt: NOW_ISO } },
          { type: 'TransactionVoided', data: { transactionId: 'bet-1', rollbackTransactionId: 'rb-1', voidedAt: NOW_ISO } },
        ]);
      // It may have reached it: the BET stays as it is, and its ROLLBACK refunds whatever the wallet took.
      spec
        .given(...rolledBack)
        .when(outcome('bet-1', { kind: 'timed_out' }, 2))
        .then([{ type: 'TransactionAttemptFailed', data: { transactionId: 'bet-1', outcome: 'timed_out', detail: 'no reply within the wallet timeout', attempt: 2, failedAt: NOW_ISO } }]);
      // A BET not rolled back is not voided by a call that did not reach the wallet.
      spec
        .given(recorded(bet('bet-1')), unconnected('bet-1'), resent)
        .when(outcome('bet-1', { kind: 'timed_out', notSent: true }, 2))
        .then([{ type: 'TransactionAttemptFailed', data: { transactionId: 'bet-1', outcome: 'timed_out', detail: 'no connection to the wallet within the wallet timeout', notSent: true, attempt: 2, failedAt: NOW_ISO } }]);
    });

    it('voids a BET whose call timed out before a connection was made (a wallet host that drops packets) when its ROLLBACK is recorded', () => {
      const rb = rollback('rb-1', 'bet-1');
      const voids: RoundEvent[] = [recorded(rb, NOW_ISO), { type: 'TransactionVoided', data: { transactionId: 'bet-1', rollbackTransactionId: 'rb-1', voidedAt: NOW_ISO } }];
      expect(txAfter('bet-1', recorded(bet('bet-1')), unconnected('bet-1'))).toMatchObject({ status: 'timed_out', reachedWallet: false });
      spec.given(recorded(bet('bet-1')), unconnected('bet-1')).when(record(rb)).then(voids);
      spec.given(recorded(bet('bet-1')), unsent('bet-1'), unconnected('bet-1', 2)).when(record(rb)).then(voids);
      // A timeout on a connection made may have been applied: not voided.
      spec.given(recorded(bet('bet-1')), unconnected('bet-1'), timedOut('bet-1', 2)).when(record(rb)).then([recorded(rb, NOW_ISO)]);
      // The outcome of such a call records that it was not sent; its provider is still told it timed out (API document 3.3).
      spec
        .given(recorded(bet('bet-1')))
        .when(outcome('bet-1', { kind: 'timed_out', notSent: true }))
        .then([{ type: 'TransactionAttemptFailed', data: { transactionId: 'bet-1', outcome: 'timed_out', detail: 'no connection to the wallet within the wallet timeout', notSent: true, attempt: 1, failedAt: NOW_ISO } }]);
    });
  });

  describe('the round\'s state after its events', () => {
    it('is new with nothing recorded', () => {
      expect(spec.given().state).toEqual({ status: 'new', txs: new Map() });
      // A force-close of an empty round changes nothing.
      expect(spec.given(forceClosed()).state.status).toBe('new');
    });

    it('is open after a BET or WIN without roundComplete, and takes its player, currency and game from its first transaction', () => {
      const state = spec.given(recorded(bet('bet-1')), recorded(win('win-1', { gameId: 'game-2' }), ago(60))).state;
      expect(state).toMatchObject({ status: 'open', playerRef: 'player-1', currency: 'EUR', gameId: 'game-1', lastActivityAt: ago(60) });
      expect(spec.given(recorded(win('win-1', { playerRef: 'player-9', currency: 'SEK', gameId: 'game-9' }))).state).toMatchObject({
        status: 'open',
        playerRef: 'player-9',
        currency: 'SEK',
        gameId: 'game-9',
      });
    });

    it('is completed after a BET or WIN with roundComplete, the first transaction included', () => {
      expect(spec.given(recorded(bet('bet-1')), recorded(win('win-1', { roundComplete: true }))).state.status).toBe('completed');
      expect(spec.given(recorded(bet('bet-1', { roundComplete: true }))).state.status).toBe('completed');
    });

    it('ignores roundComplete on a ROLLBACK or ADJUSTMENT', () => {
      expect(spec.given(recorded(bet('bet-1')), recorded(rollback('rb-1', 'bet-1', { roundComplete: true }))).state.status).toBe('open');
      expect(spec.given(recorded(adjustment('adj-1', { roundComplete: true }), AN_HOUR_AGO, 'admin')).state.status).toBe('open');
    });

    it('stays completed once completed, and is force-closed after RoundForceClosed', () => {
      expect(spec.given(recorded(bet('bet-1', { roundComplete: true })), recorded(rollback('rb-1', 'bet-1'))).state.status).toBe('completed');
      expect(spec.given(recorded(bet('bet-1')), forceClosed('bet-1')).state.status).toBe('force-closed');
      expect(spec.given(recorded(bet('bet-1')), forceClosed('bet-1'), recorded(rollback('rb-1', 'bet-1'))).state.status).toBe('force-closed');
    });

    it('tracks each transaction\'s status, attempts, reply and last error from its outcomes', () => {
      expect(txAfter('win-1', recorded(win('win-1')))).toMatchObject({ status: 'recorded', attempts: 0, walletBody: JSON.stringify(win('win-1')) });
      expect(txAfter('win-1', recorded(win('win-1')), failed('win-1', 1), timedOut('win-1', 2))).toMatchObject({
        status: 'timed_out',
        attempts: 2,
        lastError: 'no reply within the wallet timeout',
      });
      // Settled after a failure, it keeps that failure's error: with its attempts, the retries it took (docs/auditors.md).
      expect(txAfter('win-1', recorded(win('win-1')), failed('win-1', 1), settled('win-1', 'applied', 2))).toMatchObject({ status: 'applied', attempts: 2, reply: OK, lastError: 'wallet answered 503' });
      expect(txAfter('win-1', recorded(win('win-1')), failed('win-1', 4), deadLettered('win-1'))).toMatchObject({ status: 'dead', attempts: 4 });
    });
  });
});

describe('rounds decider: recording a wallet attempt\'s outcome (RecordOutcome, API document 3.3)', () => {
  it('settles as applied on a 200 OK reply, with the reply and the attempt', () => {
    spec
      .given(recorded(bet('bet-1')))
      .when(outcome('bet-1', { kind: 'reply', reply: OK }))
      .then([{ type: 'TransactionSettled', data: { transactionId: 'bet-1', outcome: 'applied', reply: OK, attempt: 1, settledAt: NOW_ISO } }]);
    spec.given(recorded(win('win-1')), failed('win-1', 1)).when(outcome('win-1', { kind: 'reply', reply: OK }, 2)).thenMatches([{ data: { transactionId: 'win-1', outcome: 'applied', attempt: 2 } }]);
  });

  it('settles a DECLINED BET as declined (a business decline)', () => {
    spec
      .given(recorded(bet('bet-1')))
      .when(outcome('bet-1', { kind: 'reply', reply: DECLINED }))
      .then([{ type: 'TransactionSettled', data: { transactionId: 'bet-1', outcome: 'declined', reply: DECLINED, attempt: 1, settledAt: NOW_ISO } }]);
  });

  it('settles a DECLINED WIN, ROLLBACK or ADJUSTMENT as invalid', () => {
    const round = [recorded(bet('bet-1')), settled('bet-1'), recorded(win('win-1')), recorded(rollback('rb-1', 'bet-1'))];
    spec.given(...round).when(outcome('win-1', { kind: 'reply', reply: DECLINED })).thenMatches([{ type: 'TransactionSettled', data: { transactionId: 'win-1', outcome: 'invalid' } }]);
    spec.given(...round).when(outcome('rb-1', { kind: 'reply', reply: DECLINED })).thenMatches([{ type: 'TransactionSettled', data: { transactionId: 'rb-1', outcome: 'invalid' } }]);
    spec
      .given(recorded(adjustment('adj-1'), AN_HOUR_AGO, 'admin'))
      .when(outcome('adj-1', { kind: 'reply', reply: DECLINED }))
      .thenMatches([{ type: 'TransactionSettled', data: { transactionId: 'adj-1', outcome: 'invalid' } }]);
  });

  it('records a non-200 or unusable reply as a failed attempt, with its HTTP status when there was one', () => {
    spec
      .given(recorded(win('win-1')))
      .when(outcome('win-1', { kind: 'failed', detail: 'wallet answered 500', httpStatus: 500 }, 3))
      .then([{ type: 'TransactionAttemptFailed', data: { transactionId: 'win-1', outcome: 'failed', detail: 'wallet answered 500', httpStatus: 500, attempt: 3, failedAt: NOW_ISO } }]);
    const unreachable = spec.given(recorded(win('win-1'))).when(outcome('win-1', { kind: 'failed', detail: 'connection refused' }));
    unreachable.then([{ type: 'TransactionAttemptFailed', data: { transactionId: 'win-1', outcome: 'failed', detail: 'connection refused', attempt: 1, failedAt: NOW_ISO } }]);
    expect(unreachable.decision).toStrictEqual([
      { type: 'TransactionAttemptFailed', data: { transactionId: 'win-1', outcome: 'failed', detail: 'connection refused', attempt: 1, failedAt: NOW_ISO } },
    ]);
  });

  it('records no reply within the timeout as a timed-out attempt', () => {
    spec
      .given(recorded(bet('bet-1')))
      .when(outcome('bet-1', { kind: 'timed_out' }))
      .then([{ type: 'TransactionAttemptFailed', data: { transactionId: 'bet-1', outcome: 'timed_out', detail: 'no reply within the wallet timeout', attempt: 1, failedAt: NOW_ISO } }]);
  });

  it('records a failed ask for a BET\'s lost reply as such: the BET stays recorded, its failure known', () => {
    const wentOn = [recorded(bet('bet-1')), recorded(win('win-1', { roundComplete: true }))];
    const ask = spec.given(...wentOn).when(outcome('bet-1', { kind: 'timed_out' }, 1, 'worker'));
    ask.then([
      { type: 'TransactionAttemptFailed', data: { transactionId: 'bet-1', outcome: 'timed_out', detail: 'no reply within the wallet timeout', attempt: 1, failedAt: NOW_ISO, replyLost: true } },
    ]);
    expect(txAfter('bet-1', ...wentOn, ...(ask.decision as RoundEvent[]))).toMatchObject({ status: 'recorded', attempts: 1 });
    spec
      .given(...wentOn, askFailed('bet-1'))
      .when(outcome('bet-1', { kind: 'failed', detail: 'wallet answered 500', httpStatus: 500 }, 2, 'worker'))
      .thenMatches([{ type: 'TransactionAttemptFailed', data: { transactionId: 'bet-1', outcome: 'failed', attempt: 2, replyLost: true } }]);
    // A resubmission's failure, even after a failed ask, is the BET's own: its provider is answered with it.
    const resubmitted = spec.given(...wentOn, askFailed('bet-1')).when(outcome('bet-1', { kind: 'failed', detail: 'wallet answered 500', httpStatus: 500 }, 2));
    expect(resubmitted.decision).toStrictEqual([
      { type: 'TransactionAttemptFailed', data: { transactionId: 'bet-1', outcome: 'failed', detail: 'wallet answered 500', httpStatus: 500, attempt: 2, failedAt: NOW_ISO } },
    ]);
    const after = [...wentOn, askFailed('bet-1'), ...(resubmitted.decision as RoundEvent[])];
    expect(txAfter('bet-1', ...after).status).toBe('failed');
    expect(workerAttempts(spec.given(...after).state, 'bet-1')).toBe(false);
    expect(mayAttempt(spec.given(...after).state, 'bet-1')).toBe(false);
    // Its reply, once it comes, settles it.
    spec.given(...wentOn, askFailed('bet-1')).when(outcome('bet-1', { kind: 'reply', reply: OK }, 2, 'worker')).thenMatches([{ type: 'TransactionSettled', data: { outcome: 'applied', attempt: 2 } }]);
  });

  it('lets a resubmission try a failed BET again only while its session stands (contract 8.4: kicked or expired, it is answered from the record)', () => {
    const failed = [recorded(bet('bet-1'))];
    const own = spec.given(...failed).when(outcome('bet-1', { kind: 'failed', detail: 'wallet answered 500', httpStatus: 500 }));
    const state = spec.given(...failed, ...(own.decision as RoundEvent[])).state;
    expect(mayAttempt(state, 'bet-1')).toBe(true);
    expect(mayAttempt(state, 'bet-1', 'active')).toBe(true);
    expect(mayAttempt(state, 'bet-1', 'revoked')).toBe(false);
    expect(mayAttempt(state, 'bet-1', 'expired')).toBe(false);
    // Not yet attempted (its process died before the call): its first attempt, or an ask, still goes.
    expect(mayAttempt(spec.given(...failed).state, 'bet-1', 'revoked')).toBe(true);
    // A credit is retried whatever became of the session that sent it.
    const credit = [recorded(win('win-1'))];
    const creditFailed = spec.given(...credit).when(outcome('win-1', { kind: 'timed_out' }, 1, 'worker'));
    expect(mayAttempt(spec.given(...credit, ...(creditFailed.decision as RoundEvent[])).state, 'win-1', 'revoked')).toBe(true);
  });

  it('records a BET\'s own failed attempt as final for the worker, and a credit\'s failure as a failure, whoever made it', () => {
    // The submission's own attempt, even in a round its provider went on with before the answer.
    const raced = [recorded(bet('bet-1')), recorded(bet('bet-2'))];
    const own = spec.given(...raced).when(outcome('bet-1', { kind: 'timed_out' }));
    expect(own.decision).toStrictEqual([
      { type: 'TransactionAttemptFailed', data: { transactionId: 'bet-1', outcome: 'timed_out', detail: 'no reply within the wallet timeout', attempt: 1, failedAt: NOW_ISO } },
    ]);
    expect(txAfter('bet-1', ...raced, ...(own.decision as RoundEvent[])).status).toBe('timed_out');
    const credit = spec.given(recorded(win('win-1'))).when(outcome('win-1', { kind: 'timed_out' }, 1, 'worker'));
    expect(credit.decision).toStrictEqual([
      { type: 'TransactionAttemptFailed', data: { transactionId: 'win-1', outcome: 'timed_out', detail: 'no reply within the wallet timeout', attempt: 1, failedAt: NOW_ISO } },
    ]);
  });

  it('records nothing for a transaction already settled for good', () => {
    const finals: RoundEvent[][] = [
      [recorded(win('win-1')), settled('win-1', 'applied')],
      [recorded(win('win-1')), settled('win-1', 'invalid')],
      [recorded(win('win-1')), failed('win-1', 9), deadLettered('win-1')],
    ];
    for (const history of finals) {
      spec.given(...history).when(outcome('win-1', { kind: 'reply', reply: OK }, 2)).thenNothing();
      spec.given(...history).when(outcome('win-1', { kind: 'failed', detail: 'late', httpStatus: 502 }, 2)).thenNothing();
      spec.given(...history).when(outcome('win-1', { kind: 'timed_out' }, 2)).thenNothing();
    }
    spec.given(recorded(bet('bet-1')), settled('bet-1', 'declined')).when(outcome('bet-1', { kind: 'reply', reply: OK }, 2)).thenNothing();
  });

  it('records nothing for a transaction the round does not know', () => {
    spec.given(recorded(bet('bet-1'))).when(outcome('bet-2', { kind: 'reply', reply: OK })).thenNothing();
    spec.given().when(outcome('bet-1', { kind: 'timed_out' })).thenNothing();
  });

  it('records the wallet\'s reply to a voided BET\'s attempt in flight, and its failure as its attempt, the BET staying voided', () => {
    const voidedBet = [recorded(bet('bet-1')), recorded(rollback('rb-1', 'bet-1')), voided('bet-1', 'rb-1')];
    spec.given(...voidedBet).when(outcome('bet-1', { kind: 'reply', reply: OK })).thenMatches([{ type: 'TransactionSettled', data: { transactionId: 'bet-1', outcome: 'applied' } }]);
    spec.given(...voidedBet).when(outcome('bet-1', { kind: 'reply', reply: DECLINED })).thenMatches([{ type: 'TransactionSettled', data: { transactionId: 'bet-1', outcome: 'declined' } }]);
    const failedCall = spec.given(...voidedBet).when(outcome('bet-1', { kind: 'failed', detail: 'wallet answered 503', httpStatus: 503 }));
    failedCall.thenMatches([{ type: 'TransactionAttemptFailed', data: { transactionId: 'bet-1', outcome: 'failed', attempt: 1, voided: true } }]);
    expect(txAfter('bet-1', ...voidedBet, ...(failedCall.decision as RoundEvent[]))).toMatchObject({ status: 'voided', attempts: 1 });
    const timedOut = spec.given(...voidedBet).when(outcome('bet-1', { kind: 'timed_out' }));
    timedOut.thenMatches([{ type: 'TransactionAttemptFailed', data: { transactionId: 'bet-1', outcome: 'timed_out', attempt: 1, voided: true } }]);
    expect(txAfter('bet-1', ...voidedBet, ...(timedOut.decision as RoundEvent[]))).toMatchObject({ status: 'voided', attempts: 1 });
    // Once its call is recorded, it is final like any other: nothing more for that call, or any other.
    spec.given(...voidedBet, settled('bet-1')).when(outcome('bet-1', { kind: 'reply', reply: OK }, 2)).thenNothing();
    const afterFailure = [...voidedBet, ...(failedCall.decision as RoundEvent[])];
    spec.given(...afterFailure).when(outcome('bet-1', { kind: 'reply', reply: OK })).thenNothing();
    spec.given(...afterFailure).when(outcome('bet-1', { kind: 'timed_out' })).thenNothing();
  });
});

describe('rounds decider: a BET sent again for its provider (Resend)', () => {
  const resend = (id: string): RoundCommand => ({ type: 'Resend', transactionId: id, now: NOW });

  it('announces the next call of a BET whose call failed or timed out (TransactionResent), changing nothing else but the call announced', () => {
    for (const last of [failed('bet-1'), timedOut('bet-1')]) {
      const given = spec.given(recorded(bet('bet-1')), last);
      given.when(resend('bet-1')).then([{ type: 'TransactionResent', data: { transactionId: 'bet-1', attempt: 2, resentAt: NOW_ISO } }]);
      const after = txAfter('bet-1', recorded(bet('bet-1')), last, { type: 'TransactionResent', data: { transactionId: 'bet-1', attempt: 2, resentAt: NOW_ISO } });
      expect(after).toEqual({ ...txAfter('bet-1', recorded(bet('bet-1')), last), announced: 2 });
    }
  });

  it('answers the reply to a resubmission\'s call only once it is recorded: nothing would ask for it again (replyLearnableAgain)', () => {
    // A BET's first call, and a credit's every call, may be answered at the reply and recorded behind it.
    expect(replyLearnableAgain(txAfter('bet-1', recorded(bet('bet-1'))))).toBe(true);
    expect(replyLearnableAgain(txAfter('bet-1', recorded(bet('bet-1')), recorded(win('win-1')), askFailed('bet-1')))).toBe(true);
    expect(replyLearnableAgain(txAfter('win-1', recorded(win('win-1'))))).toBe(true);
    expect(replyLearnableAgain(txAfter('win-1', recorded(win('win-1')), failed('win-1')))).toBe(true);
    expect(replyLearnableAgain(txAfter('rb-1', recorded(bet('bet-1')), settled('bet-1'), recorded(rollback('rb-1', 'bet-1')), timedOut('rb-1')))).toBe(true);
    // A BET's call after a failed or timed-out one: the worker never asks for it.
    for (const last of [failed('bet-1'), timedOut('bet-1')]) {
      const round = [recorded(bet('bet-1')), last, { type: 'TransactionResent', data: { transactionId: 'bet-1', attempt: 2, resentAt: NOW_ISO } } as RoundEvent];
      expect(replyLearnableAgain(txAfter('bet-1', ...round))).toBe(false);
      expect(workerAttempts(spec.given(...round, recorded(win('win-1', { roundComplete: true }))).state, 'bet-1')).toBe(false);
    }
  });

  it('announces nothing for a BET never attempted, answered, rolled back or in a closed round, nor for a credit', () => {
    spec.given(recorded(bet('bet-1'))).when(resend('bet-1')).thenNothing();
    spec.given(recorded(bet('bet-1')), settled('bet-1')).when(resend('bet-1')).thenNothing();
    spec.given(recorded(bet('bet-1')), failed('bet-1'), recorded(rollback('rb-1', 'bet-1'))).when(resend('bet-1')).thenNothing();
    spec.given(recorded(bet('bet-1')), failed('bet-1'), recorded(win('win-1', { roundComplete: true }))).when(resend('bet-1')).thenNothing();
    spec.given(recorded(win('win-1')), failed('win-1')).when(resend('win-1')).thenNothing();
    spec.given().when(resend('bet-1')).thenNothing();
  });
});

describe('rounds decider: dead-lettering a transaction whose retries ran out (DeadLetter)', () => {
  it('records nothing while the transaction is younger than the retry window', () => {
    spec.given(recorded(win('win-1'), ago(DAY - 1)), failed('win-1', 5)).when(deadLetter('win-1')).thenNothing();
  });

  it('dead-letters an unsettled transaction as old as the retry window, with its attempts and last error', () => {
    spec
      .given(recorded(win('win-1'), ago(DAY)), failed('win-1', 1), failed('win-1', 7, 'wallet answered 500'))
      .when(deadLetter('win-1'))
      .then([{ type: 'TransactionDeadLettered', data: { transactionId: 'win-1', attempts: 7, lastError: 'wallet answered 500', deadLetteredAt: NOW_ISO } }]);
    spec
      .given(recorded(win('win-1'), ago(2 * DAY)), timedOut('win-1', 4))
      .when(deadLetter('win-1'))
      .thenMatches([{ data: { transactionId: 'win-1', attempts: 4, lastError: 'no reply within the wallet timeout' } }]);
  });

  it('sends a credit never sent (its process died, then the workers were down past the window) once before its retries stop', () => {
    spec.given(recorded(win('win-1'), ago(2 * DAY))).when(deadLetter('win-1')).thenNothing();
    spec
      .given(recorded(win('win-1'), ago(2 * DAY)), failed('win-1', 1, 'wallet answered 503'))
      .when(deadLetter('win-1'))
      .then([{ type: 'TransactionDeadLettered', data: { transactionId: 'win-1', attempts: 1, lastError: 'wallet answered 503', deadLetteredAt: NOW_ISO } }]);
  });

  it('dead-letters a BET whose lost reply is asked for only once it was asked at least once', () => {
    const wentOn = [recorded(bet('bet-1'), ago(2 * DAY)), recorded(win('win-1', { roundComplete: true }))];
    spec.given(...wentOn).when(deadLetter('bet-1')).thenNothing();
    spec
      .given(...wentOn, askFailed('bet-1', 3))
      .when(deadLetter('bet-1'))
      .then([{ type: 'TransactionDeadLettered', data: { transactionId: 'bet-1', attempts: 3, lastError: 'no reply within the wallet timeout', deadLetteredAt: NOW_ISO } }]);
  });

  it('honours the retry window it is given', () => {
    spec.given(recorded(win('win-1'), ago(600)), failed('win-1')).when(deadLetter('win-1', 600)).thenMatches([{ type: 'TransactionDeadLettered' }]);
    spec.given(recorded(win('win-1'), ago(599)), failed('win-1')).when(deadLetter('win-1', 600)).thenNothing();
  });

  it('records nothing for a transaction already final, or unknown', () => {
    spec.given(recorded(win('win-1'), ago(2 * DAY)), settled('win-1')).when(deadLetter('win-1')).thenNothing();
    spec.given(recorded(win('win-1'), ago(2 * DAY)), failed('win-1'), deadLettered('win-1')).when(deadLetter('win-1')).thenNothing();
    spec.given(recorded(bet('bet-1'), ago(2 * DAY)), recorded(rollback('rb-1', 'bet-1'), ago(2 * DAY)), voided('bet-1', 'rb-1')).when(deadLetter('bet-1')).thenNothing();
    spec.given(recorded(win('win-1'), ago(2 * DAY))).when(deadLetter('win-2')).thenNothing();
  });

  it('retriesExhausted: from the moment the transaction is exactly as old as the window', () => {
    const recordedAt = (at: string) => txAfter('win-1', recorded(win('win-1'), at), failed('win-1', 1));
    expect(retriesExhausted(recordedAt(ago(DAY)), NOW, DAY)).toBe(true);
    expect(retriesExhausted(recordedAt(ago(DAY + 3600)), NOW, DAY)).toBe(true);
    expect(retriesExhausted(recordedAt(new Date(NOW.getTime() - DAY * 1000 + 1).toISOString()), NOW, DAY)).toBe(false);
    expect(retriesExhausted(recordedAt(NOW_ISO), NOW, DAY)).toBe(false);
  });
});

describe('rounds decider: force-closing a stale round (CloseStaleRound, API document 4.2 rule 4)', () => {
  const STALE_AFTER = 1800;

  it('waits while a wallet call of one of its bets is under way, however long the round has been idle', () => {
    const idle = [recorded(bet('bet-1'), ago(7)), recorded(bet('bet-2'), ago(7))];
    const close = (callsUnderWay: string[]): RoundCommand => ({ type: 'CloseStaleRound', staleAfterSeconds: 5, callsUnderWay, now: NOW });
    spec.given(...idle).when(close(['bet-2'])).thenNothing();
    spec.given(...idle).when(close([])).thenMatches([{ type: 'RoundForceClosed', data: { rolledBack: ['bet-1', 'bet-2'] } }]);
    // A call of a transaction no longer outstanding holds nothing up.
    spec.given(...idle, settled('bet-2'), recorded(rollback('rb-2', 'bet-2'), ago(6))).when(close(['bet-2'])).thenMatches([{ type: 'RoundForceClosed', data: { rolledBack: ['bet-1'] } }]);
  });

  it('closes an open round idle for the stale period, listing exactly its outstanding bets', () => {
    spec
      .given(
        recorded(bet('bet-applied'), ago(4000)),
        settled('bet-applied'),
        recorded(bet('bet-declined'), ago(3900)),
        settled('bet-declined', 'declined'),
        recorded(bet('bet-rolled-back'), ago(3800)),
        settled('bet-rolled-back'),
        recorded(rollback('rb-1', 'bet-rolled-back'), ago(3700)),
        recorded(bet('bet-timed-out'), ago(3600)),
        timedOut('bet-timed-out'),
        recorded(win('win-1'), ago(STALE_AFTER)),
      )
      .when(closeStale(STALE_AFTER))
      .then([{ type: 'RoundForceClosed', data: { closedAt: NOW_ISO, rolledBack: ['bet-applied', 'bet-timed-out'] } }]);
  });

  it('counts idleness from the last transaction recorded, not from wallet outcomes', () => {
    spec.given(recorded(bet('bet-1'), ago(STALE_AFTER - 1))).when(closeStale(STALE_AFTER)).thenNothing();
    spec.given(recorded(bet('bet-1'), ago(3 * STALE_AFTER)), recorded(win('win-1'), ago(60))).when(closeStale(STALE_AFTER)).thenNothing();
    // A wallet outcome a second ago is not activity.
    const justFailed: RoundEvent = { type: 'TransactionAttemptFailed', data: { transactionId: 'bet-1', outcome: 'failed', detail: 'wallet answered 503', attempt: 1, failedAt: ago(1) } };
    spec.given(recorded(bet('bet-1'), ago(STALE_AFTER)), justFailed).when(closeStale(STALE_AFTER)).thenMatches([{ type: 'RoundForceClosed', data: { rolledBack: ['bet-1'] } }]);
  });

  it('records nothing for an idle round without an outstanding bet (all declined or rolled back)', () => {
    spec.given(recorded(bet('bet-1'), ago(DAY)), settled('bet-1', 'declined')).when(closeStale(STALE_AFTER)).thenNothing();
    spec.given(recorded(bet('bet-1'), ago(DAY)), recorded(rollback('rb-1', 'bet-1'), ago(DAY)), voided('bet-1', 'rb-1')).when(closeStale(STALE_AFTER)).thenNothing();
    spec.given(recorded(win('win-1'), ago(DAY))).when(closeStale(STALE_AFTER)).thenNothing();
  });

  it('records nothing for a completed, already force-closed or empty round', () => {
    spec.given(recorded(bet('bet-1'), ago(DAY)), recorded(win('win-1', { roundComplete: true }), ago(DAY))).when(closeStale(STALE_AFTER)).thenNothing();
    spec.given(recorded(bet('bet-1', { roundComplete: true }), ago(DAY)), timedOut('bet-1')).when(closeStale(STALE_AFTER)).thenNothing();
    spec.given(recorded(bet('bet-1'), ago(DAY)), forceClosed('bet-1')).when(closeStale(STALE_AFTER)).thenNothing();
    spec.given().when(closeStale(STALE_AFTER)).thenNothing();
  });

  it('isStale: open, idle for at least the stale period, with an outstanding bet', () => {
    const stale = (...events: RoundEvent[]) => isStale(spec.given(...events).state, NOW, STALE_AFTER);
    expect(stale(recorded(bet('bet-1'), ago(STALE_AFTER)))).toBe(true);
    expect(stale(recorded(bet('bet-1'), ago(STALE_AFTER - 1)))).toBe(false);
    expect(stale(recorded(bet('bet-1'), ago(DAY)), settled('bet-1', 'declined'))).toBe(false);
    expect(stale(recorded(bet('bet-1'), ago(DAY)), recorded(rollback('rb-1', 'bet-1'), ago(DAY)))).toBe(false);
    expect(stale(recorded(bet('bet-1', { roundComplete: true }), ago(DAY)))).toBe(false);
    expect(stale(recorded(bet('bet-1'), ago(DAY)), forceClosed('bet-1'))).toBe(false);
    expect(stale()).toBe(false);
  });
});

/** The stale ROLLBACKs of a force-closed round holding these BETs (unanswered), as requests. */
function staleRollbacksOf(...bets: TransactionRequest[]): TransactionRequest[] {
  const state = spec.given(...bets.map((b) => recorded(b)), forceClosed(...bets.map((b) => b.transactionId))).state;
  return staleRollbacks(state).map((r) => r.request);
}

describe('rounds decider: the reconciler\'s ROLLBACKs of a force-closed round (staleRollbacks)', () => {
  it('rolls back each outstanding bet with a deterministic id, the reconciler\'s session and the BET\'s amount and currency', () => {
    const state = spec.given(
      recorded(bet('bet-1', { amount: 500 })),
      settled('bet-1'),
      recorded(bet('bet-2', { amount: 125 })),
      timedOut('bet-2'),
      recorded(bet('bet-3')),
      settled('bet-3', 'declined'),
      recorded(bet('bet-4')),
      settled('bet-4'),
      recorded(rollback('rb-4', 'bet-4')),
      forceClosed('bet-1', 'bet-2'),
    ).state;
    const rollbacks = staleRollbacks(state);
    expect(rollbacks.map((r) => r.bet.request.transactionId)).toEqual(['bet-1', 'bet-2']);
    expect(rollbacks.map((r) => r.request)).toEqual([
      {
        transactionId: 'stale-rollback:bet-1',
        sessionToken: 'system:stale-round-reconciler',
        type: 'ROLLBACK',
        roundId: 'round-1',
        roundComplete: false,
        originalTransactionId: 'bet-1',
        playerRef: 'player-1',
        amount: 500,
        currency: 'EUR',
        gameId: 'game-1',
      },
      {
        transactionId: 'stale-rollback:bet-2',
        sessionToken: RECONCILER_SESSION,
        type: 'ROLLBACK',
        roundId: 'round-1',
        roundComplete: false,
        originalTransactionId: 'bet-2',
        playerRef: 'player-1',
        amount: 125,
        currency: 'EUR',
        gameId: 'game-1',
      },
    ]);
  });

  it('produces none for an open or completed round, and none for a bet already rolled back', () => {
    expect(staleRollbacks(spec.given(recorded(bet('bet-1'), ago(DAY))).state)).toEqual([]);
    expect(staleRollbacks(spec.given(recorded(bet('bet-1', { roundComplete: true }))).state)).toEqual([]);
    const refund = staleRollbacksOf(bet('bet-1'))[0]!;
    expect(staleRollbacks(spec.given(recorded(bet('bet-1')), forceClosed('bet-1'), recorded(refund, AN_HOUR_AGO, 'reconciler')).state)).toEqual([]);
  });

  it('is recorded like any ROLLBACK: an unanswered BET is voided by it, and a repeat records nothing', () => {
    const refund = staleRollbacksOf(bet('bet-1'))[0]!;
    const closed = [recorded(bet('bet-1')), forceClosed('bet-1')];
    spec
      .given(...closed)
      .when(record(refund, 'active', 'reconciler'))
      .then([recorded(refund, NOW_ISO, 'reconciler'), { type: 'TransactionVoided', data: { transactionId: 'bet-1', rollbackTransactionId: 'stale-rollback:bet-1', voidedAt: NOW_ISO } }]);
    spec.given(...closed, recorded(refund, AN_HOUR_AGO, 'reconciler'), voided('bet-1', refund.transactionId)).when(record(refund, 'active', 'reconciler')).thenNothing();
  });
});

describe('rounds decider: whether a transaction may be sent to the wallet (mayAttempt)', () => {
  const may = (id: string, ...events: RoundEvent[]) => mayAttempt(spec.given(...events).state, id);

  it('sends an unsettled credit (again) until the wallet answers', () => {
    expect(may('win-1', recorded(bet('bet-1')), recorded(win('win-1')))).toBe(true);
    expect(may('win-1', recorded(bet('bet-1')), recorded(win('win-1')), failed('win-1', 3))).toBe(true);
    expect(may('win-1', recorded(bet('bet-1')), recorded(win('win-1', { roundComplete: true })), timedOut('win-1', 2))).toBe(true);
    expect(may('adj-1', recorded(adjustment('adj-1'), AN_HOUR_AGO, 'admin'), failed('adj-1'))).toBe(true);
    expect(may('rb-1', recorded(bet('bet-1')), settled('bet-1'), forceClosed('bet-1'), recorded(rollback('rb-1', 'bet-1')), failed('rb-1'))).toBe(true);
  });

  it('never sends a transaction settled for good', () => {
    expect(may('win-1', recorded(win('win-1')), settled('win-1'))).toBe(false);
    expect(may('win-1', recorded(win('win-1')), settled('win-1', 'invalid'))).toBe(false);
    expect(may('win-1', recorded(win('win-1')), failed('win-1'), deadLettered('win-1'))).toBe(false);
    expect(may('bet-1', recorded(bet('bet-1')), settled('bet-1', 'declined'))).toBe(false);
    expect(may('bet-1', recorded(bet('bet-1')), recorded(rollback('rb-1', 'bet-1')), voided('bet-1', 'rb-1'))).toBe(false);
  });

  it('never sends a rolled-back BET, not even one never attempted', () => {
    // A history where the BET was not voided (its process died between the two): still never sent.
    expect(may('bet-1', recorded(bet('bet-1')), recorded(rollback('rb-1', 'bet-1')))).toBe(false);
    expect(may('bet-1', recorded(bet('bet-1')), timedOut('bet-1'), recorded(rollback('rb-1', 'bet-1')))).toBe(false);
  });

  it('sends a BET of a closed round only for its first attempt', () => {
    // Its first attempt goes: a BET with roundComplete completes its own round.
    expect(may('bet-1', recorded(bet('bet-1', { roundComplete: true })))).toBe(true);
    expect(may('bet-1', recorded(bet('bet-1', { roundComplete: true })), timedOut('bet-1'))).toBe(false);
    expect(may('bet-1', recorded(bet('bet-1')), failed('bet-1'), recorded(win('win-1', { roundComplete: true })))).toBe(false);
    expect(may('bet-1', recorded(bet('bet-1')), timedOut('bet-1'), forceClosed('bet-1'))).toBe(false);
    expect(may('bet-1', recorded(bet('bet-1')), forceClosed('bet-1'))).toBe(true);
    // An ask for its lost reply goes until the wallet replies, however closed the round.
    expect(may('bet-1', recorded(bet('bet-1')), recorded(win('win-1', { roundComplete: true })), askFailed('bet-1'), askFailed('bet-1', 2))).toBe(true);
  });

  it('sends a BET of an open round again when its provider resubmits it', () => {
    expect(may('bet-1', recorded(bet('bet-1')))).toBe(true);
    expect(may('bet-1', recorded(bet('bet-1')), failed('bet-1'))).toBe(true);
  });

  it('never sends a transaction the round does not know', () => {
    expect(may('nope', recorded(bet('bet-1')))).toBe(false);
    expect(may('nope')).toBe(false);
  });
});

describe('rounds decider: what the worker asks the wallet for (workerAttempts)', () => {
  const asks = (id: string, ...events: RoundEvent[]) => workerAttempts(spec.given(...events).state, id);

  it('asks for a credit until it is settled for good', () => {
    expect(asks('win-1', recorded(win('win-1')))).toBe(true);
    expect(asks('win-1', recorded(win('win-1')), failed('win-1', 4))).toBe(true);
    expect(asks('win-1', recorded(win('win-1')), settled('win-1'))).toBe(false);
    expect(asks('win-1', recorded(win('win-1')), failed('win-1'), deadLettered('win-1'))).toBe(false);
  });

  it('asks for a BET with no attempt recorded once its provider went on with the round: its answer was given and the outcome lost', () => {
    expect(asks('bet-1', recorded(bet('bet-1')), recorded(win('win-1', { roundComplete: true })))).toBe(true);
    expect(asks('bet-1', recorded(bet('bet-1')), recorded(bet('bet-2')))).toBe(true);
  });

  it('asks for a lost BET reply again after an ask failed, until the wallet replies or the BET is rolled back', () => {
    const wentOn = [recorded(bet('bet-1')), recorded(win('win-1', { roundComplete: true }))];
    expect(asks('bet-1', ...wentOn, askFailed('bet-1'))).toBe(true);
    expect(asks('bet-1', ...wentOn, askFailed('bet-1'), askFailed('bet-1', 2))).toBe(true);
    expect(asks('bet-1', ...wentOn, askFailed('bet-1'), settled('bet-1', 'applied', 2))).toBe(false);
    expect(asks('bet-1', recorded(bet('bet-1')), recorded(bet('bet-2')), askFailed('bet-1'), recorded(rollback('rb-1', 'bet-1')), voided('bet-1', 'rb-1'))).toBe(false);
  });

  it('never asks for a BET its provider may not have been answered for, nor one attempted, settled or rolled back', () => {
    // Nothing after it: its process may have died before the wallet answered; the provider resubmits or rolls it back.
    expect(asks('bet-1', recorded(bet('bet-1')))).toBe(false);
    expect(asks('bet-1', recorded(bet('bet-1', { roundComplete: true })))).toBe(false);
    // A BET is attempted once: one whose attempt failed or timed out is its provider's to resubmit (contract section 5).
    expect(asks('bet-1', recorded(bet('bet-1')), failed('bet-1'), recorded(win('win-1')))).toBe(false);
    expect(asks('bet-1', recorded(bet('bet-1')), timedOut('bet-1'), recorded(win('win-1')))).toBe(false);
    expect(asks('bet-1', recorded(bet('bet-1')), settled('bet-1', 'declined'), recorded(bet('bet-2')))).toBe(false);
    expect(asks('bet-1', recorded(bet('bet-1')), recorded(rollback('rb-1', 'bet-1')), voided('bet-1', 'rb-1'))).toBe(false);
    // Rolled back in a history where it was not voided (its process died between the two): never.
    expect(asks('bet-1', recorded(bet('bet-1')), recorded(rollback('rb-1', 'bet-1')))).toBe(false);
    expect(asks('nope', recorded(bet('bet-1')), recorded(win('win-1')))).toBe(false);
  });

  it("never takes the reconciler's stale rollback of another bet for its provider going on: the BET would be sent for the first time, then refunded", () => {
    const [refund1] = staleRollbacksOf(bet('bet-1'));
    const closing = [recorded(bet('bet-1')), settled('bet-1'), recorded(bet('bet-2')), forceClosed('bet-1', 'bet-2'), recorded(refund1!, AN_HOUR_AGO, 'reconciler')];
    expect(asks('bet-2', ...closing)).toBe(false);
    // Its provider's own later transaction still counts, whatever the reconciler did after it.
    expect(asks('bet-2', recorded(bet('bet-1')), recorded(bet('bet-2')), recorded(win('win-1')), forceClosed('bet-1', 'bet-2'), recorded(refund1!, AN_HOUR_AGO, 'reconciler'))).toBe(true);
  });
});

describe('rounds decider: shared definitions', () => {
  it('betToAwaitBefore: a ROLLBACK waits for the BET it reverses; nothing else waits', () => {
    const round = [recorded(bet('bet-1')), recorded(win('win-1')), recorded(rollback('rb-1', 'bet-1')), recorded(adjustment('adj-1'), AN_HOUR_AGO, 'admin')];
    expect(betToAwaitBefore(txAfter('rb-1', ...round))).toBe('bet-1');
    expect(betToAwaitBefore(txAfter('bet-1', ...round))).toBeUndefined();
    expect(betToAwaitBefore(txAfter('win-1', ...round))).toBeUndefined();
    expect(betToAwaitBefore(txAfter('adj-1', ...round))).toBeUndefined();
  });

  it('isOutstanding: a BET neither declined nor rolled back, whatever the wallet said otherwise', () => {
    expect(isOutstanding(txAfter('bet-1', recorded(bet('bet-1'))))).toBe(true);
    expect(isOutstanding(txAfter('bet-1', recorded(bet('bet-1')), settled('bet-1')))).toBe(true);
    expect(isOutstanding(txAfter('bet-1', recorded(bet('bet-1')), failed('bet-1')))).toBe(true);
    expect(isOutstanding(txAfter('bet-1', recorded(bet('bet-1')), timedOut('bet-1'), deadLettered('bet-1')))).toBe(true);
    expect(isOutstanding(txAfter('bet-1', recorded(bet('bet-1')), settled('bet-1', 'declined')))).toBe(false);
    expect(isOutstanding(txAfter('bet-1', recorded(bet('bet-1')), settled('bet-1'), recorded(rollback('rb-1', 'bet-1'))))).toBe(false);
    expect(isOutstanding(txAfter('bet-1', recorded(bet('bet-1')), recorded(rollback('rb-1', 'bet-1')), voided('bet-1', 'rb-1')))).toBe(false);
    expect(isOutstanding(txAfter('win-1', recorded(win('win-1'))))).toBe(false);
  });

  it('outstandingBets: those of an open or force-closed round; none once its provider completed it (contract section 8)', () => {
    const ids = (...events: RoundEvent[]) => outstandingBets(spec.given(...events).state).map((t) => t.request.transactionId);
    expect(ids(recorded(bet('bet-1')), settled('bet-1'), recorded(bet('bet-2')), failed('bet-2'))).toEqual(['bet-1', 'bet-2']);
    // Completed by a WIN, or by a BET's own roundComplete: its bets were played out, whatever their status.
    expect(ids(recorded(bet('bet-1')), settled('bet-1'), recorded(bet('bet-2')), failed('bet-2'), recorded(win('win-1', { roundComplete: true })))).toEqual([]);
    expect(ids(recorded(bet('bet-1', { roundComplete: true })))).toEqual([]);
    // A force-closed round's, until each is rolled back.
    expect(ids(recorded(bet('bet-1'), ago(7200)), settled('bet-1'), forceClosed('bet-1'))).toEqual(['bet-1']);
    expect(roundFigures(spec.given(recorded(bet('bet-1')), settled('bet-1'), recorded(win('win-1', { roundComplete: true }))).state).outstandingBets).toBe(0);
  });

  it('UNSETTLED_STATUSES: exactly recorded, failed and timed_out', () => {
    expect(UNSETTLED_STATUSES).toEqual(['recorded', 'failed', 'timed_out']);
  });
});

describe('rounds decider: the status operators reconcile (contract section 9)', () => {
  const of = (id: string, ...events: RoundEvent[]) => {
    const t = txAfter(id, ...events);
    return operatorStatus(t.request.type, t.status);
  };
  it('a BET: pending until the wallet answers; applied or declined by its answer; failed when its one attempt failed or timed out', () => {
    expect(of('bet-1', recorded(bet('bet-1')))).toBe('pending');
    expect(of('bet-1', recorded(bet('bet-1')), settled('bet-1'))).toBe('applied');
    expect(of('bet-1', recorded(bet('bet-1')), settled('bet-1', 'declined'))).toBe('declined');
    expect(of('bet-1', recorded(bet('bet-1')), failed('bet-1'))).toBe('failed');
    expect(of('bet-1', recorded(bet('bet-1')), timedOut('bet-1'))).toBe('failed');
    // A provider's resubmission may try it again: the wallet's answer then stands.
    expect(of('bet-1', recorded(bet('bet-1')), timedOut('bet-1'), settled('bet-1', 'applied', 2))).toBe('applied');
  });
  it('a BET rolled back before it reached the wallet is voided; dead once its retries stopped', () => {
    expect(of('bet-1', recorded(bet('bet-1')), recorded(rollback('rb-1', 'bet-1')), voided('bet-1', 'rb-1'))).toBe('voided');
    expect(of('bet-1', recorded(bet('bet-1')), timedOut('bet-1'), deadLettered('bet-1'))).toBe('dead');
  });
  it('a credit (WIN, ROLLBACK, ADJUSTMENT) is pending while it is retried, dead when retries stopped or the wallet refused it', () => {
    for (const [id, req] of [['win-1', win('win-1')], ['adj-1', adjustment('adj-1')]] as const) {
      expect(of(id, recorded(req))).toBe('pending');
      expect(of(id, recorded(req), failed(id))).toBe('pending');
      expect(of(id, recorded(req), timedOut(id))).toBe('pending');
      expect(of(id, recorded(req), failed(id), settled(id, 'applied', 2))).toBe('applied');
      expect(of(id, recorded(req), failed(id), deadLettered(id))).toBe('dead');
      expect(of(id, recorded(req), settled(id, 'invalid'))).toBe('dead');
    }
    expect(of('rb-1', recorded(bet('bet-1')), settled('bet-1'), recorded(rollback('rb-1', 'bet-1')), failed('rb-1'))).toBe('pending');
  });
  it('completesRound: a BET or WIN that says roundComplete; never a ROLLBACK or an ADJUSTMENT', () => {
    expect(completesRound(bet('b', { roundComplete: true }))).toBe(true);
    expect(completesRound(win('w', { roundComplete: true }))).toBe(true);
    expect(completesRound(win('w'))).toBe(false);
    expect(completesRound(rollback('r', 'b', { roundComplete: true }))).toBe(false);
    expect(completesRound({ ...adjustment('a'), roundComplete: true })).toBe(false);
  });
});

describe('rounds decider: re-drive (an admin sends a dead credit to the wallet again)', () => {
  const redrive = (transactionId: string): RoundCommand => ({ type: 'Redrive', transactionId, by: 'ops@example', reason: 'wallet fixed', now: NOW });
  const deadWin = [recorded(bet('bet-1')), settled('bet-1'), recorded(win('win-1')), failed('win-1'), deadLettered('win-1')];

  it('records who and why for a dead WIN; the WIN is then retried like any credit, for a window of its own', () => {
    spec.given(...deadWin).when(redrive('win-1')).then([{ type: 'TransactionRedriven', data: { transactionId: 'win-1', by: 'ops@example', reason: 'wallet fixed', redrivenAt: NOW_ISO } }]);
    const after = txAfter('win-1', ...deadWin, { type: 'TransactionRedriven', data: { transactionId: 'win-1', by: 'ops@example', reason: 'wallet fixed', redrivenAt: NOW_ISO } });
    expect(after.status).toBe('recorded');
    const round = spec.given(...deadWin, { type: 'TransactionRedriven', data: { transactionId: 'win-1', by: 'ops@example', reason: 'wallet fixed', redrivenAt: NOW_ISO } }).state;
    expect(mayAttempt(round, 'win-1')).toBe(true);
    // Recorded a day ago, re-driven now: not exhausted until a window after the re-drive.
    expect(retriesExhausted({ ...after, recordedAt: ago(2 * DAY) }, NOW, DAY)).toBe(false);
    expect(retriesExhausted({ ...after, recordedAt: ago(2 * DAY) }, new Date(NOW.getTime() + DAY * 1000), DAY)).toBe(true);
  });

  it('re-drives a credit the wallet refused (DECLINED on a WIN: dead too)', () => {
    spec.given(recorded(bet('bet-1')), settled('bet-1'), recorded(win('win-1')), settled('win-1', 'invalid')).when(redrive('win-1')).thenMatches([{ type: 'TransactionRedriven' }]);
  });

  it('refuses anything not dead, a BET, and an unknown id', () => {
    spec.given(recorded(bet('bet-1')), settled('bet-1')).when(redrive('bet-1')).thenRefuses('bet-not-redriven');
    spec.given(recorded(bet('bet-1')), timedOut('bet-1'), deadLettered('bet-1')).when(redrive('bet-1')).thenRefuses('bet-not-redriven');
    spec.given(recorded(bet('bet-1')), settled('bet-1'), recorded(win('win-1')), settled('win-1')).when(redrive('win-1')).thenRefuses({ kind: 'not-dead', status: 'applied' });
    spec.given(recorded(bet('bet-1')), settled('bet-1'), recorded(win('win-1')), failed('win-1')).when(redrive('win-1')).thenRefuses({ kind: 'not-dead', status: 'pending' });
    spec.given(...deadWin).when(redrive('nope')).thenRefuses('transaction-not-found');
  });

  it('offers the console a re-drive exactly where the command would take it (mayRedrive)', () => {
    for (const type of ['BET', 'WIN', 'ROLLBACK', 'ADJUSTMENT'] as const) {
      for (const status of TX_STATUSES) {
        expect([type, status, mayRedrive(type, status)]).toEqual([type, status, type !== 'BET' && (status === 'dead' || status === 'invalid')]);
      }
    }
  });
});

describe('rounds decider: stuck money (the console)', () => {
  it('is what the wallet has not acknowledged, except a BET that was rolled back', () => {
    expect(isStuck('WIN', 'failed', false)).toBe(true);
    expect(isStuck('WIN', 'dead', false)).toBe(true);
    expect(isStuck('ADJUSTMENT', 'invalid', false)).toBe(true);
    expect(isStuck('BET', 'timed_out', false)).toBe(true);
    expect(isStuck('BET', 'timed_out', true)).toBe(false);
    expect(isStuck('BET', 'dead', true)).toBe(false);
    expect(isStuck('WIN', 'applied', false)).toBe(false);
    expect(isStuck('BET', 'declined', false)).toBe(false);
    expect(isStuck('BET', 'voided', true)).toBe(false);
  });
});
