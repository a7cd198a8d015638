import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { answerClientError } from '../../shared/http/client-error.ts';

/**
 * The answer to a request Node's parser cannot read, on a real server of 127.0.0.1, where the things
 * Node's own answer takes care of can be seen: the connection is closed on the server's side even when
 * the client keeps its own side open, and a response already streaming on the connection is never
 * written into. (test/attack/fuzz.e2e.test.ts checks the answers of the running service.)
 */
describe('answerClientError', () => {
  let server: http.Server | undefined;
  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise((r) => server?.close(r));
  });

  const serve = async (handler: http.RequestListener) => {
    server = http.createServer(handler);
    server.on('clientError', (err: NodeJS.ErrnoException, socket: net.Socket) => answerClientError(err, socket));
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    return (server.address() as net.AddressInfo).port;
  };
  const connections = () => new Promise<number>((resolve, reject) => server!.getConnections((err, n) => (err ? reject(err) : resolve(n))));

  it('answers JSON and closes the connection on its side, though the client keeps its own side open', async () => {
    const port = await serve((_req, res) => res.end('ok'));
    const chunks: Buffer[] = [];
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true }, () => socket.write('GARBAGE\r\n\r\n'));
    socket.on('data', (c: Buffer) => chunks.push(c));
    await new Promise((r) => socket.once('end', r));
    const answer = Buffer.concat(chunks).toString();
    expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 400 Bad Request');
    expect(JSON.parse(answer.split('\r\n\r\n')[1]!)).toEqual({ error: 'bad request' });
    await new Promise((r) => setTimeout(r, 200));
    expect(await connections()).toBe(0);
    socket.destroy();
  });

  it('writes nothing into a response already streaming on the connection: it is cut, as Node cuts it', async () => {
    let streaming!: () => void;
    const started = new Promise<void>((r) => (streaming = r));
    const port = await serve((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      res.write('a'.repeat(1000));
      streaming();
      // The rest would follow later; the garbage behind the request arrives first.
    });
    const chunks: Buffer[] = [];
    const socket = net.connect({ port, host: '127.0.0.1' }, () => socket.write('GET /stream HTTP/1.1\r\nHost: x\r\n\r\n'));
    socket.on('data', (c: Buffer) => chunks.push(c));
    await started;
    socket.write('GARBAGE\r\n\r\n');
    await new Promise((r) => socket.once('close', r));
    const received = Buffer.concat(chunks).toString();
    expect(received.startsWith('HTTP/1.1 200 OK')).toBe(true);
    expect(received).not.toContain('400 Bad Request');
  });
});
