import { randomBytes } from 'node:crypto';
import { HEADER, sign } from '../../shared/http/signature.ts';

/**
 * A partner's signed call to the service (contract section 3), as an operator or a provider writes it:
 * four headers, an HMAC-SHA256 over timestamp, nonce, method, path (without the query string, for calls
 * made to the service) and the SHA-256 of the exact body bytes sent. Copy it into your integration.
 */
export interface PartnerCredentials {
  kind: 'operator' | 'provider';
  /** Your catalog id: sent as X-Operator-Id or X-Provider-Id. */
  id: string;
  secret: string;
}

export interface ApiResponse<T = unknown> {
  status: number;
  contentType: string;
  /** The body as received. */
  text: string;
  /** The body parsed as JSON, or undefined when it is not JSON (the plain-text 401, for example). */
  json: T | undefined;
}

export class SignedClient {
  constructor(
    readonly baseUrl: string,
    readonly credentials: PartnerCredentials,
  ) {}

  /**
   * `pathAndQuery` is sent as given; only its path is signed. A fresh nonce for every call, retries included.
   * `extraHeaders` (an Accept, say) are sent as they are: headers are not part of the signature.
   */
  async call<T = unknown>(method: 'GET' | 'POST', pathAndQuery: string, body?: unknown, extraHeaders: Record<string, string> = {}): Promise<ApiResponse<T>> {
    const raw = body === undefined ? '' : JSON.stringify(body);
    const timestamp = String(Math.floor(Date.now() / 1000));
    const nonce = randomBytes(16).toString('hex');
    const target = pathAndQuery.split('?')[0]!;
    const signature = sign(this.credentials.secret, { timestamp, nonce, method, target, body: raw });
    const headers: Record<string, string> = {
      ...extraHeaders,
      [this.credentials.kind === 'operator' ? HEADER.operatorId : HEADER.providerId]: this.credentials.id,
      [HEADER.timestamp]: timestamp,
      [HEADER.nonce]: nonce,
      [HEADER.signature]: signature,
    };
    if (raw !== '') headers['content-type'] = 'application/json';
    return readResponse<T>(await fetch(this.baseUrl + pathAndQuery, { method, headers, ...(raw !== '' ? { body: raw } : {}) }));
  }
}

/** A response's status, content type and text, and its JSON when the text is JSON. */
export async function readResponse<T>(res: Response): Promise<ApiResponse<T>> {
  const text = await res.text();
  let json: T | undefined;
  try {
    json = JSON.parse(text) as T;
  } catch {
    json = undefined;
  }
  return { status: res.status, contentType: res.headers.get('content-type') ?? '', text, json };
}
