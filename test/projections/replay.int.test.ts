import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attachments, compareTables, createScratch, dropLeftScratch, dropScratch, GATHER_PAGES, LockNotTaken, NothingSwapped, rebuildProjections, replayInto, REPLAY_PARTS, replayPoolSize, scratchHolder, verifyProjection, VerifyInterrupted } from '../../services/audit/rebuild.ts';
import { allMigrations } from '../../services/migrations.ts';
import { allProjections } from '../../services/read-models.ts';
import { createPool } from '../../shared/db/pool.ts';
import { createEventStore } from '../../shared/eventstore/index.ts';
import { START, type EventStore, type JsonObject, type ReadPageOptions, type RecordedEvent } from '../../shared/eventstore/port.ts';
import { PageFill } from '../../shared/eventstore/text-size.ts';
import { handles, type Projection } from '../../projections/runner.ts';
import { playerSessionsStream } from '../../services/sessions/events.ts';
import { OP1 } from '../helpers/catalog.ts';
import { migratedDatabase, type MigratedDatabase } from '../helpers/db.ts';
import { eventually } from '../helpers/eventually.ts';
import { applyBatches, record, step } from '../helpers/round-histories.ts';

/**
 * The replay behind `npm run audit -- rebuild` and `verify`: every read model applies the log at its own
 * pace on a connection of its own, the reader a few pages ahead. Whatever the pages and paces, each read
 * model must end with the rows of one pass over the whole log, and a failure must stop the replay, not
 * hang it or leak its connections.
 */
