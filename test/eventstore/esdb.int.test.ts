import { randomBytes, randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createEsdbEventStore } from '../../shared/eventstore/esdb.ts';
import { eventStoreContract } from './contract.ts';
import { NamespacedEventStore } from './esdb-namespace.ts';
import { startEsdbTestServer } from './esdb-server.ts';

// Always: the EventStoreDB adapter and the real client against the protocol-level test server
// (esdb-server.ts), a fresh log per fixture. The store is used bare, without the namespace view, so its
// own handling of the system events in $all is what the contract sees.
eventStoreContract('EventStoreDB (protocol-level test server)', async () => {
  const server = await startEsdbTestServer();
  const store = createEsdbEventStore(server.connectionString);
  await store.ping();
  return {
    store,
    async cleanup() {
      await store.close();
      await server.close();
    },
  };
});

// Additionally, the same suite against a real EventStoreDB when ESDB_CONNECTION_STRING is set.
const connectionString = process.env.ESDB_CONNECTION_STRING;

if (!connectionString) {
  describe.skip('event store contract: EventStoreDB (skipped: no EventStoreDB, set ESDB_CONNECTION_STRING)', () => {
    it('runs the shared event store contract against a real EventStoreDB', () => undefined);
  });
} else {
  // The server's log is shared with every other run: each fixture gets its own stream prefix and sees
  // only its own events in the global log.
  eventStoreContract('EventStoreDB', async () => {
    const inner = createEsdbEventStore(connectionString);
    await inner.ping();
    const store = await NamespacedEventStore.create(inner, `t${randomBytes(6).toString('hex')}-`);
    return {
      store,
      async cleanup() {
        await store.close();
      },
    };
  });
}

// What the contract cannot see of the EventStoreDB adapter: its own read deadline, its logger when the
// live subscription drops, and that close() lets go of the server.
describe('EventStoreDB adapter against the test server', () => {
  it('fails a read that does not finish within readTimeoutMs, and cancels the call', async () => {
    const server = await startEsdbTestServer();
    const store = createEsdbEventStore(server.connectionString, { readTimeoutMs: 200 });
    try {
      await store.append('held-1', [{ id: randomUUID(), type: 'A', data: {} }], 'no_stream');
      const release = server.holdReads();
      const started = Date.now();
      await expect(store.readStream('held-1')).rejects.toThrow(/did not finish within 200 ms/);
      await expect(store.readAll()).rejects.toThrow(/did not finish within 200 ms/);
      await expect(store.headPosition()).rejects.toThrow(/did not finish within 200 ms/);
      expect(Date.now() - started).toBeLessThan(2_000);
      await until(() => server.activeReads() === 0);
      release();
      expect((await store.readStream('held-1')).map((e) => e.type)).toEqual(['A']);
    } finally {
      await store.close();
      await server.close();
    }
  });

  it('reads 0 events as [] (EventStoreDB refuses such a read), as the Postgres adapter does', async () => {
    const server = await startEsdbTestServer();
    const store = createEsdbEventStore(server.connectionString);
    try {
      await store.append('zero-1', [{ id: randomUUID(), type: 'A', data: {} }], 'no_stream');
      expect(await store.readStream('zero-1', { maxCount: 0 })).toEqual([]);
    } finally {
      await store.close();
      await server.close();
    }
  });
  it('lets go of a page bounded in bytes at its cut: the server sends only what flow control let it send ahead', async () => {
    const server = await startEsdbTestServer();
    const store = createEsdbEventStore(server.connectionString);
    try {
      // 60 replies of 200,000 characters: five fit a page of about 1 MB.
      const reply = 'r'.repeat(200_000);
      for (let i = 0; i < 60; i++) await store.append(`large-${i}`, [{ id: randomUUID(), type: 'Outcome', data: { reply } }], 'no_stream');
      const sentBefore = server.eventsSent();
      const pages: number[] = [];
      let from: string | undefined;
      for (;;) {
        const page = await store.readPage({ ...(from ? { from } : {}), maxCount: 1000, maxBytes: 1_000_100 });
        pages.push(page.events.length);
        from = page.events.at(-1)?.position ?? from;
        if (!page.more) break;
      }
      expect(pages).toEqual(Array.from({ length: 12 }, () => 5));
      // Each page asks for 1,000 events and cancels the read at its cut: the server has then sent about a
      // megabyte past it (125 events for these 60, 2026-11-30). Read to the end, each page would be sent
      // every large event after it: some 400 in all.
      expect(server.eventsSent() - sentBefore).toBeLessThanOrEqual(60 + pages.length * 10);
    } finally {
      await store.close();
      await server.close();
    }
  });

  it('logs a dropped live subscription, subscribes again, and lets go of it on close', async () => {
    const server = await startEsdbTestServer();
    const warnings: unknown[][] = [];
    const store = createEsdbEventStore(server.connectionString, { logger: { warn: (...args: unknown[]) => void warnings.push(args) } as never });
    try {
      store.appendSeq(); // starts the live notification subscription
      await until(() => server.activeSubscriptions() === 1);
      server.dropSubscriptions();
      await until(() => warnings.length === 1);
      expect(warnings[0]![1]).toBe('EventStoreDB live subscription dropped; restarting');
      await until(() => server.activeSubscriptions() === 1, 5_000);
      // After the restart, an append by another writer wakes waiters again.
      const seq = store.appendSeq();
      server.writeEvent('after-drop-1', 'A', {});
      await until(() => store.appendSeq() > seq);
    } finally {
      await store.close();
    }
    await until(() => server.activeReads() === 0);
    await server.close();
  });
});

async function until(done: () => boolean, timeoutMs = 3_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
