import type { Migration } from '../shared/db/migrations.ts';
import type { Projection } from './runner.ts';
import { grantsProjection, grantsReadModelMigrations } from './grants/projection.ts';
import { roundsProjection, roundsReadModelMigrations } from './rounds/projection.ts';
import { sessionsProjection, sessionsReadModelMigrations } from './sessions/projection.ts';

/** Every read model the projector role runs. Each capability adds its own. */
export function allProjections(): Projection[] {
  return [sessionsProjection, roundsProjection, grantsProjection];
}

export const readModelMigrations: Migration[] = [...sessionsReadModelMigrations, ...roundsReadModelMigrations, ...grantsReadModelMigrations];
