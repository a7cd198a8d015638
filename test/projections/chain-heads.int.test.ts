import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { chainMigrations, chainProjection, ChainRewrittenError, CHAIN, type ChainProjection } from '../../services/chain/projection.ts';
import { verifyChain } from '../../services/chain/verify.ts';
import { newSignerMemory, signingKey, signNewCheckpoints, startCheckpointSigner } from '../../services/chain/checkpoints.ts';
import { createLogger } from '../../shared/logger.ts';
import { applyBatch, projectionMigrations, ProjectionRunner, readCheckpoint } from '../../projections/runner.ts';
import { migrate } from '../../shared/db/migrations.ts';
import { createPool, type Pool } from '../../shared/db/pool.ts';
import { START, type EventStore } from '../../shared/eventstore/port.ts';
import { createEsdbEventStore } from '../../shared/eventstore/esdb.ts';
import { startEsdbTestServer, type EsdbTestServer } from '../eventstore/esdb-server.ts';
import { eventStoreMigrations, PostgresEventStore } from '../../shared/eventstore/postgres.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { OP1 } from '../helpers/catalog.ts';
import { prng } from '../helpers/prng.ts';
import { eventually } from '../helpers/eventually.ts';
import { plan, START as HISTORY_START } from '../bench/history.ts';

/**
 * The chain's runner links on only from the heads it wrote itself (services/chain/projection.ts,
 * ChainHeads): links another process's runner added while it did not own the chain are computed again
 * from the log and compared before it links after them; anything else changed under it is refused.
 */
