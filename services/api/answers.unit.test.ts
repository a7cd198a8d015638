import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Refused } from '../../shared/decider.ts';
import { TX_STATUSES, type TxState } from '../rounds/decider.ts';
import { transactionAnswer } from '../rounds/answers.ts';
import { answerFor, REFUSALS, type AnyRefusal } from './answers.ts';

/**
 * The refusal table (services/api/answers.ts) against the error reference (docs/errors.md): every
 * kind answers a client-error status, and its `error` text is one the document lists, with the status
 * the document gives it.
 */

const ERRORS_DOC = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');

/**
 * Sample refusals of every kind, with distinctive values for the variable parts. Typed so that a kind
 * added to a decider without a sample here does not compile.
 */
const SAMPLES: { [K in AnyRefusal['kind']]: Array<Extract<AnyRefusal, { kind: K }>> } = {
  'transaction-id-reused': [{ kind: 'transaction-id-reused' }],
  'session-invalid': [{ kind: 'session-invalid' }],
  'round-of-another-player': [{ kind: 'round-of-another-player' }],
  'rollback-target-not-a-bet': [{ kind: 'rollback-target-not-a-bet' }],
  'rollback-amount-mismatch': [{ kind: 'rollback-amount-mismatch', betAmount: 12345 }],
  'rollback-currency-mismatch': [{ kind: 'rollback-currency-mismatch', betCurrency: 'XTS' }],
  'bet-already-rolled-back': [{ kind: 'bet-already-rolled-back' }],
  'round-in-another-currency': [{ kind: 'round-in-another-currency' }],
  'round-completed': [{ kind: 'round-completed' }],
  'transaction-not-found': [{ kind: 'transaction-not-found' }],
  'bet-not-redriven': [{ kind: 'bet-not-redriven' }],
  'not-dead': [
    { kind: 'not-dead', status: 'applied' },
    { kind: 'not-dead', status: 'pending' },
  ],
  'game-not-found': [{ kind: 'game-not-found' }],
  'currency-format': [{ kind: 'currency-format' }],
  'currency-unsupported': [{ kind: 'currency-unsupported', currency: 'XTS' }],
  'language-unsupported': [{ kind: 'language-unsupported', language: 'xx-XX' }],
  'lobby-url-invalid': [{ kind: 'lobby-url-invalid' }],
  'launch-blocked': [{ kind: 'launch-blocked' }],
  'session-mismatch': [
    { kind: 'session-mismatch', field: 'playerRef' },
    { kind: 'session-mismatch', field: 'gameId' },
    { kind: 'session-mismatch', field: 'currency' },
  ],
  'demo-session': [{ kind: 'demo-session' }],
  'campaign-not-found': [{ kind: 'campaign-not-found' }],
  'campaign-inactive': [{ kind: 'campaign-inactive' }],
  'grant-term-missing': [
    { kind: 'grant-term-missing', field: 'gameId' },
    { kind: 'grant-term-missing', field: 'spins' },
    { kind: 'grant-term-missing', field: 'currency' },
  ],
  'game-not-visible': [{ kind: 'game-not-visible' }],
  'grant-currency-unsupported': [{ kind: 'grant-currency-unsupported', currency: 'XTS' }],
  'grant-not-cancellable': [
    { kind: 'grant-not-cancellable', status: 'pending' },
    { kind: 'grant-not-cancellable', status: 'failed' },
    { kind: 'grant-not-cancellable', status: 'cancelled' },
  ],
};

const ALL_SAMPLES: AnyRefusal[] = Object.values(SAMPLES).flat();

