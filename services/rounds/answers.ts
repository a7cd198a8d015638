import { isFinal, type TxState } from './decider.ts';

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
      // The worker attempts every credit not settled for good (one still `recorded` too: held by another attempt).
      retrying: !isFinal(tx.status),
    },
  };
}
