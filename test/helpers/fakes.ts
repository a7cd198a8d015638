import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { drainedOrClosed } from '../../shared/http/drain.ts';

/** What a partner received, after checking our signature exactly as contract section 3 tells it to. */
export interface ReceivedCall {
  method: string;
  /** Path plus query, as sent (what we sign on outbound calls). */
  target: string;
  headers: http.IncomingHttpHeaders;
  body: unknown;
  rawBody: string;
  signatureValid: boolean;
  nonce: string | undefined;
  at: number;
}

export type Reply =
  | { status: number; body?: unknown; raw?: string; delayMs?: number }
  | { hang: true }
  /** A JSON object of exactly `bytes` bytes, `fields` then "pad":"ZZZ…", written in 64 KiB chunks without a content-length. */
  | { status: number; stream: { bytes: number; fields?: Record<string, unknown> } };

/** The padding of a streamed reply: a run of it in what the service answered means the body leaked through. */
export const STREAM_PAD = 'Z';

/** Checks an inbound call from the service: HMAC over timestamp, nonce, method, path+query, body hash. */
export function verifyServiceSignature(secret: string, method: string, target: string, headers: http.IncomingHttpHeaders, rawBody: string): boolean {
  const ts = headers['x-timestamp'];
  const nonce = headers['x-nonce'];
  const sig = headers['x-signature'];
  if (typeof ts !== 'string' || typeof nonce !== 'string' || typeof sig !== 'string') return false;
  if (Math.abs(Date.now() / 1000 - Number(ts)) > 300) return false;
  const bodyHash = createHash('sha256').update(rawBody).digest('hex');
  const expected = createHmac('sha256', secret).update([ts, nonce, method, target, bodyHash].join('\n')).digest('hex');
  return expected.length === sig.length && timingSafeEqual(Buffer.from(expected), Buffer.from(sig));
}

interface FakeServer {
  url: string;
  calls: ReceivedCall[];
  close(): Promise<void>;
}

async function listen(handler: (req: http.IncomingMessage, raw: string, res: http.ServerResponse) => Promise<void> | void): Promise<{ server: http.Server; url: string }> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      Promise.resolve(handler(req, Buffer.concat(chunks).toString('utf8'), res)).catch((err: unknown) => {
        res.statusCode = 500;
        res.end(String(err));
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((r) => server.close(() => r()));
}

async function streamJson(res: http.ServerResponse, status: number, bytes: number, fields: Record<string, unknown>): Promise<void> {
  const head = `${JSON.stringify(fields).slice(0, -1)}${Object.keys(fields).length > 0 ? ',' : ''}"pad":"`;
  const tail = '"}';
  let left = bytes - Buffer.byteLength(head) - tail.length;
  if (left < 0) throw new Error(`a streamed reply of ${bytes} bytes cannot hold ${head}`);
  res.statusCode = status;
  res.setHeader('content-type', 'application/json');
  res.write(head);
  const chunk = STREAM_PAD.repeat(64 * 1024);
  while (left > 0 && !res.destroyed) {
    const n = Math.min(chunk.length, left);
    left -= n;
    if (!res.write(n === chunk.length ? chunk : chunk.slice(0, n))) {
      await drainedOrClosed(res);
    }
  }
  if (!res.destroyed) res.end(tail);
}

async function send(res: http.ServerResponse, reply: Reply): Promise<void> {
  if ('hang' in reply) return; // never answers; the connection is cut when the server closes
  if ('stream' in reply) return streamJson(res, reply.status, reply.stream.bytes, reply.stream.fields ?? {});
  if (reply.delayMs) await new Promise((r) => setTimeout(r, reply.delayMs));
  res.statusCode = reply.status;
  if (reply.raw !== undefined) {
    res.setHeader('content-type', 'text/plain');
    res.end(reply.raw);
  } else {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(reply.body ?? {}));
  }
}

/** What a partner answers to a request whose signature does not check out (contract section 3). */
function refuseSignature(res: http.ServerResponse): void {
  res.statusCode = 401;
  res.setHeader('content-type', 'text/plain');
  res.end('invalid signature');
}

function record(req: http.IncomingMessage, raw: string, secret: string): ReceivedCall {
  let body: unknown;
  try {
    body = raw ? JSON.parse(raw) : undefined;
  } catch {
    body = raw;
  }
  const target = req.url ?? '/';
  return {
    method: req.method ?? 'GET',
    target,
    headers: req.headers,
    body,
    rawBody: raw,
    signatureValid: verifyServiceSignature(secret, req.method ?? 'GET', target, req.headers, raw),
    nonce: typeof req.headers['x-nonce'] === 'string' ? req.headers['x-nonce'] : undefined,
    at: Date.now(),
  };
}

