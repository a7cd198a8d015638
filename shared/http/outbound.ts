import { randomUUID } from 'node:crypto';
import { Agent, Dispatcher, errors as undiciErrors, request } from 'undici';
import type { Operator, Provider } from '../catalog/schema.ts';
import { HEADER, sign } from './signature.ts';

/**
 * The calls (by their abort signal, one per call) that undici began writing to a connected socket. A
 * call not among them when it ends in an error or a timeout never left this process: its connection was
 * never made (refused, no such host, no route, a failed TLS handshake, or a connect still under way: a
 * host that drops packets silently), or it was still waiting for one of its pool's connections, so the
 * peer got nothing (`notSent`). One among them may have reached the peer, whatever the error that ended it.
 */
const begun = new WeakSet<AbortSignal>();

/**
 * A call's handler (undici's `request` gives its own, in undici's first handler interface), noting when
 * undici starts the call on a connected socket: it calls onConnect right before writing it there.
 */
class NoteBegun implements Dispatcher.DispatchHandler {
  constructor(
    private readonly inner: Dispatcher.DispatchHandler,
    private readonly signal: AbortSignal,
  ) {}
  onConnect(abort: (err?: Error) => void): void {
    begun.add(this.signal);
    this.inner.onConnect?.(abort);
  }
  onHeaders(statusCode: number, headers: Buffer[], resume: () => void, statusText: string): boolean {
    return this.inner.onHeaders?.(statusCode, headers, resume, statusText) ?? true;
  }
  onData(chunk: Buffer): boolean {
    return this.inner.onData?.(chunk) ?? true;
  }
  onComplete(trailers: string[] | null): void {
    this.inner.onComplete?.(trailers);
  }
  onError(err: Error): void {
    this.inner.onError?.(err);
  }
}

/**
 * An agent whose calls note when they begin (NoteBegun). Not undici's `compose`: its interceptors convert
 * every handler to the newer interface and back, about 9 µs of CPU a call here against 2 for this.
 */
class NotingAgent extends Dispatcher {
  constructor(private readonly agent: Agent) {
    super();
  }
  override dispatch(opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    // `request` passes its options on to the dispatcher, the call's signal among them (the types omit it).
    const { signal } = opts as { signal?: unknown };
    if (!(signal instanceof AbortSignal)) return this.agent.dispatch(opts, handler);
    // A handler of undici's newer interface cannot be watched this way: its call may have reached the peer.
    if (handler.onRequestStart !== undefined) {
      begun.add(signal);
      return this.agent.dispatch(opts, handler);
    }
    return this.agent.dispatch(opts, new NoteBegun(handler, signal));
  }
  override close(): Promise<void> {
    return this.agent.close();
  }
  override destroy(): Promise<void> {
    return this.agent.destroy();
  }
}

/** undici's own connect timeout, which a call's shorter timeout lowers (agentOf). */
const CONNECT_TIMEOUT_MS = 10_000;
const newAgent = (connectTimeoutMs = CONNECT_TIMEOUT_MS) =>
  new NotingAgent(new Agent({ keepAliveTimeout: 30_000, keepAliveMaxTimeout: 60_000, connections: 128, connect: { timeout: connectTimeoutMs } }));
/** Keep-alive connection pools for calls that name no tenant. */
const shared = newAgent();
/**
 * Keep-alive connection pools per tenant (an operator's wallet, a provider): up to 128 connections per
 * origin each, so a partner that hangs holds only its own and never makes another partner's calls
 * queue for a connection, even when both are served from one host (contract section 8, rule 8). Made
 * for the tenant's call timeout: a connect gives up when its call does, so the calls a host that drops
 * packets timed out do not go on holding connections (and connecting, only to be dropped) for undici's
 * 10 s. When the catalog changes the timeout, the tenant gets new pools and the old ones are closed once
 * their calls under way have ended (undici's close lets them finish): neither their idle connections nor
 * the pools themselves outlive the timeout they were made for.
 */
