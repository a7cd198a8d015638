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
    try {
      req.body = JSON.parse(raw.toString('utf8')) as unknown;
    } catch {
      throw badRequest('request body is not valid JSON');
    }
  }
  next();
}
