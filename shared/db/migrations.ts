import type { Pool } from './pool.ts';

export interface Migration {
  id: string;
  sql: string;
  /**
   * A baseline: the migrations it stands for (their final schema, written as one). A database that
   * applied all of them records the baseline as applied without running it; a fresh one runs it; one
   * that applied only some of them must first be upgraded by the release that still had them.
   */
  replaces?: readonly string[];
}

/**
 * Applies, in order, the migrations not yet recorded. Every process runs this at start; the advisory
 * lock makes concurrent starts take turns, so each migration runs once.
 */
export async function migrate(pool: Pool, migrations: Migration[]): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock(7281001)');
    await client.query(
      'CREATE TABLE IF NOT EXISTS schema_migrations (id text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
    );
    const { rows } = await client.query<{ id: string }>('SELECT id FROM schema_migrations');
    const applied = new Set(rows.map((r) => r.id));
    for (const m of migrations) {
      if (applied.has(m.id)) continue;
      const replaced = (m.replaces ?? []).filter((id) => applied.has(id));
      if (replaced.length > 0 && replaced.length < m.replaces!.length) {
        throw new Error(
          `migration ${m.id} replaces ${m.replaces!.join(', ')}, of which this database applied only ${replaced.join(', ')}: upgrade it with the release before the baseline first`,
        );
      }
      await client.query('BEGIN');
      try {
        if (replaced.length === 0) await client.query(m.sql);
        await client.query('INSERT INTO schema_migrations (id) VALUES ($1)', [m.id]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK');
        throw new Error(`migration ${m.id} failed: ${(err as Error).message}`);
      }
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock(7281001)').catch(() => undefined);
    client.release();
  }
}
