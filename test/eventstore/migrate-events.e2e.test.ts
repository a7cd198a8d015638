import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool, type Pool } from '../../shared/db/pool.ts';
import { OP1, PROV_A, testCatalog } from '../helpers/catalog.ts';
import { signedRequest } from '../helpers/signing.ts';
import { ADMIN_TOKEN, startInProcess } from '../helpers/service.ts';
import { startMoneyHarness, type MoneyHarness } from '../money/harness.ts';
import { startEsdbTestServer } from './esdb-server.ts';
import { childEnv, entryArgs } from '../helpers/bundle.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const run = promisify(execFile);
/** The same server's maintenance database. */
const adminUrl = (url: string) => Object.assign(new URL(url), { pathname: '/postgres' }).toString();

/**
 * A platform that outgrows one Postgres moves its history to EventStoreDB (and back): `npm run audit --
 * migrate-events --to STORE` copies every stream, checks both stores hold the same events, rebuilds the
 * read models from the new store and records it; the service then runs on the new store with every
 * transaction still answered from its history, and refuses to start on the old one.
 */
describe('npm run audit -- migrate-events', () => {
  let h: MoneyHarness;
  let esdb: { connectionString: string; close(): Promise<void> };
  const settled: Array<Record<string, unknown>> = [];
  /** A BET made once the service runs on EventStoreDB. */
  let afterMove: Record<string, unknown> | undefined;

  beforeAll(async () => {
    esdb = await startEsdbTestServer();
    h = await startMoneyHarness('migrate');
    // A history with rounds, a rollback, a kick and a grant.
    for (let i = 0; i < 3; i++) {
      const player = `m-${i}-${randomUUID().slice(0, 6)}`;
      const token = await h.launch(player);
      const base = { sessionToken: token, roundId: `mr-${randomUUID()}`, playerRef: player, currency: 'EUR', gameId: 'fruit-1' };
      const bet = { ...base, transactionId: `mb-${randomUUID()}`, type: 'BET', roundComplete: false, amount: 100 + i };
      expect((await h.tx(bet)).status).toBe(200);
      settled.push(bet);
      if (i === 1) expect((await h.tx({ ...base, transactionId: `mrb-${randomUUID()}`, type: 'ROLLBACK', originalTransactionId: bet.transactionId, amount: bet.amount })).status).toBe(200);
      const win = { ...base, transactionId: `mw-${randomUUID()}`, type: 'WIN', roundComplete: true, amount: 7 };
      expect((await h.tx(win)).status).toBe(200);
      settled.push(win);
      if (i === 2) await signedRequest(h.svc.url, { path: '/v1/operator/players/kick', body: { playerRef: player }, as: OP1 });
    }
    await signedRequest(h.svc.url, {
      path: '/v1/operator/free-spins/grants',
      body: { playerRef: 'm-grant', idempotencyKey: randomUUID(), gameId: 'fruit-1', spins: 3, currency: 'EUR' },
      as: OP1,
    });
    await h.caughtUp();
    await h.svc.stop();
  }, 60_000);
  afterAll(async () => {
    await h?.svc.stop(); // stopped already, unless the set-up failed before that
    await Promise.all([h?.wallet.close(), h?.wallet2.close(), h?.provider.close()]);
    await h?.env.cleanup();
    await esdb?.close();
  });

  const audit = async (eventStore: string, ...args: string[]) => {
    try {
      const { stdout, stderr } = await run(process.execPath, [...entryArgs('audit'), ...args], {
        cwd: ROOT,
        env: childEnv({ DATABASE_URL: h.env.db.url, EVENT_STORE: eventStore, LOG_LEVEL: 'silent' }),
      });
      return { code: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };
  let firstAppended: Array<{ id: string; at: Date }> = [];
  /**
   * Time travel reads the times the events were first recorded at, not the move's: each moved event keeps
   * its first store's time and says where it came from (metadata.movedFrom), and a fold as of the first
   * event's time holds it.
   */
  const expectTimesKept = async (url: string, roundId: string, appended: Array<{ id: string; at: Date }>, store: string | undefined) => {
    firstAppended = appended;
    const get = async (query: string) =>
      (await (await fetch(`${url}/v1/audit/rounds/studio-a/op-1/${roundId}${query}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()) as {
        history: Array<{ event: { id: string; createdAt: string; metadata: { movedFrom?: { store: string; createdAt: string } } } }>;
      };
    const all = await get('');
    const firstTime = (x: (typeof all.history)[number]) => x.event.metadata.movedFrom?.createdAt ?? x.event.createdAt;
    expect(all.history.map((x) => [x.event.id, firstTime(x)])).toEqual(appended.map((e) => [e.id, e.at.toISOString()]));
    expect(all.history.map((x) => x.event.metadata.movedFrom?.store)).toEqual(appended.map(() => store));
    const asOfFirst = await get(`?asOf=${encodeURIComponent(appended[0]!.at.toISOString())}`);
    expect(asOfFirst.history.map((x) => x.event.id)).toEqual(appended.filter((e) => e.at.getTime() <= appended[0]!.at.getTime()).map((e) => e.id));
  };
  const rows = async (svcPool: Pick<Pool, 'query'>) => ({
    rounds: (await svcPool.query('SELECT * FROM rm_rounds ORDER BY round_stream')).rows,
    // Each row's log position is its store's own; what operators page by is their order, which moves with the history.
    txs: (await svcPool.query('SELECT * FROM rm_transactions ORDER BY round_stream, transaction_id')).rows.map(({ log_major, log_minor, ...row }) => row),
    order: (await svcPool.query('SELECT transaction_id FROM rm_transactions ORDER BY operator_id, log_major, log_minor')).rows.map((r) => r.transaction_id),
    grants: (await svcPool.query('SELECT id, status, spins FROM rm_grants ORDER BY id')).rows,
    sessions: (await svcPool.query('SELECT * FROM rm_sessions ORDER BY token')).rows,
  });

  it('refuses bad usage before doing anything', async () => {
    expect((await audit('postgres', 'migrate-events')).code).toBe(2);
    const bad = await audit('postgres', 'migrate-events', '--to', 'mysql://x');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--to');
    const same = await audit('postgres', 'migrate-events', '--to', 'postgres');
    expect(same.code).toBe(2);
    expect(same.stderr).toContain('nothing to move');
  });

  it('moves the history to EventStoreDB, and the service runs on it as before; the old store is then refused at start', async () => {
    const pool = createPool(h.env.db.url, 2);
    const before = await rows(pool);
    // A round's events and the times Postgres recorded them: time travel must read the same after the move.
    const round = String(settled[2]!.roundId);
    const appended = (await pool.query<{ id: string; at: Date }>(`SELECT event_id::text AS id, created_at AS at FROM es_events WHERE stream_id = $1 ORDER BY revision`, [`round|studio-a|op-1|${round}`])).rows;
    await pool.end();
    expect(appended.length).toBeGreaterThan(1);
    const moved = await audit('postgres', 'migrate-events', '--to', esdb.connectionString);
    expect(moved.stderr.split('\n').filter((l) => /failed|Error/.test(l))).toEqual([]);
    expect(moved.code).toBe(0);
    expect(moved.stdout).toMatch(/^copied \d+ events of \d+ streams to the esdb store$/m);
    expect(moved.stdout).toMatch(/^both stores hold the same \d+ events, in the same order$/m);
    for (const p of ['sessions', 'rounds', 'grants']) expect(moved.stdout).toContain(`${p}: rebuilt from the esdb store`);
    // The chain was verified on the store left behind and archived with it; the new store's starts again.
    expect(moved.stdout).toMatch(/^chain: \d+ events and \d+ checkpoint\(s\) of the postgres store verified$/m);
    expect(moved.stdout).toMatch(/^chain: the postgres store's chain \(\d+ events\) archived as epoch 1; the esdb store's starts at its first event$/m);

    // The read models rebuilt from EventStoreDB are the ones built from Postgres.
    const svc = await startInProcess(h.env, { EVENT_STORE: esdb.connectionString });
    try {
      expect(await rows(svc.ctx.pool)).toEqual(before);
      await expectTimesKept(svc.url, round, appended, 'postgres');
      await svc.ctx.catalog.apply(testCatalog({ walletUrl: h.wallet.url, wallet2Url: h.wallet2.url, providerUrl: h.provider.url }));
      // Every transaction is answered from its history, without a wallet call.
      const calls = h.wallet.calls.length;
      for (const tx of settled) {
        const res = await signedRequest(svc.url, { path: '/v1/wallet/transaction', body: tx, as: PROV_A });
        expect(res.status).toBe(200);
      }
      expect(h.wallet.calls.length).toBe(calls);
      // And new money moves on the new store.
      const token = (await signedRequest<{ sessionToken: string }>(svc.url, { path: '/v1/operator/games/launch', body: { playerRef: 'm-after', gameId: 'fruit-1', currency: 'EUR', mode: 'REAL' }, as: OP1 })).json.sessionToken;
      afterMove = { transactionId: `ma-${randomUUID()}`, sessionToken: token, type: 'BET', roundId: `ma-${randomUUID()}`, roundComplete: true, playerRef: 'm-after', amount: 5, currency: 'EUR', gameId: 'fruit-1' };
      const res = await signedRequest(svc.url, { path: '/v1/wallet/transaction', body: afterMove, as: PROV_A });
      expect(res.status).toBe(200);
    } finally {
      await svc.stop();
    }
    expect((await audit(esdb.connectionString, 'verify')).code).toBe(0);
    // The service linked the new store's history into a chain of its own, which holds.
    const chain = await audit(esdb.connectionString, 'verify-chain');
    expect(chain.code, chain.stdout + chain.stderr).toBe(0);
    expect(chain.stdout).toMatch(/^chain intact: \d+ events linked and verified/m);

    // Started on the store it left, the service refuses, naming the way back.
    await expect(startInProcess(h.env)).rejects.toThrow(/positions in the esdb event store, but EVENT_STORE selects postgres.*migrate-events/);
    const refused = await audit('postgres', 'verify');
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('migrate-events');
  }, 60_000);

  it('moves it back to Postgres, with what was written on EventStoreDB meanwhile, waiting out a transaction held open elsewhere on the server', async () => {
    // A transaction open in another database holds Postgres's log back (the reader's rule that no event
    // is passed over): what the move appends shows in the log only once it ends. The move must wait for
    // it, not report the store short of what it copied.
    const other = new pg.Client({ connectionString: adminUrl(h.env.db.url) });
    await other.connect();
    await other.query('BEGIN');
    await other.query('SELECT pg_current_xact_id()');
    const release = setTimeout(() => void other.query('COMMIT'), 2_000);
    let back;
    try {
      back = await audit(esdb.connectionString, 'migrate-events', '--to', 'postgres');
    } finally {
      clearTimeout(release);
      await other.query('COMMIT').catch(() => undefined);
      await other.end();
    }
    expect(back.code, back.stdout + back.stderr).toBe(0);
    expect(back.stdout).toMatch(/^both stores hold the same \d+ events, in the same order$/m);
    const svc = await startInProcess(h.env);
    try {
      // Back where they were first appended, the round's events are the originals, at their own times
      // (the copies of them were already there: nothing was written over them).
      await expectTimesKept(svc.url, String(settled[2]!.roundId), firstAppended, undefined);
      await svc.ctx.catalog.apply(testCatalog({ walletUrl: h.wallet.url, wallet2Url: h.wallet2.url, providerUrl: h.provider.url }));
      const calls = h.wallet.calls.length;
      // The BET made on EventStoreDB is answered from the history now in Postgres, without a wallet call.
      const res = await signedRequest(svc.url, { path: '/v1/wallet/transaction', body: afterMove!, as: PROV_A });
      expect(res.status).toBe(200);
      expect(h.wallet.calls.length).toBe(calls);
    } finally {
      await svc.stop();
    }
    expect((await audit('postgres', 'verify')).code).toBe(0);
  }, 60_000);
});

/** A target that already holds another history: the copy check fails, and nothing of the ledger moves. */
describe('npm run audit -- migrate-events to a store that holds something else', () => {
  let h: MoneyHarness;
  let esdb: Awaited<ReturnType<typeof startEsdbTestServer>>;
  beforeAll(async () => {
    esdb = await startEsdbTestServer();
    // Another ledger's events already there, before this one's are copied.
    esdb.writeEvent('round|other-ledger|op-9|r1', 'TransactionRecorded', { request: { transactionId: 'theirs' } });
    h = await startMoneyHarness('migratebad');
    const token = await h.launch('mb-player');
    const bet = h.bet(token, { playerRef: 'mb-player' });
    expect((await h.tx(bet)).status).toBe(200);
    // The outcome is recorded behind the answer: wait for it, then for every runner (the chain's too) to have it.
    await h.until(async () => (await h.svc.ctx.pool.query(`SELECT 1 FROM rm_transactions WHERE transaction_id = $1 AND status = 'applied'`, [bet.transactionId])).rowCount === 1);
    await h.caughtUp();
    await h.svc.stop();
  }, 60_000);
  afterAll(async () => {
    await h?.svc.stop(); // stopped already, unless the set-up failed before that
    await Promise.all([h?.wallet.close(), h?.wallet2.close(), h?.provider.close()]);
    await h?.env.cleanup();
    await esdb?.close();
  });

  /** `npm run audit -- migrate-events --to <the test server>` from Postgres: its exit code and output. */
  const moveToEsdb = () =>
    run(process.execPath, [...entryArgs('audit'), 'migrate-events', '--to', esdb.connectionString], {
      cwd: ROOT,
      env: childEnv({ DATABASE_URL: h.env.db.url, EVENT_STORE: 'postgres', LOG_LEVEL: 'silent' }),
    }).then(
      (r) => ({ code: 0, stdout: r.stdout }),
      (e: { code: number; stdout: string }) => ({ code: e.code, stdout: e.stdout }),
    );

  it("refuses to move a history whose chain is broken: exit 1 naming the break, nothing copied", async () => {
    const pool = createPool(h.env.db.url, 2);
    try {
      const { rows } = await pool.query<{ event_id: string; data: unknown }>(`SELECT event_id, data FROM es_events WHERE type = 'TransactionRecorded' LIMIT 1`);
      await pool.query(`UPDATE es_events SET data = jsonb_set(data, '{request,amount}', '7') WHERE event_id = $1`, [rows[0]!.event_id]);
      try {
        const { code, stdout } = await moveToEsdb();
        expect(code, stdout).toBe(1);
        expect(stdout).toMatch(/^the postgres store's chain is broken at event #\d+ \(position [\d.]+\): the event is not the one that was linked here/m);
        expect(stdout).not.toContain('copied');
      } finally {
        await pool.query(`UPDATE es_events SET data = $2 WHERE event_id = $1`, [rows[0]!.event_id, rows[0]!.data]);
      }
    } finally {
      await pool.end();
    }
  }, 60_000);

  it('exits 1 naming the difference, leaves the read models and their store as they were, and the service goes on on Postgres', async () => {
    const pool = createPool(h.env.db.url, 2);
    try {
      const before = (await pool.query('SELECT * FROM rm_transactions ORDER BY transaction_id')).rows;
      const { code, stdout } = await moveToEsdb();
      expect(code).toBe(1);
      expect(stdout).toContain('the esdb store does not hold the same history');
      expect(stdout).toMatch(/^  event 0: (event id|stream): source .* target .*round\|other-ledger/m);
      expect(stdout).not.toContain('rebuilt from the esdb store');
      expect((await pool.query('SELECT * FROM rm_transactions ORDER BY transaction_id')).rows).toEqual(before);
      expect((await pool.query('SELECT store FROM checkpoint_store')).rows).toEqual([{ store: 'postgres' }]);
    } finally {
      await pool.end();
    }
    const svc = await startInProcess(h.env);
    await svc.stop();
  }, 60_000);
});
