import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { Redis } from 'ioredis';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { CatalogSnapshot } from '../catalog/store.ts';
import { AppError, unavailable } from '../errors.ts';

/**
 * Per-operator limit of contract section 4, counted in Redis so every API process shares it. Runs
 * after the signature check, so only authenticated requests count.
 */
export function operatorRateLimit(redis: Redis, catalog: () => CatalogSnapshot, onRefusal?: (operatorId: string) => void): RequestHandler {
  const limiters = new Map<string, RateLimiterRedis>();
  const limiterFor = (limit: number, windowSeconds: number) => {
    const key = `${limit}/${windowSeconds}`;
    let limiter = limiters.get(key);
    if (!limiter) {
      limiter = new RateLimiterRedis({ storeClient: redis, points: limit, duration: windowSeconds, keyPrefix: `rl:${key}` });
      limiters.set(key, limiter);
    }
    return limiter;
  };
  return async (req: Request, _res: Response, next: NextFunction) => {
    const operator = req.caller ? catalog().operators.get(req.caller.id) : undefined;
    if (!operator) throw new AppError(401, 'invalid signature');
    const { limit, windowSeconds } = operator.rateLimit;
    try {
      await limiterFor(limit, windowSeconds).consume(operator.id);
    } catch (err) {
      if (!(err instanceof RateLimiterRes)) throw unavailable('service unavailable');
      onRefusal?.(operator.id);
      const retryAfter = Math.max(1, Math.ceil(err.msBeforeNext / 1000));
      throw new AppError(429, 'rate limit exceeded', { 'Retry-After': String(retryAfter) });
    }
    next();
  };
}
