import type { ServerResponse } from 'node:http';

/**
 * Until a response whose write returned false can take more ('drain'), or its connection is gone: then
 * 'drain' never comes, and a connection already gone has sent its 'close' before this was called, so that is
 * checked first. The caller checks `res.destroyed` after it, and stops writing.
 */
export function drainedOrClosed(res: ServerResponse): Promise<void> {
  return new Promise<void>((resolve) => {
    if (res.destroyed || res.closed) return resolve();
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}
