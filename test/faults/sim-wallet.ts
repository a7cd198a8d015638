import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TransactionRequest } from '../../services/rounds/events.ts';
import { verifyServiceSignature } from '../helpers/fakes.ts';

/**
 * An operator wallet as the simulator needs one: it behaves as API document part 4.2 and contract
 * section 8 require of a real wallet (deduplication on (playerRef, transactionId), stored replies, a
 * ROLLBACK refunds its BET's amount, rollback tombstones), keeps its own ledger of what it applied, and
 * misbehaves when told to (chaos). The checker compares this ledger with the service's history.
 */
export interface WalletEntry {
  /** The exact body the wallet applied under this (playerRef, transactionId). */
  body: string;
  request: TransactionRequest;
  status: 'OK' | 'DECLINED';
  delta: number;
  balance: number;
  /** A ROLLBACK of a BET not seen yet: recorded, nothing refunded, the BET refused if it comes. */
  tombstone?: boolean;
}

/** A fault for one call: fail before applying, never answer, answer late, or apply and then answer late. */
export type WalletChaos = { fail: number } | { hang: true } | { delayMs: number } | { applyThenDelayMs: number };

export interface SimWallet {
  url: string;
  operatorId: string;
  initialBalance: number;
  /** Its ledger: key `${playerRef}\n${transactionId}`. */
  entries: Map<string, WalletEntry>;
  balances: Map<string, number>;
  /** Arrival times of every transaction call, per transactionId. */
  arrivals: Map<string, number[]>;
  /** The second each of those calls was signed in (its X-Timestamp, in ms), in the same order: when the service made it. */
  signedAt: Map<string, number[]>;
  /** Calls that reused a (playerRef, transactionId) with another body: the service broke identity. */
  conflicts: string[];
  /** Calls whose signature did not verify. */
  badSignatures: number;
  setChaos(chaos: ((tx: TransactionRequest) => WalletChaos | undefined) | undefined): void;
  /** Fail the next `times` calls of this transactionId with a 500. */
  failNext(transactionId: string, times: number): void;
  /** Hang every call (a wallet that stopped answering) until set back to false. */
  setHung(hung: boolean): void;
  /** Called right after the wallet sent a 200 reply to a transaction (for faults timed to it). */
  setAfterReply(hook: ((tx: TransactionRequest) => void) | undefined): void;
  close(): Promise<void>;
}

export const walletKey = (playerRef: string, transactionId: string): string => `${playerRef}\n${transactionId}`;

