import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { allMigrations } from '../../services/migrations.ts';
import { migrate } from '../../shared/db/migrations.ts';
import type { Pool } from '../../shared/db/pool.ts';
import { PostgresEventStore } from '../../shared/eventstore/postgres.ts';
import { migratedDatabase } from '../helpers/db.ts';
import { sessionsOfPlayer } from '../../services/sessions/queries.ts';
import { legacyMigrations } from './legacy-migrations.ts';
import { applyBatch, projectionFailures, readCheckpoint } from '../../projections/runner.ts';
import { runnerNames } from '../../services/read-models.ts';
import { roundsProjection } from '../../services/rounds/projection.ts';
import { transactionsPage } from '../../services/reconciliation/queries.ts';
import { START } from '../../shared/eventstore/port.ts';
import { eventually } from '../helpers/eventually.ts';

/**
 * The public schema as SQL sees it. Columns are compared by their order among the table's live columns:
 * information_schema's ordinal_position is the attribute number, which keeps the gaps of dropped columns
 * (rm_sessions upgraded by sessions-002-stored-once has token at 1 and revoked_at at 12), while
 * SELECT * and INSERT without a column list see the same order either way.
 */
async function schemaOf(pool: Pool) {
  const q = async (sql: string) => (await pool.query(sql)).rows;
  return {
    relations: await q(`
      SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'public' ORDER BY 1, 2`),
    columns: await q(`
      SELECT table_name, column_name,
        row_number() OVER (PARTITION BY table_name ORDER BY ordinal_position) AS position,
        data_type, udt_name, character_maximum_length, numeric_precision, numeric_scale, column_default, is_nullable
      FROM information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, position`),
    indexes: await q(`SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1, 2`),
    constraints: await q(`
      SELECT c.conrelid::regclass::text AS relation, c.conname, c.contype, pg_get_constraintdef(c.oid) AS definition
      FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
      WHERE n.nspname = 'public' ORDER BY 1, 2`),
    functions: await q(`
      SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS arguments, pg_get_functiondef(p.oid) AS definition
      FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
      WHERE n.nspname = 'public' ORDER BY 1, 2`),
  };
}

const baselines = allMigrations.filter((m) => m.replaces);

