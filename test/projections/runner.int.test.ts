import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { applyBatch, CheckpointMovedError, ProjectionApplyError, projectionFailures, projectionMigrations, ProjectionRunner, readCheckpoint, resetProjection } from '../../projections/runner.ts';
import { createLogger } from '../../shared/logger.ts';
import { migrate } from '../../shared/db/migrations.ts';
import { createPool, type Pool } from '../../shared/db/pool.ts';
import { START, type ReadPageOptions } from '../../shared/eventstore/port.ts';
import { eventStoreMigrations, PostgresEventStore } from '../../shared/eventstore/postgres.ts';
import { TALLY_TABLE_SQL, tallyProjection } from '../fixtures/tally-projection.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { childEnv } from '../helpers/bundle.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

async function until(check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Every runner a test starts, stopped after it even when the test failed first: a runner left running
 * would go on into the next test file of the worker (vitest runs them in one process), opening
 * connections to this file's database every 20 ms once it is dropped.
 */
const started: ProjectionRunner[] = [];
class TestRunner extends ProjectionRunner {
  constructor(...args: ConstructorParameters<typeof ProjectionRunner>) {
    super(...args);
    started.push(this);
  }
}

describe('projection runner', () => {
  let db: TestDatabase;
  let pool: Pool;
  let store: PostgresEventStore;

  beforeAll(async () => {
    db = await createTestDatabase('proj');
    pool = createPool(db.url);
    await migrate(pool, [...eventStoreMigrations, ...projectionMigrations]);
    await pool.query(TALLY_TABLE_SQL);
    store = new PostgresEventStore(pool, db.url);
  });
  afterAll(async () => {
    await store.close();
    await pool.end();
    await db.drop();
  });
  afterEach(async () => {
    await Promise.all(started.splice(0).map((r) => r.stop()));
  });
  beforeEach(async () => {
    // Each test starts from an empty log and read model.
    await pool.query('TRUNCATE es_events, tally, projection_checkpoints');
  });

  const appendEvents = async (n: number) => {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const id = randomUUID();
      ids.push(id);
      await store.append(`s-${i % 7}`, [{ id, type: 'Tick', data: { i } }], 'any');
    }
    return ids;
  };

  /** Every Tick of the log applied exactly once, in log order. */
  const expectExactlyOnce = async (ids: string[]) => {
    const { rows } = await pool.query<{ event_id: string; position: string }>('SELECT event_id, position FROM tally ORDER BY ctid');
    expect(rows.map((r) => r.event_id).sort()).toEqual([...ids].sort());
    const log = (await store.readAll({ maxCount: 10_000 })).filter((e) => e.type === 'Tick').map((e) => e.id);
    expect(rows.map((r) => r.event_id)).toEqual(log);
  };

  it('resumes after a batch fails half-way: the failed batch leaves nothing, nothing is skipped or doubled', async () => {
    const ids = await appendEvents(50);
    let failures = 0;
    let attempt = 0;
    const runner = new TestRunner(
      pool,
      db.url,
      store,
      tallyProjection({
        beforeEach: (e) => {
          if (e.data.i === 29 && attempt++ === 0) {
            failures++;
            throw new Error('crash in the middle of batch 2');
          }
        },
      }),
      { batchSize: 20, lockRetryMs: 20 },
    );
    runner.start();
    await until(async () => (await pool.query('SELECT 1 FROM tally')).rowCount === 50);
    await runner.stop();
    expect(failures).toBe(1);
    await expectExactlyOnce(ids);
  });

  it('names an event it cannot apply (log, checkpoint row, callback), keeps the events before it, and goes on once it applies (#18 part 8)', async () => {
    const ids = await appendEvents(50);
    // The global log holds an event back while any older transaction of the server is open (another
    // test's, under load): wait until it shows all 50 before picking the poison from it.
    await until(async () => (await store.readAll({ maxCount: 100 })).length === 50);
    const poison = (await store.readAll({ maxCount: 100 })).find((e) => e.data.i === 27)!;
    let poisoned = true;
    const lines: Array<Record<string, unknown>> = [];
    const logger = createLogger('info', {}, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
    const failures: ProjectionApplyError[] = [];
    const runner = new TestRunner(
      pool,
      db.url,
      store,
      tallyProjection({
        beforeEach: (e) => {
          if (poisoned && e.id === poison.id) throw new Error('value out of range for type integer');
        },
      }),
      { batchSize: 20, lockRetryMs: 20, failureBackoffMaxMs: 100, logger, onApplyFailure: (err) => failures.push(err) },
    );
    runner.start();
    try {
      await until(async () => (await projectionFailures(pool, ['tally'])).length === 1);
      // The 27 events before it are applied and checkpointed; nothing of it or after it.
      expect((await pool.query('SELECT 1 FROM tally')).rowCount).toBe(27);
      expect(await projectionFailures(pool, ['tally'])).toEqual([
        { name: 'tally', position: poison.position, eventType: 'Tick', streamId: poison.streamId, error: 'value out of range for type integer', since: expect.any(String) },
      ]);
      expect(failures[0]!.event.id).toBe(poison.id);
      const logged = lines.find((l) => l.msg === 'projection cannot apply an event; the other projections go on, this one retries it');
      expect(logged).toMatchObject({ level: 50, projection: 'tally', position: poison.position, eventType: 'Tick', streamId: poison.streamId, eventId: poison.id, error: 'value out of range for type integer' });
      poisoned = false;
      await until(async () => (await pool.query('SELECT 1 FROM tally')).rowCount === 50);
      await until(async () => (await projectionFailures(pool, ['tally'])).length === 0);
    } finally {
      await runner.stop();
    }
    await expectExactlyOnce(ids);
  });

  it('resumes after its process is killed with SIGKILL in the middle of a batch', async () => {
    const ids = await appendEvents(150);
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/projection-child.ts'], {
      cwd: ROOT,
      env: childEnv({ DATABASE_URL: db.url }),
      stdio: 'ignore',
    });
    const exited = new Promise((r) => child.once('exit', r));
    // Let it commit a few batches, then kill it while a batch (20 events, 15 ms each) is open.
    await until(async () => (await pool.query('SELECT 1 FROM tally')).rowCount! >= 40);
    await new Promise((r) => setTimeout(r, 130));
    child.kill('SIGKILL');
    await exited;

    // Only whole batches survived, and the checkpoint says exactly how many events they held.
    const { rows } = await pool.query<{ n: string; applied: string }>(
      `SELECT (SELECT count(*) FROM tally) AS n, (SELECT events_applied FROM projection_checkpoints WHERE name = 'tally') AS applied`,
    );
    expect(Number(rows[0]!.n)).toBe(Number(rows[0]!.applied));
    expect(Number(rows[0]!.n) % 20).toBe(0);
    expect(Number(rows[0]!.n)).toBeLessThan(150);

    const runner = new TestRunner(pool, db.url, store, tallyProjection(), { batchSize: 20, lockRetryMs: 20 });
    runner.start();
    await until(async () => (await pool.query('SELECT 1 FROM tally')).rowCount === 150);
    await runner.stop();
    await expectExactlyOnce(ids);
  });

  it('lets exactly one of two runners own the projection, and hands over when the owner stops', async () => {
    const first = await appendEvents(30);
    const a = new TestRunner(pool, db.url, store, tallyProjection(), { batchSize: 7, lockRetryMs: 20 });
    const b = new TestRunner(pool, db.url, store, tallyProjection(), { batchSize: 7, lockRetryMs: 20 });
    a.start();
    b.start();
    await until(async () => (await pool.query('SELECT 1 FROM tally')).rowCount === 30);
    expect([a.isOwner(), b.isOwner()].filter(Boolean)).toHaveLength(1);
    const [owner, standby] = a.isOwner() ? [a, b] : [b, a];
    await owner.stop();
    const second = await appendEvents(20);
    await until(async () => (await pool.query('SELECT 1 FROM tally')).rowCount === 50);
    expect(standby.isOwner()).toBe(true);
    await standby.stop();
    await expectExactlyOnce([...first, ...second]);
  });

  it('closes the connection of a lock attempt that failed, so no connection is left open (and no lock held) by it, and owns the projection once the attempts succeed', async () => {
    const ids = await appendEvents(5);
    // The lock query made to fail while the connection stays up, after the lock was granted: a function of
    // the same name ahead of pg_catalog's on this runner's search path, failing while `lockfail.failing`
    // says so (a sequence counts the attempts: its increments are not undone by the error).
    await pool.query(`
      DROP SCHEMA IF EXISTS lockfail CASCADE;
      CREATE SCHEMA lockfail;
      CREATE TABLE lockfail.failing (on_ boolean NOT NULL);
      INSERT INTO lockfail.failing VALUES (true);
      CREATE SEQUENCE lockfail.attempts;
      CREATE FUNCTION lockfail.pg_try_advisory_lock(integer, integer) RETURNS boolean LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM nextval('lockfail.attempts');
        IF (SELECT on_ FROM lockfail.failing) THEN
          -- Granted, then the statement fails (its reply lost, say): a session's advisory lock outlives the error.
          PERFORM pg_catalog.pg_try_advisory_lock($1, $2);
          RAISE EXCEPTION 'lock attempt failed';
        END IF;
        RETURN pg_catalog.pg_try_advisory_lock($1, $2);
      END $$;`);
    const app = `lockfail-${randomUUID().slice(0, 8)}`;
    const url = new URL(db.url);
    url.searchParams.set('application_name', app);
    url.searchParams.set('options', '-c search_path=lockfail,pg_catalog,public');
    const connections = async () => Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = $1', [app])).rows[0]!.n);
    const attempts = async () => Number((await pool.query<{ n: string }>('SELECT last_value AS n FROM lockfail.attempts')).rows[0]!.n);
    try {
      const runner = new TestRunner(pool, url.toString(), store, tallyProjection(), { lockRetryMs: 20 });
      runner.start();
      await until(async () => (await attempts()) >= 6);
      expect(runner.isOwner()).toBe(false);
      // At most the attempt under way is connected: each failed attempt's connection is closed, and with it
      // the lock it was granted (left open, the first would hold the projection from every runner for good).
      expect(await connections()).toBeLessThanOrEqual(1);
      await pool.query('UPDATE lockfail.failing SET on_ = false');
      await until(async () => (await pool.query('SELECT 1 FROM tally')).rowCount === 5);
      expect(runner.isOwner()).toBe(true);
      expect(await connections()).toBe(1);
      await runner.stop();
      await until(async () => (await connections()) === 0);
      await expectExactlyOnce(ids);
    } finally {
      await pool.query('DROP SCHEMA lockfail CASCADE');
    }
  });

  it('catching up, reads pages of up to its batch and 8 MiB, reads on at once while a page says the log goes on (a short one cut by its bytes too), and waits for appends only at the end', async () => {
    const ids = await appendEvents(300);
    await until(async () => (await store.readAll({ maxCount: 1000 })).length === 300);
    const log: Array<{ kind: 'read'; asked: number; maxBytes: number; got: number; more: boolean } | { kind: 'wait' }> = [];
    // Once 150 events are read, the store is asked for pages of 1 byte, as if each event were larger than the
    // bound: every page is one event, and says the log goes on.
    let read = 0;
    const spy = new Proxy(store, {
      get(target, key) {
        if (key === 'readPage') {
          return async (o: ReadPageOptions) => {
            const page = await target.readPage(read >= 150 ? { ...o, maxBytes: 1 } : o);
            read += page.events.length;
            log.push({ kind: 'read', asked: o.maxCount ?? 0, maxBytes: o.maxBytes, got: page.events.length, more: page.more });
            return page;
          };
        }
        if (key === 'waitForAppend') {
          return (seq: number, ms: number, signal?: AbortSignal) => {
            log.push({ kind: 'wait' });
            return target.waitForAppend(seq, ms, signal);
          };
        }
        const value: unknown = Reflect.get(target, key);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const runner = new TestRunner(pool, db.url, spy, tallyProjection(), { batchSize: 100, lockRetryMs: 20, gatherMs: 0 });
    runner.start();
    await until(async () => (await pool.query('SELECT 1 FROM tally')).rowCount === 300);
    await runner.stop();
    await expectExactlyOnce(ids);
    const reads = log.filter((l) => l.kind === 'read');
    expect(reads.slice(0, 3)).toEqual([
      { kind: 'read', asked: 100, maxBytes: 8 * 1024 * 1024, got: 100, more: true },
      { kind: 'read', asked: 100, maxBytes: 8 * 1024 * 1024, got: 100, more: true },
      { kind: 'read', asked: 100, maxBytes: 8 * 1024 * 1024, got: 1, more: true },
    ]);
    // The other 100 one at a time; the last of them says the log ends there.
    expect(reads.slice(2, 102).map((r) => [r.got, r.more])).toEqual([...Array.from({ length: 99 }, () => [1, true]), [1, false]]);
    // Never a wait right after a page that said the log goes on: the backlog is read on at once.
    for (const [i, l] of log.entries()) if (l.kind === 'wait') expect(log[i - 1], `entry ${i}`).toMatchObject({ kind: 'read', more: false });
  });

  it('reports its lag in events and milliseconds behind the head', async () => {
    await appendEvents(5);
    const runner = new TestRunner(pool, db.url, store, tallyProjection(), { batchSize: 50, lockRetryMs: 20 });
    // The global log is eventually consistent (another transaction on the server can hold it back).
    await until(async () => (await runner.lag()).eventsBehind === 5);
    await new Promise((r) => setTimeout(r, 30));
    const behind = await runner.lag();
    expect(behind.eventsBehind).toBe(5);
    expect(behind.msBehind).toBeGreaterThan(0);
    runner.start();
    await until(async () => (await runner.lag()).eventsBehind === 0);
    expect((await runner.lag()).msBehind).toBe(0);
    await runner.stop();
  });

  it('passes over events of no use to it, records where it got once caught up, and resumes from there', async () => {
    const other = (n: number) => Promise.all(Array.from({ length: n }, (_, i) => store.append(`o-${i % 5}`, [{ id: randomUUID(), type: 'Other', data: { i } }], 'any')));
    const runner = new TestRunner(pool, db.url, store, tallyProjection(), { batchSize: 10, lockRetryMs: 20, gatherMs: 0 });
    runner.start();
    await other(40);
    const ticks = await appendEvents(3);
    await other(25);
    const row = async () => (await pool.query<{ position: string; events_applied: string }>('SELECT position, events_applied FROM projection_checkpoints WHERE name = $1', ['tally'])).rows[0];
    // Wait on the checkpoint itself: the global log is eventually consistent, so "no lag" can also mean "not readable yet".
    await until(async () => (await row())?.events_applied === '68'); // every event counted, those of no use included
    expect((await row())?.position).toBe(await store.headPosition());
    expect((await runner.lag()).eventsBehind).toBe(0);
    await runner.stop();
    await expectExactlyOnce(ticks);

    // A new runner starts from the recorded checkpoint: later ticks applied, none of the earlier twice.
    const more = await appendEvents(2);
    await other(3);
    const again = new TestRunner(pool, db.url, store, tallyProjection(), { batchSize: 10, lockRetryMs: 20, gatherMs: 0 });
    again.start();
    await until(async () => (await row())?.events_applied === '73');
    await again.stop();
    await expectExactlyOnce([...ticks, ...more]);
  });

  it('rebuilds from zero to the same rows', async () => {
    const ids = await appendEvents(25);
    const runner = new TestRunner(pool, db.url, store, tallyProjection(), { batchSize: 10, lockRetryMs: 20 });
    runner.start();
    await until(async () => (await pool.query('SELECT 1 FROM tally')).rowCount === 25);
    const before = (await pool.query('SELECT event_id, position FROM tally ORDER BY position')).rows;
    await resetProjection(pool, tallyProjection());
    await until(async () => (await pool.query('SELECT 1 FROM tally')).rowCount === 25);
    await runner.stop();
    expect((await pool.query('SELECT event_id, position FROM tally ORDER BY position')).rows).toEqual(before);
    await expectExactlyOnce(ids);
  });

  it('follows a checkpoint moved under it while it was idle (a reset, then an append at once): no error, no pause, every event once', async () => {
    const ids = await appendEvents(10);
    const lines: Array<Record<string, unknown>> = [];
    const logger = createLogger('info', {}, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
    // A lock retry far longer than the test waits: a runner that gave its lock up would not be back in time.
    const runner = new TestRunner(pool, db.url, store, tallyProjection(), { batchSize: 10, lockRetryMs: 60_000, logger });
    runner.start();
    await until(async () => (await pool.query('SELECT 1 FROM tally')).rowCount === 10);
    // Idle: the runner only reads the checkpoint again at its next quiet read. The append wakes it first,
    // from where it was, and its batch finds the checkpoint moved.
    await resetProjection(pool, tallyProjection());
    ids.push(...(await appendEvents(1)));
    await until(async () => (await pool.query('SELECT 1 FROM tally')).rowCount === 11, 10_000);
    await runner.stop();
    expect(lines.filter((l) => (l.level as number) >= 50)).toEqual([]);
    await expectExactlyOnce(ids);
  });

  it('refuses to apply a batch from a checkpoint that has moved (compare-and-set), writing nothing', async () => {
    await appendEvents(3);
    let events = await store.readAll({ from: START });
    // The global log is eventually consistent: wait until all three are readable.
    await until(async () => (events = await store.readAll({ from: START })).length === 3);
    const projection = tallyProjection();
    await readCheckpoint(pool, projection.name);
    await applyBatch(pool, projection, START, events);
    await expect(applyBatch(pool, projection, START, events)).rejects.toBeInstanceOf(CheckpointMovedError);
    expect((await pool.query('SELECT 1 FROM tally')).rowCount).toBe(3);
  });
});
