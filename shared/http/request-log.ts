import type { RequestHandler } from 'express';
import { stdSerializers, type Level, type Logger } from 'pino';

export interface RequestLogOptions {
  /** Requests not logged at all (health probes, metrics scrapes). */
  ignore?: (url: string) => boolean;
  /** The request's id, as the first middleware gave it (X-Request-Id). */
  requestId: (res: Parameters<RequestHandler>[1]) => string | undefined;
}

/**
 * One line per request when it ends: `request completed`, or `request aborted` when the client went
 * away before the answer was sent. 5xx is logged at error, 4xx at warn and the rest at info, with the
 * request (pino's standard serializer; the logger redacts the signature and bearer headers), the
 * response's status and headers, and the time taken in ms.
 *
 * The line is built only when its level is enabled. pino-http, used before, made a child logger for
 * every request, serializing and redacting the whole request whatever the level: at LOG_LEVEL=warn
 * that measured about a tenth of the api process's CPU per provider transaction (measured with A/B runs; see the git log).
 */
export function requestLog(logger: Logger, options: RequestLogOptions): RequestHandler {
  return (req, res, next) => {
    if (options.ignore?.(req.url)) {
      next();
      return;
    }
    const started = performance.now();
    res.once('close', () => {
      const level: Level = res.statusCode >= 500 ? 'error' : res.statusCode >= 400 ? 'warn' : 'info';
      if (!logger.isLevelEnabled(level)) return;
      logger[level](
        {
          reqId: options.requestId(res),
          req: stdSerializers.req(req),
          res: stdSerializers.res(res),
          responseTime: Math.round(performance.now() - started),
          // Why a request was refused when the answer does not say (a 401's reason).
          ...(typeof res.locals.refusal === 'string' ? { refusal: res.locals.refusal } : {}),
        },
        res.writableFinished ? 'request completed' : 'request aborted',
      );
    });
    next();
  };
}