export type { TransactionRequest as TransactionBody } from '../../services/rounds/events.ts';
import type { TransactionRequest as TransactionBody } from '../../services/rounds/events.ts';

export interface FakeWallet extends FakeServer {
  balances: Map<string, number>;
  /** transactionId → stored reply (the wallet's idempotency record). */
  processed: Map<string, { status: 'OK' | 'DECLINED'; balance: number }>;
  /** How many times each transactionId changed a balance (must never exceed 1). */
  effects: Map<string, number>;
  /** Most calls for one transactionId ever in flight at the same time. */
  maxInFlight: Map<string, number>;
  /** Every balance change, in order: which transaction moved which player's balance by how much. */
  movements: Array<{ transactionId: string; playerRef: string; delta: number }>;
  initialBalance: number;
  /** Scripted replies consumed in order before normal processing, per transactionId or for any ('*'). */
  script(key: string, ...replies: Reply[]): void;
  /** Drops the replies still scripted for a key. */
  unscript(key: string): void;
  setBalanceReply(reply: Reply | undefined): void;
  declineBets(playerRef: string): void;
  /** Delay normal processing of one transaction type (the reply is still the real one). */
  setLatency(type: TransactionBody['type'], ms: number): void;
  /** Decides a fault per transaction call (undefined: behave); for fault runs. */
  setChaos(chaos: ((tx: TransactionBody) => Chaos | undefined) | undefined): void;
  /** Awaited before a transaction call is processed (say, to hold a lock of the service's while it replies). */
  setBeforeProcessing(hook: ((tx: TransactionBody) => Promise<void>) | undefined): void;
}

/** A wallet fault: fail before applying, never answer, answer slowly, or apply and then answer too late. */
export type Chaos = { fail: number } | { hang: true } | { delayMs: number } | { applyThenDelayMs: number };

/**
 * An operator wallet as part 4.2 describes it: verifies our signature and refuses a bad one (401),
 * refuses a reused nonce, stores the reply for every transactionId and replays it on a repeat.
 */
