import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../shared/db/migrations.ts';
import { createPool } from '../../shared/db/pool.ts';
import { eventStoreMigrations, NOTIFY_EVERY_MS, PostgresEventStore } from '../../shared/eventstore/postgres.ts';
import { START, WrongExpectedRevisionError, type RecordedEvent } from '../../shared/eventstore/port.ts';
import { createTestDatabase, describeHoldBack } from '../helpers/db.ts';
import { eventually } from '../helpers/eventually.ts';
import { eventStoreContract } from './contract.ts';

async function openStore(label: string) {
  const db = await createTestDatabase(label);
  const pool = createPool(db.url, 20);
  await migrate(pool, eventStoreMigrations);
  const store = new PostgresEventStore(pool, db.url);
  return {
    db,
    pool,
    store,
    async cleanup() {
      await store.close();
      await pool.end();
      await db.drop();
    },
  };
}

eventStoreContract('Postgres', async () => {
  const fx = await openStore('escontract');
  return {
    store: fx.store,
    async diagnose() {
      return `${await describeHoldBack(fx.db.url)}; readAll dropped ${fx.store.outOfOrderRowsDropped} rows`;
    },
    async cleanup() {
      if (fx.store.outOfOrderRowsDropped > 0) console.warn(`readAll dropped ${fx.store.outOfOrderRowsDropped} out-of-order rows`);
      await fx.cleanup();
    },
  };
});

describe('Postgres event store: a batch that fails as a whole', () => {
  let fx: Awaited<ReturnType<typeof openStore>>;
  beforeAll(async () => {
    fx = await openStore('esbatch');
  });
  afterAll(async () => fx.cleanup());

  it('tries each append of the batch alone: the one whose event ids are taken is refused, its neighbours are written', async () => {
    const { store } = fx;
    const ev = (type: string) => ({ id: randomUUID(), type, data: {} });
    const taken = [ev('T')];
    await store.append('owner', taken, 'no_stream');
    const settle = <T>(p: Promise<T>) => p.then((value) => ({ value }), (error: unknown) => ({ error }));
    // Two appends take both batch slots; the next three share one batch, which the taken ids make fail.
    const [, , thief, left, right] = await Promise.all([
      settle(store.append('slot-1', [ev('S')], 'any')),
      settle(store.append('slot-2', [ev('S')], 'any')),
      settle(store.append('thief', taken, 'any')),
      settle(store.append('left', [ev('L')], 'no_stream')),
      settle(store.append('right', [ev('R')], 'no_stream')),
    ]);
    expect('error' in thief && thief.error).toBeInstanceOf(WrongExpectedRevisionError); // event ids are unique across streams here
    expect(left).toEqual({ value: expect.objectContaining({ nextRevision: 0 }) });
    expect(right).toEqual({ value: expect.objectContaining({ nextRevision: 0 }) });
    expect(await store.readStream('thief')).toEqual([]);
    expect((await store.readStream('owner')).map((e) => e.id)).toEqual(taken.map((e) => e.id));
  });
});