export async function startSimWallet(operatorId: string, secret: string, initialBalance: number): Promise<SimWallet> {
  const entries = new Map<string, WalletEntry>();
  const balances = new Map<string, number>();
  const arrivals = new Map<string, number[]>();
  const signedAt = new Map<string, number[]>();
  const conflicts: string[] = [];
  const failures = new Map<string, number>();
  let chaos: ((tx: TransactionRequest) => WalletChaos | undefined) | undefined;
  let hung = false;
  let afterReply: ((tx: TransactionRequest) => void) | undefined;
  let badSignatures = 0;
  const hanging = new Set<http.ServerResponse>();
  const hang = (res: http.ServerResponse) => {
    hanging.add(res);
    res.on('close', () => hanging.delete(res));
  };
  /** BETs refused in advance: a ROLLBACK of them came first. Key: walletKey(playerRef, bet id). */
  const tombstones = new Set<string>();
  const balanceOf = (p: string) => balances.get(p) ?? initialBalance;
  const reply = (res: http.ServerResponse, status: number, body: unknown) => {
    if (res.destroyed) return;
    res.statusCode = status;
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(body));
  };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  /** Applies one transaction once; a repeat of its key gets the stored reply. */
  const apply = (raw: string, tx: TransactionRequest): WalletEntry => {
    const key = walletKey(tx.playerRef, tx.transactionId);
    const stored = entries.get(key);
    if (stored) {
      if (stored.body !== raw) conflicts.push(`${operatorId}: ${tx.transactionId} of ${tx.playerRef} sent with another body: ${stored.body} then ${raw}`);
      return stored;
    }
    let balance = balanceOf(tx.playerRef);
    let status: 'OK' | 'DECLINED' = 'OK';
    let delta = 0;
    let tombstone = false;
    switch (tx.type) {
      case 'BET': {
        if (tombstones.has(key) || balance < tx.amount) status = 'DECLINED';
        else delta = -tx.amount;
        break;
      }
      case 'WIN':
        delta = tx.amount;
        break;
      case 'ROLLBACK': {
        const bet = entries.get(walletKey(tx.playerRef, tx.originalTransactionId ?? ''));
        if (!bet) {
          tombstone = true;
          tombstones.add(walletKey(tx.playerRef, tx.originalTransactionId ?? ''));
        }
        else if (bet.status === 'OK') delta = bet.request.amount; // the BET's amount, whatever the ROLLBACK says
        break;
      }
      case 'ADJUSTMENT':
        // Only a BET may be DECLINED (API document 4.2): an adjustment is applied, a DEBIT even below zero.
        delta = tx.direction === 'DEBIT' ? -tx.amount : tx.amount;
        break;
    }
    balance += delta;
    balances.set(tx.playerRef, balance);
    const entry: WalletEntry = { body: raw, request: tx, status, delta, balance, ...(tombstone ? { tombstone } : {}) };
    entries.set(key, entry);
    return entry;
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const target = req.url ?? '/';
        if (!verifyServiceSignature(secret, req.method ?? 'GET', target, req.headers, raw)) {
          badSignatures++;
          return reply(res, 401, { error: 'invalid signature' });
        }
        const url = new URL(target, 'http://x');
        if (req.method === 'GET' && url.pathname === '/v1/wallet/balance') {
          if (hung) return hang(res);
          return reply(res, 200, { balance: balanceOf(url.searchParams.get('playerRef') ?? '') });
        }
        if (req.method !== 'POST' || url.pathname !== '/v1/wallet/transaction') return reply(res, 404, { error: 'not found' });
        const tx = JSON.parse(raw) as TransactionRequest;
        arrivals.set(tx.transactionId, [...(arrivals.get(tx.transactionId) ?? []), Date.now()]);
        signedAt.set(tx.transactionId, [...(signedAt.get(tx.transactionId) ?? []), Number(req.headers['x-timestamp']) * 1000]);
        if (hung) return hang(res);
        const failing = failures.get(tx.transactionId) ?? 0;
        if (failing > 0) {
          failures.set(tx.transactionId, failing - 1);
          return reply(res, 500, { error: 'scripted failure' });
        }
        const fault = chaos?.(tx);
        if (fault && 'fail' in fault) return reply(res, fault.fail, { error: 'chaos' });
        if (fault && 'hang' in fault) return hang(res);
        if (fault && 'delayMs' in fault) await sleep(fault.delayMs); // may outlast the service's timeout: applied late
        const entry = apply(raw, tx);
        if (fault && 'applyThenDelayMs' in fault) await sleep(fault.applyThenDelayMs);
        reply(res, 200, { status: entry.status, balance: entry.balance });
        afterReply?.(tx);
      })().catch((err: unknown) => reply(res, 500, { error: String(err) }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    operatorId,
    initialBalance,
    entries,
    balances,
    arrivals,
    signedAt,
    conflicts,
    get badSignatures() {
      return badSignatures;
    },
    setChaos: (c) => (chaos = c),
    setAfterReply: (hook) => (afterReply = hook),
    failNext: (id, times) => failures.set(id, times),
    setHung(h) {
      hung = h;
      if (!h) {
        for (const res of hanging) res.destroy();
        hanging.clear();
      }
    },
    close() {
      server.closeAllConnections();
      return new Promise((r) => server.close(() => r()));
    },
  };
}
