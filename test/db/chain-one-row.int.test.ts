import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { catchUpChain } from '../../services/chain/archive.ts';
import { chainedEvent, eventBytes, GENESIS, nextLink } from '../../services/chain/link.ts';
import { operatorHistory } from '../../services/chain/routes.ts';
import { ownerOf } from '../../services/chain/tenancy.ts';
import { verifyChain } from '../../services/chain/verify.ts';
import { allMigrations } from '../../services/migrations.ts';
import { roundStream } from '../../services/rounds/events.ts';
import { migrate } from '../../shared/db/migrations.ts';
import type { Pool } from '../../shared/db/pool.ts';
import { PostgresEventStore } from '../../shared/eventstore/postgres.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';
import { wholeLog } from '../../shared/eventstore/whole-log.ts';
import { migratedDatabase } from '../helpers/db.ts';
import { eventually } from '../helpers/eventually.ts';

const ONE_ROW = 'chain-002-one-row-an-event';

/** A few rounds of two operators and streams of no operator's, appended through the store. Returns how many events. */
async function appendRounds(store: PostgresEventStore, rounds: number): Promise<number> {
  let events = 0;
  for (let i = 0; i < rounds; i++) {
    const operator = i % 3 === 0 ? 'op-b' : 'op-a';
    const stream = roundStream('prov-1', operator, `r-${randomUUID()}`);
    await store.append(stream, [{ id: randomUUID(), type: 'TransactionRecorded', data: { amount: 100 + i }, metadata: {} }], 'no_stream');
    await store.append(stream, [{ id: randomUUID(), type: 'TransactionSettled', data: { balance: 900 - i }, metadata: {} }], 0);
    events += 2;
    if (i % 4 === 0) {
      await store.append(`platform-${randomUUID()}`, [{ id: randomUUID(), type: 'Noted', data: { i }, metadata: {} }], 'no_stream');
      events += 1;
    }
  }
  return events;
}

/** The whole log once it shows `count` events (the log holds events back while an older transaction anywhere on the server is open). */
async function wholeHistory(store: PostgresEventStore, count: number): Promise<RecordedEvent[]> {
  const read = async () => {
    const all: RecordedEvent[] = [];
    for await (const page of wholeLog(store, undefined, 500)) all.push(...page);
    return all;
  };
  const all = await eventually(read, (a) => a.length >= count, 20_000);
  expect(all).toHaveLength(count);
  return all;
}

/**
 * What the chain's runner of the release before wrote (chain-001): a row for each event's global link
 * and a second, in chain_operator_links, for its operator's link. Only rounds and streams of no operator
 * here, whose owner the stream's name says.
 */
async function linkAsTheReleaseBefore(pool: Pool, events: RecordedEvent[]): Promise<void> {
  let previous = GENESIS;
  const heads = new Map<string, { seq: number; globalSeq: number; link: Buffer }>();
  for (const [i, e] of events.entries()) {
    const seq = i + 1;
    const chained = eventBytes(chainedEvent(e));
    previous = nextLink(previous, chained);
    await pool.query('INSERT INTO chain_links (seq, position, stream_id, revision, link) VALUES ($1, $2, $3, $4, $5)', [seq, e.position, e.streamId, e.revision, previous]);
    const owner = ownerOf(e, () => undefined);
    if (owner === undefined) continue;
    const head = heads.get(owner.operatorId) ?? { seq: 0, globalSeq: 0, link: GENESIS };
    const next = { seq: head.seq + 1, globalSeq: seq, link: nextLink(head.link, chained) };
    heads.set(owner.operatorId, next);
    await pool.query('INSERT INTO chain_operator_links (operator_id, seq, global_seq, link) VALUES ($1, $2, $3, $4)', [owner.operatorId, next.seq, seq, next.link]);
  }
  for (const [operator, h] of heads) {
    await pool.query('INSERT INTO chain_operator_heads (operator_id, seq, global_seq, link) VALUES ($1, $2, $3, $4)', [operator, h.seq, h.globalSeq, h.link]);
  }
  await pool.query(`INSERT INTO projection_checkpoints (name, position) VALUES ('chain', $1)`, [events[events.length - 1]!.position]);
}

/**
 * chain-002: one row an event, the operator's link beside the global one. A chain linked by the release
 * before (two rows an event) upgrades to it with every link kept, verifies, serves each operator the same
 * history, and goes on linking; verify-chain catches a change to the operator's part of a row.
 */
