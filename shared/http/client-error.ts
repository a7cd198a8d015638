import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Logger } from '../logger.ts';

/**
 * The answer to a request Node's HTTP parser could not read (a malformed request line or header, a bad or
 * duplicated Content-Length, headers over Node's limit, a request not sent in time), in the form every
 * other error has (docs/errors.md): JSON `{"error": …}` with an `X-Request-Id`, which the log line names.
 * Node's own answer to these is a bare status line. As Node's, it is written only when no answer is under
 * way on the connection (a response already streaming is cut, never written into), and the connection is
 * closed after it.
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Socket, logger?: Logger): void {
  const answering = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (err.code === 'ECONNRESET' || !socket.writable || answering?.headersSent) {
    socket.destroy();
    return;
  }
  const [status, reason, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'Request Header Fields Too Large', 'request headers too large']
      : err.code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW'
        ? [413, 'Payload Too Large', 'request body too large']
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? [408, 'Request Timeout', 'request not received in time']
          : [400, 'Bad Request', 'bad request'];
  const requestId = randomUUID();
  logger?.info({ reqId: requestId, status, code: err.code }, 'request the HTTP parser could not read');
  const body = JSON.stringify({ error: message });
  // Written, then the connection closed once it is flushed (the server keeps half-open sockets, so end()
  // alone would leave it open until the client closed it).
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
    () => socket.destroy(),
  );
}
