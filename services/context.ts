import type { Request } from 'express';
import type { Redis } from 'ioredis';
import type { Operator } from '../shared/catalog/schema.ts';
import { AppError } from '../shared/errors.ts';
import type { BackgroundTasks } from '../shared/background.ts';
import type { CatalogStore } from '../shared/catalog/store.ts';
import type { Config } from '../shared/config.ts';
import type { Pool } from '../shared/db/pool.ts';
import type { EventStore } from '../shared/eventstore/port.ts';
import type { Logger } from '../shared/logger.ts';
import type { Metrics } from '../shared/metrics.ts';
import type { Cursors } from '../shared/http/cursor.ts';

/** What every role of a process shares: built once at start by services/service.ts. */
export interface ServiceContext {
  config: Config;
  logger: Logger;
  pool: Pool;
  /** Fails fast when Redis is unreachable (no offline queue), for request paths. */
  redis: Redis;
  eventStore: EventStore;
  catalog: CatalogStore;
  background: BackgroundTasks;
  /** The clock; tests may move it. */
  now: () => Date;
  /** This service instance's Prometheus metrics (GET /metrics). */
  metrics: Metrics;
  /** The paged routes' cursors, under the database's key. */
  cursors: Cursors;
}

/** The operator the signature check proved; every operator route is scoped to it. */
export function callingOperator(ctx: ServiceContext, req: Request): Operator {
  const operator = req.caller?.kind === 'operator' ? ctx.catalog.snapshot().operators.get(req.caller.id) : undefined;
  if (!operator) throw new AppError(401, 'invalid signature');
  return operator;
}