for (const kind of ['postgres', 'esdb'] as const) describe(`the chain runner links on only after links it wrote or can compute again (${kind === 'postgres' ? 'Postgres event store' : 'EventStoreDB adapter, protocol-level test server'})`, () => {
  let db: TestDatabase;
  let pool: Pool;
  let store: EventStore;
  let server: EsdbTestServer | undefined;
  let rounds = 0;
  /** The log position of the last event appended: what a linking pass must reach. */
  let appended: string | undefined;

  beforeAll(async () => {
    db = await createTestDatabase('chainheads');
    pool = createPool(db.url);
    await migrate(pool, [...eventStoreMigrations, ...projectionMigrations, ...chainMigrations]);
  });
  afterAll(async () => {
    await store.close();
    await server?.close();
    await pool.end();
    await db.drop();
  });
  beforeEach(async () => {
    // Each test starts from an empty log: a new test server's, or the table emptied.
    await store?.close();
    await server?.close();
    if (kind === 'esdb') {
      server = await startEsdbTestServer();
      store = createEsdbEventStore(server.connectionString);
    } else {
      store = new PostgresEventStore(pool, db.url);
      await pool.query('TRUNCATE es_events');
    }
    await pool.query('TRUNCATE projection_checkpoints, chain_links, chain_operator_heads, chain_grant_owners, chain_checkpoints');
    appended = undefined;
  });

  /** Appends `n` rounds (BET, WIN and their outcomes; most of OP1, some of OP2). */
  const appendRounds = async (n: number) => {
    const rnd = prng(rounds + 1);
    for (let i = 0; i < n; i++) {
      const p = plan(rounds++, rnd, HISTORY_START + rounds * 1000);
      appended = (await store.append(p.stream, p.events, 'no_stream')).position;
    }
  };
  /**
   * What `chain` links of the log after the chain's checkpoint, as its runner does (batch and checkpoint
   * in one transaction), up to the last event appended (which a reader sees only once every transaction
   * older than its append has ended: other test files run beside this one).
   */
  const linkOn = async (chain: ChainProjection) => {
    let at = await readCheckpoint(pool, CHAIN);
    while (at !== appended) {
      const { events } = await store.readPage({ from: at, maxCount: 7, maxBytes: 8 << 20 });
      if (events.length === 0) await new Promise((r) => setTimeout(r, 20));
      else at = await applyBatch(pool, chain, at, events);
    }
  };
  const count = async () => Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM chain_links')).rows[0]!.n);
  const until = async (check: () => Promise<boolean>, timeoutMs = 20_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error('condition not met in time');
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  /**
   * The chain's state now (its count, its rows' heads, its checkpoint), and a way back to it: what a
   * database failover that lost the chain's commits after now leaves (the events stay, as in a store of their own).
   */
  const failoverPoint = async () => {
    const kept = await count();
    const { rows: heads } = await pool.query('SELECT * FROM chain_operator_heads');
    const at = await readCheckpoint(pool, CHAIN);
    return {
      kept,
      async failOver() {
        await pool.query('DELETE FROM chain_links WHERE seq > $1', [kept]);
        await pool.query('TRUNCATE chain_operator_heads');
        for (const h of heads) await pool.query('INSERT INTO chain_operator_heads (operator_id, seq, global_seq, link) VALUES ($1, $2, $3, $4)', [h.operator_id, h.seq, h.global_seq, h.link]);
        await pool.query('UPDATE projection_checkpoints SET position = $2 WHERE name = $1', [CHAIN, at]);
      },
    };
  };
  const failure = async () => (await pool.query<{ failing_error: string | null }>('SELECT failing_error FROM projection_checkpoints WHERE name = $1', [CHAIN])).rows[0]?.failing_error ?? '';

  it("after another process's runner linked for a while, it checks each of those links against the log and links on", async () => {
    const mine = chainProjection(store);
    await appendRounds(5);
    await linkOn(mine);
    // This process loses the chain; another one's runner links the next events.
    await appendRounds(6);
    await linkOn(chainProjection(store));
    const theirs = await count();
    // This one owns it again.
    await appendRounds(3);
    await linkOn(mine);
    expect(mine.heads.linked()?.get('')?.seq).toBe(await count());
    expect(await count()).toBeGreaterThan(theirs);
    expect((await verifyChain(pool, store)).broken).toBeUndefined();
  });

  it('refuses to link after a link the other runner is said to have written that the log does not give', async () => {
    const mine = chainProjection(store);
    await appendRounds(4);
    await linkOn(mine);
    const before = await count();
    await appendRounds(4);
    await linkOn(chainProjection(store));
    // One of the other runner's links, changed with database access alone.
    await pool.query(`UPDATE chain_links SET link = decode(repeat('ab', 32), 'hex') WHERE seq = $1`, [before + 3]);
    await appendRounds(1);
    const at = await readCheckpoint(pool, CHAIN);
    await expect(linkOn(mine)).rejects.toThrow(ChainRewrittenError);
    await expect(linkOn(mine)).rejects.toThrow(`the global chain in the database holds at count ${before + 3} a link this process did not write`);
    // Nothing was linked after it, and the runner's heads did not move.
    expect(await readCheckpoint(pool, CHAIN)).toBe(at);
    expect(mine.heads.linked()?.get('')?.seq).toBe(before);
  });

  it('refuses a chain made shorter under it; linked that far again by another runner (the same events), it goes on', async () => {
    const mine = chainProjection(store);
    await appendRounds(3);
    await linkOn(mine);
    const { kept, failOver } = await failoverPoint();
    await appendRounds(2);
    await linkOn(mine);
    const top = await count();
    await failOver();
    await expect(linkOn(mine)).rejects.toThrow(`the global chain in the database ends at count ${kept}, not at the count ${top} and link this process linked last`);
    // Linked that far again by another runner (the same events, so the same links): this one goes on.
    await linkOn(chainProjection(store));
    await appendRounds(1);
    await linkOn(mine);
    expect(mine.heads.linked()?.get('')?.seq).toBe(await count());
    expect((await verifyChain(pool, store)).broken).toBeUndefined();
  });

  it("refuses a checkpoint moved under it, forward (events left out) or back (events linked twice)", async () => {
    const mine = chainProjection(store);
    await appendRounds(3);
    await linkOn(mine);
    const at = await readCheckpoint(pool, CHAIN);
    await appendRounds(2);
    // The log shows what was just appended once every older transaction has ended (other files run beside this one).
    const { events } = await eventually(() => store.readPage({ from: at, maxCount: 3, maxBytes: 8 << 20 }), (page) => page.events.length >= 2);
    for (const moved of [events[1]!.position, START]) {
      await pool.query('UPDATE projection_checkpoints SET position = $2 WHERE name = $1', [CHAIN, moved]);
      await expect(linkOn(mine)).rejects.toThrow(`the chain's checkpoint in the database is at ${moved}, not at the last event linked (${at}, count `);
    }
    await pool.query('UPDATE projection_checkpoints SET position = $2 WHERE name = $1', [CHAIN, at]);
    await linkOn(mine);
    expect((await verifyChain(pool, store)).broken).toBeUndefined();
  });

  it('its signer never signs a head whose commit the tables lost (a failover): it refuses', async () => {
    const key = await signingKey(pool, undefined);
    const memory = newSignerMemory();
    const mine = chainProjection(store);
    await appendRounds(3);
    await linkOn(mine);
    const { kept, failOver } = await failoverPoint();
    expect((await signNewCheckpoints(pool, key, mine.heads.linked(), memory)).signed).toBeGreaterThan(0);
    await appendRounds(2);
    await linkOn(mine);
    const top = await count();
    await failOver();
    const round = await signNewCheckpoints(pool, key, mine.heads.linked(), memory);
    expect(round.signed).toBe(0);
    expect(round.refused).toContainEqual({ chain: '', why: `its link at count ${top}, this process's last, is no longer in its tables` });
    expect((await pool.query(`SELECT count(*)::int AS n FROM chain_checkpoints WHERE chain = '' AND seq > $1`, [kept])).rows[0].n).toBe(0);
  });

  it('a process standing by signs nothing: its signer signs once its own runner owns the chain', async () => {
    const chain = chainProjection(store);
    await appendRounds(2);
    await linkOn(chain);
    let owns = false;
    const signer = startCheckpointSigner(pool, await signingKey(pool, undefined), chain.heads, () => owns, 0.2, createLogger('silent'));
    const signed = async () => (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM chain_checkpoints')).rows[0]!.n;
    try {
      // Five rounds' time standing by.
      await new Promise((r) => setTimeout(r, 1000));
      expect(await signed()).toBe(0);
      owns = true;
      await until(async () => (await signed()) > 0);
    } finally {
      await signer.stop();
    }
  });

  it('a runner that halts keeps the chain: a standby process does not take it over and link after rows it did not write', async () => {
    const options = { lockRetryMs: 20, gatherMs: 0, failureBackoffMaxMs: 100 };
    const owner = new ProjectionRunner(pool, db.url, store, chainProjection(store), options);
    const standby = new ProjectionRunner(pool, db.url, store, chainProjection(store), options);
    try {
      owner.start();
      await until(async () => owner.isOwner());
      standby.start();
      await appendRounds(3);
      await until(async () => (await readCheckpoint(pool, CHAIN)) === appended);
      const top = await count();
      // A head of the attacker's making, with the position the checkpoint holds: a runner started afresh takes it.
      await pool.query(`INSERT INTO chain_links (seq, position, stream_id, revision, link) VALUES ($1, $2, 'forged', 0, decode(repeat('ab', 32), 'hex'))`, [top + 1, appended]);
      await appendRounds(1);
      await until(async () => (await failure()).includes(`holds at count ${top + 1} a link this process did not write`));
      // Many of the standby's lock attempts later, the owner still holds the chain and nothing was linked after the forged row.
      await new Promise((r) => setTimeout(r, 500));
      expect(owner.isOwner()).toBe(true);
      expect(standby.isOwner()).toBe(false);
      expect(await count()).toBe(top + 1);
      // The row gone, the owner links on.
      await pool.query('DELETE FROM chain_links WHERE seq = $1', [top + 1]);
      await until(async () => (await readCheckpoint(pool, CHAIN)) === appended);
      expect(await failure()).toBe('');
      expect((await verifyChain(pool, store)).broken).toBeUndefined();
    } finally {
      await owner.stop();
      await standby.stop();
    }
  });

  it('a process standing by follows the chain: the links the owner adds are checked as they come, with no false alarm', async () => {
    const standby = chainProjection(store);
    await standby.heads.follow(pool, store);
    const owner = new ProjectionRunner(pool, db.url, store, chainProjection(store), { lockRetryMs: 20, gatherMs: 0 });
    try {
      owner.start();
      let appending = true;
      const checks = (async () => {
        let n = 0;
        while (appending) {
          await standby.heads.follow(pool, store);
          n++;
        }
        return n;
      })();
      for (let i = 0; i < 20; i++) await appendRounds(1);
      await until(async () => (await readCheckpoint(pool, CHAIN)) === appended);
      appending = false;
      expect(await checks).toBeGreaterThan(1);
      await standby.heads.follow(pool, store);
      expect(standby.heads.linked()?.get('')?.seq).toBe(await count());
      const { rows } = await pool.query<{ operator_id: string; seq: string }>('SELECT operator_id, seq FROM chain_operator_heads');
      for (const r of rows) expect(standby.heads.linked()?.get(r.operator_id)?.seq).toBe(Number(r.seq));
    } finally {
      await owner.stop();
    }
  });

  it('links of events its read of the log does not return yet (a store node behind) are no refusal: checked again later', async () => {
    const lagging = { readPage: async () => ({ events: [], more: false }) };
    const behind = chainProjection(lagging);
    await behind.heads.follow(pool, lagging);
    await appendRounds(2);
    await linkOn(chainProjection(store));
    const checked = behind.heads.follow(pool, lagging);
    await expect(checked).rejects.toThrow('past the last event this read of the log returns; checked again later');
    await expect(checked).rejects.not.toBeInstanceOf(ChainRewrittenError);
    expect(behind.heads.linked()?.get('')).toBeUndefined();
    // Its runner, taking the chain over, does not halt on it either.
    await appendRounds(1);
    await expect(linkOn(behind)).rejects.not.toBeInstanceOf(ChainRewrittenError);
  });

  // The events edited in the database: the Postgres store's.
  it.runIf(kind === 'postgres')('a history rewritten behind what a standing-by process checked (events and links, in the same database) is refused by it, and not linked after when it takes over', async () => {
    const standby = chainProjection(store);
    await standby.heads.follow(pool, store);
    await appendRounds(3);
    await linkOn(chainProjection(store));
    await standby.heads.follow(pool, store);
    const top = await count();
    expect(standby.heads.linked()?.get('')?.seq).toBe(top);
    // The owner's process gone, an event edited and the chain linked again over it by the attacker's own linker.
    const { rows } = await pool.query<{ event_id: string }>(`SELECT event_id FROM es_events WHERE type = 'TransactionRecorded' ORDER BY global_position LIMIT 1`);
    await pool.query(`UPDATE es_events SET data = jsonb_set(data, '{request,amount}', '1') WHERE event_id = $1`, [rows[0]!.event_id]);
    await pool.query('TRUNCATE chain_links, chain_operator_heads, chain_grant_owners');
    await pool.query(`UPDATE projection_checkpoints SET position = 'start' WHERE name = $1`, [CHAIN]);
    await linkOn(chainProjection(store));
    await expect(standby.heads.follow(pool, store)).rejects.toThrow(`the global chain in the database ends at count ${top}, not at the count ${top} and link this process linked last`);
    expect(standby.heads.linked()?.get('')?.seq).toBe(top);
    // Taking the chain over, its runner links nothing after the rewrite.
    await appendRounds(1);
    await expect(linkOn(standby)).rejects.toThrow(ChainRewrittenError);
  });

  it("refuses an operator's head changed under it", async () => {
    const mine = chainProjection(store);
    await appendRounds(4);
    await linkOn(mine);
    const { rows } = await pool.query<{ seq: string }>('SELECT seq FROM chain_operator_heads WHERE operator_id = $1', [OP1.id]);
    await pool.query(`UPDATE chain_operator_heads SET link = decode(repeat('cd', 32), 'hex') WHERE operator_id = $1`, [OP1.id]);
    // Enough rounds that one is OP1's (nine in ten are).
    await appendRounds(5);
    await expect(linkOn(mine)).rejects.toThrow(`operator ${OP1.id}'s chain in the database ends at count ${rows[0]!.seq}, not at the count ${rows[0]!.seq} and link this process linked last`);
  });

  it('a runner started afresh takes the heads the tables hold (what a checkpoint kept outside the service must catch)', async () => {
    await appendRounds(3);
    await linkOn(chainProjection(store));
    await pool.query(`UPDATE chain_links SET link = decode(repeat('ef', 32), 'hex') WHERE seq = (SELECT max(seq) FROM chain_links)`);
    await appendRounds(1);
    const fresh = chainProjection(store);
    await linkOn(fresh);
    expect(fresh.heads.linked()?.get('')?.seq).toBe(await count());
    expect((await verifyChain(pool, store)).broken).toBeDefined();
  });
});