describe('Postgres event store: late commits', () => {
  let fx: Awaited<ReturnType<typeof openStore>>;
  beforeAll(async () => {
    fx = await openStore('eslate');
  });
  afterAll(async () => fx.cleanup());

  it('holds back an event committed after a higher-numbered one, then delivers both exactly once', async () => {
    const { store, db } = fx;
    const seen: RecordedEvent[] = [];
    const controller = new AbortController();
    const sub = (async () => {
      for await (const e of store.subscribeAll({ from: START, signal: controller.signal })) {
        seen.push(e);
        if (seen.length === 2) controller.abort();
      }
    })();

    // A transaction takes the lower global position and stays open...
    const slow = new pg.Client({ connectionString: db.url });
    slow.on('error', () => undefined); // ended by the database's drop, were the test to fail before it ends
    await slow.connect();
    try {
      await slow.query('BEGIN');
      await slow.query(
        `INSERT INTO es_events (stream_id, revision, event_id, type, data) VALUES ('slow', 0, $1, 'Slow', '{}')`,
        [randomUUID()],
      );
      // ...while a later one commits.
      await store.append('fast', [{ id: randomUUID(), type: 'Fast', data: {} }], 'no_stream');
      await new Promise((r) => setTimeout(r, 300));
      expect(seen).toEqual([]); // not delivered ahead of the open transaction: delivering it would skip 'Slow'
      expect(await store.readAll({ from: START })).toEqual([]);

      await slow.query('COMMIT');
    } finally {
      // Never left open: an open transaction holds back the log of every database on the server.
      await slow.end().catch(() => undefined);
    }
    await sub;
    expect(seen.map((e) => e.type).sort()).toEqual(['Fast', 'Slow']);
    const all = await store.readAll({ from: START });
    expect(all.map((e) => e.id)).toEqual(seen.map((e) => e.id));
  });
});

