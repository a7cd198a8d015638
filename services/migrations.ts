import { projectionMigrations } from '../projections/runner.ts';
import { catalogMigrations } from '../shared/catalog/store.ts';
import type { Migration } from '../shared/db/migrations.ts';
import { eventStoreMigrations } from '../shared/eventstore/postgres.ts';
import { registryMigrations } from '../shared/eventstore/registry.ts';
import { readModelMigrations } from './read-models.ts';
import { sessionsMigrations } from './sessions/store.ts';
import { chainMigrations } from './chain/projection.ts';
import { cursorKeyMigrations } from '../shared/http/cursor.ts';

/** The service's whole database schema, in the order it is built; every process applies it at start. */
export const allMigrations: Migration[] = [
  ...eventStoreMigrations,
  ...catalogMigrations,
  ...projectionMigrations,
  ...registryMigrations,
  ...sessionsMigrations,
  ...readModelMigrations,
  ...chainMigrations,
  ...cursorKeyMigrations,
];