const agents = new Map<string, { timeoutMs: number; agent: Dispatcher }>();
const agentOf = (tenant: string | undefined, timeoutMs: number): Dispatcher => {
  if (tenant === undefined) return shared;
  const held = agents.get(tenant);
  if (held?.timeoutMs === timeoutMs) return held.agent;
  const agent = newAgent(Math.min(timeoutMs, CONNECT_TIMEOUT_MS));
  agents.set(tenant, { timeoutMs, agent });
  // The caller dispatches on the agent it is given before anything else runs, so none is closed under it.
  if (held) void held.agent.close().catch(() => undefined);
  return agent;
};

/**
 * Where and how to call an operator's wallet: its address, secret, timeout and connection pools of its
 * own. Every call to a partner takes these from here, so none can share another tenant's pools.
 */
export const walletTarget = (operator: Pick<Operator, 'id' | 'walletUrl' | 'secret' | 'walletTimeoutMs'>) =>
  ({ baseUrl: operator.walletUrl, secret: operator.secret, timeoutMs: operator.walletTimeoutMs, tenant: `operator:${operator.id}` }) as const;

/** Where and how to call a provider's API (see walletTarget). */
export const providerTarget = (provider: Pick<Provider, 'id' | 'apiBaseUrl' | 'secret' | 'timeoutMs'>) =>
  ({ baseUrl: provider.apiBaseUrl, secret: provider.secret, timeoutMs: provider.timeoutMs, tenant: `provider:${provider.id}` }) as const;

export interface OutboundRequest {
  baseUrl: string;
  /** Path plus query string, exactly as sent: it is what gets signed (contract section 3). */
  pathAndQuery: string;
  method: 'GET' | 'POST';
  body?: unknown;
  /** The exact JSON text to send instead of serialising `body` (a stored wallet body, byte for byte). */
  rawBody?: string;
  secret: string;
  timeoutMs: number;
  signal?: AbortSignal;
  /** Whose connection pools the call uses (walletTarget, providerTarget); calls of different tenants never wait for each other's connections. */
  tenant?: string;
}

/**
 * The most a partner's reply body may hold. Past it the reply is not read on, the connection is cut and
 * the call is a failure: a wallet that streams gigabytes must not take the process's memory with it.
 */
export const REPLY_LIMIT_BYTES = 1024 * 1024;

export type OutboundResult =
  | { kind: 'response'; status: number; body: string; contentType: string | undefined }
  /** The reply (whatever its status) was over REPLY_LIMIT_BYTES; its body was dropped unread past that. */
  | { kind: 'oversized'; status: number; limitBytes: number }
  /** `notSent`: no connection was made within the timeout (a host that drops packets), so the peer got nothing. */
  | { kind: 'timeout'; notSent?: true }
  /** `notSent`: no connection was made (refused, no such host, no route), so the peer got nothing. */
  | { kind: 'unreachable'; error: string; notSent?: true };

/** Joins a base URL (which may carry a path prefix) and a path-and-query. */
export function joinUrl(baseUrl: string, pathAndQuery: string): URL {
  const base = new URL(baseUrl);
  const prefix = base.pathname.replace(/\/+$/, '');
  return new URL(prefix + pathAndQuery, base.origin);
}

/**
 * The body as text, read chunk by chunk; undefined as soon as more than `limit` bytes have arrived (the
 * loop's early return destroys the stream, which makes undici drop the connection).
 */
export async function readCapped(body: AsyncIterable<Uint8Array>, limit: number): Promise<string | undefined> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.byteLength;
    if (size > limit) return undefined;
    chunks.push(chunk);
  }
  return new TextDecoder().decode(Buffer.concat(chunks, size));
}

/**
 * One signed call made by the service: fresh timestamp, nonce and signature over path plus query,
 * bounded by timeoutMs for the whole exchange and its reply by REPLY_LIMIT_BYTES. Never throws for
 * network trouble: a timeout, an unreachable peer and an oversized reply are results the caller decides about.
 */
