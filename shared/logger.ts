import { pino, type DestinationStream, type Logger } from 'pino';

/**
 * destination: where lines go (stdout unless given; tests read them). On a terminal the lines are
 * pretty-printed by pino's own pretty transport, for a person reading a first `npm start`; anywhere else
 * (a pipe, a file, a container's log) they are JSON, one per line, for machines.
 */
export function createLogger(level: string, base: Record<string, unknown> = {}, destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { pid: process.pid, ...base },
    redact: { paths: ['req.headers["x-signature"]', 'req.headers.authorization', '*.secret'], censor: '[redacted]' },
  };
  if (destination) return pino(options, destination);
  if (process.stdout.isTTY) {
    return pino(options, pino.transport({ target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } }));
  }
  return pino(options);
}

export type { Logger };
