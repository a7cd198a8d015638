import { AsyncLocalStorage } from 'node:async_hooks';
import { pino, type DestinationStream, type Logger } from 'pino';

/** Carries the request id through every await of a request, so every log line of it is tagged. */
export const requestContext = new AsyncLocalStorage<{ reqId: string }>();

/** destination: where lines go (stdout unless given; tests read them). */
export function createLogger(level: string, base: Record<string, unknown> = {}, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { pid: process.pid, ...base },
    mixin() {
      const ctx = requestContext.getStore();
      return ctx ? { reqId: ctx.reqId } : {};
    },
    redact: { paths: ['req.headers["x-signature"]', 'req.headers.authorization', '*.secret'], censor: '[redacted]' },
  };
  return destination ? pino(options, destination) : pino(options);
}

export type { Logger };