export async function startFakeWallet(secret: string, initialBalance = 10_000): Promise<FakeWallet> {
  const calls: ReceivedCall[] = [];
  const balances = new Map<string, number>();
  const processed = new Map<string, { status: 'OK' | 'DECLINED'; balance: number }>();
  const effects = new Map<string, number>();
  const scripts = new Map<string, Reply[]>();
  const seenNonces = new Set<string>();
  const betAmounts = new Map<string, number>();
  const decliners = new Set<string>();
  const inFlight = new Map<string, number>();
  const latency = new Map<string, number>();
  let chaos: ((tx: TransactionBody) => Chaos | undefined) | undefined;
  let beforeProcessing: ((tx: TransactionBody) => Promise<void>) | undefined;
  const maxInFlight = new Map<string, number>();
  const movements: Array<{ transactionId: string; playerRef: string; delta: number }> = [];
  let balanceReply: Reply | undefined;
  const balanceOf = (p: string) => balances.get(p) ?? initialBalance;

  const { server, url } = await listen(async (req, raw, res) => {
    const call = record(req, raw, secret);
    calls.push(call);
    if (!call.signatureValid) return refuseSignature(res);
    if (call.nonce && seenNonces.has(call.nonce)) return send(res, { status: 401, body: { error: 'replayed request' } });
    if (call.nonce) seenNonces.add(call.nonce);
    const u = new URL(call.target, 'http://x');
    if (req.method === 'GET' && u.pathname === '/v1/wallet/balance') {
      if (balanceReply) return send(res, balanceReply);
      const playerRef = u.searchParams.get('playerRef');
      if (!playerRef) return send(res, { status: 400, body: { error: 'playerRef required' } });
      return send(res, { status: 200, body: { balance: balanceOf(playerRef) } });
    }
    if (req.method === 'POST' && u.pathname === '/v1/wallet/transaction') {
      const tx = call.body as TransactionBody;
      const now = (inFlight.get(tx.transactionId) ?? 0) + 1;
      inFlight.set(tx.transactionId, now);
      maxInFlight.set(tx.transactionId, Math.max(now, maxInFlight.get(tx.transactionId) ?? 0));
      res.on('close', () => inFlight.set(tx.transactionId, (inFlight.get(tx.transactionId) ?? 1) - 1));
      await beforeProcessing?.(tx);
      const scripted = scripts.get(tx.transactionId)?.shift() ?? scripts.get(`type:${tx.type}`)?.shift() ?? scripts.get('*')?.shift();
      if (scripted) return send(res, scripted);
      const delay = latency.get(tx.type);
      if (delay) await new Promise((r) => setTimeout(r, delay));
      const fault = chaos?.(tx);
      if (fault && 'fail' in fault) return send(res, { status: fault.fail, body: { error: 'chaos' } });
      if (fault && 'hang' in fault) return;
      if (fault && 'delayMs' in fault) await new Promise((r) => setTimeout(r, fault.delayMs));
      const lateReply = fault && 'applyThenDelayMs' in fault ? fault.applyThenDelayMs : 0;
      const stored = processed.get(tx.transactionId);
      if (stored) return send(res, { status: 200, body: stored, delayMs: lateReply });
      let balance = balanceOf(tx.playerRef);
      let status: 'OK' | 'DECLINED' = 'OK';
      let delta = 0;
      if (tx.type === 'BET') {
        if (decliners.has(tx.playerRef) || balance < tx.amount) status = 'DECLINED';
        else {
          delta = -tx.amount;
          betAmounts.set(tx.transactionId, tx.amount);
        }
      } else if (tx.type === 'WIN') delta = tx.amount;
      else if (tx.type === 'ROLLBACK') delta = betAmounts.get(tx.originalTransactionId ?? '') ?? 0;
      else delta = tx.direction === 'DEBIT' ? -tx.amount : tx.amount;
      balance += delta;
      balances.set(tx.playerRef, balance);
      if (status === 'OK') {
        effects.set(tx.transactionId, (effects.get(tx.transactionId) ?? 0) + 1);
        movements.push({ transactionId: tx.transactionId, playerRef: tx.playerRef, delta });
      }
      const reply = { status, balance };
      processed.set(tx.transactionId, reply);
      return send(res, { status: 200, body: reply, delayMs: lateReply });
    }
    return send(res, { status: 404, body: { error: 'not found' } });
  });

  return {
    url,
    calls,
    balances,
    processed,
    effects,
    maxInFlight,
    movements,
    initialBalance,
    script: (key, ...replies) => scripts.set(key, [...(scripts.get(key) ?? []), ...replies]),
    unscript: (key) => scripts.delete(key),
    setBalanceReply: (r) => (balanceReply = r),
    declineBets: (p) => decliners.add(p),
    setLatency: (type, ms) => latency.set(type, ms),
    setChaos: (c) => (chaos = c),
    setBeforeProcessing: (h) => (beforeProcessing = h),
    close: () => closeServer(server),
  };
}

export interface FakeProvider extends FakeServer {
  /** Replies per path prefix, consumed in order; when none is scripted the default applies. */
  script(pathPrefix: string, ...replies: Reply[]): void;
  /** Drops the replies still scripted for a prefix (a test that failed part-way leaves none to the next). */
  unscript(pathPrefix: string): void;
  setDefault(pathPrefix: string, reply: Reply): void;
}

/** A provider's server: checks our signature with the provider secret and answers per script. */
export async function startFakeProvider(secret: string): Promise<FakeProvider> {
  const calls: ReceivedCall[] = [];
  const scripts = new Map<string, Reply[]>();
  const defaults = new Map<string, Reply>();
  let grantSeq = 0;
  const { server, url } = await listen(async (req, raw, res) => {
    const call = record(req, raw, secret);
    calls.push(call);
    if (!call.signatureValid) return refuseSignature(res);
    const path = new URL(call.target, 'http://x').pathname;
    for (const [prefix, queue] of scripts) {
      if (path.startsWith(prefix) && queue.length > 0) return send(res, queue.shift()!);
    }
    for (const [prefix, reply] of defaults) if (path.startsWith(prefix)) return send(res, reply);
    if (path === '/v1/free-spins/grants') return send(res, { status: 200, body: { externalRef: `ext-${++grantSeq}` } });
    return send(res, { status: 200, body: {} });
  });
  return {
    url,
    calls,
    script: (prefix, ...replies) => scripts.set(prefix, [...(scripts.get(prefix) ?? []), ...replies]),
    unscript: (prefix) => scripts.delete(prefix),
    setDefault: (prefix, reply) => defaults.set(prefix, reply),
    close: () => closeServer(server),
  };
}
