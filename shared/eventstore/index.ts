import type { Pool } from '../db/pool.ts';
import type { EventStore } from './port.ts';
import { PostgresEventStore } from './postgres.ts';

/** EVENT_STORE=postgres keeps events in DATABASE_URL; an esdb:// string selects EventStoreDB. */
export async function createEventStore(setting: string, pool: Pool, databaseUrl: string): Promise<EventStore> {
  if (setting === 'postgres') return new PostgresEventStore(pool, databaseUrl);
  const { createEsdbEventStore } = await import('./esdb.ts');
  return createEsdbEventStore(setting);
}