describe('the chain, one row an event', () => {
  let pool: Pool;
  let close: () => Promise<void>;
  let store: PostgresEventStore;
  /** Each operator's history as the release before served it: the fields its links cover and say where. */
  const before: Record<string, Array<{ count: number; link: string; stream: string; position: string }>> = {};
  let linkedBefore = 0;

  beforeAll(async () => {
    const db = await migratedDatabase('chainonerow', allMigrations.filter((m) => m.id !== ONE_ROW));
    pool = db.pool;
    store = new PostgresEventStore(pool, db.db.url);
    close = async () => {
      await store.close();
      await db.close();
    };
    const events = await wholeHistory(store, await appendRounds(store, 24));
    linkedBefore = events.length;
    await linkAsTheReleaseBefore(pool, events);
    // The release before's operator history, read as its route read it.
    for (const op of ['op-a', 'op-b']) {
      const { rows } = await pool.query<{ seq: string; link: Buffer; stream_id: string; revision: string; position: string }>(
        `SELECT o.seq, o.link, g.stream_id, g.revision, g.position FROM chain_operator_links o JOIN chain_links g ON g.seq = o.global_seq
         WHERE o.operator_id = $1 ORDER BY o.seq`,
        [op],
      );
      before[op] = rows.map((r) => ({ count: Number(r.seq), link: r.link.toString('hex'), stream: r.stream_id, position: r.position }));
    }
    // An archived epoch of the release before (a move between stores), to be carried over as well.
    // Its first six events: a round of op-b (its #1 and #2), an event of no operator, the first round of op-a
    // and the record of its second (#1 to #3), so an operator's count differs from the global one.
    await pool.query(`INSERT INTO chain_archives (store, events) VALUES ('esdb', 6)`);
    await pool.query(`INSERT INTO chain_archived_links SELECT 1, seq, position, stream_id, revision, link FROM chain_links WHERE seq <= 6`);
    await pool.query(`INSERT INTO chain_archived_operator_links SELECT 1, operator_id, seq, global_seq, link FROM chain_operator_links WHERE global_seq <= 6`);
    await migrate(pool, allMigrations);
  });
  afterAll(async () => {
    await close();
  });

  it('keeps every link of the release before: verify-chain holds, and each operator reads the same history', async () => {
    const report = await verifyChain(pool, store);
    expect(report.broken).toBeUndefined();
    expect(report.events).toBe(linkedBefore);
    expect(report.unlinked).toBe(0);
    for (const op of ['op-a', 'op-b']) {
      const now = await operatorHistory(pool, store, op, 0, 1000);
      expect(before[op]!.length).toBeGreaterThan(5);
      expect(now.map((e) => ({ count: e.count, link: e.link, stream: e.stream, position: e.position }))).toEqual(before[op]);
    }
    const { rows } = await pool.query(`SELECT to_regclass('chain_operator_links') AS live, to_regclass('chain_archived_operator_links') AS archived`);
    expect(rows[0]).toEqual({ live: null, archived: null });
  });

  it('carries the archived operator links into their rows', async () => {
    const { rows } = await pool.query<{ seq: string; operator_id: string | null; operator_seq: string | null; same: boolean | null }>(
      `SELECT a.seq, a.operator_id, a.operator_seq, a.operator_link = l.operator_link AS same
       FROM chain_archived_links a JOIN chain_links l ON l.seq = a.seq WHERE a.epoch = 1 ORDER BY a.seq`,
    );
    expect(rows.map((r) => [r.seq, r.operator_id, r.operator_seq, r.same])).toEqual([
      ['1', 'op-b', '1', true],
      ['2', 'op-b', '2', true],
      ['3', null, null, null],
      ['4', 'op-a', '1', true],
      ['5', 'op-a', '2', true],
      ['6', 'op-a', '3', true],
    ]);
  });

  it('goes on linking after the upgrade, each operator counting on from its last link', async () => {
    const countsBefore = Object.fromEntries(Object.entries(before).map(([op, h]) => [op, h.length]));
    const appended = await appendRounds(store, 6);
    let linked = 0;
    await eventually(async () => (linked += await catchUpChain(pool, store)), (n) => n >= appended, 20_000);
    expect(linked).toBe(appended);
    const report = await verifyChain(pool, store);
    expect(report.broken).toBeUndefined();
    expect(report.events).toBe(linkedBefore + linked);
    for (const op of ['op-a', 'op-b']) {
      const all = await operatorHistory(pool, store, op, 0, 1000);
      expect(all.length).toBeGreaterThan(countsBefore[op]!);
      expect(all.map((e) => e.count)).toEqual(all.map((_, i) => i + 1));
      // Each link recomputes from the one before it, as an operator checks them.
      let link = GENESIS;
      for (const e of all) {
        const { count: _count, link: stored, ...chained } = e;
        link = nextLink(link, chained);
        expect(stored).toBe(link.toString('hex'));
      }
    }
  });

  describe("verify-chain catches a change to an operator's part of a row", () => {
    /** Changes one row for the length of `check`, then puts it back, and the chain holds again. */
    const tampered = async (set: string, where: string, check: (what: string | undefined) => void) => {
      const { rows } = await pool.query<{ seq: string }>(`SELECT seq FROM chain_links WHERE ${where} ORDER BY seq LIMIT 1 OFFSET 3`);
      const seq = rows[0]!.seq;
      const { rows: saved } = await pool.query('SELECT operator_id, operator_seq, operator_link FROM chain_links WHERE seq = $1', [seq]);
      await pool.query(`UPDATE chain_links SET ${set} WHERE seq = $1`, [seq]);
      try {
        const report = await verifyChain(pool, store);
        expect(report.broken?.count).toBe(Number(seq));
        check(report.broken?.what);
      } finally {
        await pool.query('UPDATE chain_links SET operator_id = $2, operator_seq = $3, operator_link = $4 WHERE seq = $1', [seq, saved[0].operator_id, saved[0].operator_seq, saved[0].operator_link]);
      }
      expect((await verifyChain(pool, store)).broken).toBeUndefined();
    };

    it('an operator link edited', async () => {
      await tampered(`operator_link = sha256(operator_link)`, `operator_id = 'op-a'`, (what) => expect(what).toMatch(/operator op-a's link #\d+ is not the one this event makes/));
    });
    it("an event moved into another operator's chain", async () => {
      await tampered(`operator_id = 'op-c'`, `operator_id = 'op-a'`, (what) => expect(what).toBe("operator op-a's chain does not hold this event of its stream"));
    });
    it("an event taken out of its operator's chain", async () => {
      await tampered(`operator_id = NULL, operator_seq = NULL, operator_link = NULL`, `operator_id = 'op-b'`, (what) => expect(what).toBe("operator op-b's chain does not hold this event of its stream"));
    });
    it("an event of no operator put into an operator's chain", async () => {
      await tampered(`operator_id = 'op-a', operator_seq = 999, operator_link = link`, `operator_id IS NULL`, (what) => expect(what).toBe("the chain of operator op-a holds this event, which is no operator's"));
    });
    it('a row with half an operator link is refused by the table', async () => {
      const { rows } = await pool.query<{ seq: string }>(`SELECT seq FROM chain_links WHERE operator_id IS NOT NULL LIMIT 1`);
      await expect(pool.query('UPDATE chain_links SET operator_link = NULL WHERE seq = $1', [rows[0]!.seq])).rejects.toThrow(/chain_links_operator_whole/);
    });
  });

});

describe('the upgrade to one row an event, on a chain that is not as it was written', () => {
  it('stops, naming why, and leaves every table as it was when an archived operator link has no row of its event', async () => {
    const { pool, close } = await migratedDatabase('chainonerowbad', allMigrations.filter((m) => m.id !== ONE_ROW));
    try {
      await pool.query(`INSERT INTO chain_archives (store, events) VALUES ('esdb', 1)`);
      await pool.query(`INSERT INTO chain_archived_links VALUES (1, 1, '1.1', 'round|p|op-a|r1', 0, sha256('a'))`);
      // Linked to global #2, which the archive does not hold.
      await pool.query(`INSERT INTO chain_archived_operator_links VALUES (1, 'op-a', 1, 2, sha256('b'))`);
      await expect(migrate(pool, allMigrations)).rejects.toThrow(/chain-002-one-row-an-event failed: an operator link has no row of its event in the global chain/);
      const { rows } = await pool.query(`SELECT to_regclass('chain_operator_links') IS NOT NULL AS live, to_regclass('chain_archived_operator_links') IS NOT NULL AS archived`);
      expect(rows[0]).toEqual({ live: true, archived: true });
    } finally {
      await close();
    }
  });
});
