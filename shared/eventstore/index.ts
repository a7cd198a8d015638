import type { Pool } from '../db/pool.ts';
import type { Logger } from '../logger.ts';
import type { EventStore } from './port.ts';
import { PostgresEventStore } from './postgres.ts';

/**
 * EVENT_STORE=postgres keeps events in DATABASE_URL; an esdb:// string selects EventStoreDB. The logger
 * hears what the adapter cannot throw to a caller (a live subscription dropped and resumed).
 */
export async function createEventStore(setting: string, pool: Pool, databaseUrl: string, logger?: Logger): Promise<EventStore> {
  if (setting === 'postgres') return new PostgresEventStore(pool, databaseUrl);
  const { createEsdbEventStore } = await import('./esdb.ts');
  return createEsdbEventStore(setting, logger ? { logger } : {});
}
