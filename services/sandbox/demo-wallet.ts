import type http from 'node:http';
import type { Logger } from 'pino';
import type { z } from 'zod';
import { walletTransactionRequest } from '../rounds/schemas.ts';
import { signatureCheck, startPartnerServer, type PartnerReply } from './partner-server.ts';

/**
 * A reference operator wallet: the two callbacks of API document part 4.2, as small and as correct as
 * we can make them. The sandbox runs one per operator; `npm run conformance` checks a wallet against the
 * same rules. State is in memory (balances, stored replies, nonces): a restart forgets everything, which
 * is fine for a sandbox and is exactly what a real wallet must not do with its idempotency records.
 */
export interface DemoWalletOptions {
  /** The operator's secret: verifies the service's signatures (contract section 3, target = path+query). */
  secret: string;
  /** Default 0 (any free port). */
  port?: number;
  /** Default '127.0.0.1'. */
  host?: string;
  /** Minor units credited to a player the first time it is seen; default 100_000. */
  startingBalance?: number;
  /** Accepted X-Timestamp skew, both ways; default 300. */
  signatureWindowSeconds?: number;
  logger?: Logger;
}

export interface DemoWalletEntry {
  transactionId: string;
  playerRef: string;
  type: string;
  amount: number;
  status: 'OK' | 'DECLINED';
  balance: number;
}

export interface DemoWallet {
  /** e.g. http://127.0.0.1:40123: the catalog's walletUrl. */
  url: string;
  balanceOf(playerRef: string): number;
  setBalance(playerRef: string, minor: number): void;
  /** Every transaction it processed, in order (repeats are replayed, not listed again). */
  entries(): readonly DemoWalletEntry[];
  close(): Promise<void>;
}

/**
 * Deliberate defects, for the conformance checker's own tests only: each breaks one rule of part 4.2
 * so the tests can show the checker catches it. Never set outside tests.
 */
export interface DemoWalletDefects {
  acceptBadSignatures?: boolean;
  /** A repeat of these types is applied again and answered afresh instead of replayed. */
  reapplyRepeats?: ReadonlyArray<TransactionRequest['type']>;
  declineWins?: boolean;
  balanceEndpoint?: 'missing' | 'non-integer';
  refuseStaleRollbackIds?: boolean;
  /** A ROLLBACK of a bet not seen yet leaves no tombstone: the bet arriving later is debited for good. */
  forgetUnseenRollbacks?: boolean;
  /** A ROLLBACK refunds the amount it carries instead of its bet's. */
  refundRollbackAmount?: boolean;
  /** A repeat of these types is not applied again but answered with today's balance instead of the stored reply. */
  replayTodaysBalance?: ReadonlyArray<TransactionRequest['type']>;
  /** A ROLLBACK under a new transactionId refunds its bet again, however often it was refunded. */
  refundEveryRollback?: boolean;
  /** Replies name `status` twice (`{"status":"DECLINED","balance":n,"status":"OK"}`), which a JSON parser reads as its last. */
  nameStatusTwice?: boolean;
}

const BODY_LIMIT_BYTES = 64 * 1024;

/** TransactionRequest, API document 2.10. Unknown fields are ignored, so a later addition does not break us. */
/**
 * The body the service sends (the schema its OpenAPI webhook documents), loosened as a partner should be:
 * a field the service adds later is ignored, not refused. The rules part 2.10 states per type come on top.
 */
const transactionRequest = walletTransactionRequest.loose().superRefine((t, ctx) => {
  if (t.type === 'ROLLBACK' && t.originalTransactionId === undefined) {
    ctx.addIssue({ code: 'custom', path: ['originalTransactionId'], message: 'required for a ROLLBACK' });
  }
  if (t.type === 'ADJUSTMENT' && t.direction === undefined) {
    ctx.addIssue({ code: 'custom', path: ['direction'], message: 'required for an ADJUSTMENT' });
  }
});
type TransactionRequest = z.infer<typeof transactionRequest>;

interface Bet {
  amount: number;
  /** Declined bets and bets already refunded are refunded (again) by nothing. */
  refundable: boolean;
  /** Refunded once (for the refundEveryRollback defect). */
  refunded?: boolean;
}

interface Account {
  balance: number;
  /** transactionId → the exact reply text sent the first time (part 4.2 rule 2: keyed per player). */
  replies: Map<string, string>;
  bets: Map<string, Bet>;
  /** Bets rolled back before this wallet saw them: if one still arrives it is declined, never debited. */
  rolledBackUnseen: Set<string>;
}

type Reply = PartnerReply;

class Refusal {
  constructor(
    readonly status: number,
    readonly error: string,
  ) {}
}