describe('Postgres event store: lost notifications', () => {
  let fx: Awaited<ReturnType<typeof openStore>>;
  beforeAll(async () => {
    fx = await openStore('esnotify');
  });
  afterAll(async () => fx.cleanup());

  it('still delivers appends made by another process when its LISTEN connection is killed', async () => {
    const { store, db, pool } = fx;
    const controller = new AbortController();
    const seen: string[] = [];
    const sub = (async () => {
      for await (const e of store.subscribeAll({ signal: controller.signal })) {
        seen.push(e.type);
        if (seen.length === 2) controller.abort();
      }
    })();
    await new Promise((r) => setTimeout(r, 100));
    await pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND query ILIKE 'LISTEN%'`, [db.name]);
    const other = createPool(db.url, 2);
    const writer = new PostgresEventStore(other, db.url);
    await writer.append('x', [{ id: randomUUID(), type: 'One', data: {} }], 'any');
    await writer.append('x', [{ id: randomUUID(), type: 'Two', data: {} }], 'any');
    await sub;
    expect(seen).toEqual(['One', 'Two']);
    await writer.close();
    await other.end();
  });
});

describe('Postgres event store: notifications', () => {
  let fx: Awaited<ReturnType<typeof openStore>>;
  beforeAll(async () => {
    fx = await openStore('esnotifyrate');
  });
  afterAll(async () => fx.cleanup());

  /** A connection listening on the appends' channel, counting what it is sent. */
  async function listening() {
    const client = new pg.Client({ connectionString: fx.db.url });
    await client.connect();
    const at: number[] = [];
    client.on('notification', () => at.push(Date.now()));
    await client.query('LISTEN es_appended');
    return { at, close: () => client.end() };
  }

  // Postgres wakes every backend that listens in the database at every notification, whatever its channel
  // (the catalog's listeners too): one notification for each append cost each of them a wake-up per
  // transaction, while the projector reads the log every ~100 ms under load anyway.
  it('notifies the first append after a quiet moment at once, and a burst of appends a few times, not once each', async () => {
    const { store } = fx;
    const listener = await listening();
    try {
      await new Promise((r) => setTimeout(r, 200)); // quiet: no append for longer than the store waits between notifications
      const first = Date.now();
      await store.append(`quiet-${randomUUID()}`, [{ id: randomUUID(), type: 'First', data: {} }], 'any');
      await expect.poll(() => listener.at.length, { timeout: 2000 }).toBe(1);
      expect(listener.at[0]! - first).toBeLessThan(1000);
      await new Promise((r) => setTimeout(r, NOTIFY_EVERY_MS + 20)); // so the burst's first append is notified

      const appends = 100;
      const started = Date.now();
      for (let i = 0; i < appends; i++) await store.append(`burst-${i}`, [{ id: randomUUID(), type: 'Burst', data: {} }], 'any');
      const elapsed = Date.now() - started;
      await new Promise((r) => setTimeout(r, 300));
      const during = listener.at.length - 1;
      // At most one a connection every NOTIFY_EVERY_MS (sequential appends use one or two of the pool's connections).
      expect(during).toBeGreaterThanOrEqual(1);
      expect(during).toBeLessThanOrEqual(2 * (Math.ceil(elapsed / NOTIFY_EVERY_MS) + 1));
      expect(during).toBeLessThan(appends / 2);
      // Nothing is lost for it: every append is in the log. (Polled: the log is read up to the oldest
      // transaction still open in the whole cluster, and another file's test may hold one open for a moment.)
      await expect
        .poll(async () => (await store.readAll({ from: START })).filter((e) => e.type === 'Burst').length)
        .toBe(appends);
    } finally {
      await listener.close();
    }
  });

  it('a rolled-back append takes back its notification and its place in the window: the next one notifies at once', async () => {
    const listener = await listening();
    const client = new pg.Client({ connectionString: fx.db.url });
    await client.connect();
    const append = (stream: string) =>
      client.query(`SELECT * FROM es_append_one($1, NULL, ARRAY[$2::uuid], ARRAY['Rolled'], ARRAY['{}'::jsonb], ARRAY['{}'::jsonb])`, [stream, randomUUID()]);
    try {
      await client.query('BEGIN');
      await append(`rolled-${randomUUID()}`);
      await client.query('ROLLBACK');
      const kept = `kept-${randomUUID()}`;
      await append(kept); // at once, on the same connection, well within NOTIFY_EVERY_MS of the first
      await expect.poll(() => listener.at.length, { timeout: 2000 }).toBe(1);
      await new Promise((r) => setTimeout(r, 100));
      expect(listener.at).toHaveLength(1); // the rolled-back one sent nothing
      expect((await fx.store.readStream(kept)).map((e) => e.type)).toEqual(['Rolled']);
    } finally {
      await client.end();
      await listener.close();
    }
  });

  it('appends whatever a session was given under the name it keeps its last notification in', async () => {
    // A setting of that name from the database's or the role's defaults (or a connection string's options)
    // is not a time: the append notifies, as for a session that never did.
    await fx.pool.query(`ALTER DATABASE ${fx.db.name} SET es.notified_at = 'not a time'`);
    const pool = createPool(fx.db.url, 2);
    const store = new PostgresEventStore(pool, fx.db.url);
    const listener = await listening();
    try {
      await store.append(`odd-${randomUUID()}`, [{ id: randomUUID(), type: 'Odd', data: {} }], 'any');
      await expect.poll(() => listener.at.length, { timeout: 2000 }).toBe(1);
    } finally {
      await listener.close();
      await store.close();
      await pool.end();
      await fx.pool.query(`ALTER DATABASE ${fx.db.name} RESET es.notified_at`);
    }
  });
});

describe('Postgres event store: transaction ids of different lengths', () => {
  let fx: Awaited<ReturnType<typeof openStore>>;
  beforeAll(async () => {
    fx = await openStore('esxidlen');
  });
  afterAll(async () => fx.cleanup());

  // The log is ordered by transaction id. A server's ids grow past 99,999 to 100,000 (and every other
  // power of ten) while it runs: ordered as text, '100000' sorts before '99999', and a reader paging by
  // position passed over every event written before the id gained a digit (found by a fault run).
  it('orders, pages and reports the head by the ids’ value, not their spelling', async () => {
    const { pool, store } = fx;
    // Ids below the server's own (every one committed long ago), whose spellings sort the other way.
    for (const [xid, stream] of [['9', 'a'], ['10', 'b'], ['99', 'c'], ['100', 'd']] as const) {
      await pool.query(`INSERT INTO es_events (transaction_id, stream_id, revision, event_id, type, data) VALUES ($1::xid8, $2, 0, $3, 'E', '{}')`, [
        xid,
        stream,
        randomUUID(),
      ]);
    }
    const all = await store.readAll({ from: START });
    expect(all.map((e) => e.streamId)).toEqual(['a', 'b', 'c', 'd']);
    const paged: string[] = [];
    let from = START;
    for (;;) {
      const page = await store.readAll({ from, maxCount: 1 });
      if (page.length === 0) break;
      paged.push(page[0]!.streamId);
      from = page[0]!.position;
    }
    expect(paged).toEqual(['a', 'b', 'c', 'd']);
    expect(await store.headPosition()).toBe(all[3]!.position);
    expect(store.outOfOrderRowsDropped).toBe(0);
  });
});

describe("Postgres event store: an event's time", () => {
  let fx: Awaited<ReturnType<typeof openStore>>;
  beforeAll(async () => {
    fx = await openStore('estime');
  });
  afterAll(async () => fx.cleanup());

  // The hash chain links each event with this time (services/chain/link.ts), and the audit routes show it:
  // every read must give the stored time to the millisecond, the microseconds cut (never rounded up), in
  // whatever time zone the database's sessions run.
  it('is the stored created_at to the millisecond, microseconds cut, in every read and any session time zone', async () => {
    const { store, pool, db } = fx;
    const stored = ['2026-11-28 04:22:09.123999+00', '1999-12-31 23:59:59.999999+00', '2026-01-01 00:00:00.000001+00', '2026-03-29 01:30:00+00', '1969-12-31 23:59:59.9995+00', '2004-05-28 01:36:12.228+00'];
    const expected = ['2026-11-28T04:22:09.123Z', '1999-12-31T23:59:59.999Z', '2026-01-01T00:00:00.000Z', '2026-03-29T01:30:00.000Z', '1969-12-31T23:59:59.999Z', '2004-05-28T01:36:12.228Z'];
    for (const [i, at] of stored.entries()) {
      const { position } = await store.append(`timed-${i}`, [{ id: randomUUID(), type: 'T', data: {} }], 'no_stream');
      await pool.query('UPDATE es_events SET created_at = $1 WHERE global_position = $2', [at, position.split('.')[1]]);
    }
    const reads = async () => [
      (await store.readAll({ from: START, maxCount: 100 })).map((e) => e.createdAt.toISOString()),
      await Promise.all(stored.map(async (_, i) => (await store.readStream(`timed-${i}`))[0]!.createdAt.toISOString())),
      await Promise.all(stored.map(async (_, i) => (await store.readStream(`timed-${i}`, { maxCount: 1 }))[0]!.createdAt.toISOString())),
    ];
    expect(await eventually(reads, (v) => v[0]!.length === stored.length)).toEqual([expected, expected, expected]);
    // A session time zone with a half-hour offset and summer time: the instant read is the same.
    await pool.query(`ALTER DATABASE ${db.name} SET timezone = 'America/St_Johns'`);
    const zoned = createPool(db.url, 2); // its sessions start with the database's new setting
    const other = new PostgresEventStore(zoned, db.url);
    try {
      expect((await zoned.query<{ tz: string }>("SELECT current_setting('TimeZone') AS tz")).rows[0]!.tz).toBe('America/St_Johns');
      expect((await other.readAll({ from: START, maxCount: 100 })).map((e) => e.createdAt.toISOString())).toEqual(expected);
    } finally {
      await other.close();
      await zoned.end();
    }
  });

  it('reads on past a time edited by hand to infinity: the event is read, its time invalid', async () => {
    const { store, pool } = fx;
    const { position } = await store.append('timed-infinite', [{ id: randomUUID(), type: 'T', data: {} }], 'no_stream');
    await pool.query(`UPDATE es_events SET created_at = 'infinity' WHERE global_position = $1`, [position.split('.')[1]]);
    const [event] = await store.readStream('timed-infinite');
    expect(Number.isNaN(event!.createdAt.getTime())).toBe(true);
    const all = await eventually(() => store.readAll({ from: START, maxCount: 100 }), (v) => v.some((e) => e.streamId === 'timed-infinite'));
    expect(all.map((e) => e.streamId)).toContain('timed-infinite');
  });
});

describe('Postgres event store: a position written with leading zeros', () => {
  let fx: Awaited<ReturnType<typeof openStore>>;
  beforeAll(async () => {
    fx = await openStore('eszeros');
  });
  afterAll(async () => fx.cleanup());

  // Postgres reads '042'::xid8 as octal (34): the position must reach it as the decimal the guard compares.
  it('stores large events uncompressed, and stores again those a release before compressed, the same JSON, so a page of them stays within its bytes', async () => {
    const db = await createTestDatabase('esuncompressed');
    const pool = createPool(db.url, 5);
    const upTo = (id: string) => eventStoreMigrations.slice(0, eventStoreMigrations.findIndex((m) => m.id === id));
    try {
      // A log written by the release before: repetitive replies of a million characters, which Postgres compressed.
      await migrate(pool, upTo('eventstore-009-uncompressed-data'));
      const before = new PostgresEventStore(pool, db.url);
      const body = (i: number) => String(i).repeat(1_000_000);
      for (let i = 0; i < 12; i++) await before.append(`old-${i}`, [{ id: randomUUID(), type: 'Settled', data: { i, reply: { body: body(i % 10) } }, metadata: { note: 'n'.repeat(5_000) } }], 'no_stream');
      await before.close();
      const compressed = async () => (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM es_events WHERE pg_column_compression(data) IS NOT NULL OR pg_column_compression(metadata) IS NOT NULL')).rows[0]!.n;
      expect(await compressed()).toBe(12);
      const rows = async () => (await pool.query<{ p: string; x: string; c: string; d: string; m: string }>('SELECT global_position AS p, transaction_id::text AS x, created_at::text AS c, md5(data::text) AS d, md5(metadata::text) AS m FROM es_events ORDER BY 1')).rows;
      const stored = await rows();
      await migrate(pool, eventStoreMigrations);
      expect(await compressed()).toBe(0);
      expect(await rows(), 'content, position, transaction and time unchanged').toEqual(stored);
      const store = new PostgresEventStore(pool, db.url);
      try {
        // New ones are not compressed either.
        await store.append('new', [{ id: randomUUID(), type: 'Settled', data: { reply: { body: body(7) } } }], 'no_stream');
        expect(await compressed()).toBe(0);
        // About a million characters each: eight to a page of 8 MiB, not all thirteen. (A reader sees the
        // log once every transaction older than its appends has ended, in any database of the server:
        // other test files run beside this one, and one that began between two of these appends holds back
        // the later ones until it ends, so the page is read until it is full.)
        const deadline = Date.now() + 10_000;
        let page = await store.readPage({ from: START, maxCount: 1000, maxBytes: 8 * 1024 * 1024 });
        while (page.events.length < 8 && Date.now() < deadline) {
          await new Promise((r) => setTimeout(r, 20));
          page = await store.readPage({ from: START, maxCount: 1000, maxBytes: 8 * 1024 * 1024 });
        }
        expect(page.events.map((e) => (e.data as { i?: number }).i)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
        expect(page.more).toBe(true);
      } finally {
        await store.close();
      }
    } finally {
      await pool.end();
      await db.drop();
    }
  });

  it('reads after the same position as without them, dropping nothing as out of order', async () => {
    const { store } = fx;
    for (let i = 0; i < 12; i++) await store.append(`zeros-${i}`, [{ id: randomUUID(), type: 'T', data: {} }], 'no_stream');
    const all = await eventually(() => store.readAll({ from: START, maxCount: 100 }), (v) => v.length === 12);
    expect(all).toHaveLength(12);
    const from = all[3]!.position;
    const [xid, pos] = from.split('.');
    const padded = `00${xid}.00${pos}`;
    expect((await store.readAll({ from: padded, maxCount: 100 })).map((e) => e.id)).toEqual(all.slice(4).map((e) => e.id));
    expect(store.outOfOrderRowsDropped).toBe(0);
  });
});
