import { AsyncLocalStorage } from 'node:async_hooks';
import { pino, type Logger } from 'pino';

/** Carries the request id through every await of a request, so every log line of it is tagged. */
export const requestContext = new AsyncLocalStorage<{ reqId: string }>();

export function createLogger(level: string, base: Record<string, unknown> = {}): Logger {
  return pino({
    level,
    base: { pid: process.pid, ...base },
    mixin() {
      const ctx = requestContext.getStore();
      return ctx ? { reqId: ctx.reqId } : {};
    },
    redact: { paths: ['req.headers["x-signature"]', 'req.headers.authorization', '*.secret'], censor: '[redacted]' },
  });
}

export type { Logger };
