import { createHash, timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { unauthorized } from '../errors.ts';

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Bearer ADMIN_TOKEN for admin and audit routes; with no token configured they are closed. */
export function adminAuth(token: string | undefined): RequestHandler {
  const expected = token ? digest(token) : undefined;
  return (req: Request, _res: Response, next: NextFunction) => {
    // The scheme's name in any case (RFC 9110 11.1), then the token.
    const match = /^bearer +(\S.*)$/i.exec(req.headers.authorization ?? '');
    if (!expected || !match || !timingSafeEqual(digest(match[1]!), expected)) throw unauthorized('unauthorized');
    next();
  };
}
