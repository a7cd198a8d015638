import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { roundStream } from '../../services/rounds/events.ts';
import { OP1, OP2, PROV_A, testCatalog } from '../helpers/catalog.ts';
import { startFakeWallet, type FakeWallet } from '../helpers/fakes.ts';
import { ADMIN_TOKEN, createTestEnv, spawnService, writeCatalogFile, type SpawnedService, type TestEnv } from '../helpers/service.ts';
import { parseExposition } from '../metrics/exposition.ts';
import { signedRequest } from '../helpers/signing.ts';

/**
 * The provider is answered as soon as the wallet replies; the outcome is recorded behind the answer
 * (ADR 4). These tests hold the outcome's append back with the round stream's own lock (the one every
 * append to it takes, in Postgres), taken by the wallet while it replies: the answer must not wait
 * for it, and whatever happens to the api meanwhile, the outcome ends up recorded, learned again from
 * the wallet if the api died, and the wallet moves the money once.
 */
const BET_REPLY = '{"status":"OK","balance":9750}';

describe('the outcome recorded behind the answer', () => {
  let env: TestEnv;
  let wallet: FakeWallet;
  let api: SpawnedService | undefined;
  let worker: SpawnedService | undefined;
  let file: string;
  let db: pg.Client;
  const common = () => ({ ...env.env(), RECOVERY_SWEEP_SECONDS: '1', DISPATCH_BACKOFF_BASE_MS: '200', DISPATCH_BACKOFF_MAX_MS: '500' });

  beforeAll(async () => {
    env = await createTestEnv('writebehind');
    wallet = await startFakeWallet(OP1.secret);
    // A short wallet timeout: a dead api's lease (timeout + 5 s) lapses sooner.
    file = await writeCatalogFile(testCatalog({ walletUrl: wallet.url, walletTimeoutMs: 500 }));
    db = new pg.Client({ connectionString: env.db.url });
    await db.connect();
    api = await spawnService({ ...common(), CATALOG_FILE: file, ROLES: 'api,projector' });
  });
  afterAll(async () => {
    await Promise.all([api?.stop(), worker?.stop()]);
    await db?.end();
    await wallet?.close();
    await env?.cleanup();
  });

  const until = async (check: () => boolean | Promise<boolean>, timeoutMs = 30_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error('condition not met in time');
      await new Promise((r) => setTimeout(r, 25));
    }
  };
  const launch = async (url: string, playerRef: string) =>
    (await signedRequest<{ sessionToken: string }>(url, { path: '/v1/operator/games/launch', body: { playerRef, gameId: 'fruit-1', currency: 'EUR', mode: 'REAL' }, as: OP1 })).json.sessionToken;
  const post = (url: string, body: Record<string, unknown>) => signedRequest(url, { path: '/v1/wallet/transaction', body, as: PROV_A });
  const callsFor = (txId: string) => wallet.calls.filter((c) => (c.body as { transactionId?: string }).transactionId === txId).length;
  const types = async (stream: string) => (await db.query<{ type: string }>('SELECT type FROM es_events WHERE stream_id = $1 ORDER BY revision', [stream])).rows.map((r) => r.type);
  const settledReply = async (stream: string, txId: string) =>
    (
      await db.query<{ body: string }>(
        `SELECT data->'reply'->>'body' AS body FROM es_events WHERE stream_id = $1 AND type = 'TransactionSettled' AND data->>'transactionId' = $2`,
        [stream, txId],
      )
    ).rows.map((r) => r.body);

  /** The api's /metrics samples. */
  const samples = async (url: string) =>
    parseExposition(await (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text()).samples;
  /** The api's outcome backlog gauges. */
  const backlog = async (url: string) => {
    const all = await samples(url);
    const value = (name: string) => all.find((x) => x.name === name)?.value;
    return { writes: value('outcome_backlog_writes'), bytes: value('outcome_backlog_bytes'), waiting: value('outcome_backlog_waiting') };
  };
  /** One of the api's by-operator series of the backlog. */
  const byOperator = async (url: string, name: string, operatorId: string) =>
    (await samples(url)).find((x) => x.name === name && x.labels.operator === operatorId)?.value;
  const backlogOf = (url: string, operatorId: string) => byOperator(url, 'outcome_backlog_operator_bytes', operatorId);
  const refusals = (url: string, operatorId: string) => byOperator(url, 'outcome_backlog_refusals_total', operatorId);
  /** An append waiting for an advisory lock in this database (other test files' databases wait for theirs). */
  const lockWaiter = async () =>
    (await db.query(`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`)).rowCount! > 0;
  /** Ends the connections waiting for an advisory lock in this database (an append waiting for the held round). */
  const terminateLockWaiters = async () => {
    const { rowCount } = await db.query(
      `SELECT pg_terminate_backend(l.pid) FROM pg_locks l WHERE l.locktype = 'advisory' AND NOT l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    );
    expect(rowCount).toBe(1);
  };

  /** While the wallet processes `txId`, another connection takes the round's append lock and keeps it until released. */
  const holdAppendsDuring = (stream: string, txId: string) => {
    const holder = new pg.Client({ connectionString: env.db.url });
    let taken = false;
    wallet.setBeforeProcessing(async (tx) => {
      if (tx.transactionId !== txId || taken) return;
      taken = true;
      await holder.connect();
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock(7281004, hashtext($1))', [stream]);
    });
    return {
      release: async () => {
        wallet.setBeforeProcessing(undefined);
        if (!taken) return;
        taken = false;
        await holder.query('COMMIT');
        await holder.end();
      },
    };
  };

  /**
   * The BET is answered with the wallet's reply while its outcome's append waits for the round's lock;
   * the api dies before it can record it (the append it had sent goes with its connection). A new api
   * takes its place.
   */
  const answeredThenDied = async (stream: string, bet: Record<string, unknown> & { transactionId: string }) => {
    const hold = holdAppendsDuring(stream, bet.transactionId);
    try {
      const answered = await post(api!.url, bet);
      expect(answered.status).toBe(200);
      expect(answered.text).toBe(BET_REPLY);
      expect(await types(stream)).toEqual(['TransactionRecorded']);
      await until(lockWaiter);
      expect(await api!.stop('SIGKILL')).toBe(null);
      api = undefined;
      await terminateLockWaiters();
    } finally {
      await hold.release();
    }
    expect(await types(stream)).toEqual(['TransactionRecorded']);
    api = await spawnService({ ...common(), CATALOG_FILE: file, ROLES: 'api,projector' });
  };

  /** Round `n` of player `wb-<n>` (a session launched; the api and a worker running) and its BET of 250, not yet sent. */
  const roundOf = async (n: number) => {
    api ??= await spawnService({ ...common(), CATALOG_FILE: file, ROLES: 'api,projector' });
    worker ??= await spawnService({ ...common(), ROLES: 'worker,projector' });
    const token = await launch(api.url, `wb-${n}`);
    const base = { sessionToken: token, roundId: `wb-round-${n}`, playerRef: `wb-${n}`, currency: 'EUR', gameId: 'fruit-1' };
    return { base, bet: { ...base, transactionId: `wb-bet-${n}`, type: 'BET', roundComplete: false, amount: 250 } };
  };

  /**
   * The api dies during the BET's first wallet call, and the provider gets no answer. The wallet fails that
   * call and the next `failing - 1` of the BET (none: it applies the first). A new api takes its place.
   */
  const diedDuringFirstCall = async (bet: Record<string, unknown> & { transactionId: string }, failing = 0) => {
    wallet.script(bet.transactionId, ...Array.from({ length: failing }, () => ({ status: 500, body: {} })));
    const dying = api!;
    wallet.setBeforeProcessing(async (tx) => {
      if (tx.transactionId === bet.transactionId && callsFor(bet.transactionId) === 1) await dying.stop('SIGKILL');
    });
    try {
      expect((await post(dying.url, bet).catch(() => undefined))?.status).toBeUndefined();
    } finally {
      wallet.setBeforeProcessing(undefined);
    }
    api = await spawnService({ ...common(), CATALOG_FILE: file, ROLES: 'api,projector' });
  };

  it('answers the BET before its outcome is recorded; the api dies; the worker learns the outcome again from the wallet, which moves the money once', async () => {
    const token = await launch(api!.url, 'wb-1');
    const stream = roundStream(PROV_A.id, OP1.id, 'wb-round-1');
    const base = { sessionToken: token, roundId: 'wb-round-1', playerRef: 'wb-1', currency: 'EUR', gameId: 'fruit-1' };
    const bet = { ...base, transactionId: 'wb-bet-1', type: 'BET', roundComplete: false, amount: 250 };
    await answeredThenDied(stream, bet);

    // The provider goes on with the round (it has its answer) on another api process.
    const win = await post(api!.url, { ...base, transactionId: 'wb-win-1', type: 'WIN', roundComplete: true, amount: 400 });
    expect(win.text).toBe('{"status":"OK","balance":10150}');

    // The worker's recovery sweep finds the BET with no outcome in a round that went on, once the dead
    // api's lease has lapsed, and asks the wallet again with the same body: the wallet answers from its
    // idempotency record, and that is what is recorded, the answer the provider got.
    worker = await spawnService({ ...common(), ROLES: 'worker,projector' });
    await until(async () => (await settledReply(stream, bet.transactionId)).length === 1);
    expect(await settledReply(stream, bet.transactionId)).toEqual([BET_REPLY]);
    // The first call and the worker's ask (one more when an ask's reply came after the 500 ms wallet
    // timeout, as on a loaded machine: asked again, the same body).
    const calls = callsFor(bet.transactionId);
    expect(calls).toBeGreaterThanOrEqual(2);
    expect(wallet.effects.get(bet.transactionId)).toBe(1);
    expect(wallet.balances.get('wb-1')).toBe(10_150);

    // The provider's resubmission is answered byte for byte as the first answer, without a wallet call.
    const again = await post(api!.url, bet);
    expect(again.status).toBe(200);
    expect(again.text).toBe(BET_REPLY);
    expect(callsFor(bet.transactionId)).toBe(calls);
    await until(async () => (await db.query(`SELECT status FROM rm_transactions WHERE transaction_id = 'wb-bet-1'`)).rows[0]?.status === 'applied');
  }, 90_000);

  it('keeps asking for a lost BET reply while the wallet fails the asks, in a round its WIN completed, until it learns the reply the provider got', async () => {
    const { base, bet } = await roundOf(5);
    const stream = roundStream(PROV_A.id, OP1.id, 'wb-round-5');
    await answeredThenDied(stream, bet);
    // The wallet's first two answers to the worker's asks are failures: a 500, then one too late.
    wallet.script(bet.transactionId, { status: 500, body: {} }, { status: 200, body: { status: 'OK', balance: 9750 }, delayMs: 800 });
    const win = await post(api!.url, { ...base, transactionId: 'wb-win-5', type: 'WIN', roundComplete: true, amount: 400 });
    expect(win.text).toBe('{"status":"OK","balance":10150}');

    // Meanwhile the operators see the BET pending (not failed): it is still being asked.
    await until(async () => (await db.query(`SELECT attempts FROM rm_transactions WHERE transaction_id = 'wb-bet-5'`)).rows[0]?.attempts >= 1);
    const { rows: meanwhile } = await db.query(`SELECT status, operator_status FROM rm_transactions WHERE transaction_id = 'wb-bet-5'`);
    expect(meanwhile[0]).toEqual({ status: 'recorded', operator_status: 'pending' });

    // The asks fail, and the worker asks again until the wallet replies: the reply the provider got.
    await until(async () => (await settledReply(stream, bet.transactionId)).length === 1);
    expect(await settledReply(stream, bet.transactionId)).toEqual([BET_REPLY]);
    expect(await types(stream)).toEqual(['TransactionRecorded', 'TransactionRecorded', 'TransactionSettled', 'TransactionAttemptFailed', 'TransactionAttemptFailed', 'TransactionSettled']);
    expect(wallet.effects.get(bet.transactionId)).toBe(1);
    expect(wallet.balances.get('wb-5')).toBe(10_150);
    await until(async () => (await db.query(`SELECT status FROM rm_transactions WHERE transaction_id = 'wb-bet-5'`)).rows[0]?.status === 'applied');
    const again = await post(api!.url, bet);
    expect(again.text).toBe(BET_REPLY);
  }, 90_000);

  it('answers a resubmitted BET only once its call\'s outcome is recorded: the api dies first, its provider gets no answer, and the next resubmission gets the wallet\'s reply', async () => {
    const { bet } = await roundOf(9);
    const stream = roundStream(PROV_A.id, OP1.id, 'wb-round-9');
    // Its first call fails, and the provider is told so.
    wallet.script(bet.transactionId, { status: 500, body: {} });
    expect((await post(api!.url, bet)).status).toBe(502);
    // It resubmits; the wallet applies the call, and the outcome's append waits for the round's lock.
    const hold = holdAppendsDuring(stream, bet.transactionId);
    const dying = api!;
    try {
      const answered = post(dying.url, bet).then(
        (r) => r.status,
        () => undefined,
      );
      await until(lockWaiter);
      // The wallet has replied: the provider is not answered before the outcome is recorded. Were it, and
      // the api died now, the history would keep the BET failed while the wallet took it and the provider
      // was told it stands: nothing asks the wallet for a BET whose provider was told it failed.
      expect(await Promise.race([answered, new Promise((r) => setTimeout(() => r('waiting'), 500))])).toBe('waiting');
      expect(await dying.stop('SIGKILL')).toBe(null);
      api = undefined;
      await terminateLockWaiters();
      expect(await answered).toBeUndefined();
    } finally {
      await hold.release();
    }
    expect(await types(stream)).toEqual(['TransactionRecorded', 'TransactionAttemptFailed', 'TransactionResent']);
    expect(wallet.effects.get(bet.transactionId)).toBe(1);
    // Without an answer, the provider resubmits again: once the dead api's lease lapsed, the call is made
    // once more, the wallet answers from its idempotency record, and that reply is recorded and answered.
    api = await spawnService({ ...common(), CATALOG_FILE: file, ROLES: 'api,projector' });
    const again = await post(api.url, bet);
    expect(again.status).toBe(200);
    expect(again.text).toBe(BET_REPLY);
    expect(await settledReply(stream, bet.transactionId)).toEqual([BET_REPLY]);
    expect(callsFor(bet.transactionId)).toBe(3);
    expect(wallet.effects.get(bet.transactionId)).toBe(1);
    expect(wallet.balances.get('wb-9')).toBe(9_750);
  }, 90_000);

  it('never sends on its own a BET whose provider was told it failed, even once the provider completes the round (its first call died with its process)', async () => {
    const { base, bet } = await roundOf(7);
    await diedDuringFirstCall(bet, 2);
    // Its resubmission makes the next call, once the dead api's lease lapsed; the wallet fails it too: 502.
    const resubmitted = await post(api!.url, bet);
    expect(resubmitted.status).toBe(502);
    // The provider, told the BET failed, closes the round without rolling it back (WIN 0).
    const win = await post(api!.url, { ...base, transactionId: 'wb-win-7', type: 'WIN', roundComplete: true, amount: 0 });
    expect(win.status).toBe(200);
    // Sweeps run every second: the worker never sends the failed BET; the player is never charged for it.
    await new Promise((r) => setTimeout(r, 5000));
    expect(callsFor(bet.transactionId)).toBe(2);
    expect(wallet.effects.get(bet.transactionId)).toBeUndefined();
    expect(wallet.balances.get('wb-7')).toBe(10_000);
    expect((await db.query(`SELECT status FROM rm_transactions WHERE transaction_id = 'wb-bet-7'`)).rows[0]?.status).toBe('failed');
  }, 90_000);

  it('never sends on its own a BET whose resubmission failed after a failed ask: its provider was told it failed', async () => {
    const { base, bet } = await roundOf(8);
    // Every call of the BET fails until told otherwise.
    await diedDuringFirstCall(bet, 100);
    // The provider goes on without its answer (a second BET of the round), so the worker asks for the
    // first, once the dead api's lease lapsed, and its asks fail.
    expect((await post(api!.url, { ...base, transactionId: 'wb-bet-8b', type: 'BET', roundComplete: false, amount: 10 })).status).toBe(200);
    await until(async () => callsFor(bet.transactionId) >= 2, 30_000);
    // The provider resubmits the first BET; its own call fails, and it is told so.
    const resubmitted = await post(api!.url, bet);
    expect(resubmitted.status).toBe(502);
    // Told the BET failed, the provider completes the round without rolling it back; the wallet works again.
    expect((await post(api!.url, { ...base, transactionId: 'wb-win-8', type: 'WIN', roundComplete: true, amount: 0 })).status).toBe(200);
    wallet.unscript(bet.transactionId);
    const calls = callsFor(bet.transactionId);
    await new Promise((r) => setTimeout(r, 4000));
    // The worker never sends it again: the player is not charged for a BET its provider was told failed.
    expect(callsFor(bet.transactionId)).toBe(calls);
    expect(wallet.effects.get(bet.transactionId)).toBeUndefined();
    expect((await db.query(`SELECT status FROM rm_transactions WHERE transaction_id = 'wb-bet-8'`)).rows[0]?.status).toBe('failed');
  }, 90_000);

  it('never sends again a BET its provider got no answer for (the api died during the wallet call); the provider resubmits it', async () => {
    const { bet: first } = await roundOf(3);
    const bet = { ...first, roundComplete: true, amount: 300 };
    // The wallet applies it, but the api that asked is gone: the provider gets no answer.
    await diedDuringFirstCall(bet);
    await until(() => wallet.effects.get(bet.transactionId) === 1);
    // Its lease (wallet timeout + 5 s) lapses and sweeps run every second: the worker still never sends
    // it (a BET is attempted once; its provider resubmits it or rolls it back).
    await new Promise((r) => setTimeout(r, 8000));
    expect(callsFor(bet.transactionId)).toBe(1);
    const resubmitted = await post(api!.url, bet);
    expect(resubmitted.text).toBe('{"status":"OK","balance":9700}');
    expect(callsFor(bet.transactionId)).toBe(2);
    expect(wallet.effects.get(bet.transactionId)).toBe(1);
  }, 60_000);

  it('answers a failed BET attempt only once the failure is recorded: the wallet kept nothing to ask again', async () => {
    api ??= await spawnService({ ...common(), CATALOG_FILE: file, ROLES: 'api,projector' });
    const token = await launch(api.url, 'wb-4');
    const stream = roundStream(PROV_A.id, OP1.id, 'wb-round-4');
    const bet = { sessionToken: token, roundId: 'wb-round-4', playerRef: 'wb-4', currency: 'EUR', gameId: 'fruit-1', transactionId: 'wb-bet-4', type: 'BET', roundComplete: false, amount: 100 };
    wallet.script(bet.transactionId, { status: 500, body: {} });
    const hold = holdAppendsDuring(stream, bet.transactionId);
    let answer: Awaited<ReturnType<typeof post>> | undefined;
    try {
      const pending = post(api.url, bet).then((r) => (answer = r));
      await until(lockWaiter);
      await new Promise((r) => setTimeout(r, 300));
      expect(answer).toBeUndefined();
      await hold.release();
      await pending;
    } finally {
      await hold.release();
    }
    expect(answer!.status).toBe(502);
    expect(await types(stream)).toEqual(['TransactionRecorded', 'TransactionAttemptFailed']);
  }, 30_000);

  it('keeps trying an outcome append that fails (its connection killed), then records it; a stop waits for it', async () => {
    api ??= await spawnService({ ...common(), CATALOG_FILE: file, ROLES: 'api,projector' });
    const token = await launch(api.url, 'wb-2');
    const stream = roundStream(PROV_A.id, OP1.id, 'wb-round-2');
    const win = { sessionToken: token, roundId: 'wb-round-2', playerRef: 'wb-2', currency: 'EUR', gameId: 'fruit-1' };
    expect((await post(api.url, { ...win, transactionId: 'wb-bet-2', type: 'BET', roundComplete: false, amount: 100 })).status).toBe(200);
    await until(async () => (await types(stream)).length === 2);
    const hold = holdAppendsDuring(stream, 'wb-win-2');
    let stopped: Promise<number | null> | undefined;
    try {
      const answered = await post(api.url, { ...win, transactionId: 'wb-win-2', type: 'WIN', roundComplete: true, amount: 300 });
      expect(answered.text).toBe('{"status":"OK","balance":10200}');
      // The append waiting for the lock loses its connection: it fails, and is tried again.
      await until(lockWaiter);
      await terminateLockWaiters();
      // A graceful stop now does not drop the outcome: it waits for the append.
      stopped = api.stop('SIGTERM');
      await new Promise((r) => setTimeout(r, 300));
      expect(await types(stream)).toEqual(['TransactionRecorded', 'TransactionSettled', 'TransactionRecorded']);
    } finally {
      await hold.release();
    }
    expect(await stopped).toBe(0);
    api = undefined;
    expect(await types(stream)).toEqual(['TransactionRecorded', 'TransactionSettled', 'TransactionRecorded', 'TransactionSettled']);
    expect(await settledReply(stream, 'wb-win-2')).toEqual(['{"status":"OK","balance":10200}']);
    expect(wallet.effects.get('wb-win-2')).toBe(1);
  }, 60_000);
  it('holds at most OUTCOME_BACKLOG_BYTES of replies answered and not yet recorded: past it a new transaction waits, then is refused 503 with nothing recorded, and goes through once the backlog is written', async () => {
    // An api of its own whose write-behind holds replies of 4,096 characters at most, all of them one operator's if need be.
    const small = await spawnService({ ...common(), CATALOG_FILE: file, ROLES: 'api', OUTCOME_BACKLOG_BYTES: '4096', OUTCOME_BACKLOG_OPERATOR_BYTES: '4096' });
    try {
      const bet = async (n: number) => {
        const token = await launch(small.url, `wb-${n}`);
        return {
          stream: roundStream(PROV_A.id, OP1.id, `wb-round-${n}`),
          body: { sessionToken: token, roundId: `wb-round-${n}`, playerRef: `wb-${n}`, currency: 'EUR', gameId: 'fruit-1', transactionId: `wb-bet-${n}`, type: 'BET', roundComplete: false, amount: 100 },
        };
      };
      // An ordinary reply held behind its answer leaves room: the next transaction goes straight through.
      const [held, next] = [await bet(40), await bet(41)];
      let hold = holdAppendsDuring(held.stream, held.body.transactionId);
      try {
        expect((await post(small.url, held.body)).status).toBe(200);
        await until(lockWaiter);
        expect((await post(small.url, next.body)).status).toBe(200);
        expect(await types(held.stream)).toEqual(['TransactionRecorded']);
      } finally {
        await hold.release();
      }
      // A reply of 8,000 characters held behind its answer fills the backlog.
      const [large, refused] = [await bet(42), await bet(43)];
      const padded = { status: 'OK', balance: 9900, padding: 'x'.repeat(8000) };
      wallet.script(large.body.transactionId, { status: 200, body: padded });
      hold = holdAppendsDuring(large.stream, large.body.transactionId);
      try {
        const answered = await post(small.url, large.body);
        expect(answered.status).toBe(200);
        expect(answered.text).toBe(JSON.stringify(padded));
        await until(lockWaiter);
        // A transaction recorded before is answered from its record at once, the backlog full or not.
        const before = Date.now();
        const resubmitted = await post(small.url, next.body);
        expect(resubmitted.status).toBe(200);
        expect(resubmitted.text).toBe('{"status":"OK","balance":9900}');
        expect(Date.now() - before).toBeLessThan(4000);
        const started = Date.now();
        const refusing = post(small.url, refused.body);
        // The platform team sees the backlog and the transaction waiting for room.
        await until(async () => (await backlog(small.url)).waiting === 1);
        expect(await backlog(small.url)).toEqual({ writes: 1, bytes: JSON.stringify(padded).length, waiting: 1 });
        const res = await refusing;
        expect(res.status).toBe(503);
        expect(res.json).toEqual({ error: 'service unavailable' });
        expect(res.headers.get('retry-after')).toBe('1');
        expect(Date.now() - started).toBeGreaterThanOrEqual(4500); // it waited for room first
        expect(await refusals(small.url, OP1.id)).toBe(1);
        // Refused before anything was recorded: the wallet never saw it, its id is free.
        expect(callsFor(refused.body.transactionId)).toBe(0);
        expect(await types(refused.stream)).toEqual([]);
        expect((await db.query('SELECT 1 FROM tx_registry WHERE transaction_id = $1', [refused.body.transactionId])).rowCount).toBe(0);
        // A transaction waiting for room that another api records meanwhile is answered from that record
        // when its wait ends, not refused: the provider already has its answer, and the wallet moved once.
        const meanwhile = await bet(44);
        // The other api started first: its start under a loaded machine took longer than the wait (5 s).
        const elsewhere = await spawnService({ ...common(), CATALOG_FILE: file, ROLES: 'api' });
        const waiting = post(small.url, meanwhile.body);
        try {
          await until(async () => (await backlog(small.url)).waiting === 1);
          const first = await post(elsewhere.url, meanwhile.body);
          expect([first.status, first.text]).toEqual([200, '{"status":"OK","balance":9900}']);
        } finally {
          await elsewhere.stop();
        }
        const late = await waiting;
        expect([late.status, late.text]).toEqual([200, '{"status":"OK","balance":9900}']);
        expect(callsFor(meanwhile.body.transactionId)).toBe(1);
        expect(wallet.effects.get(meanwhile.body.transactionId)).toBe(1);
        expect(await refusals(small.url, OP1.id)).toBe(1);
      } finally {
        await hold.release();
      }
      // Once the held reply is recorded, the resubmission goes through, and the wallet moves its money once.
      await until(async () => (await types(large.stream)).length === 2);
      expect(await settledReply(large.stream, large.body.transactionId)).toEqual([JSON.stringify(padded)]);
      const again = await post(small.url, refused.body);
      expect(again.status).toBe(200);
      expect(again.text).toBe('{"status":"OK","balance":9900}');
      await until(async () => (await types(refused.stream)).length === 2);
      expect(wallet.effects.get(refused.body.transactionId)).toBe(1);
      await until(async () => (await backlog(small.url)).writes === 0);
      expect(await backlog(small.url)).toEqual({ writes: 0, bytes: 0, waiting: 0 });
    } finally {
      await small.stop();
    }
  }, 60_000);
  it('gives each operator a share of the backlog: one wallet of large replies holds back its own operator’s new transactions, not another operator’s', async () => {
    // Another operator with a wallet of its own; an api whose backlog holds 16,384 characters, 4,096 of one operator's.
    const wallet2 = await startFakeWallet(OP2.secret);
    const shared = await writeCatalogFile(testCatalog({ walletUrl: wallet.url, wallet2Url: wallet2.url, walletTimeoutMs: 500 }));
    const small = await spawnService({ ...common(), CATALOG_FILE: shared, ROLES: 'api', OUTCOME_BACKLOG_BYTES: '16384', OUTCOME_BACKLOG_OPERATOR_BYTES: '4096' });
    try {
      const bet = async (as: typeof OP1, n: number) => {
        const token = (await signedRequest<{ sessionToken: string }>(small.url, { path: '/v1/operator/games/launch', body: { playerRef: `share-${n}`, gameId: 'fruit-1', currency: 'EUR', mode: 'REAL' }, as })).json
          .sessionToken;
        return {
          stream: roundStream(PROV_A.id, as.id, `share-round-${n}`),
          body: { sessionToken: token, roundId: `share-round-${n}`, playerRef: `share-${n}`, currency: 'EUR', gameId: 'fruit-1', transactionId: `share-bet-${n}`, type: 'BET', roundComplete: false, amount: 100 },
        };
      };
      // Operator one's wallet answers 8,000 characters, held behind the answer: its share is full, the whole is not.
      const [large, waits, other] = [await bet(OP1, 50), await bet(OP1, 51), await bet(OP2, 52)];
      const padded = { status: 'OK', balance: 9900, padding: 'x'.repeat(8000) };
      wallet.script(large.body.transactionId, { status: 200, body: padded });
      const hold = holdAppendsDuring(large.stream, large.body.transactionId);
      let waiting: Promise<Awaited<ReturnType<typeof post>>> | undefined;
      let refusing: Promise<Awaited<ReturnType<typeof post>>> | undefined;
      try {
        expect((await post(small.url, large.body)).status).toBe(200);
        await until(lockWaiter);
        expect(await backlogOf(small.url, OP1.id)).toBe(JSON.stringify(padded).length);
        // Operator one's next transactions wait for room in its share: one to be answered, then one the
        // round will refuse (another player's), which holds room while it is decided.
        waiting = post(small.url, waits.body);
        await until(async () => (await backlog(small.url)).waiting === 1);
        refusing = post(small.url, { ...waits.body, roundId: 'share-round-50', transactionId: 'share-bet-53' });
        await until(async () => (await backlog(small.url)).waiting === 2);
        // Operator two's goes straight through.
        const started = Date.now();
        const answered = await post(small.url, other.body);
        expect(answered.status).toBe(200);
        expect(answered.text).toBe('{"status":"OK","balance":9900}');
        expect(Date.now() - started).toBeLessThan(2000);
        // Operator one's still wait, and its wallet has not seen them.
        expect((await backlog(small.url)).waiting).toBe(2);
        expect(callsFor(waits.body.transactionId)).toBe(0);
      } finally {
        await hold.release();
      }
      await until(async () => (await types(other.stream)).length === 2);
      expect(wallet2.effects.get(other.body.transactionId)).toBe(1);
      // The held reply recorded, operator one's transactions go on, in turn, within their wait: the first
      // answered, the second refused by its round, neither for want of room.
      const res = await waiting!;
      expect(res.status).toBe(200);
      expect(res.text).toBe('{"status":"OK","balance":9900}');
      const refused = await refusing!;
      expect([refused.status, refused.json]).toEqual([409, { error: 'round belongs to another player' }]);
      await until(async () => (await types(waits.stream)).length === 2);
      expect(wallet.effects.get(waits.body.transactionId)).toBe(1);
      expect(await refusals(small.url, OP1.id)).toBeUndefined();
      // Nothing is left held: the refused one gave back the room it took, as the answered one did.
      await until(async () => (await backlog(small.url)).writes === 0);
      expect([await backlogOf(small.url, OP1.id), await backlogOf(small.url, OP2.id)]).toEqual([0, 0]);
      expect(await backlog(small.url)).toEqual({ writes: 0, bytes: 0, waiting: 0 });
    } finally {
      await small.stop();
      await wallet2.close();
    }
  }, 60_000);
});