export async function signedCall(req: OutboundRequest): Promise<OutboundResult> {
  const url = joinUrl(req.baseUrl, req.pathAndQuery);
  const target = url.pathname + url.search;
  const body = req.rawBody ?? (req.body === undefined ? '' : JSON.stringify(req.body));
  const timestamp = String(Math.floor(Date.now() / 1000));
  // 32 hex characters (docs/signing.md), 122 of their bits random, from the cache randomUUID is served
  // from (randomBytes goes into OpenSSL on every call: about 2 µs here).
  const nonce = randomUUID().replaceAll('-', '');
  const signature = sign(req.secret, { timestamp, nonce, method: req.method, target, body });
  return await sendCall({
    url,
    method: req.method,
    headers: { [HEADER.timestamp]: timestamp, [HEADER.nonce]: nonce, [HEADER.signature]: signature },
    body: body !== '' ? body : undefined,
    timeoutMs: req.timeoutMs,
    signal: req.signal,
    tenant: req.tenant,
  });
}

/**
 * A call with exactly these headers (the signature's among them) and body, bounded as signedCall's are:
 * timeoutMs for the whole exchange, its connect included (whenAborted), and the reply by
 * REPLY_LIMIT_BYTES. signedCall signs with it; the conformance checker sends its deliberately wrong
 * calls with it. Never throws for network trouble.
 */
export async function sendCall(req: {
  url: URL;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
  timeoutMs: number;
  signal?: AbortSignal;
  tenant?: string;
}): Promise<OutboundResult> {
  const timeout = AbortSignal.timeout(req.timeoutMs);
  const signal = req.signal ? AbortSignal.any([timeout, req.signal]) : timeout;
  const stop = whenAborted(signal);
  try {
    const res = await stop.race(request(req.url, {
      method: req.method,
      dispatcher: agentOf(req.tenant, req.timeoutMs),
      signal,
      headers: { ...req.headers, ...(req.body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(req.body !== undefined ? { body: req.body } : {}),
    }));
    const declared = Number(res.headers['content-length']);
    const text = declared > REPLY_LIMIT_BYTES ? undefined : await readCapped(res.body, REPLY_LIMIT_BYTES);
    if (text === undefined) {
      // Destroying the body unread aborts the request: undici closes the socket rather than drain it.
      res.body.destroy();
      return { kind: 'oversized', status: res.statusCode, limitBytes: REPLY_LIMIT_BYTES };
    }
    const ct = res.headers['content-type'];
    return { kind: 'response', status: res.statusCode, body: text, contentType: Array.isArray(ct) ? ct[0] : ct };
  } catch (err) {
    const notSent = begun.has(signal) ? {} : { notSent: true as const };
    if (timeout.aborted || err instanceof undiciErrors.HeadersTimeoutError || err instanceof undiciErrors.BodyTimeoutError) {
      return { kind: 'timeout', ...notSent };
    }
    return { kind: 'unreachable', error: (err as Error).message, ...notSent };
  } finally {
    stop.done();
  }
}

/**
 * Races a call against its signal. undici aborts a call on its signal only once the call is on a
 * connection: one waiting for its connect (a host that drops packets) would wait for undici's own 10 s
 * connect timeout, past the wallet timeout and the dispatch lease. Left behind, such a call is never
 * written: undici finds it aborted when the connection comes (its rejection is swallowed here).
 */
function whenAborted(signal: AbortSignal): { race<T>(call: Promise<T>): Promise<T>; done(): void } {
  let onAbort = (): void => {};
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  // Handled here too, should the call throw before racing it.
  aborted.catch(() => {});
  return {
    race: (call) => {
      call.catch(() => {});
      return Promise.race([call, aborted]);
    },
    done: () => signal.removeEventListener('abort', onAbort),
  };
}
