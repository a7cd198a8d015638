import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { drainedOrClosed } from './drain.ts';

describe('drainedOrClosed', () => {
  let server: http.Server | undefined;
  afterEach(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));

  /** A response the client stops reading and then drops; `settled` says whether the wait ended. */
  async function waitOnDroppedClient(dropBeforeWait: boolean): Promise<boolean> {
    let settled = false;
    const waited = new Promise<void>((done) => {
      server = http.createServer((_req, res) => {
        const chunk = Buffer.alloc(1 << 20, 'z');
        // Fill the socket until a write says "wait".
        while (res.write(chunk));
        const wait = () => void drainedOrClosed(res).then(() => ((settled = true), done()));
        if (dropBeforeWait) res.on('close', wait);
        else wait();
      });
    });
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
    const req = http.get({ port: (server!.address() as AddressInfo).port, host: '127.0.0.1' }, (res) => {
      res.pause(); // reads nothing: the server's writes back up
      setTimeout(() => req.destroy(), 100);
    });
    req.on('error', () => undefined);
    await Promise.race([waited, new Promise((r) => setTimeout(r, 3_000))]);
    return settled;
  }

  it('ends when the connection goes away while waiting for drain', async () => {
    expect(await waitOnDroppedClient(false)).toBe(true);
  });

  it('ends at once when the connection was gone before the wait began (its close already fired)', async () => {
    expect(await waitOnDroppedClient(true)).toBe(true);
  });
});
