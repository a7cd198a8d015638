import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { badRequest } from '../errors.ts';

export const BODY_LIMIT = '64kb';

/** Keeps the exact bytes (the signature covers them); 413 past 64 KiB. */
export const rawBody: RequestHandler[] = [
  express.raw({ type: () => true, limit: BODY_LIMIT }),
  (req: Request, _res: Response, next: NextFunction) => {
    req.rawBody = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    req.body = undefined;
    next();
  },
];

/** Parses the already-verified raw bytes as JSON; an empty body stays undefined. */
export function jsonFromRaw(req: Request, _res: Response, next: NextFunction): void {
  const raw = req.rawBody;
  if (raw && raw.length > 0) {
    const text = raw.toString('utf8');
    try {
      req.body = JSON.parse(text) as unknown;
    } catch {
      throw badRequest('request body is not valid JSON');
    }
    // Such text can only come as a raw NUL or a \u escape: most bodies are never walked.
    if ((text.includes('\\u') || text.includes('\0')) && holdsUnstorableText(req.body)) throw unstorable();
  }
  next();
}

/** After express.json (the admin routes): the same refusal, on the parsed body. */
export function refuseUnstorableText(req: Request, _res: Response, next: NextFunction): void {
  if (holdsUnstorableText(req.body)) throw unstorable();
  next();
}

const unstorable = () => badRequest('body: text holds U+0000 or a lone surrogate, which cannot be stored');

/** U+0000, or a surrogate that is not half of a pair: Postgres text and jsonb refuse both (contract 8, rule 6). */
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function holdsUnstorableText(value: unknown): boolean {
  if (typeof value === 'string') return UNSTORABLE.test(value);
  if (Array.isArray(value)) return value.some(holdsUnstorableText);
  if (value !== null && typeof value === 'object') {
    return Object.entries(value).some(([k, v]) => UNSTORABLE.test(k) || holdsUnstorableText(v));
  }
  return false;
}
