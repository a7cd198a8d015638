import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import express from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import { errorRenderer, requestIdOf } from '../../shared/http/errors.ts';
import { requestLog } from '../../shared/http/request-log.ts';
import { createLogger } from '../../shared/logger.ts';

interface Line {
  level: number;
  msg: string;
  reqId?: string;
  err?: { message: string };
  req?: { method: string; url: string; headers: Record<string, string> };
  res?: { statusCode: number };
  responseTime?: number;
}

const servers: http.Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** An app as the service builds it (its logger, the request log after the request id), at `level`. */
async function serve(level: string): Promise<{ url: string; lines: Line[] }> {
  const lines: Line[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l) as Line);
      done();
    },
  });
  const logger = createLogger(level, {}, sink);
  const app = express();
  app.use((_req, res, next) => {
    res.setHeader('X-Request-Id', 'req-42');
    next();
  });
  app.use(requestLog(logger, { requestId: requestIdOf, ignore: (url) => url === '/healthz' }));
  app.get('/ok', (_req, res) => void res.json({ ok: true }));
  app.get('/healthz', (_req, res) => void res.send('ok'));
  app.get('/missing', (_req, res) => void res.status(404).json({ error: 'not found' }));
  app.get('/broken', (_req, res) => void res.status(500).json({ error: 'internal error' }));
  app.get('/slow', () => undefined); // never answers: the client gives up
  app.get('/throws', async () => {
    await Promise.resolve();
    throw new Error('projection table missing');
  });
  app.use(errorRenderer(logger));
  const server = http.createServer(app);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, lines };
}

/** Waits until `n` lines were written (a line is written when the server closes the response, which may come after the client has read it). */
async function lines(of: Line[], n: number): Promise<Line[]> {
  const deadline = Date.now() + 5000;
  while (of.length < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  return of;
}

describe('request log', () => {
  it('logs each request once it is answered: level by status, request with its signature redacted, status, time', async () => {
    const { url, lines: written } = await serve('info');
    await fetch(`${url}/ok`, { headers: { 'x-signature': 'a'.repeat(64), authorization: 'Bearer admin-token' } });
    await fetch(`${url}/missing`);
    await fetch(`${url}/broken`);
    const got = await lines(written, 3);
    expect(got.map((l) => [l.level, l.msg, l.res?.statusCode, l.req?.url])).toEqual([
      [30, 'request completed', 200, '/ok'],
      [40, 'request completed', 404, '/missing'],
      [50, 'request completed', 500, '/broken'],
    ]);
    const first = got[0]!;
    expect(first.reqId).toBe('req-42');
    expect(first.req?.method).toBe('GET');
    expect(first.req?.headers['x-signature']).toBe('[redacted]');
    expect(first.req?.headers.authorization).toBe('[redacted]');
    expect(typeof first.responseTime).toBe('number');
  });

  it('writes only the levels the logger is set to, and never the ignored probes', async () => {
    const { url, lines: written } = await serve('warn');
    await fetch(`${url}/ok`);
    await fetch(`${url}/healthz`);
    await fetch(`${url}/missing`);
    expect((await lines(written, 1)).map((l) => [l.msg, l.res?.statusCode])).toEqual([['request completed', 404]]);

    const all = await serve('info');
    await fetch(`${all.url}/healthz`);
    await fetch(`${all.url}/ok`);
    expect((await lines(all.lines, 1)).map((l) => l.req?.url)).toEqual(['/ok']);
  });

  it('logs an unhandled error under the request id the caller was answered with, and tells the caller nothing of it', async () => {
    const { url, lines: written } = await serve('warn');
    const res = await fetch(`${url}/throws`);
    expect(res.status).toBe(500);
    expect(res.headers.get('x-request-id')).toBe('req-42');
    expect(await res.text()).toBe('{"error":"internal error"}');
    expect((await lines(written, 2)).map((l) => [l.level, l.msg, l.reqId, l.err?.message])).toEqual([
      [50, 'unhandled error', 'req-42', 'projection table missing'],
      [50, 'request completed', 'req-42', undefined],
    ]);
  });

  it('reports a request whose client went away before the answer as aborted', async () => {
    const { url, lines: written } = await serve('info');
    const gone = new Promise<void>((resolve) => {
      const req = http.get(`${url}/slow`);
      req.on('error', () => resolve());
      setTimeout(() => req.destroy(), 50);
    });
    await gone;
    expect((await lines(written, 1)).map((l) => [l.msg, l.req?.url])).toEqual([['request aborted', '/slow']]);
  });
});