describe('replaying the log into scratch tables, a queue per read model', () => {
  let env: MigratedDatabase;
  let store: EventStore;
  let log: RecordedEvent[];
  const projections = allProjections();

  beforeAll(async () => {
    env = await migratedDatabase('replay', allMigrations);
    store = await createEventStore('postgres', env.pool, env.db.url);
    // One history the decider could record (bets, wins, rollbacks, outcomes, dead letters, re-drives,
    // force-closes), appended event by event as the ledger appends them.
    // Twenty such histories, each on rounds of its own, interleaved in the log.
    const histories = fc.sample(fc.array(step, { minLength: 60, maxLength: 60 }), { seed: 2026_11_26, numRuns: 20 });
    const events = histories.map((steps, h) => record(steps).events.map((e) => ({ ...e, streamId: `${e.streamId}-h${h}` })));
    // Now and then a launch or a kick: events only the sessions read model reads, so its share of a page
    // is small and it gathers them over pages.
    let appended = 0;
    for (let i = 0; events.some((es) => i < es.length); i++) {
      for (const e of events.flatMap((es) => es[i] ?? [])) {
        await store.append(e.streamId, [{ id: randomUUID(), type: e.type, data: e.data as JsonObject }], 'any');
        appended += 1;
      }
      if (i % 3 === 0) {
        await store.append(playerSessionsStream(OP1.id, `p${i % 2}`), [sessionEvent(i)], 'any');
        appended += 1;
      }
    }
    // The global log holds back the newest events while any transaction older than them is open on the
    // server (another test's, in a full run): wait until it shows every one.
    log = await eventually(() => store.readAll({ from: START, maxCount: 10_000 }), (l) => l.length >= appended, 20_000);
    expect(log.length).toBe(appended);
    expect(log.length).toBeGreaterThan(100);
    // The live tables: the whole log applied in one batch, the reference every replay must match.
    for (const p of projections) await applyBatches(env.pool, p, [log.filter((e) => handles(p, e.type))]);
    expect((await env.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM rm_sessions')).rows[0]!.n).toBeGreaterThan(0);
  });
  afterAll(async () => {
    await store?.close();
    await env?.close();
  });

  const sessionEvent = (i: number) => {
    const at = new Date(Date.parse('2026-11-24T12:00:00Z') + i * 1000).toISOString();
    return i % 9 === 6
      ? { id: randomUUID(), type: 'SessionsRevoked', data: { operatorId: OP1.id, playerRef: `p${i % 2}`, tokens: [], revokedAt: at } }
      : {
          id: randomUUID(),
          type: 'SessionStarted',
          data: { token: `t-${i}`, operatorId: OP1.id, playerRef: `p${i % 2}`, providerId: 'studio-a', gameId: 'fruit-1', currency: 'EUR', demo: false, createdAt: at, expiresAt: at },
        };
  };

  const differences = async (schema: string, only: Projection[] = projections) => {
    const client = await env.pool.connect();
    try {
      const found = [];
      for (const p of only) found.push(...(await compareTables(client, schema, p)));
      return found;
    } finally {
      client.release();
    }
  };

  it('ends with the rows of one pass, in pages of 1, 3, 50 events and of the whole log, each read model at its own pace', async () => {
    // Pages of one event are all full, so the replay reads once more at the end, finds nothing, and must
    // still apply what each read model gathered; the log's length as the page size ends on a short page.
    for (const pageSize of [1, 3, 50, log.length]) {
      const schema = await createScratch(env.pool, projections);
      try {
        const seen: number[] = [];
        const at = await replayInto(env.pool, store, schema, projections, START, undefined, { pageSize, progress: (n) => seen.push(n) });
        expect(at, `pages of ${pageSize}`).toBe(log[log.length - 1]!.position);
        expect(await differences(schema), `pages of ${pageSize}`).toEqual([]);
        // Progress only counts what every read model is done with: it never goes back, and ends at the whole log.
        expect(seen).toEqual([...seen].sort((a, b) => a - b));
        expect(seen[seen.length - 1]).toBe(log.length);
        // It moves as the pages are applied, not only at the end: no read model, however few of the
        // events concern it, holds what it gathered more than GATHER_PAGES pages behind the reader.
        const steps = [0, ...seen].slice(1).map((n, i) => n - [0, ...seen][i]!);
        expect(Math.max(...steps), `pages of ${pageSize}: progress reported ${seen.join(', ')}`).toBeLessThanOrEqual(pageSize * (GATHER_PAGES + 1));
      } finally {
        await dropScratch(env.pool, schema);
      }
      expect(env.pool.totalCount - env.pool.idleCount, 'connections held after the replay').toBe(0);
    }
  });

  it('rebuilds and verifies on a pool of replayPoolSize connections, no more', async () => {
    // The log's reads ask the pool for a connection while every lane holds its own for the whole replay:
    // a pool one short of that waits until its wait ends (a fault run's checker sized 4 did, once the
    // rounds read model took three lanes).
    for (const [what, only] of [['every read model', projections], ['the rounds read model', projections.filter((p) => p.streamLocal)]] as const) {
      const pool = createPool(env.db.url, replayPoolSize(only));
      const sized = await createEventStore('postgres', pool, env.db.url);
      try {
        // Each verify replays to the end and compares (what it finds is other tests' business).
        for (const p of only) expect((await verifyProjection(pool, sized, p)).position, `${what}: ${p.name}`).toBeTruthy();
        const rebuilt = await rebuildProjections(pool, sized, [...only]);
        expect(rebuilt.swap, what).toBe('renamed');
      } finally {
        await sized.close();
        await pool.end();
      }
    }
    await matchesOnePass();
  });

  it('splits a stream-local read model (rounds) over connections of its own, each stream on one of them, to the same rows', async () => {
    const rounds = projections.find((p) => p.name === 'rounds')!;
    expect(rounds.streamLocal).toBe(true);
    /** Per connection the rounds read model was applied on, the streams of its batches. */
    const streamsOn = new Map<unknown, Set<string>>();
    const watched: Projection = {
      ...rounds,
      async apply(events, tx) {
        const seen = streamsOn.get(tx) ?? new Set<string>();
        for (const e of events) seen.add(e.streamId);
        streamsOn.set(tx, seen);
        return rounds.apply(events, tx);
      },
    };
    const schema = await createScratch(env.pool, projections);
    try {
      await replayInto(env.pool, store, schema, projections.map((p) => (p === rounds ? watched : p)), START, undefined, { pageSize: 7 });
      expect(await differences(schema)).toEqual([]);
      expect(streamsOn.size).toBe(REPLAY_PARTS);
      const all = [...streamsOn.values()].flatMap((s) => [...s]);
      expect(new Set(all).size, 'each stream applied on one connection only').toBe(all.length);
      expect(new Set(all)).toEqual(new Set(log.filter((e) => handles(rounds, e.type)).map((e) => e.streamId)));
      for (const s of streamsOn.values()) expect(s.size).toBeGreaterThan(5);
    } finally {
      await dropScratch(env.pool, schema);
    }
  });

  it('reads large events a few at a time and applies them in batches of about 8 MiB of text, to the same rows', async () => {
    // The same log, each event carrying a million characters more (as an outcome with a large wallet
    // reply would; the read models ignore the extra field). One string shared by every event: the test
    // holds it once.
    const padding = 'x'.repeat(1024 * 1024);
    const asked: Array<{ maxCount?: number; maxBytes: number }> = [];
    const padded = {
      /** The store's page, padded, and bounded as the stores bound it (at most maxBytes, the first event always). */
      async readPage(options: ReadPageOptions) {
        asked.push({ maxCount: options.maxCount, maxBytes: options.maxBytes });
        const fill = new PageFill(options.maxCount ?? 1000, options.maxBytes);
        for (const e of await store.readAll(options)) if (!fill.add({ ...e, data: { ...e.data, padding } })) break;
        return fill.page();
      },
    } as unknown as EventStore;
    const rounds = projections.find((p) => p.name === 'rounds')!;
    const batches: number[] = [];
    const watched: Projection = { ...rounds, apply: (events, tx) => (batches.push(events.length), rounds.apply(events, tx)) };
    const schema = await createScratch(env.pool, projections);
    try {
      const at = await replayInto(env.pool, padded, schema, projections.map((p) => (p === rounds ? watched : p)), START, undefined);
      expect(at).toBe(log[log.length - 1]!.position);
      expect(await differences(schema)).toEqual([]);
      // Pages of at most 8 MiB asked for (not 2,000 events, two gigabytes of text), read on to the end of the log.
      expect(asked.every((a) => a.maxBytes === 8 * 1024 * 1024)).toBe(true);
      expect(asked.length).toBeGreaterThan(log.length / 8);
      // Each of the rounds read model's batches at most about 8 MiB of text, the last event included.
      expect(Math.max(...batches)).toBeLessThanOrEqual(8);
      expect(batches.reduce((a, b) => a + b, 0)).toBe(log.filter((e) => handles(rounds, e.type)).length);
    } finally {
      await dropScratch(env.pool, schema);
    }
    expect(env.pool.totalCount - env.pool.idleCount, 'connections held after the replay').toBe(0);
  });

  it('tells the planner how large the scratch tables grow, and leaves no transaction open behind it', async () => {
    // A table never analyzed reads reltuples -1: the planner then guesses, and for a table that grew
    // large since, a guess made for an empty one scans it at every batch.
    const schema = await createScratch(env.pool, projections);
    try {
      await replayInto(env.pool, store, schema, projections, START, undefined, { pageSize: 3 });
      const { rows } = await env.pool.query<{ table: string; reltuples: number }>(
        `SELECT c.relname AS table, c.reltuples::float8 AS reltuples FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = $1 AND c.relkind = 'r' ORDER BY 1`,
        [schema],
      );
      expect(rows.map((r) => r.table)).toEqual(projections.flatMap((p) => p.tables.map((t) => t.name)).sort());
      for (const r of rows) {
        const n = Number((await env.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${schema}.${r.table}`)).rows[0]!.n);
        // rm_grants stays empty: the log holds no grant events, so its read model never applies anything.
        if (n > 0) expect(r.reltuples, `${r.table} (${n} rows): analyzed`).toBeGreaterThanOrEqual(0);
        if (n >= 20) expect(r.reltuples, `${r.table} (${n} rows): known not to be empty`).toBeGreaterThan(0);
      }
      const open = await env.pool.query(`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`);
      expect(open.rows, 'connections left inside a transaction').toEqual([]);
    } finally {
      await dropScratch(env.pool, schema);
    }
  });

  it('stops at `until`, and a second replay from there catches up to the same rows', async () => {
    const middle = log[Math.floor(log.length / 2)]!.position;
    const schema = await createScratch(env.pool, projections);
    try {
      expect(await replayInto(env.pool, store, schema, projections, START, middle, { pageSize: 4 })).toBe(middle);
      expect(await differences(schema)).not.toEqual([]); // half the log is not all of it
      expect(await replayInto(env.pool, store, schema, projections, middle, undefined, { pageSize: 4 })).toBe(log[log.length - 1]!.position);
      expect(await differences(schema)).toEqual([]);
    } finally {
      await dropScratch(env.pool, schema);
    }
  });

  it('in the caller\'s transaction, one step after the other on its connection, to the same rows', async () => {
    const schema = await createScratch(env.pool, projections);
    const client = await env.pool.connect();
    try {
      await client.query('BEGIN');
      await replayInto(client, store, schema, projections, START, undefined, { pageSize: 3 });
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    try {
      expect(await differences(schema)).toEqual([]);
    } finally {
      await dropScratch(env.pool, schema);
    }
  });

  /** The console's read model, failing at its third batch; the rounds read model goes on meanwhile. */
  const failingConsole = (): Projection => {
    const consoleModel = projections.find((p) => p.name === 'console')!;
    let calls = 0;
    return {
      ...consoleModel,
      async apply(events, tx) {
        if (++calls === 3) throw new Error('disk full');
        return consoleModel.apply(events, tx);
      },
    };
  };
  const others = projections.filter((p) => p.name !== 'console');
  const held = () => env.pool.totalCount - env.pool.idleCount;

  it('a read model that fails stops the whole replay with its error, and gives back every connection', async () => {
    const schema = await createScratch(env.pool, projections);
    try {
      await expect(replayInto(env.pool, store, schema, [failingConsole(), ...others], START, undefined, { pageSize: 2 })).rejects.toThrow('disk full');
      // Stopped early: the other read models got at most a few pages past the failure, not the whole log.
      const count = async (table: string) => (await env.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`)).rows[0]!.n;
      const live = await count('rm_transactions');
      expect(await count(`${schema}.rm_transactions`)).toBeLessThan(live / 4);
      expect(held(), 'connections held after the failure: only the one that holds the scratch schema').toBe(1);
    } finally {
      await dropScratch(env.pool, schema);
    }
  });

  it('a read of the log that fails stops the replay with its error, and gives back every connection', async () => {
    let reads = 0;
    const flaky: EventStore = Object.assign(Object.create(store) as EventStore, {
      readPage: (options: ReadPageOptions) => (++reads === 4 ? Promise.reject(new Error('connection reset')) : store.readPage(options)),
    });
    const schema = await createScratch(env.pool, projections);
    try {
      await expect(replayInto(env.pool, flaky, schema, projections, START, undefined, { pageSize: 5 })).rejects.toThrow('connection reset');
      expect(held(), 'connections held after the failure: only the one that holds the scratch schema').toBe(1);
    } finally {
      await dropScratch(env.pool, schema);
    }
  });

  it('in the caller\'s transaction, a read model that fails returns its own error, and no statement follows it', async () => {
    const schema = await createScratch(env.pool, projections);
    const client = await env.pool.connect();
    const query = client.query.bind(client);
    let sent = 0;
    let sentAtFailure: number | undefined;
    const failing = failingConsole();
    const apply = failing.apply;
    failing.apply = async (events, tx) => {
      try {
        return await apply(events, tx);
      } catch (err) {
        sentAtFailure = sent;
        throw err;
      }
    };
    client.query = ((...args: Parameters<typeof client.query>) => {
      sent += 1;
      return (query as (...a: unknown[]) => unknown)(...args);
    }) as typeof client.query;
    try {
      await client.query('BEGIN');
      await expect(replayInto(client, store, schema, [failing, ...others], START, undefined, { pageSize: 2 })).rejects.toThrow('disk full');
      expect(sentAtFailure).toBeGreaterThan(0);
      expect(sent, 'statements sent after the failure').toBe(sentAtFailure);
      await client.query('ROLLBACK');
    } finally {
      client.query = query;
      client.release();
      await dropScratch(env.pool, schema);
    }
  });

  /** The live read models' shape: every column, key, index and check, and how each table is stored. */
  const shape = async () => ({
    columns: (
      await env.pool.query(
        `SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull, pg_get_expr(d.adbin, d.adrelid) AS def
         FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
         WHERE c.relnamespace = 'public'::regnamespace AND c.relname LIKE 'rm\\_%' AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped ORDER BY 1, a.attnum`,
      )
    ).rows,
    constraints: (await env.pool.query(`SELECT conrelid::regclass::text AS t, conname, pg_get_constraintdef(oid) AS d FROM pg_constraint WHERE connamespace = 'public'::regnamespace AND conrelid::regclass::text LIKE 'rm\\_%' ORDER BY 1, 2`)).rows,
    indexes: (await env.pool.query(`SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename LIKE 'rm\\_%' ORDER BY 1, 2`)).rows,
    tables: (await env.pool.query(`SELECT relname, relpersistence, relowner::regrole::text AS owner FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relname LIKE 'rm\\_%' AND relkind = 'r' ORDER BY 1`)).rows,
  });
  /** Until `ok` holds of the number of sessions waiting for a lock on rm_sessions, the first table a swap locks (20 s at most). */
  const untilWaiters = async (ok: (waiting: number) => boolean, what: string) => {
    for (const deadline = Date.now() + 20_000; ; await new Promise((r) => setTimeout(r, 10))) {
      const { rows } = await env.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND relation = 'public.rm_sessions'::regclass AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      );
      if (ok(rows[0]!.n)) return;
      if (Date.now() > deadline) throw new Error(`never: ${what}`);
    }
  };
  const scratchLeft = async () => (await env.pool.query(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 'audit\\_%'`)).rows;
  /** Ends the session that holds scratch schema `schema`'s lock (the one that created it), as a kill would. */
  const endScratchSession = async (schema: string) => {
    const pid = await scratchHolder(env.pool, schema);
    expect(pid, `no session holds ${schema}`).toBeDefined();
    await env.pool.query('SELECT pg_terminate_backend($1)', [pid]);
    // pg_terminate_backend only signals the backend: until it has exited it still holds the lock, and a
    // rebuild checking it meanwhile rightly finds its tables whole (on a loaded machine, seen once).
    for (const deadline = Date.now() + 20_000; (await env.pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid])).rowCount !== 0; await new Promise((r) => setTimeout(r, 10))) {
      if (Date.now() > deadline) throw new Error(`backend ${pid} still there 20 s after it was terminated`);
    }
  };
  /** endScratchSession of the one scratch schema a running rebuild or verify holds. */
  const endRunningScratchSession = async () => {
    const running = (await scratchLeft()) as Array<{ nspname: string }>;
    expect(running).toHaveLength(1);
    await endScratchSession(running[0]!.nspname);
  };
  const matchesOnePass = async () => {
    const schema = await createScratch(env.pool, projections);
    try {
      await replayInto(env.pool, store, schema, projections, START, undefined);
      expect(await differences(schema)).toEqual([]);
    } finally {
      await dropScratch(env.pool, schema);
    }
  };
  const removedSession = async () =>
    (await env.pool.query<{ token: string }>(`DELETE FROM rm_sessions WHERE token = (SELECT min(token) FROM rm_sessions) RETURNING token`)).rows[0]!.token;

  it('a swap that fails midway leaves every live read model, its keys and the checkpoints as they were', async () => {
    // A view that leans on rm_rounds' key (it groups by it) makes dropping that key fail, after rm_sessions
    // was already emptied and refilled in the same transaction. One live row is removed first, so the
    // live rows and a rebuild's differ.
    const tables = projections.flatMap((p) => p.tables.map((t) => t.name));
    expect(tables.indexOf('rm_sessions')).toBeLessThan(tables.indexOf('rm_rounds'));
    const snapshot = async () => ({
      rows: await Promise.all(
        tables.map(async (t) => (await env.pool.query<{ h: string | null }>(`SELECT md5(string_agg(x::text, ',' ORDER BY x::text)) AS h FROM ${t} x`)).rows[0]!.h),
      ),
      keys: (await env.pool.query(`SELECT conrelid::regclass::text AS t, conname, pg_get_constraintdef(oid) AS d FROM pg_constraint WHERE conrelid::regclass::text LIKE 'rm\\_%' ORDER BY 1, 2`)).rows,
      indexes: (await env.pool.query(`SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename LIKE 'rm\\_%' ORDER BY 1`)).rows,
      checkpoints: (await env.pool.query('SELECT name, position FROM projection_checkpoints ORDER BY name')).rows,
      scratch: (await env.pool.query(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 'audit\\_%'`)).rows,
    });
    await env.pool.query(`DELETE FROM rm_sessions WHERE token = (SELECT min(token) FROM rm_sessions)`);
    await env.pool.query('CREATE VIEW round_statuses AS SELECT r.round_stream, r.status FROM rm_rounds r GROUP BY r.round_stream');
    try {
      const before = await snapshot();
      await expect(rebuildProjections(env.pool, store, projections)).rejects.toThrow(/depend/);
      expect(await snapshot()).toEqual(before);
    } finally {
      await env.pool.query('DROP VIEW round_statuses');
    }
    // Without the view, the rebuild goes through and puts the removed row back.
    await rebuildProjections(env.pool, store, projections);
    await matchesOnePass();
  });

  it('swaps the rebuilt tables in by name, logged, keyed, indexed and analyzed as the live ones; a read waiting for the lock reads the rebuilt rows', async () => {
    expect(await attachments(env.pool, projections.flatMap((p) => p.tables.map((t) => t.name)))).toEqual([]);
    const before = await shape();
    expect(before.tables.every((t) => t.relpersistence === 'p')).toBe(true);
    const token = await removedSession();
    const count = 'SELECT count(*)::int AS n FROM rm_sessions';
    const holder = await env.pool.connect();
    const reader = await env.pool.connect();
    let replayed = 0;
    try {
      // A statement prepared on a connection before the swap, run again after it.
      const n0 = (await reader.query<{ n: number }>({ name: 'count-sessions', text: count })).rows[0]!.n;
      // A reader in the middle of a transaction holds the swap off until it ends.
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM rm_sessions LIMIT 1');
      const rebuilt = rebuildProjections(env.pool, store, projections, () => (replayed = Date.now()));
      await untilWaiters((n) => n >= 1, 'the swap asks for the lock');
      // These queue behind the swap's lock, on the live table it then drops.
      const again = reader.query<{ n: number }>({ name: 'count-sessions', text: count });
      const found = env.pool.query('SELECT token FROM rm_sessions WHERE token = $1', [token]);
      await untilWaiters((n) => n >= 3, 'two reads queue behind the swap');
      await holder.query('COMMIT');
      const result = await rebuilt;
      expect(result.swap).toBe('renamed');
      expect((await again).rows[0]!.n, 'the prepared statement counts the rebuilt table').toBe(n0 + 1);
      expect((await found).rows, 'the waiting read finds the row the rebuild put back').toEqual([{ token }]);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
      reader.release();
    }
    expect(await shape()).toEqual(before);
    // Analyzed once whole (the replay analyzes its tables as they grow, and is done before its last report).
    const { rows: analyzed } = await env.pool.query<{ relname: string; at: Date | null }>(
      `SELECT relname, greatest(last_analyze, last_autoanalyze) AS at FROM pg_stat_user_tables WHERE schemaname = 'public' AND relname IN ('rm_transactions', 'rm_rounds', 'rm_sessions')`,
    );
    expect(analyzed.length).toBe(3);
    for (const r of analyzed) expect(r.at?.getTime(), `${r.relname} analyzed after the replay`).toBeGreaterThan(replayed);
    expect(await scratchLeft()).toEqual([]);
    await matchesOnePass();
  });

  it('a rebuild whose tables cannot be made ready for the swap leaves every live read model as it was', async () => {
    // An index the live rows can hold but the rebuilt ones cannot: its expression fails on the token of
    // the row removed from the live table, which the rebuild puts back. It refuses only once the index is
    // built and the row removed: a build after the removal would still index the removed row while any
    // older snapshot is open on the server (another test file's), and fail on it.
    const refusing = (token: string) =>
      env.pool.query(
        `CREATE OR REPLACE FUNCTION replay_test_refuse(t text) RETURNS text IMMUTABLE LANGUAGE plpgsql AS $$
         BEGIN IF t = '${token}' THEN RAISE EXCEPTION 'refused %', t; END IF; RETURN t; END $$`,
      );
    await refusing('');
    await env.pool.query('CREATE INDEX rm_sessions_refuse_idx ON rm_sessions (replay_test_refuse(token))');
    const token = await removedSession();
    await refusing(token);
    try {
      const before = await shape();
      const rows = (await env.pool.query('SELECT * FROM rm_sessions ORDER BY token')).rows;
      await expect(rebuildProjections(env.pool, store, projections)).rejects.toThrow(`refused ${token}`);
      expect(await shape()).toEqual(before);
      expect((await env.pool.query('SELECT * FROM rm_sessions ORDER BY token')).rows).toEqual(rows);
      expect(await scratchLeft()).toEqual([]);
    } finally {
      await env.pool.query('DROP INDEX rm_sessions_refuse_idx');
      await env.pool.query('DROP FUNCTION replay_test_refuse');
    }
    await rebuildProjections(env.pool, store, projections);
    await matchesOnePass();
  });

  it('names what is attached to a live table itself, copies the rows in under the lock instead, and the attachments survive', async () => {
    const tables = projections.flatMap((p) => p.tables.map((t) => t.name));
    await env.pool.query(`CREATE VIEW replay_test_tokens AS SELECT token FROM rm_sessions`);
    await env.pool.query(`GRANT SELECT ON rm_grants TO PUBLIC`);
    await env.pool.query(`ALTER TABLE rm_rounds SET (fillfactor = 90)`);
    await env.pool.query(`COMMENT ON TABLE rm_transactions IS 'one row per transaction'`);
    await env.pool.query(`ALTER TABLE rm_console_minutes ALTER COLUMN minute SET STATISTICS 500`);
    await env.pool.query(`CREATE FUNCTION replay_test_touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$`);
    await env.pool.query(`CREATE TRIGGER replay_test_touch BEFORE UPDATE ON rm_settlement_quarters FOR EACH ROW EXECUTE FUNCTION replay_test_touch()`);
    // Things the swap by name would lose without a trace, or that would make it fail.
    await env.pool.query(`CREATE FUNCTION replay_test_grants() RETURNS SETOF rm_grants LANGUAGE sql AS 'SELECT * FROM rm_grants'`);
    await env.pool.query(`CREATE STATISTICS replay_test_stats (dependencies) ON operator_id, currency FROM rm_rounds`);
    await env.pool.query(`COMMENT ON INDEX rm_transactions_time_idx IS 'the operators'' time ranges'`);
    await env.pool.query(`CREATE PUBLICATION replay_test_all FOR ALL TABLES`);
    try {
      const attached = [
        'rm_console_minutes: a publication of every table',
        'rm_console_minutes: column settings, privileges or identity',
        'rm_grants: a publication of every table',
        'rm_grants: function replay_test_grants()',
        'rm_grants: privileges granted on it',
        'rm_rounds: a publication of every table',
        'rm_rounds: extended statistics',
        'rm_rounds: storage parameters fillfactor=90',
        'rm_sessions: a publication of every table',
        'rm_sessions: rule _RETURN on view replay_test_tokens',
        'rm_settlement_quarters: a publication of every table',
        'rm_settlement_quarters: trigger replay_test_touch on table rm_settlement_quarters',
        'rm_transactions: a comment',
        'rm_transactions: a comment on an index or a constraint',
        'rm_transactions: a publication of every table',
      ];
      expect(await attachments(env.pool, tables)).toEqual(attached);
      const token = await removedSession();
      const result = await rebuildProjections(env.pool, store, projections);
      expect(result.swap).toBe('copied');
      expect(result.attached).toEqual(attached);
      // Each attachment is still there, on the table with the rebuilt rows.
      expect((await env.pool.query('SELECT token FROM replay_test_tokens WHERE token = $1', [token])).rows).toEqual([{ token }]);
      expect(await attachments(env.pool, tables)).toEqual(attached);
      expect(await scratchLeft()).toEqual([]);
      await matchesOnePass();
    } finally {
      await env.pool.query('DROP VIEW replay_test_tokens');
      await env.pool.query('REVOKE SELECT ON rm_grants FROM PUBLIC');
      await env.pool.query('ALTER TABLE rm_rounds RESET (fillfactor)');
      await env.pool.query('COMMENT ON TABLE rm_transactions IS NULL');
      await env.pool.query('ALTER TABLE rm_console_minutes ALTER COLUMN minute SET STATISTICS -1');
      await env.pool.query('DROP TRIGGER replay_test_touch ON rm_settlement_quarters');
      await env.pool.query('DROP FUNCTION replay_test_touch');
      await env.pool.query('DROP FUNCTION replay_test_grants');
      await env.pool.query('DROP STATISTICS replay_test_stats');
      await env.pool.query('COMMENT ON INDEX rm_transactions_time_idx IS NULL');
      await env.pool.query('DROP PUBLICATION replay_test_all');
    }
    expect(await attachments(env.pool, tables), 'all undone').toEqual([]);
  });
  /**
   * A rebuild held at its lock by a reader of rm_sessions (the first table it locks), while `meanwhile`
   * runs in that reader's transaction, which then ends and lets the rebuild go on.
   */
  const heldAtTheLock = async (meanwhile: (tx: import('pg').PoolClient) => Promise<void>) => {
    const holder = await env.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM rm_sessions LIMIT 1');
      const rebuilt = rebuildProjections(env.pool, store, projections);
      rebuilt.catch(() => undefined); // awaited below
      await untilWaiters((n) => n > 0, 'the rebuild asks for the lock');
      await meanwhile(holder);
      await holder.query('COMMIT');
      return await rebuilt;
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
    }
  };

  it('copies instead, when something is attached to a live table after it was last looked for', async () => {
    const token = await removedSession();
    try {
      const result = await heldAtTheLock((tx) => tx.query('GRANT SELECT ON rm_grants TO PUBLIC').then(() => undefined));
      expect(result.swap).toBe('copied');
      expect(result.attached).toEqual(['rm_grants: privileges granted on it']);
      expect((await env.pool.query(`SELECT has_table_privilege('public', 'rm_grants', 'SELECT') AS granted`)).rows[0].granted).toBe(true);
      expect((await env.pool.query('SELECT token FROM rm_sessions WHERE token = $1', [token])).rows).toEqual([{ token }]);
      expect(await scratchLeft()).toEqual([]);
      await matchesOnePass();
    } finally {
      await env.pool.query('REVOKE SELECT ON rm_grants FROM PUBLIC');
    }
  });

  it('swaps nothing in when a live table changed shape during the rebuild (a migration meanwhile), and says what changed', async () => {
    await removedSession();
    const rows = (await env.pool.query('SELECT * FROM rm_sessions ORDER BY token')).rows;
    try {
      await expect(
        heldAtTheLock(async (tx) => {
          await tx.query('CREATE INDEX replay_test_grants_idx ON rm_grants (id)');
        }),
      ).rejects.toThrow(/changed while they were rebuilt[\s\S]*rm_grants: the live table has index CREATE INDEX replay_test_grants_idx/);
      // Everything as it was: the new index, the live rows (one still missing), no scratch left.
      expect((await env.pool.query(`SELECT indexname FROM pg_indexes WHERE indexname = 'replay_test_grants_idx'`)).rows).toHaveLength(1);
      expect((await env.pool.query('SELECT * FROM rm_sessions ORDER BY token')).rows).toEqual(rows);
      expect(await scratchLeft()).toEqual([]);
    } finally {
      await env.pool.query('DROP INDEX replay_test_grants_idx');
    }
    expect((await rebuildProjections(env.pool, store, projections)).swap).toBe('renamed');
    await matchesOnePass();
  });

  it('copies into tables with generated and identity columns, which a swap by name cannot take', async () => {
    await env.pool.query('ALTER TABLE rm_sessions ADD COLUMN replay_test_len int GENERATED ALWAYS AS (length(token)) STORED');
    await env.pool.query('ALTER TABLE rm_rounds ADD COLUMN replay_test_seq bigint GENERATED ALWAYS AS IDENTITY');
    try {
      expect(await attachments(env.pool, ['rm_rounds'])).toContain('rm_rounds: column settings, privileges or identity');
      const token = await removedSession();
      const result = await rebuildProjections(env.pool, store, projections);
      expect(result.swap).toBe('copied');
      expect((await env.pool.query('SELECT replay_test_len FROM rm_sessions WHERE token = $1', [token])).rows).toEqual([{ replay_test_len: token.length }]);
      const { rows } = await env.pool.query<{ n: number; distinct: number; max: string }>('SELECT count(*)::int AS n, count(DISTINCT replay_test_seq)::int AS distinct, max(replay_test_seq) AS max FROM rm_rounds');
      expect(rows[0]!.distinct).toBe(rows[0]!.n);
      // The identity goes on after the values copied in.
      const { rows: next } = await env.pool.query<{ v: string }>(`SELECT nextval(pg_get_serial_sequence('rm_rounds', 'replay_test_seq')) AS v`);
      expect(BigInt(next[0]!.v)).toBeGreaterThan(BigInt(rows[0]!.max));
    } finally {
      await env.pool.query('ALTER TABLE rm_sessions DROP COLUMN replay_test_len');
      await env.pool.query('ALTER TABLE rm_rounds DROP COLUMN replay_test_seq');
    }
    expect(await attachments(env.pool, projections.flatMap((p) => p.tables.map((t) => t.name)))).toEqual([]);
  });
  it('drops the scratch schemas no running rebuild or verify holds, and only those', async () => {
    const running = await createScratch(env.pool, projections);
    // A run killed midway: its schema is there, the session that held its lock is gone.
    const killed = await createScratch(env.pool, projections);
    await endScratchSession(killed);
    // Named like one, but not made by a rebuild or verify: never touched.
    await env.pool.query('CREATE SCHEMA audit_2026112701');
    try {
      const { dropped, inUse, failed } = await dropLeftScratch(env.pool);
      expect(dropped.map((d) => d.schema)).toEqual([killed]);
      expect(inUse).toEqual([running]);
      expect(failed).toEqual([]);
      const { rows } = await env.pool.query<{ nspname: string }>(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 'audit\\_%' ORDER BY 1`);
      expect(rows.map((r) => r.nspname).sort()).toEqual(['audit_2026112701', running].sort());
      // The running one is still usable, and is dropped by its own run.
      await replayInto(env.pool, store, running, projections, START, undefined);
      expect(await differences(running)).toEqual([]);
    } finally {
      await dropScratch(env.pool, running);
      await dropScratch(env.pool, killed);
      await env.pool.query('DROP SCHEMA audit_2026112701');
    }
    expect(await dropLeftScratch(env.pool)).toEqual({ dropped: [], inUse: [], failed: [] });
  });

  it('a replay whose scratch schema is dropped under it stops, and writes nothing into the live tables', async () => {
    // The console read model alone: its rows are sums, so any page applied to the live rows changes them.
    const console = projections.filter((p) => p.name === 'console');
    const tables = projections.flatMap((p) => p.tables.map((t) => t.name));
    const digest = async () =>
      Promise.all(tables.map(async (t) => (await env.pool.query<{ h: string | null }>(`SELECT md5(string_agg(x::text, ',' ORDER BY x::text)) AS h FROM ${t} x`)).rows[0]!.h));
    const live = await digest();
    const schema = await createScratch(env.pool, console);
    let reads = 0;
    const dropping: EventStore = Object.assign(Object.create(store) as EventStore, {
      readPage: async (options: ReadPageOptions) => {
        // As another run's clean-up (or a person) would: it waits for the pages being applied, then drops.
        // Twelve pages in, the read model has applied eight or more (the reader is at most four ahead) and
        // its next ANALYZE of the scratch tables (which would fail) is at its sixteenth.
        if (++reads === 12) await env.pool.query(`DROP SCHEMA ${schema} CASCADE`);
        return store.readPage(options);
      },
    });
    try {
      await expect(replayInto(env.pool, dropping, schema, console, START, undefined, { pageSize: 5 })).rejects.toThrow(/does not exist/);
      expect(await digest(), 'the live read models').toEqual(live);
    } finally {
      await dropScratch(env.pool, schema);
    }
  });

  it('asks for the lock a bounded time at each try, lets reads through between tries, and gives up naming who holds it', async () => {
    await removedSession();
    const rows = (await env.pool.query('SELECT * FROM rm_sessions ORDER BY token')).rows;
    const holder = await env.pool.connect();
    try {
      // A long reader: a report in a transaction left open.
      const pid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM rm_sessions LIMIT 1 -- the monthly report`);
      const rebuilt = rebuildProjections(env.pool, store, projections, undefined, { waitMs: 150, attempts: 4, pauseMs: 150 });
      rebuilt.catch(() => undefined);
      await untilWaiters((n) => n > 0, 'the rebuild asks for the lock');
      // Reads asked for after the swap's lock still go through while the report runs (one that asks for
      // the lock for as long as it takes would hold them, and this test, until the report ends).
      for (let i = 0; i < 3; i++) await env.pool.query('SELECT count(*) FROM rm_sessions');
      const err = await rebuilt.then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(LockNotTaken);
      expect((err as LockNotTaken).message).toMatch(/could not be locked for the swap \(4 tries of 150 ms\), so nothing was swapped in/);
      expect((err as LockNotTaken).holders.join('\n')).toContain(`pid ${pid} (idle in transaction): SELECT 1 FROM rm_sessions LIMIT 1 -- the monthly report`);
      expect((await env.pool.query('SELECT * FROM rm_sessions ORDER BY token')).rows).toEqual(rows);
      expect(await scratchLeft()).toEqual([]);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
    }
    // A reader that leaves between two tries: the first gives up, the second takes the lock.
    const late = await env.pool.connect();
    try {
      await late.query('BEGIN');
      await late.query('SELECT 1 FROM rm_sessions LIMIT 1');
      const seen: number[] = [];
      // Tries enough to outlast the wait below for the log to show the append (another test file's
      // transaction open for seconds holds it back): 5 gave up before the reader left, once, beside test/cli.
      const rebuilt = rebuildProjections(env.pool, store, projections, (n) => seen.push(n), { waitMs: 100, attempts: 40, pauseMs: 500 });
      rebuilt.catch(() => undefined);
      await untilWaiters((n) => n > 0, 'the first try asks for the lock');
      // Appended while the first try waits: the rebuild catches up with it before the try that takes the
      // lock. The log shows it only once no older transaction is open anywhere on the server (another
      // test file's, say), so the reader leaves only once the log shows it.
      const appended = await store.append(playerSessionsStream(OP1.id, 'p0'), [sessionEvent(1_000)], 'any');
      const shown = await eventually(() => store.readAll({ from: log[log.length - 1]!.position, maxCount: 10 }), (l) => l.length > 0, 20_000);
      expect(shown, 'the log never showed the appended event').not.toHaveLength(0);
      await untilWaiters((n) => n === 0, 'a try gives up');
      await late.query('COMMIT');
      const result = await rebuilt;
      expect(result.swap).toBe('renamed');
      expect(result.tries).toBeGreaterThanOrEqual(2);
      expect(result.position).toBe(appended.position);
      // The progress it reports goes on through its catch-ups (it started again from zero at each) and
      // ends at every event of the log.
      expect(seen).toEqual([...seen].sort((a, b) => a - b));
      expect(seen[seen.length - 1]).toBe(log.length + 1);
    } finally {
      await late.query('ROLLBACK').catch(() => undefined);
      late.release();
    }
    await matchesOnePass();
  });

  it('swaps nothing in when the session holding its scratch tables ended during the run (a server that restarted may have lost their last rows)', async () => {
    await removedSession();
    const rows = (await env.pool.query('SELECT * FROM rm_sessions ORDER BY token')).rows;
    const holder = await env.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM rm_sessions LIMIT 1');
      const rebuilt = rebuildProjections(env.pool, store, projections, undefined, { waitMs: 100, attempts: 20, pauseMs: 200 });
      rebuilt.catch(() => undefined);
      await untilWaiters((n) => n > 0, 'the first try asks for the lock');
      // As a crash and restart of the server would end it (and every other session).
      await endRunningScratchSession();
      await holder.query('COMMIT');
      const err = await rebuilt.then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(NothingSwapped);
      expect((err as Error).message).toMatch(/the session that held the rebuilt tables ended during the run .*nothing was swapped in; run the rebuild again/);
      expect((await env.pool.query('SELECT * FROM rm_sessions ORDER BY token')).rows).toEqual(rows);
      expect(await scratchLeft()).toEqual([]);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      holder.release();
    }
    // Run again, it mends the live read model.
    expect((await rebuildProjections(env.pool, store, projections)).swap).toBe('renamed');
    await matchesOnePass();
  });

  /**
   * verify of the sessions read model (whose live rows hold the whole log: the tests above leave it so),
   * with the projector in the middle of a batch: its transaction has written the checkpoint's row and not
   * committed yet (a batch of events the read model does not read moves only the checkpoint). Once verify
   * has replayed the log and waits for that row, `meanwhile` runs; then the projector commits.
   */
  const verifyBehindTheProjector = async (meanwhile: () => Promise<void>) => {
    const sessions = projections.find((p) => p.name === 'sessions')!;
    const all = await store.readAll({ from: START, maxCount: 10_000 });
    const end = all[all.length - 1]!.position;
    await env.pool.query(`INSERT INTO projection_checkpoints (name, position) VALUES ('sessions', $1) ON CONFLICT (name) DO UPDATE SET position = EXCLUDED.position`, [end]);
    const projector = await env.pool.connect();
    try {
      await projector.query('BEGIN');
      await projector.query(`UPDATE projection_checkpoints SET updated_at = now() WHERE name = 'sessions'`);
      const verifying = verifyProjection(env.pool, store, sessions);
      verifying.catch(() => undefined);
      const waiting = async () =>
        (await env.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'SELECT position FROM projection_checkpoints%FOR SHARE'`)).rows[0]!.n;
      expect(await eventually(waiting, (n) => n > 0, 20_000)).toBeGreaterThan(0);
      await meanwhile();
      await projector.query('COMMIT');
      return { end, outcome: await verifying.then((result) => ({ result }), (err: unknown) => ({ err })) };
    } finally {
      await projector.query('ROLLBACK').catch(() => undefined);
      projector.release();
      await env.pool.query(`DELETE FROM projection_checkpoints WHERE name = 'sessions'`);
    }
  };

  it("verify asks again when the projector commits its checkpoint just as verify asks for it (Postgres's serialization failure), and matches", async () => {
    const { end, outcome } = await verifyBehindTheProjector(async () => undefined);
    expect(outcome).toEqual({ result: expect.objectContaining({ differences: [], position: end }) });
  });

  it('verify compares nothing when the session holding its scratch tables ended during the run (unlogged, a restarted server empties them)', async () => {
    const { outcome } = await verifyBehindTheProjector(async () => {
      // As a crash and restart of the server would end it (and every other session).
      await endRunningScratchSession();
    });
    const err = 'err' in outcome ? outcome.err : undefined;
    expect(err).toBeInstanceOf(VerifyInterrupted);
    expect((err as Error).message).toMatch(/the session that held the replayed tables ended during the run .*nothing was compared; run verify again/);
    expect(await scratchLeft()).toEqual([]);
  });
});
