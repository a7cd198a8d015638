import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { bullConnection, DispatchQueues, enqueueRetry } from '../../services/rounds/queue.ts';
import { within } from '../helpers/eventually.ts';

/**
 * Review finding (services/rounds/queue.ts, DispatchQueues.of): a Queue is made on an operator's first
 * retry. Made while Redis is unreachable, BullMQ's Queue waits for its connection to become ready, so the
 * add() never fails: submitTransaction awaits it (submit.ts, after the wallet attempt), and the provider's
 * WIN / the reconciler's sweep / the worker's recovery sweep (and so close()) hang until Redis returns.
 * The single queue made at start-up failed at once ("enableOfflineQueue is false"), and the caller logged
 * it and answered; a queue already made still does.
 */
describe('dispatch queues while Redis is unreachable', () => {
  it("fails an operator's first enqueue at once instead of hanging until Redis returns", async () => {
    // A port nothing listens on.
    const port = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as net.AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    const connection = bullConnection(`redis://127.0.0.1:${port}`, false);
    const queues = new DispatchQueues(connection);
    try {
      const outcome = await within(
        enqueueRetry(queues, 'op-new', { roundStream: 'round|p|op-new|r1', transactionId: 'w1' }, 0).then(
          () => 'enqueued',
          () => 'failed',
        ),
        3000,
      );
      expect(outcome).toBe('failed');
    } finally {
      connection.disconnect();
      await Promise.race([queues.close().catch(() => undefined), new Promise((r) => setTimeout(r, 500))]);
    }
  }, 10_000);
});
