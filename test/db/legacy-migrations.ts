import { readdirSync, readFileSync } from 'node:fs';
import type { Migration } from '../../shared/db/migrations.ts';

/**
 * The migrations of the release before the baselines (commit f5f7ff3), verbatim, in the order its
 * allMigrations applied them: what a database of that release holds. Kept as SQL files
 * (legacy-schema/NN-<id>.sql): a fixture, never to be changed.
 */
const dir = new URL('./legacy-schema/', import.meta.url);

export const legacyMigrations: Migration[] = readdirSync(dir)
  .filter((f) => f.endsWith('.sql'))
  .sort()
  .map((f) => ({ id: f.replace(/^\d+-/, '').replace(/\.sql$/, ''), sql: readFileSync(new URL(f, dir), 'utf8') }));
