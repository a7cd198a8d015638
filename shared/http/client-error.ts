import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';

/**
 * The answer to a request Node's HTTP parser could not read (a malformed request line or header, a bad or
 * duplicated Content-Length, headers over Node's limit, a request not sent in time), in the form every
 * other error has (docs/errors.md): JSON `{"error": …}` with an `X-Request-Id`. Node's own answer to
 * these is a bare status line. The connection is closed after it, as Node's is.
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const [status, reason, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'Request Header Fields Too Large', 'request headers too large']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', 'request not received in time']
        : [400, 'Bad Request', 'bad request'];
  const body = JSON.stringify({ error: message });
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${randomUUID()}\r\nConnection: close\r\n\r\n${body}`,
  );
}