export async function startDemoWallet(options: DemoWalletOptions, defects: DemoWalletDefects = {}): Promise<DemoWallet> {
  const startingBalance = options.startingBalance ?? 100_000;
  if (!Number.isSafeInteger(startingBalance)) throw new Error('startingBalance must be an integer (minor units)');
  const windowSeconds = options.signatureWindowSeconds ?? 300;
  const log = options.logger;
  const accounts = new Map<string, Account>();
  const ledger: DemoWalletEntry[] = [];

  const account = (playerRef: string): Account => {
    let a = accounts.get(playerRef);
    if (!a) {
      a = { balance: startingBalance, replies: new Map(), bets: new Map(), rolledBackUnseen: new Set() };
      accounts.set(playerRef, a);
    }
    return a;
  };

  const checkSignature = signatureCheck({ secret: options.secret, windowSeconds, acceptBadSignatures: defects.acceptBadSignatures === true });

  /**
   * Applies one transaction, or replays its stored reply. Synchronous from lookup to store, so two
   * identical requests arriving together cannot both apply (one event loop, no await in between).
   */
  function transact(t: TransactionRequest): Reply {
    const a = account(t.playerRef);
    const stored = a.replies.get(t.transactionId);
    if (stored !== undefined && defects.replayTodaysBalance?.includes(t.type)) {
      const { status } = JSON.parse(stored) as { status: string };
      return { status: 200, text: JSON.stringify({ status, balance: a.balance }), contentType: 'application/json' };
    }
    if (stored !== undefined && !defects.reapplyRepeats?.includes(t.type)) return { status: 200, text: stored, contentType: 'application/json' };
    if (defects.refuseStaleRollbackIds && t.transactionId.includes(':')) throw new Refusal(400, 'transactionId: unsupported characters');

    let status: 'OK' | 'DECLINED' = 'OK';
    switch (t.type) {
      case 'BET':
        // DECLINED is the only business refusal, and only a BET may get it (part 4.2 rule 8).
        if (t.amount > a.balance || a.rolledBackUnseen.has(t.transactionId)) {
          status = 'DECLINED';
          a.bets.set(t.transactionId, { amount: t.amount, refundable: false });
        } else {
          a.balance -= t.amount;
          a.bets.set(t.transactionId, { amount: t.amount, refundable: true });
        }
        break;
      case 'WIN':
        if (defects.declineWins) status = 'DECLINED';
        else a.balance += t.amount;
        break;
      case 'ROLLBACK': {
        // Refund the bet's own amount, once, whatever the rollback carries (part 4.2 rule 3). A rollback
        // of a bet never seen or declined refunds nothing and still answers OK: there is nothing to
        // undo, and a non-200 would only be retried. A bet still arriving after it is then declined.
        const betId = t.originalTransactionId!;
        const bet = a.bets.get(betId);
        if (bet === undefined) {
          if (!defects.forgetUnseenRollbacks) a.rolledBackUnseen.add(betId);
        } else if (bet.refundable || (stored !== undefined && defects.reapplyRepeats !== undefined) || (defects.refundEveryRollback && bet.refunded)) {
          a.balance += defects.refundRollbackAmount ? t.amount : bet.amount;
          bet.refundable = false;
          bet.refunded = true;
        }
        break;
      }
      case 'ADJUSTMENT':
        if (t.direction === 'CREDIT') a.balance += t.amount;
        else if (t.amount > a.balance) {
          // Never DECLINED: a correction that cannot apply now is refused with a non-200, not stored,
          // so the service's retry can apply it later.
          throw new Refusal(409, 'insufficient funds for this adjustment');
        } else a.balance -= t.amount;
        break;
      default: {
        const unknown: never = t.type;
        throw new Error(`unknown type ${String(unknown)}`);
      }
    }
    const text = defects.nameStatusTwice
      ? `{"status":"${status === 'OK' ? 'DECLINED' : 'OK'}","balance":${a.balance},"status":"${status}"}`
      : JSON.stringify({ status, balance: a.balance });
    if (stored === undefined) {
      a.replies.set(t.transactionId, text);
      ledger.push({ transactionId: t.transactionId, playerRef: t.playerRef, type: t.type, amount: t.amount, status, balance: a.balance });
    }
    log?.info({ transactionId: t.transactionId, playerRef: t.playerRef, type: t.type, amount: t.amount, status, balance: a.balance }, 'demo wallet transaction');
    return { status: 200, text, contentType: 'application/json' };
  }

  function handle(req: http.IncomingMessage, body: Buffer): Reply {
    const target = req.url ?? '/';
    const refused = checkSignature(req, body);
    if (refused) {
      log?.warn({ target, status: refused.status }, 'demo wallet refused a request');
      return refused;
    }
    const url = new URL(target, 'http://wallet.invalid');
    if (req.method === 'GET' && url.pathname === '/v1/wallet/balance' && defects.balanceEndpoint !== 'missing') {
      const playerRef = url.searchParams.get('playerRef');
      if (!playerRef) return { status: 400, json: { error: 'playerRef: required' } };
      const balance = account(playerRef).balance;
      return { status: 200, json: { balance: defects.balanceEndpoint === 'non-integer' ? balance + 0.5 : balance } };
    }
    if (req.method === 'POST' && url.pathname === '/v1/wallet/transaction') {
      let parsed: unknown;
      try {
        parsed = JSON.parse(body.toString('utf8'));
      } catch {
        return { status: 400, json: { error: 'request body is not valid JSON' } };
      }
      const result = transactionRequest.safeParse(parsed);
      if (!result.success) {
        const issue = result.error.issues[0]!;
        return { status: 400, json: { error: `${issue.path.join('.') || 'body'}: ${issue.message}` } };
      }
      try {
        return transact(result.data);
      } catch (err) {
        if (err instanceof Refusal) return { status: err.status, json: { error: err.error } };
        throw err;
      }
    }
    return { status: 404, json: { error: 'not found' } };
  }

  const server = await startPartnerServer({
    port: options.port,
    host: options.host,
    bodyLimit: BODY_LIMIT_BYTES,
    handle,
    onError: (err) => log?.error({ err }, 'demo wallet failed'),
  });

  return {
    url: server.url,
    balanceOf: (playerRef) => account(playerRef).balance,
    setBalance: (playerRef, minor) => {
      if (!Number.isSafeInteger(minor)) throw new Error('a balance is an integer in minor units');
      account(playerRef).balance = minor;
    },
    entries: () => ledger,
    close: () => server.close(),
  };
}
