import { EventStoreUnavailableError } from '../eventstore/port.ts';
import type { ErrorRequestHandler, Request, Response } from 'express';
import type { Logger } from 'pino';
import { Refused } from '../decider.ts';
import { AppError } from '../errors.ts';
import { InvalidSignature } from './verify.ts';

interface BodyParserError {
  type?: string;
  status?: number;
}

/**
 * Renders every error in the documented form: `{"error": "..."}`, except the plain-text 401 of a bad
 * signature. A rule's refusal is answered as `answerRefusal` (the API's refusal table) says. A 500 says
 * nothing about what failed; the log has it.
 */
export function errorRenderer(logger: Logger, answerRefusal?: (refused: Refused) => { status: number; error: string }): ErrorRequestHandler {
  return (err: unknown, req: Request, res: Response, _next) => {
    if (res.headersSent) {
      req.socket.destroy();
      return;
    }
    if (err instanceof InvalidSignature) {
      res.locals.refusal = err.reason; // for the request's log line
      res.status(401).type('text/plain').send('invalid signature');
      return;
    }
    if (err instanceof Refused && answerRefusal) {
      const { status, error } = answerRefusal(err);
      res.status(status).json({ error });
      return;
    }
    if (err instanceof AppError) {
      res.set(err.headers).status(err.status).json({ error: err.message });
      return;
    }
    const bp = err as BodyParserError;
    if (bp.type === 'entity.too.large') {
      res.status(413).json({ error: 'request body too large' });
      return;
    }
    if (bp.type === 'entity.parse.failed' || bp.type === 'encoding.unsupported' || bp.type === 'charset.unsupported') {
      res.status(400).json({ error: 'request body is not valid JSON' });
      return;
    }
    if (typeof bp.status === 'number' && bp.status >= 400 && bp.status < 500) {
      res.status(bp.status).json({ error: 'bad request' });
      return;
    }
    if (isLostConnection(err) || err instanceof EventStoreUnavailableError) {
      // Postgres went away under the request (restart, failover, a killed connection), or the event store
      // did not answer: nothing about the request was wrong, and what it recorded is answered on
      // resubmission, so it is worth retrying.
      logger.warn({ err, reqId: requestIdOf(res) }, err instanceof EventStoreUnavailableError ? 'event store did not answer during the request' : 'database connection lost during the request');
      res.set('Retry-After', '1').status(503).json({ error: 'service unavailable' });
      return;
    }
    logger.error({ err, reqId: requestIdOf(res) }, 'unhandled error');
    res.status(500).json({ error: 'internal error' });
  };
}

/**
 * A failure of the database connection itself, not of a statement: SQLSTATE class 08 (connection
 * exception), but not 08P01 (a protocol violation: a bug, failing the same way every time); 57P01-57P03
 * (the server shutting down or not yet up), 57P05 (an idle session timed out); 53300 (too many
 * connections); or the socket failing (or a statement given a read timeout going unanswered) under
 * node-postgres.
 */
export function isLostConnection(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const { code, message } = err as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && ((/^08/.test(code) && code !== '08P01') || ['57P01', '57P02', '57P03', '57P05', '53300', 'ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH'].includes(code))) return true;
  return typeof message === 'string' && /^(Connection terminated|Client has encountered a connection error|connection timeout|timeout exceeded when trying to connect|Query read timeout)/i.test(message);
}

/** The request id the api answered with (X-Request-Id), for the request's log lines. */
export function requestIdOf(res: Response): string | undefined {
  const id = res.getHeader('X-Request-Id');
  return typeof id === 'string' ? id : undefined;
}

export function renderNotFound(_req: Request, res: Response): void {
  res.status(404).json({ error: 'not found' });
}

