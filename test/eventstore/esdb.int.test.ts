import { randomBytes } from 'node:crypto';
import { describe, it } from 'vitest';
import { createEsdbEventStore } from '../../shared/eventstore/esdb.ts';
import { eventStoreContract } from './contract.ts';
import { NamespacedEventStore } from './esdb-namespace.ts';

const connectionString = process.env.ESDB_CONNECTION_STRING;

if (!connectionString) {
  console.warn('skipped: no EventStoreDB (set ESDB_CONNECTION_STRING to run the EventStoreDB contract suite)');
  describe.skip('event store contract: EventStoreDB (skipped: no EventStoreDB, set ESDB_CONNECTION_STRING)', () => {
    it('runs the shared event store contract against EventStoreDB', () => undefined);
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
