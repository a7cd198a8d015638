import { randomBytes } from 'node:crypto';
import { sign } from '../../shared/http/signature.ts';

export interface SignedRequestOptions {
  method?: string;
  /** Path, optionally with a query string; only the path is signed (calls made to the service). */
  path: string;
  body?: unknown;
  /** The body's exact bytes (a Buffer for bytes that are not UTF-8). */
  rawBody?: string | Buffer;
  as: { kind: 'operator' | 'provider'; id: string; secret: string };
  nonce?: string;
  timestamp?: number;
  /** Override any header after signing (to tamper). */
  headers?: Record<string, string | undefined>;
  /** Aborts the request: the caller drops its connection. */
  signal?: AbortSignal;
}

export interface TestResponse<T = unknown> {
  status: number;
  headers: Headers;
  text: string;
  json: T;
}

export const freshNonce = () => randomBytes(12).toString('hex');

/** Builds the headers and body of a request signed as contract section 3 says a partner signs it. */
export function signRequest(opts: SignedRequestOptions): { headers: Record<string, string>; body: string | undefined; bytes: Buffer | undefined; method: string } {
  const method = (opts.method ?? (opts.body !== undefined || opts.rawBody !== undefined ? 'POST' : 'GET')).toUpperCase();
  // `bytes`: a raw body given as bytes, sent as they are (`body` is then undefined).
  const bytes = Buffer.isBuffer(opts.rawBody) ? opts.rawBody : undefined;
  const body = bytes ? undefined : ((opts.rawBody as string | undefined) ?? (opts.body !== undefined ? JSON.stringify(opts.body) : undefined));
  const timestamp = String(opts.timestamp ?? Math.floor(Date.now() / 1000));
  const nonce = opts.nonce ?? freshNonce();
  const target = opts.path.split('?')[0]!;
  const signature = sign(opts.as.secret, { timestamp, nonce, method, target, body: bytes ?? body ?? '' });
  const headers: Record<string, string> = {
    [opts.as.kind === 'operator' ? 'x-operator-id' : 'x-provider-id']: opts.as.id,
    'x-timestamp': timestamp,
    'x-nonce': nonce,
    'x-signature': signature,
  };
  if (body || bytes) headers['content-type'] = 'application/json';
  for (const [k, v] of Object.entries(opts.headers ?? {})) {
    if (v === undefined) delete headers[k.toLowerCase()];
    else headers[k.toLowerCase()] = v;
  }
  return { headers, body, bytes, method };
}

export async function signedRequest<T = unknown>(baseUrl: string, opts: SignedRequestOptions): Promise<TestResponse<T>> {
  const { headers, body, bytes, method } = signRequest(opts);
  const payload = bytes ? new Uint8Array(bytes) : body;
  const res = await fetch(baseUrl + opts.path, { method, headers, ...(payload ? { body: payload } : {}), ...(opts.signal ? { signal: opts.signal } : {}) });
  return toTestResponse<T>(res);
}

export async function toTestResponse<T>(res: Response): Promise<TestResponse<T>> {
  const text = await res.text();
  let json: unknown = undefined;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json: json as T };
}
