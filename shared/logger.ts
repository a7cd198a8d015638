import { pino, type DestinationStream, type Logger } from 'pino';

/** destination: where lines go (stdout unless given; tests read them). */
export function createLogger(level: string, base: Record<string, unknown> = {}, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { pid: process.pid, ...base },
    redact: { paths: ['req.headers["x-signature"]', 'req.headers.authorization', '*.secret'], censor: '[redacted]' },
  };
  return destination ? pino(options, destination) : pino(options);
}

export type { Logger };
