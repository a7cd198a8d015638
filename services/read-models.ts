import type { Migration } from '../shared/db/migrations.ts';
import type { Projection } from '../projections/runner.ts';
import { grantsProjection, grantsReadModelMigrations } from './grants/projection.ts';
import { roundsProjection, roundsReadModelMigrations } from './rounds/projection.ts';
import { sessionsProjection } from './sessions/projection.ts';
import { consoleMigrations, consoleProjection } from './console/projection.ts';
import { chainProjection } from './chain/projection.ts';

/** Every read model the projector role runs. Each capability adds its own. */
export function allProjections(): Projection[] {
  return [sessionsProjection, roundsProjection, grantsProjection, consoleProjection];
}

/** Every projection the projector role runs: the read models and the hash chain. */
export const allRunners = (): Projection[] => [...allProjections(), chainProjection];

export const runnerNames = (): string[] => allRunners().map((p) => p.name);

/**
 * The sessions read model's table is created with the sessions' own (services/sessions/store.ts: sessions are stored once);
 * the rounds read model's include the operators' reconciliation tables, which it keeps.
 */
export const readModelMigrations: Migration[] = [...roundsReadModelMigrations, ...grantsReadModelMigrations, ...consoleMigrations];
