import type { Migration } from '../shared/db/migrations.ts';
import type { Projection } from '../projections/runner.ts';
import { grantsProjection, grantsReadModelMigrations } from './grants/projection.ts';
import { roundsProjection, roundsReadModelMigrations } from './rounds/projection.ts';
import { sessionsProjection } from './sessions/projection.ts';
import { consoleMigrations, consoleProjection } from './console/projection.ts';
import { CHAIN } from './chain/projection.ts';

/** Every read model the projector role runs. Each capability adds its own. */
export function allProjections(): Projection[] {
  return [sessionsProjection, roundsProjection, grantsProjection, consoleProjection];
}

/** The name of every projection the projector role runs: the read models and the hash chain (its runner is made with its process's signer, services/service.ts). */
export const runnerNames = (): string[] => [...allProjections().map((p) => p.name), CHAIN];

/**
 * The sessions read model's table is created with the sessions' own (services/sessions/store.ts: sessions are stored once);
 * the rounds read model's include the operators' reconciliation tables, which it keeps.
 */
export const readModelMigrations: Migration[] = [...roundsReadModelMigrations, ...grantsReadModelMigrations, ...consoleMigrations];