/** The variable values of a refusal (every field but its kind), as they appear in its message. */
const variableParts = (r: AnyRefusal): string[] =>
  Object.entries(r)
    .filter(([k]) => k !== 'kind')
    .map(([, v]) => String(v));

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The doc's table rows: their status cells and the messages quoted in them (`...`). */
const DOC_ROWS = ERRORS_DOC.split('\n')
  .filter((line) => line.startsWith('|'))
  .map((line) => ({
    line,
    statuses: line
      .split('|')
      .map((c) => c.trim())
      .filter((c) => /^\d{3}$/.test(c))
      .map(Number),
    messages: [...line.matchAll(/`([^`]*)`/g)].map((m) => m[1]!),
  }));

/**
 * The doc rows quoting this message: literally, or (for a message with variable parts) with each
 * variable part matching the doc's placeholder (`<C>`, `<n>`, ...) or whatever the doc writes there.
 */
function rowsQuoting(message: string, variables: string[]): typeof DOC_ROWS {
  const literal = DOC_ROWS.filter((row) => row.messages.includes(message));
  if (literal.length > 0 || variables.length === 0) return literal;
  let pattern = escapeRegExp(message);
  for (const v of variables) pattern = pattern.split(escapeRegExp(v)).join('[^`]+');
  const re = new RegExp(`^${pattern}$`);
  return DOC_ROWS.filter((row) => row.messages.some((m) => re.test(m)));
}

describe('REFUSALS against docs/errors.md', () => {
  it('has a sample for every kind of the table (and no other)', () => {
    expect(Object.keys(SAMPLES).sort()).toEqual(Object.keys(REFUSALS).sort());
  });

  it('the doc tables were read', () => {
    expect(DOC_ROWS.length).toBeGreaterThan(30);
  });

  describe.each(ALL_SAMPLES.map((r) => [JSON.stringify(r), r] as const))('%s', (_name, refusal) => {
    const answer = answerFor(new Refused(refusal));

    it('answers a client-error status (400, 401, 403, 404 or 409)', () => {
      expect([400, 401, 403, 404, 409]).toContain(answer.status);
    });

    it('carries its variable parts in the message', () => {
      for (const v of variableParts(refusal)) expect(answer.error).toContain(v);
    });

    it('its error text is listed in docs/errors.md, under the same status', () => {
      const rows = rowsQuoting(answer.error, variableParts(refusal));
      expect(rows.map((r) => r.line), `"${answer.error}" is not quoted in docs/errors.md`).not.toEqual([]);
      expect(
        rows.flatMap((r) => r.statuses),
        `"${answer.error}" is documented under another status than ${answer.status}`,
      ).toContain(answer.status);
    });
  });

  it('names each session-mismatch field the doc row lists (playerRef, or gameId, currency)', () => {
    const rows = rowsQuoting('playerRef: does not match the session', []);
    expect(rows).toHaveLength(1);
    for (const field of ['gameId', 'currency']) expect(rows[0]!.line).toContain(`\`${field}\``);
  });

  it('the doc rows are matched strictly: a changed fixed part is not found', () => {
    expect(rowsQuoting('currency: XTS is not supported by this game!', ['XTS'])).toEqual([]);
    expect(rowsQuoting('launch blocked for this player', [])).toEqual([]);
  });

  it('answerFor throws for a kind with no row', () => {
    expect(() => answerFor(new Refused({ kind: 'no-such-refusal' }))).toThrow('no answer for refusal no-such-refusal');
  });
});

describe('transactionAnswer against docs/errors.md', () => {
  const tx = (status: TxState['status']): TxState => ({
    request: { transactionId: 'w1', sessionToken: 's', type: 'WIN', roundId: 'r', roundComplete: true, playerRef: 'p', amount: 5, currency: 'EUR', gameId: 'g' },
    providerId: 'studio-a',
    operatorId: 'op-1',
  reachedWallet: true,
    origin: 'provider',
    walletBody: '{}',
    contentHash: 'h',
    status,
    attempts: 1,
    recordedAt: '2026-11-24T12:00:00.000Z',
    ...(status === 'applied' || status === 'declined' || status === 'invalid' ? { reply: { status: status === 'applied' ? 'OK' : 'DECLINED', balance: 7, body: '{"status":"OK","balance":7}' } } : {}),
  });

  it.each(TX_STATUSES.filter((s) => s !== 'applied' && s !== 'declined'))('a %s transaction: its error text is listed in docs/errors.md under its status', (status) => {
    const answer = transactionAnswer(tx(status));
    const { error } = JSON.parse(answer.body) as { error: string };
    const rows = rowsQuoting(error, ['WIN']);
    expect(rows.map((r) => r.line), `"${error}" is not quoted in docs/errors.md`).not.toEqual([]);
    expect(rows.flatMap((r) => r.statuses)).toContain(answer.status);
  });

  it('an applied or declined transaction is answered 200 with the wallet reply verbatim', () => {
    expect(transactionAnswer(tx('applied'))).toEqual({ status: 200, body: '{"status":"OK","balance":7}' });
    expect(transactionAnswer(tx('declined')).status).toBe(200);
  });
});
