import type { Migration } from '../shared/db/migrations.ts';
import type { Projection } from './runner.ts';
import { grantsProjection, grantsReadModelMigrations } from '../services/grants/projection.ts';
import { roundsProjection, roundsReadModelMigrations } from '../services/rounds/projection.ts';
import { sessionsProjection, sessionsReadModelMigrations } from '../services/sessions/projection.ts';

/** Every read model the projector role runs. Each capability adds its own. */
export function allProjections(): Projection[] {
  return [sessionsProjection, roundsProjection, grantsProjection];
}

export const readModelMigrations: Migration[] = [...sessionsReadModelMigrations, ...roundsReadModelMigrations, ...grantsReadModelMigrations];
