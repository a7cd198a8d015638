import type { Refused } from '../../shared/decider.ts';
import type { GrantRefusal } from '../grants/decider.ts';
import type { RoundRefusal, TxState } from '../rounds/decider.ts';
import type { SessionRefusal } from '../sessions/decider.ts';

/** Every refusal a decider can return. */
export type AnyRefusal = RoundRefusal | SessionRefusal | GrantRefusal;

type Answer<K extends AnyRefusal['kind']> = (r: Extract<AnyRefusal, { kind: K }>) => { status: number; error: string };

/**
 * Everything the API answers for a rule of the domain: a decider's refusal, or a transaction's outcome.
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

/**
 * How a transaction is answered to whoever submitted it, from its state (contract section 5): the
 * wallet's reply verbatim once it answered, otherwise what became of it.
 */
export function transactionAnswer(tx: TxState): { status: number; body: string } {
  switch (tx.status) {
    case 'applied':
    case 'declined':
      return { status: 200, body: tx.reply!.body };
    case 'invalid':
      return { status: 502, body: JSON.stringify({ error: `wallet answered DECLINED to a ${tx.request.type}` }) };
    case 'failed':
      return { status: 502, body: JSON.stringify({ error: 'wallet call failed' }) };
    case 'timed_out':
      return { status: 504, body: JSON.stringify({ error: 'wallet timeout' }) };
    case 'dead':
      return { status: 502, body: JSON.stringify({ error: 'wallet never accepted the transaction; retries stopped' }) };
    case 'voided':
      return { status: 409, body: JSON.stringify({ error: 'bet was rolled back' }) };
    case 'recorded':
      return { status: 504, body: JSON.stringify({ error: 'transaction still in progress; resubmit to get its outcome' }) };
    default: {
      const unknown: never = tx.status;
      return unknown;
    }
  }
}

/**
 * How an adjustment is answered to the platform admin (docs/operations.md): 200 once the wallet
 * applied it, 502 when it answered DECLINED (an invalid credit), otherwise 202 while it is retried.
 */
export function adjustmentAnswer(tx: TxState): { status: number; body: Record<string, unknown> } {
  return {
    status: tx.status === 'applied' ? 200 : tx.status === 'invalid' ? 502 : 202,
    body: {
      transactionId: tx.request.transactionId,
      status: tx.status,
      attempts: tx.attempts,
      ...(tx.reply ? { reply: { status: tx.reply.status, balance: tx.reply.balance } } : {}),
      ...(tx.lastError ? { lastError: tx.lastError } : {}),
      retrying: tx.status === 'failed' || tx.status === 'timed_out',
    },
  };
}
