import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { Redis } from 'ioredis';
import type { CatalogSnapshot } from '../catalog/store.ts';
import { AppError, unavailable } from '../errors.ts';
import { HEADER, MAX_NONCE_LENGTH, signatureMatches } from './signature.ts';

export type CallerKind = 'operator' | 'provider';

export interface Caller {
  kind: CallerKind;
  id: string;
}

declare module 'express-serve-static-core' {
  interface Request {
    /** The exact bytes received, kept for the signature check. */
    rawBody?: Buffer;
    /** Set by the signature check once the request is proven to come from this catalog entry. */
    caller?: Caller;
  }
}

export interface VerifierOptions {
  kind: CallerKind;
  catalog: () => CatalogSnapshot;
  redis: Redis;
  windowSeconds: number;
  now?: () => number;
}

/**
 * Plain-text 401 of contract section 3: the signature check runs before any handler. The reason goes to
 * the service's log (the request's line), never into the response: a caller probing the check learns
 * nothing from it, while whoever runs the service sees why a partner's calls fail.
 */
export class InvalidSignature extends AppError {
  constructor(readonly reason: string) {
    super(401, 'invalid signature');
  }
}

/**
 * The Redis key of a caller's nonce. The caller's id is URI-encoded, so that it holds no ":" and the key
 * names one caller and one nonce: with ids such as "a:b" written as they are, caller "a:b"'s nonce "c"
 * and caller "a"'s nonce "b:c" were one key. (An id of letters, digits and "-_.!~*'()" keeps the key it
 * had; for any other, the verifier also looks for the key as it was written before.)
 */
export const nonceKey = (kind: string, callerId: string, nonce: string): string => `nonce:${kind}:${encodeURIComponent(callerId)}:${nonce}`;

/**
 * How long a nonce is remembered (contract section 8, rule 9): until its own timestamp has left the
 * accepted window (timestamp + W, which this receiver accepts up to the end of that second), plus one
 * more window for the other API processes, whose clocks may differ from this one's. Counted from the
 * timestamp, not from first use: a request stamped ahead of this clock stays acceptable, and so must
 * stay remembered, for longer than one stamped behind it.
 */
export function nonceLifetimeMs(timestampSeconds: number, nowMs: number, windowSeconds: number): number {
  return Math.max(1000, (timestampSeconds + 1 + 2 * windowSeconds) * 1000 - nowMs);
}

const header = (req: Request, name: string): string | undefined => {
  const v = req.headers[name];
  return typeof v === 'string' ? v : undefined;
};

/**
 * Contract section 3, in its order: nonce shape (400), signature (401 plain text), replay (401).
 * The nonce is recorded only after the signature proved valid, so a forged request cannot burn it;
 * if Redis cannot record it the request is refused (503), never let through unchecked.
 */
export function signatureVerifier(options: VerifierOptions): RequestHandler {
  const idHeader = options.kind === 'operator' ? HEADER.operatorId : HEADER.providerId;
  const now = options.now ?? (() => Date.now());
  return async (req: Request, _res: Response, next: NextFunction) => {
    const nonce = header(req, HEADER.nonce);
    if (nonce === undefined || nonce.length === 0 || nonce.length > MAX_NONCE_LENGTH) {
      throw new AppError(400, 'invalid nonce');
    }
    const callerId = header(req, idHeader);
    const timestamp = header(req, HEADER.timestamp);
    const signature = header(req, HEADER.signature);
    if (callerId === undefined || timestamp === undefined || signature === undefined) {
      const missing = Object.entries({ [idHeader]: callerId, [HEADER.timestamp]: timestamp, [HEADER.signature]: signature }).filter(([, v]) => v === undefined);
      throw new InvalidSignature(`missing header ${missing.map(([h]) => h).join(', ')}`);
    }
    if (!/^\d{1,12}$/.test(timestamp)) throw new InvalidSignature(`${HEADER.timestamp} is not Unix seconds`);
    const snapshot = options.catalog();
    const callers = options.kind === 'operator' ? snapshot.operators : snapshot.providers;
    const secret = callers.get(callerId)?.secret;
    if (secret === undefined) throw new InvalidSignature(`unknown ${options.kind} ${JSON.stringify(callerId)}${callers.size === 0 ? ` (no ${options.kind} is in the catalog)` : ''}`);
    const skew = Math.floor(now() / 1000) - Number(timestamp);
    if (Math.abs(skew) > options.windowSeconds) throw new InvalidSignature(`${HEADER.timestamp} is ${Math.abs(skew)} s ${skew > 0 ? 'behind' : 'ahead of'} this server's clock (window ${options.windowSeconds} s)`);
    const target = req.originalUrl.split('?')[0]!;
    const input = { timestamp, nonce, method: req.method, target, body: req.rawBody ?? Buffer.alloc(0) };
    if (!signatureMatches(secret, input, signature)) throw new InvalidSignature(`signature does not match ${req.method} ${target} with this ${options.kind}'s secret`);

    let fresh: string | null;
    try {
      const key = nonceKey(options.kind, callerId, nonce);
      // An id the encoding changes had its nonces kept under the key written as it is (before 2026-12-01):
      // one used just before an upgrade is still a replay (contract 8, rule 9).
      const legacy = `nonce:${options.kind}:${callerId}:${nonce}`;
      fresh = key !== legacy && (await options.redis.exists(legacy)) === 1 ? null : await options.redis.set(key, '1', 'PX', nonceLifetimeMs(Number(timestamp), now(), options.windowSeconds), 'NX');
    } catch {
      throw unavailable('service unavailable');
    }
    if (fresh !== 'OK') throw new AppError(401, 'replayed request');
    req.caller = { kind: options.kind, id: callerId };
    next();
  };
}
