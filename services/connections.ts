import type { Config } from '../shared/config.ts';
import { fenceConnections } from '../shared/eventstore/kick-fence.ts';
import { runnerNames } from './read-models.ts';

/**
 * The most Postgres connections one process opens with this configuration, and what for: its query pool
 * (DATABASE_POOL_SIZE); the catalog's notification channel and, with the Postgres event store, the log's;
 * the projector's lock of each projection it runs; the reconciler's sweep locks; and, with EventStoreDB,
 * the api's kick fence. Every process of a deployment together must stay within Postgres's
 * max_connections (docs/operations.md, Scaling out).
 */
export function postgresConnections(config: Pick<Config, 'roles' | 'eventStore' | 'databasePoolSize'>): { total: number; parts: Record<string, number> } {
  const postgresStore = config.eventStore === 'postgres';
  const has = (role: Config['roles'][number]) => config.roles.includes(role);
  const parts: Record<string, number> = {
    queries: config.databasePoolSize,
    notifications: postgresStore ? 2 : 1,
    ...(has('projector') ? { projectionLocks: runnerNames().length } : {}),
    ...(has('reconciler') ? { sweepLocks: 1 } : {}),
    ...(!postgresStore && has('api') ? { kickFence: fenceConnections(config.databasePoolSize) } : {}),
  };
  return { total: Object.values(parts).reduce((a, b) => a + b, 0), parts };
}
