import { repeatedName } from '../../shared/http/json-keys.ts';
import type { OutboundResult } from '../../shared/http/outbound.ts';
import type { WalletOutcome } from './decider.ts';
import type { WalletReply } from './events.ts';

// One home for what counts as a wallet's reply: the dispatcher records by it, and the conformance
// checker (services/conformance) holds an operator's wallet to it.

/** The wallet's answer as the domain sees it (API document 3.3). */
export function classify(result: OutboundResult): WalletOutcome {
  switch (result.kind) {
    case 'timeout':
      return { kind: 'timed_out', ...(result.notSent ? { notSent: true as const } : {}) };
    case 'unreachable':
      return { kind: 'failed', detail: `wallet unreachable: ${result.error}`, ...(result.notSent ? { notSent: true as const } : {}) };
    case 'oversized':
      // Never stored nor passed on, whatever its status: a failure, retried as any other for credits.
      return { kind: 'failed', detail: 'wallet reply over 1 MiB', httpStatus: result.status };
    case 'response': {
      if (result.status !== 200) return { kind: 'failed', detail: `wallet answered ${result.status}`, httpStatus: result.status };
      const reply = parseReply(result.body);
      return reply ? { kind: 'reply', reply } : { kind: 'failed', detail: 'wallet answered 200 without a valid TransactionResponse', httpStatus: 200 };
    }
    default: {
      const unknown: never = result;
      return unknown;
    }
  }
}

const REPLY_FIELDS = ['status', 'balance'];

export function parseReply(body: string): WalletReply | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const { status, balance } = parsed as { status?: unknown; balance?: unknown };
  if ((status !== 'OK' && status !== 'DECLINED') || typeof balance !== 'number' || !Number.isSafeInteger(balance)) return undefined;
  // Named twice, a field reads one way here and maybe the other way at the provider, to whom the reply
  // is passed on as it came: no valid reply.
  if (repeatedName(body, REPLY_FIELDS) !== undefined) return undefined;
  return { status, balance, body };
}
