import type { Refused } from '../../shared/decider.ts';
import type { GrantRefusal } from '../grants/decider.ts';
import type { RoundRefusal } from '../rounds/decider.ts';
import type { SessionRefusal } from '../sessions/decider.ts';

/** Every refusal a decider can return. */
export type AnyRefusal = RoundRefusal | SessionRefusal | GrantRefusal;

type Answer<K extends AnyRefusal['kind']> = (r: Extract<AnyRefusal, { kind: K }>) => { status: number; error: string };

/**
 * The one table from a rule's refusal to what the API answers: the status, and the `error` text of
 * the documented `{"error": "..."}` body (docs/errors.md lists the same). A kind added to a decider
 * without a row here does not compile.
 */
export const REFUSALS: { [K in AnyRefusal['kind']]: Answer<K> } = {
  // Transactions (rounds/decider.ts)
  'transaction-id-reused': () => ({ status: 409, error: 'transactionId already used with different content' }),
  'session-invalid': () => ({ status: 401, error: 'invalid session' }),
  'round-of-another-player': () => ({ status: 409, error: 'round belongs to another player' }),
  'rollback-target-not-a-bet': () => ({ status: 400, error: 'originalTransactionId is not a BET of this round' }),
  'rollback-amount-mismatch': (r) => ({ status: 400, error: `amount: a ROLLBACK must carry its BET's amount (${r.betAmount})` }),
  'rollback-currency-mismatch': (r) => ({ status: 400, error: `currency: a ROLLBACK must carry its BET's currency (${r.betCurrency})` }),
  'bet-already-rolled-back': () => ({ status: 409, error: 'bet already rolled back' }),
  'round-in-another-currency': () => ({ status: 409, error: 'round is in another currency' }),
  'round-completed': () => ({ status: 409, error: 'round already completed' }),
  // Re-drive (admin)
  'transaction-not-found': () => ({ status: 404, error: 'transaction not found' }),
  'bet-not-redriven': () => ({ status: 409, error: 'a BET is never re-driven: its provider resubmits it or rolls it back' }),
  'not-dead': (r) => ({ status: 409, error: `only a dead transaction is re-driven: this one is ${r.status}` }),
  // Sessions (sessions/decider.ts)
  'game-not-found': () => ({ status: 404, error: 'game not found' }),
  'currency-format': () => ({ status: 400, error: 'currency: expected an upper-case ISO-4217 code' }),
  'currency-unsupported': (r) => ({ status: 400, error: `currency: ${r.currency} is not supported by this game` }),
  'language-unsupported': (r) => ({ status: 400, error: `language: ${r.language} is not supported by this game` }),
  'lobby-url-invalid': () => ({ status: 400, error: 'lobbyUrl: expected an absolute http(s) URL' }),
  'launch-blocked': () => ({ status: 403, error: 'launch blocked' }),
  'session-mismatch': (r) => ({ status: 400, error: `${r.field}: does not match the session` }),
  'demo-session': () => ({ status: 400, error: 'demo session: demo play never reaches the operator wallet' }),
  // Free-spin grants (grants/decider.ts)
  'campaign-not-found': () => ({ status: 404, error: 'campaign not found' }),
  'campaign-inactive': () => ({ status: 400, error: 'campaignId: the campaign is inactive or outside its validity window' }),
  'grant-term-missing': (r) => ({
    status: 400,
    error: r.field === 'spins' ? 'spins: required (a positive integer) when campaignId is omitted' : `${r.field}: required when campaignId is omitted`,
  }),
  'game-not-visible': () => ({ status: 403, error: 'game not visible to this operator' }),
  'grant-currency-unsupported': (r) => ({ status: 400, error: `currency: ${r.currency} is not supported by this game's provider` }),
  'grant-not-cancellable': (r) => ({ status: 400, error: `grant not cancellable: it is ${r.status}` }),
};

/** What the API answers for a refusal (the error renderer's lookup). */
export function answerFor(refused: Refused): { status: number; error: string } {
  const r = refused.refusal as AnyRefusal;
  const answer = REFUSALS[r.kind] as Answer<AnyRefusal['kind']> | undefined;
  if (!answer) throw new Error(`no answer for refusal ${r.kind}`);
  return answer(r);
}
