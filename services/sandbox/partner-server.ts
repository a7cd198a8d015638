import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { HEADER, MAX_NONCE_LENGTH, signatureMatches } from '../../shared/http/signature.ts';

/**
 * What a partner of the service (an operator's wallet, a provider) needs to receive the service's signed
 * calls: the check of contract section 3 and a small HTTP server. Shared by the demo wallet and the demo
 * provider; an integrator can read it as the whole of "verifying the service's signature".
 */

/** A reply: JSON, or text sent as it is (the plain-text 401, or a stored JSON reply sent byte for byte). */
export type PartnerReply = { status: number; json: unknown } | { status: number; text: string; contentType?: string };

export interface SignatureCheckOptions {
  /** The shared secret: the operator's for a wallet, the provider's for a provider. */
  secret: string;
  /** Accepted X-Timestamp skew, both ways, in seconds. */
  windowSeconds: number;
  /** Test-only: skip the signature, timestamp and replay checks (the conformance tests' broken wallet). */
  acceptBadSignatures?: boolean;
}

/**
 * Contract section 3, in its order: a missing or oversized nonce is 400, a bad signature or a timestamp
 * outside the window is the plain-text 401, a nonce already used within the window is 401 "replayed
 * request". The target is the path plus query exactly as the service sent it (req.url). A nonce is
 * recorded only once the signature is proven, so a forged request cannot burn one. Returns the refusal,
 * or undefined when the call is genuine.
 */
export function signatureCheck(options: SignatureCheckOptions): (req: http.IncomingMessage, body: Buffer) => PartnerReply | undefined {
  /** nonce → when it may be forgotten (ms): after that its timestamp is outside the window anyway. */
  const nonces = new Map<string, number>();
  let nextSweep = 0;
  return (req, body) => {
    const header = (name: string) => (typeof req.headers[name] === 'string' ? (req.headers[name] as string) : undefined);
    const nonce = header(HEADER.nonce);
    if (nonce === undefined || nonce.length === 0 || nonce.length > MAX_NONCE_LENGTH) return { status: 400, json: { error: 'invalid nonce' } };
    if (options.acceptBadSignatures) return undefined;
    const timestamp = header(HEADER.timestamp);
    const signature = header(HEADER.signature);
    const valid =
      timestamp !== undefined &&
      signature !== undefined &&
      /^\d{1,12}$/.test(timestamp) &&
      Math.abs(Math.floor(Date.now() / 1000) - Number(timestamp)) <= options.windowSeconds &&
      signatureMatches(options.secret, { timestamp, nonce, method: req.method ?? '', target: req.url ?? '/', body }, signature);
    if (!valid) return { status: 401, text: 'invalid signature' };
    const now = Date.now();
    if (now >= nextSweep) {
      for (const [n, until] of nonces) if (until <= now) nonces.delete(n);
      nextSweep = now + options.windowSeconds * 1000;
    }
    if ((nonces.get(nonce) ?? 0) > now) return { status: 401, json: { error: 'replayed request' } };
    nonces.set(nonce, now + options.windowSeconds * 2 * 1000);
    return undefined;
  };
}

export interface PartnerServer {
  url: string;
  close(): Promise<void>;
}

/**
 * An HTTP server that collects each request body (413 above `bodyLimit`), hands it to `handle`, and
 * writes the reply; a handler that throws answers 500.
 */
export async function startPartnerServer(options: {
  port?: number | undefined;
  host?: string | undefined;
  bodyLimit: number;
  handle: (req: http.IncomingMessage, body: Buffer) => PartnerReply;
  onError?: (err: unknown) => void;
}): Promise<PartnerServer> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= options.bodyLimit) chunks.push(c);
    });
    req.on('end', () => {
      let reply: PartnerReply;
      try {
        reply = size > options.bodyLimit ? { status: 413, json: { error: 'request body too large' } } : options.handle(req, Buffer.concat(chunks));
      } catch (err) {
        options.onError?.(err);
        reply = { status: 500, json: { error: 'internal error' } };
      }
      if ('text' in reply) res.writeHead(reply.status, { 'content-type': reply.contentType ?? 'text/plain' }).end(reply.text);
      else res.writeHead(reply.status, { 'content-type': 'application/json' }).end(JSON.stringify(reply.json));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