describe('baselined migrations', () => {
  it('upgrade a database of the release before to the schema a fresh one gets', async () => {
    const fresh = await migratedDatabase('migfresh', allMigrations);
    const upgraded = await migratedDatabase('migupgraded', legacyMigrations);
    try {
      await migrate(upgraded.pool, allMigrations);
      const [want, got] = [await schemaOf(fresh.pool), await schemaOf(upgraded.pool)];
      expect(want.functions.map((f) => f.proname)).toEqual([
        'es_append', 'es_append_batch', 'es_append_fenced', 'es_append_one', 'es_lock_streams', 'es_notify_appended', 'es_stream_has', 'ledger_claim_and_record',
      ]);
      expect(got.relations).toEqual(want.relations);
      expect(got.columns).toEqual(want.columns);
      expect(got.indexes).toEqual(want.indexes);
      expect(got.constraints).toEqual(want.constraints);
      expect(got.functions).toEqual(want.functions);

      // The upgrade ran no baseline: each is recorded beside the ids it replaces.
      const { rows } = await upgraded.pool.query<{ id: string }>('SELECT id FROM schema_migrations');
      const applied = new Set(rows.map((r) => r.id));
      for (const b of baselines) {
        expect(applied.has(b.id), b.id).toBe(true);
        for (const id of b.replaces!) expect(applied.has(id), id).toBe(true);
      }
    } finally {
      await fresh.close();
      await upgraded.close();
    }
  });

  it('keep the events written before the upgrade, and streams go on after it', async () => {
    const { db, pool, close } = await migratedDatabase('migdata', legacyMigrations);
    const stream = `round-${randomUUID()}`;
    const event = { id: randomUUID(), type: 'TransactionRecorded', data: { amount: 100 }, metadata: { by: 'legacy' } };
    try {
      const before = new PostgresEventStore(pool, db.url);
      await before.append(stream, [event], 'no_stream');
      await before.close();

      await migrate(pool, allMigrations);

      const after = new PostgresEventStore(pool, db.url);
      try {
        const read = await after.readStream(stream);
        expect(read.map((e) => [e.id, e.revision, e.type, e.data, e.metadata])).toEqual([[event.id, 0, event.type, event.data, event.metadata]]);
        const next = await after.append(stream, [{ id: randomUUID(), type: 'TransactionSettled', data: {} }], 0);
        expect(next.nextRevision).toBe(1);
      } finally {
        await after.close();
      }
    } finally {
      await close();
    }
  });

  it('keep every session: its facts in session_tokens (lobby URL and sessions only rm_sessions knew included), when a kick ended it in rm_sessions', async () => {
    const { pool, close } = await migratedDatabase('migsessions', legacyMigrations);
    try {
      const cols = 'token, operator_id, player_ref, provider_id, game_id, currency, language, demo, created_at, expires_at';
      const vals = `'op-1', 'p1', 'studio-a', 'fruit-1', 'EUR', 'en', false, '2026-11-20T10:00:00Z', '2026-11-21T10:00:00Z'`;
      await pool.query(`INSERT INTO session_tokens (${cols}, start_revision) VALUES ('kept', ${vals}, 0)`);
      await pool.query(`INSERT INTO rm_sessions (${cols}, lobby_url, revoked_at) VALUES ('kept', ${vals}, 'https://lobby.example/x', '2026-11-20T11:00:00Z')`);
      // Launch died between its append and its token row: only the projection knew the session.
      await pool.query(`INSERT INTO rm_sessions (${cols}, lobby_url, revoked_at) VALUES ('orphan', ${vals}, NULL, NULL)`);
      await pool.query(
        `INSERT INTO es_events (stream_id, revision, event_id, type, data) VALUES ('player-sessions|op-1|p1', 3, $1, 'SessionStarted', '{"token":"orphan"}')`,
        [randomUUID()],
      );

      await migrate(pool, allMigrations);

      const { rows: facts } = await pool.query('SELECT token, lobby_url, start_revision FROM session_tokens ORDER BY token');
      expect(facts).toEqual([
        { token: 'kept', lobby_url: 'https://lobby.example/x', start_revision: '0' },
        { token: 'orphan', lobby_url: null, start_revision: '3' },
      ]);
      const { rows: ended } = await pool.query('SELECT token, revoked_at FROM rm_sessions ORDER BY token');
      expect(ended).toEqual([
        { token: 'kept', revoked_at: new Date('2026-11-20T11:00:00Z') },
        { token: 'orphan', revoked_at: null },
      ]);
      expect(await sessionsOfPlayer(pool, 'op-1', 'p1')).toHaveLength(2);
    } finally {
      await close();
    }
  });

  it('fold the reconciliation read model into the rounds one: its copy of the transactions goes, and the rounds read model is projected again from the start', async () => {
    const merge = 'rm-reconciliation-002-one-transactions-table';
    // The release before the merge: without it and the read model's migrations that came after it.
    const later = new Set([merge, 'rm-reconciliation-003-fewer-indexes']);
    const { db, pool, close } = await migratedDatabase('migmerge', allMigrations.filter((m) => !later.has(m.id)));
    try {
      const store = new PostgresEventStore(pool, db.url);
      const request = { transactionId: 'b1', sessionToken: 's', type: 'BET', roundId: 'r1', roundComplete: false, playerRef: 'p1', amount: 40, currency: 'EUR', gameId: 'fruit-1' };
      await store.append('round|studio-a|op-1|r1', [
        { id: randomUUID(), type: 'TransactionRecorded', data: { providerId: 'studio-a', operatorId: 'op-1', origin: 'provider', request, walletBody: '{}', contentHash: 'h', recordedAt: '2026-11-20T10:00:00.000Z' } },
        { id: randomUUID(), type: 'TransactionSettled', data: { transactionId: 'b1', outcome: 'applied', reply: { status: 'OK', balance: 960, body: '{}' }, attempt: 1, settledAt: '2026-11-20T10:00:00.100Z' } },
      ], 'no_stream');
      const head = await store.headPosition();
      // What the release before kept: the two read models at their own positions, each with its rows.
      await pool.query(`INSERT INTO projection_checkpoints (name, position) VALUES ('rounds', $1), ('reconciliation', $1)`, [head]);
      await pool.query(
        `INSERT INTO rm_operator_transactions (round_stream, transaction_id, operator_id, log_major, log_minor, provider_id, origin, round_id, game_id, player_ref,
           type, amount, currency, status, attempts, recorded_at)
         VALUES ('round|studio-a|op-1|r1', 'b1', 'op-1', 1, 1, 'studio-a', 'provider', 'r1', 'fruit-1', 'p1', 'BET', 40, 'EUR', 'applied', 1, now())`,
      );
      await pool.query(`INSERT INTO rm_settlement_quarters VALUES ('op-1', '2026-11-20T10:00:00Z', 'studio-a', 'fruit-1', 'EUR', 'BET', '', 'applied', 1, 40)`);

      await migrate(pool, allMigrations);

      expect((await pool.query(`SELECT to_regclass('rm_operator_transactions') AS t`)).rows[0].t).toBeNull();
      expect((await pool.query(`SELECT name FROM projection_checkpoints ORDER BY name`)).rows).toEqual([{ name: 'rounds' }]);
      expect(await readCheckpoint(pool, 'rounds')).toBe(START);
      expect((await pool.query(`SELECT count(*)::int AS n FROM rm_settlement_quarters`)).rows[0].n).toBe(0);
      // The projector goes through the history again, and the operators' view of it is back, once.
      // The global log holds back events while any older transaction is open on the server (another test's, in a full run).
      const log = await eventually(() => store.readAll({ from: START }), (l) => l.length >= 2, 20_000);
      expect(log).toHaveLength(2);
      await applyBatch(pool, roundsProjection, START, log);
      const page = await transactionsPage(pool, 'op-1', { from: '2026-11-20T00:00:00Z', to: '2026-11-21T00:00:00Z' }, 10, undefined);
      expect(page.transactions).toMatchObject([{ transactionId: 'b1', status: 'applied', walletBalance: 960, settledAt: '2026-11-20T10:00:00.100Z' }]);
      expect((await pool.query(`SELECT count::int AS n, amount::int AS a FROM rm_settlement_quarters`)).rows).toEqual([{ n: 1, a: 40 }]);
      // A process of the release before, still running, writes its reconciliation checkpoint again and fails
      // on the table that is gone: no projection of this release would ever clear that, so it is not reported.
      await pool.query(
        `INSERT INTO projection_checkpoints (name, position, failing_since, failing_event, failing_error)
         VALUES ('reconciliation', 'start', now(), '{"position": "1.1", "eventType": "TransactionRecorded", "streamId": "round|studio-a|op-1|r1"}', 'relation "rm_operator_transactions" does not exist')`,
      );
      await pool.query(`UPDATE projection_checkpoints SET failing_since = now(), failing_event = '{"position": "1.1", "eventType": "TransactionRecorded", "streamId": "s"}' WHERE name = 'rounds'`);
      expect((await projectionFailures(pool, runnerNames())).map((f) => f.name)).toEqual(['rounds']);
      await store.close();
    } finally {
      await close();
    }
  });

  it.each(baselines.map((b) => [b.id, b.replaces!] as const))('%s refuses a database that applied only part of what it replaces', async (id, replaces) => {
    const missing = replaces.at(-1)!;
    const { pool, close } = await migratedDatabase('migpartial', legacyMigrations.filter((m) => m.id !== missing));
    try {
      await expect(migrate(pool, allMigrations)).rejects.toThrow(`migration ${id} replaces ${replaces.join(', ')}, of which this database applied only ${replaces.slice(0, -1).join(', ')}`);
      const { rows } = await pool.query('SELECT 1 FROM schema_migrations WHERE id = $1', [id]);
      expect(rows).toHaveLength(0);
    } finally {
      await close();
    }
  });
});
