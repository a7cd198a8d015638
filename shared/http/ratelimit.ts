import { randomBytes } from 'node:crypto';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { Redis } from 'ioredis';
import type { CatalogSnapshot } from '../catalog/store.ts';
import { AppError, unavailable } from '../errors.ts';

/**
 * A sliding-window log in one sorted set per operator, scored by acceptance time on Redis's own clock
 * (one clock for every API process). Entries older than the window are dropped; a request is accepted
 * only while fewer than `limit` remain, so no closed interval of `window` ms ever holds more than `limit`
 * accepted requests (a fixed window lets 2 × limit through around its boundary). Refused requests are
 * not logged, so a client that keeps hammering still gets in once the window slides. When refused, the
 * answer is the ms until enough entries age out.
 */
const SLIDING_LOG = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - window))
local n = redis.call('ZCARD', KEYS[1])
if n < limit then
  redis.call('ZADD', KEYS[1], now, now .. ':' .. ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window + 1000)
  return 0
end
local oldest = redis.call('ZRANGE', KEYS[1], n - limit, n - limit, 'WITHSCORES')
return tonumber(oldest[2]) + window + 1 - now
`;

type SlidingLogRedis = Redis & { rateLimitSlidingLog(key: string, limit: number, windowMs: number, member: string): Promise<number> };

/**
 * Per-operator limit of contract sections 4 and 8 (rule 10), counted in Redis so every API process
 * shares it. Runs after the signature check, so only authenticated requests count.
 *
 * Written here rather than taken from a library: rate-limiter-flexible (used before) has only fixed
 * windows for Redis, and the sliding-window packages on npm bring their own Redis client.
 */
export function operatorRateLimit(redis: Redis, catalog: () => CatalogSnapshot, onRefusal?: (operatorId: string) => void): RequestHandler {
  if (!('rateLimitSlidingLog' in redis)) redis.defineCommand('rateLimitSlidingLog', { numberOfKeys: 1, lua: SLIDING_LOG });
  const client = redis as SlidingLogRedis;
  // Unique per process; with the Redis time in the member, no two accepted requests share one entry.
  const processTag = randomBytes(6).toString('hex');
  let counter = 0;
  return async (req: Request, _res: Response, next: NextFunction) => {
    const operator = req.caller ? catalog().operators.get(req.caller.id) : undefined;
    if (!operator) throw new AppError(401, 'invalid signature');
    const { limit, windowSeconds } = operator.rateLimit;
    let waitMs: number;
    try {
      waitMs = await client.rateLimitSlidingLog(`rl:${operator.id}`, limit, windowSeconds * 1000, `${processTag}:${counter++}`);
    } catch {
      throw unavailable('service unavailable');
    }
    if (waitMs > 0) {
      onRefusal?.(operator.id);
      throw new AppError(429, 'rate limit exceeded', { 'Retry-After': String(Math.max(1, Math.ceil(waitMs / 1000))) });
    }
    next();
  };
}
