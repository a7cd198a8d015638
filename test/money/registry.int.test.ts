import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPool, type Pool } from '../../shared/db/pool.ts';
import { claimThenAppend } from '../../shared/eventstore/claim-then-append.ts';
import { KICK_FENCE, KICK_FENCE_APPLICATION } from '../../shared/eventstore/kick-fence.ts';
import { comparePositions, GuardBrokenError, type EventStore, type KickMissed, type RecordRequest, type RegistryEntry, type StreamStore, type TransactionRecorder, type WalletKey } from '../../shared/eventstore/port.ts';
import { claimTransaction, registryMigrations, releaseLease } from '../../shared/eventstore/registry.ts';
import { eventStoreMigrations, PostgresEventStore } from '../../shared/eventstore/postgres.ts';
import { migratedDatabase, type MigratedDatabase } from '../helpers/db.ts';
import { eventually, within } from '../helpers/eventually.ts';

/**
 * A describe's own migrated database (event store and registry) with the Postgres event store on it,
 * opened before its tests and closed after them: `use` receives them, and may return what to close first.
 */
function withStoreDatabase(name: string, use: (d: { env: MigratedDatabase; pool: Pool; store: PostgresEventStore }) => void | (() => Promise<void>)): void {
  let env: MigratedDatabase | undefined;
  let store: PostgresEventStore | undefined;
  let closeFirst: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    env = await migratedDatabase(name, [...eventStoreMigrations, ...registryMigrations]);
    store = new PostgresEventStore(env.pool, env.db.url);
    closeFirst = use({ env, pool: env.pool, store }) ?? undefined;
  });
  afterAll(async () => {
    await closeFirst?.();
    await store?.close();
    await env?.close();
  });
}

describe('transaction registry: claims made at the same moment', () => {
  let env: MigratedDatabase;
  let pool: Pool;
  beforeAll(async () => {
    env = await migratedDatabase('registry', registryMigrations);
    pool = env.pool;
  });
  afterAll(() => env.close());

  const entry = (hash: string): RegistryEntry => ({ contentHash: hash, roundStream: 'round|p|o|r1' });
  const p1: WalletKey = { operatorId: 'op-1', playerRef: 'p1' };
  const claim = (txId: string, hash: string) => claimTransaction(pool, 'studio-a', txId, entry(hash), p1, randomUUID(), 10_000);

  it('gives one of twenty identical claims the registration and the lease; the others see it held', async () => {
    // Issued in one tick behind two other claims (which take the two batch slots), so all twenty share
    // one batch, before the id exists: repeats of one id inside a batch must not break it.
    const [, , ...claims] = await Promise.all([claim('tx-other-1', 'x'), claim('tx-other-2', 'y'), ...Array.from({ length: 20 }, () => claim('tx-same', 'h1'))]);
    expect(claims.filter((c) => c.inserted)).toHaveLength(1);
    expect(claims.filter((c) => c.leased)).toHaveLength(1);
    expect(claims.every((c) => c.entry.contentHash === 'h1')).toBe(true);
  });

  it('answers each id of a mixed batch on its own: new ids, a used id with other content, a lease taken again after release', async () => {
    const token = randomUUID();
    const held = await claimTransaction(pool, 'studio-a', 'tx-held', entry('h2'), p1, token, 10_000);
    expect(held.leased).toBe(true);
    await releaseLease(pool, 'studio-a', 'tx-held', token);

    const [fresh1, fresh2, other, again, otherProvider] = await Promise.all([
      claim('tx-new-1', 'a'),
      claim('tx-new-2', 'b'),
      claim('tx-held', 'different content'),
      claim('tx-held', 'h2'),
      claimTransaction(pool, 'studio-b', 'tx-held', entry('zz'), { operatorId: 'op-2', playerRef: 'p1' }, randomUUID(), 10_000),
    ]);
    expect(fresh1).toMatchObject({ inserted: true, leased: true, entry: { contentHash: 'a' } });
    expect(fresh2).toMatchObject({ inserted: true, leased: true, entry: { contentHash: 'b' } });
    // Other content under a used id: told what the id holds, and never given the lease.
    expect(other).toMatchObject({ inserted: false, leased: false, entry: { contentHash: 'h2' } });
    // The same content after the lease was released takes it again.
    expect(again).toMatchObject({ inserted: false, leased: true, entry: { contentHash: 'h2' } });
    // Another provider may use the id for another operator's player.
    expect(otherProvider).toMatchObject({ inserted: true, leased: true, taken: false, entry: { contentHash: 'zz' } });
  });

  it('refuses an id for a player whose wallet has seen it from another registrant, also when both claim at once', async () => {
    const first = await claimTransaction(pool, 'studio-a', 'tx-wallet', entry('w1'), p1, randomUUID(), 10_000);
    expect(first).toMatchObject({ inserted: true, leased: true, taken: false });
    const [otherProvider, adjustment, otherPlayer] = await Promise.all([
      claimTransaction(pool, 'studio-b', 'tx-wallet', { contentHash: 'w2', roundStream: 'round|b' }, p1, randomUUID(), 10_000),
      claimTransaction(pool, 'platform', 'tx-wallet', { contentHash: 'w3', roundStream: 'round|adj' }, p1, randomUUID(), 10_000),
      claimTransaction(pool, 'studio-b', 'tx-wallet', { contentHash: 'w4', roundStream: 'round|b2' }, { operatorId: 'op-1', playerRef: 'p2' }, randomUUID(), 10_000),
    ]);
    expect(otherProvider).toMatchObject({ inserted: false, leased: false, taken: true, entry: { contentHash: 'w1' } });
    expect(adjustment).toMatchObject({ inserted: false, leased: false, taken: true, entry: { contentHash: 'w1' } });
    expect(otherPlayer).toMatchObject({ inserted: true, leased: true, taken: false });

    // Two registrants claiming one new wallet key at the same moment, on two connections: one wins.
    const racers = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        claimTransaction(pool, `studio-${i}`, 'tx-race', { contentHash: `r${i}`, roundStream: `round|${i}` }, p1, randomUUID(), 10_000),
      ),
    );
    expect(racers.filter((c) => c.inserted)).toHaveLength(1);
    expect(racers.filter((c) => c.taken)).toHaveLength(5);
  });
});

/**
 * The recorder port's contract, for both of its implementations: the Postgres adapter's (claim, session
 * check and record in one statement) and the one the EventStoreDB adapter uses (claim, then append),
 * here over the Postgres store standing in for any store kept apart from the registry.
 */
describe.each([
  ['in one statement (the Postgres adapter)', (_pool: Pool, store: PostgresEventStore) => store.transactionRecorder(), true],
  ['as a claim then an append (the EventStoreDB adapter)', (pool: Pool, store: PostgresEventStore) => claimThenAppend(pool, store), false],
])('transaction recorder %s: claim, session check and record', (_name, recorderOf, inOneStatement) => {
  let env: MigratedDatabase;
  let pool: Pool;
  let store: PostgresEventStore;
  let recorder: TransactionRecorder;
  const claimAndRecord = (_pool: Pool, request: RecordRequest) => recorder.record(request);
  withStoreDatabase('record', (d) => {
    ({ env, pool, store } = d);
    recorder = recorderOf(pool, store);
    return () => recorder.close();
  });

  const request = (txId: string, round: string, hash: string, extra: Partial<RecordRequest> = {}): RecordRequest => ({
    registryKey: 'studio-a',
    transactionId: txId,
    entry: { contentHash: hash, roundStream: round },
    wallet: { operatorId: 'op-1', playerRef: 'p1' },
    token: randomUUID(),
    ttlMs: 10_000,
    guard: undefined,
    expectedRevision: -1,
    events: [{ id: randomUUID(), type: 'TransactionRecorded', data: { transactionId: txId } }],
    ...extra,
  });
  const registered = async (txId: string) => (await pool.query('SELECT 1 FROM tx_registry WHERE provider_id = $1 AND transaction_id = $2', ['studio-a', txId])).rowCount;

  it('answers each item of a batch on its own: recorded, refused by its guard, behind its round, repeated, other content', async () => {
    await store.append('sessions|op-1|kicked', [{ id: randomUUID(), type: 'SessionStarted', data: {} }, { id: randomUUID(), type: 'SessionsRevoked', data: {} }], 'no_stream');
    await store.append('round|moved-on', [{ id: randomUUID(), type: 'TransactionRecorded', data: { transactionId: 'earlier' } }], 'no_stream');
    const kickedAfterStart = { stream: 'sessions|op-1|kicked', fromRevision: 1, eventType: 'SessionsRevoked' };
    const startedAfterKick = { stream: 'sessions|op-1|kicked', fromRevision: 2, eventType: 'SessionsRevoked' };
    const fresh = request('tx-fresh', 'round|fresh', 'h-fresh', { guard: startedAfterKick });

    // Behind two others (which take the two batch slots), so that the rest share one statement. A recorder
    // that does not batch takes them in no set order, so there the first of the id goes first.
    const first = inOneStatement ? undefined : await claimAndRecord(pool, fresh);
    const [, , recorded, refused, behind, repeated, otherContent] = await Promise.all([
      claimAndRecord(pool, request('tx-fill-1', 'round|fill-1', 'f1')),
      claimAndRecord(pool, request('tx-fill-2', 'round|fill-2', 'f2')),
      first ?? claimAndRecord(pool, fresh),
      claimAndRecord(pool, request('tx-kicked', 'round|kicked', 'h-kicked', { guard: kickedAfterStart })),
      claimAndRecord(pool, request('tx-behind', 'round|moved-on', 'h-behind')),
      claimAndRecord(pool, { ...fresh, token: randomUUID(), events: [{ id: randomUUID(), type: 'TransactionRecorded', data: { transactionId: 'tx-fresh' } }] }),
      claimAndRecord(pool, request('tx-fresh', 'round|fresh', 'other content')),
    ]);

    expect(recorded).toMatchObject({ kind: 'claimed', claim: { inserted: true, leased: true }, append: { kind: 'appended', result: { nextRevision: 0 } } });
    expect((await store.readStream('round|fresh')).map((e) => e.id)).toEqual([fresh.events[0]!.id]);

    // A broken guard claims nothing and records nothing: the id stays free.
    expect(refused).toEqual({ kind: 'refused' });
    expect(await store.readStream('round|kicked')).toEqual([]);
    expect(await registered('tx-kicked')).toBe(0);

    // The round had moved on: nothing appended, but the id is claimed (and leased) by this caller.
    expect(behind).toMatchObject({ kind: 'claimed', claim: { inserted: true, leased: true }, append: { kind: 'conflict' } });
    expect(await store.readStream('round|moved-on')).toHaveLength(1);
    expect(await registered('tx-behind')).toBe(1);

    // A repeat of the id in the same statement finds it held; other content is told what the id holds. Neither appends.
    expect(repeated).toMatchObject({ kind: 'claimed', claim: { inserted: false, leased: false, entry: { contentHash: 'h-fresh' } }, append: undefined });
    expect(otherContent).toMatchObject({ kind: 'claimed', claim: { inserted: false, leased: false, entry: { contentHash: 'h-fresh' } }, append: undefined });
    expect(await store.readStream('round|fresh')).toHaveLength(1);

    // Once the holder has let the lease go, the same content takes it again (a resubmission answered
    // from the round, as claimTransaction would), and still appends nothing.
    await releaseLease(pool, 'studio-a', 'tx-fresh', fresh.token);
    const resubmitted = await claimAndRecord(pool, { ...fresh, token: randomUUID(), events: [{ id: randomUUID(), type: 'TransactionRecorded', data: { transactionId: 'tx-fresh' } }] });
    expect(resubmitted).toMatchObject({ kind: 'claimed', claim: { inserted: false, leased: true, entry: { contentHash: 'h-fresh' } }, append: undefined });
    expect(await store.readStream('round|fresh')).toHaveLength(1);
  });

  it('answers a kicked session only for what it registered before the kick, and refuses a wallet key held by another registrant', async () => {
    await store.append('sessions|op-1|late', [{ id: randomUUID(), type: 'SessionStarted', data: {} }], 'no_stream');
    const guard = { stream: 'sessions|op-1|late', fromRevision: 1, eventType: 'SessionsRevoked' };
    const before = request('tx-before-kick', 'round|late', 'h-late', { guard, wallet: { operatorId: 'op-1', playerRef: 'late' } });
    expect(await claimAndRecord(pool, before)).toMatchObject({ kind: 'claimed', revoked: false, append: { kind: 'appended' } });
    await releaseLease(pool, 'studio-a', 'tx-before-kick', before.token);
    await store.append('sessions|op-1|late', [{ id: randomUUID(), type: 'SessionsRevoked', data: {} }], 0);

    // The identical resubmission takes the lease (to be answered), told that the session is revoked; a new id is refused.
    const again = await claimAndRecord(pool, { ...before, token: randomUUID(), events: [{ id: randomUUID(), type: 'TransactionRecorded', data: {} }] });
    expect(again).toMatchObject({ kind: 'claimed', revoked: true, claim: { inserted: false, leased: true }, append: undefined });
    expect(await claimAndRecord(pool, request('tx-after-kick', 'round|late', 'h-new', { guard, expectedRevision: 0, wallet: { operatorId: 'op-1', playerRef: 'late' } }))).toEqual({ kind: 'refused' });
    expect(await store.readStream('round|late')).toHaveLength(1);

    // Another provider, and the platform, for the same operator's player: the id is taken, nothing is appended.
    const [otherProvider, platform] = await Promise.all([
      claimAndRecord(pool, { ...request('tx-before-kick', 'round|b-late', 'h-b'), registryKey: 'studio-b', wallet: { operatorId: 'op-1', playerRef: 'late' } }),
      claimAndRecord(pool, { ...request('tx-before-kick', 'round|adj', 'h-adj'), registryKey: 'platform', wallet: { operatorId: 'op-1', playerRef: 'late' } }),
    ]);
    expect(otherProvider).toMatchObject({ kind: 'claimed', claim: { inserted: false, leased: false, taken: true, entry: { contentHash: 'h-late' } }, append: undefined });
    expect(platform).toMatchObject({ kind: 'claimed', claim: { inserted: false, leased: false, taken: true } });
    expect(await store.readStream('round|b-late')).toEqual([]);
    expect(await store.readStream('round|adj')).toEqual([]);
  });

  it('tells another registrant at once that a player\'s id is taken while its holder\'s row is being written (no wait on that write)', async () => {
    const wallet = { operatorId: 'op-1', playerRef: 'busy' };
    expect(await claimAndRecord(pool, request('tx-busy', 'round|busy-a', 'h-busy', { wallet }))).toMatchObject({ kind: 'claimed', claim: { inserted: true } });
    // The holder's row under a write not yet committed, as a lease renewal or another batch's re-lease
    // holds it until its commit: the other registrant's answer does not depend on that write, so it must
    // not wait for it (two batches waiting so on each other's rows would deadlock).
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`UPDATE tx_registry SET leased_until = clock_timestamp() WHERE provider_id = 'studio-a' AND transaction_id = 'tx-busy'`);
      const other = claimAndRecord(pool, { ...request('tx-busy', 'round|busy-b', 'h-other'), registryKey: 'studio-b', wallet });
      expect(await within(other, 3000)).toMatchObject({ kind: 'claimed', claim: { inserted: false, leased: false, taken: true, entry: { contentHash: 'h-busy' } }, append: undefined });
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
    expect(await store.readStream('round|busy-b')).toEqual([]);
  });

  it('records one of several claims made at the same moment on connections of their own: other registrants are told the id is taken, the same one that it is held', async () => {
    const racers = await Promise.all(Array.from({ length: 6 }, () => {
      const racerPool = createPool(env.db.url, 1);
      const racerStore = new PostgresEventStore(racerPool, env.db.url);
      return { pool: racerPool, store: racerStore, recorder: recorderOf(racerPool, racerStore) };
    }));
    /**
     * The six statements of `race` write at the same moment: the registry is locked against writes until all
     * six wait for it, so each has read it empty before any inserts (the race the wallet key's unique index
     * decides, which a retry then answers as taken).
     */
    const atOnce = async <T,>(race: () => Promise<T>): Promise<T> => {
      const gate = await pool.connect();
      try {
        await gate.query('BEGIN');
        await gate.query('LOCK TABLE tx_registry IN SHARE ROW EXCLUSIVE MODE');
        const raced = race();
        const waiting = async () =>
          (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)).rows[0]!.n;
        expect(await eventually(waiting, (n) => n >= racers.length)).toBe(racers.length);
        await gate.query('COMMIT');
        return await raced;
      } finally {
        gate.release();
      }
    };
    try {
      const wallet = { operatorId: 'op-1', playerRef: 'racing' };
      // Six registrants, one new id for one player: one records it, five are told whose it is.
      const others = await atOnce(() =>
        Promise.all(racers.map((r, i) => r.recorder.record({ ...request('tx-race', `round|race-${i}`, `h-${i}`), registryKey: `studio-${i}`, wallet }))),
      );
      const winners = others.filter((o) => o.kind === 'claimed' && o.claim.inserted);
      expect(winners).toHaveLength(1);
      const winner = winners[0]!;
      if (winner.kind !== 'claimed') throw new Error('unreachable');
      expect(winner).toMatchObject({ claim: { leased: true, taken: false }, append: { kind: 'appended' } });
      for (const lost of others.filter((o) => o !== winner)) {
        expect(lost).toMatchObject({ kind: 'claimed', claim: { inserted: false, leased: false, taken: true, entry: winner.claim.entry }, append: undefined });
      }
      const appended = await Promise.all(racers.map((_, i) => store.readStream(`round|race-${i}`)));
      expect(appended.map((events) => events.length).sort()).toEqual([0, 0, 0, 0, 0, 1]);

      // One registrant sending one id six times at once: one records it and holds the lease, the others find it held.
      const same = request('tx-same', 'round|same', 'h-same', { wallet: { operatorId: 'op-1', playerRef: 'same' } });
      const copies = await atOnce(() =>
        Promise.all(racers.map((r) => r.recorder.record({ ...same, token: randomUUID(), events: [{ id: randomUUID(), type: 'TransactionRecorded', data: {} }] }))),
      );
      expect(copies.filter((o) => o.kind === 'claimed' && o.claim.inserted && o.claim.leased && o.append?.kind === 'appended')).toHaveLength(1);
      expect(copies.filter((o) => o.kind === 'claimed' && !o.claim.inserted && !o.claim.leased && !o.claim.taken && o.append === undefined)).toHaveLength(5);
      expect(await store.readStream('round|same')).toHaveLength(1);
    } finally {
      for (const r of racers) {
        await r.recorder.close();
        await r.store.close();
        await r.pool.end();
      }
    }
  });
});

/**
 * The claim-then-append recorder talks to two stores: when the event store fails between them, what the
 * claim took must be given back, or a provider's resubmission waits out the lease and gets 504 (and a
 * refused kick would hold the player's wallet key).
 */
describe('transaction recorder as a claim then an append: an event store failure frees what the claim took', () => {
  let pool: Pool;
  let store: PostgresEventStore;
  withStoreDatabase('recordfail', (d) => {
    ({ pool, store } = d);
  });

  /** The store, but with one method failing as a lost EventStoreDB connection would (after a while: the claim beside it is in by then). */
  const failing = (method: 'readStream' | 'append'): EventStore =>
    Object.assign(Object.create(store) as EventStore, {
      [method]: async () => {
        await new Promise((r) => setTimeout(r, 100));
        throw new Error('event store unavailable');
      },
    });
  const request = (txId: string, extra: Partial<RecordRequest> = {}): RecordRequest => ({
    registryKey: 'studio-a',
    transactionId: txId,
    entry: { contentHash: `h-${txId}`, roundStream: `round|${txId}` },
    wallet: { operatorId: 'op-1', playerRef: 'p1' },
    token: randomUUID(),
    ttlMs: 60_000,
    guard: undefined,
    expectedRevision: -1,
    events: [{ id: randomUUID(), type: 'TransactionRecorded', data: { transactionId: txId } }],
    ...extra,
  });
  const row = async (txId: string) =>
    (await pool.query<{ leased: boolean }>('SELECT leased_until > clock_timestamp() AS leased FROM tx_registry WHERE provider_id = $1 AND transaction_id = $2', ['studio-a', txId])).rows[0];

  it('a guard that cannot be read: the error surfaces and the id is not claimed', async () => {
    const guard = { stream: 'player-sessions|op-1|p1', fromRevision: 1, eventType: 'SessionsRevoked' };
    await expect(claimThenAppend(pool, failing('readStream')).record(request('tx-guard', { guard }))).rejects.toThrow('event store unavailable');
    expect(await row('tx-guard')).toBeUndefined();
    // The resubmission, with the store back, claims and records it.
    expect(await claimThenAppend(pool, store).record(request('tx-guard', { guard }))).toMatchObject({ kind: 'claimed', claim: { inserted: true, leased: true }, append: { kind: 'appended' } });
  });

  it('an append that fails: the error surfaces, the claim stays (the append may have been stored) and its lease is free', async () => {
    await expect(claimThenAppend(pool, failing('append')).record(request('tx-append'))).rejects.toThrow('event store unavailable');
    expect(await row('tx-append')).toEqual({ leased: null });
    // A resubmission takes the lease at once (it is answered from the round), instead of waiting out the ttl.
    expect(await claimThenAppend(pool, store).record(request('tx-append'))).toMatchObject({ kind: 'claimed', claim: { inserted: false, leased: true }, append: undefined });
  });
});

/** A new transaction's record under a kick guard on `guardStream` (a player's sessions), in a round of its own. */
const guardedRequest = (txId: string, guardStream: string): RecordRequest => ({
  registryKey: 'studio-a',
  transactionId: txId,
  entry: { contentHash: `h-${txId}`, roundStream: `round|${txId}` },
  wallet: { operatorId: 'op-1', playerRef: guardStream },
  token: randomUUID(),
  ttlMs: 60_000,
  guard: { stream: guardStream, fromRevision: 1, eventType: 'SessionsRevoked' },
  expectedRevision: -1,
  events: [{ id: randomUUID(), type: 'TransactionRecorded', data: { transactionId: txId } }],
});
/** A kick's append, through the store the recorder's fence gives it. */
const kick = (fenced: StreamStore, stream: string) => fenced.append(stream, [{ id: randomUUID(), type: 'SessionsRevoked', data: {} }], 'any');
/** A player with one session started: its sessions stream, the guard stream of its transactions. */
const startedPlayer = async (store: EventStore, prefix: string) => {
  const player = `player-sessions|op-1|${prefix}-${randomUUID()}`;
  await store.append(player, [{ id: randomUUID(), type: 'SessionStarted', data: {} }], 'no_stream');
  return player;
};
/** A gate: `reached` resolves when something waits at it (`pass`), `open()` lets it through. */
const gate = () => {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  let arrive!: () => void;
  const reached = new Promise<void>((r) => (arrive = r));
  return { open, reached, pass: async () => (arrive(), await opened) };
};
type Gate = ReturnType<typeof gate>;
/** `store`, but a read of `guardStream` waits at `at` once it has read: the kick check is made, and what it found comes back later. */
const checkedThenWaiting = (store: EventStore, guardStream: string, at: Gate): EventStore =>
  Object.assign(Object.create(store) as EventStore, {
    readStream: async (...args: Parameters<EventStore['readStream']>) => {
      const read = await store.readStream(...args);
      if (args[0] === guardStream) await at.pass();
      return read;
    },
  });
/** `store`, but an append to a round waits at `at` before it is made: a transaction held between its kick check and its append. */
const appendingAfter = (store: EventStore, at: Gate, landed?: () => void): EventStore =>
  Object.assign(Object.create(store) as EventStore, {
    append: async (...args: Parameters<EventStore['append']>) => {
      if (!args[0].startsWith('round|')) return store.append(...args);
      await at.pass();
      const result = await store.append(...args);
      landed?.();
      return result;
    },
  });

/**
 * Contract section 8, rule 4 on EventStoreDB (#20): the kick check and the append of a transaction are two
 * calls to the event store, so a kick could be acknowledged between them and the transaction recorded
 * after it. The recorder's fence orders them: a kick waits for the transactions already checked, and
 * the transactions after it wait for the kick, then see it.
 */
describe('transaction recorder as a claim then an append: a kick is ordered with the transactions of its player', () => {
  let pool: Pool;
  let store: PostgresEventStore;
  withStoreDatabase('recordfence', (d) => {
    ({ pool, store } = d);
  });

  it('a kick waits for a transaction already past its kick check: the transaction is recorded before the kick is acknowledged', async () => {
    const player = await startedPlayer(store, 'fenced');
    const appending = gate();
    const recorder = claimThenAppend(pool, appendingAfter(store, appending));
    try {
      const order: string[] = [];
      const bet = recorder.record(guardedRequest(`tx-${randomUUID()}`, player)).then((o) => (order.push('bet recorded'), o));
      await appending.reached;
      const kicked = recorder.exclusive(player, async (fenced) => (await kick(fenced, player), order.push('kick acknowledged')));
      await new Promise((r) => setTimeout(r, 200));
      expect(order).toEqual([]); // the kick waits while the BET is between its check and its append
      appending.open();
      await Promise.all([bet, kicked]);
      expect(order).toEqual(['bet recorded', 'kick acknowledged']);
      expect(await bet).toMatchObject({ kind: 'claimed', revoked: false, append: { kind: 'appended' } });
    } finally {
      await recorder.close();
    }
  });

  it('a transaction that comes while a kick is under way waits for it, then is refused by it', async () => {
    const player = await startedPlayer(store, 'fenced');
    const recorder = claimThenAppend(pool, store);
    try {
      // The kick is under way (it holds the fence) but has not appended yet.
      let finish!: () => void;
      const kicking = recorder.exclusive(player, async (fenced) => {
        await new Promise<void>((r) => (finish = r));
        await kick(fenced, player);
      });
      await new Promise((r) => setTimeout(r, 50));
      const txId = `tx-${randomUUID()}`;
      const bet = recorder.record(guardedRequest(txId, player));
      await new Promise((r) => setTimeout(r, 200));
      finish();
      await kicking;
      expect(await bet).toEqual({ kind: 'refused' });
      expect(await store.readStream(`round|${txId}`)).toEqual([]);
    } finally {
      await recorder.close();
    }
  });

  it('a transaction recorded after its claim (guarded) waits for a kick under way, then is refused by it, appending nothing', async () => {
    const player = await startedPlayer(store, 'fenced');
    const recorder = claimThenAppend(pool, store);
    try {
      const guard = { stream: player, fromRevision: 1, eventType: 'SessionsRevoked' };
      const append = (round: string) => recorder.guarded(guard).append(round, [{ id: randomUUID(), type: 'TransactionRecorded', data: {} }], 'no_stream');
      expect((await append(`round|ok-${randomUUID()}`)).nextRevision).toBe(0);
      let finish!: () => void;
      const kicking = recorder.exclusive(player, async (fenced) => {
        await new Promise<void>((r) => (finish = r));
        await kick(fenced, player);
      });
      await new Promise((r) => setTimeout(r, 50));
      const round = `round|late-${randomUUID()}`;
      let settled = false;
      const late = append(round).finally(() => (settled = true));
      late.catch(() => undefined);
      await new Promise((r) => setTimeout(r, 200));
      expect(settled).toBe(false);
      finish();
      await kicking;
      await expect(late).rejects.toBeInstanceOf(GuardBrokenError);
      expect(await store.readStream(round)).toEqual([]);
    } finally {
      await recorder.close();
    }
  });
});

/**
 * The fence is a lock of a Postgres session: a fence connection that dies (a failover, a killed backend)
 * lets go of it while its holder goes on with its calls to EventStoreDB. Each holder finds out and acts so
 * that a kick acknowledged before a transaction is recorded still stops it, or, where nothing can (the
 * connection died during the append itself), the transaction is reported.
 */
describe('transaction recorder as a claim then an append: a kick fence whose connection dies', () => {
  let env: MigratedDatabase;
  let pool: Pool;
  let store: PostgresEventStore;
  withStoreDatabase('recordfencelost', (d) => {
    ({ env, pool, store } = d);
  });

  /** Ends the fence connections holding a kick fence in this database, as a failover would, and waits until they are gone. */
  const endFenceConnections = async () => {
    const { rows } = await pool.query<{ pid: number }>(
      `SELECT DISTINCT a.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.classid = $1 AND l.granted AND a.application_name = $2 AND a.datname = current_database()`,
      [KICK_FENCE, KICK_FENCE_APPLICATION],
    );
    expect(rows).toHaveLength(1);
    await pool.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
    await eventually(async () => (await pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [rows[0]!.pid])).rowCount, (n) => n === 0);
    // The holder's client reads the server's goodbye on its socket.
    await new Promise((r) => setTimeout(r, 100));
  };
  it('a transaction whose fence connection died after its kick check appends nothing and gives its id back; the kick is not held up', async () => {
    const player = await startedPlayer(store, 'lost');
    const checked = gate();
    // The guard is read, then the transaction waits before going on: it has checked, and found no kick.
    const slowCheck = checkedThenWaiting(store, player, checked);
    const recorder = claimThenAppend(pool, slowCheck);
    try {
      const txId = `tx-${randomUUID()}`;
      const request = guardedRequest(txId, player);
      const bet = recorder.record(request);
      bet.catch(() => undefined);
      await checked.reached;
      await endFenceConnections();
      // With the fence gone, the kick goes through at once, and is acknowledged.
      expect(await within(recorder.exclusive(player, (fenced) => kick(fenced, player)), 5000)).toMatchObject({ nextRevision: 1 });
      checked.open();
      await expect(bet).rejects.toMatchObject({ code: '57P01' });
      expect(await store.readStream(`round|${txId}`)).toEqual([]);
      // The id is free again: the provider's resubmission is refused by the kick.
      expect(await recorder.record({ ...request, token: randomUUID() })).toEqual({ kind: 'refused' });
    } finally {
      await recorder.close();
    }
  });

  it('a kick whose fence connection died during its append is acknowledged only after a transaction that checked before it landed is recorded', async () => {
    const player = await startedPlayer(store, 'lost');
    const appending = gate();
    // 'bet recorded' once the transaction's append has landed in the store. (Not when record() resolves:
    // it resolves after its fence is let go, which also lets the kick take it again, and on a loaded
    // machine the kick's acknowledgement was seen first, one round trip apart, after the append.)
    const order: string[] = [];
    const recorder = claimThenAppend(pool, appendingAfter(store, appending, () => order.push('bet recorded')));
    try {
      const kickGate = gate();
      const kicked = recorder.exclusive(player, async (fenced) => {
        await kickGate.pass();
        await kick(fenced, player);
      }).then(() => order.push('kick acknowledged'));
      await kickGate.reached;
      await endFenceConnections();
      // The fence is gone: a transaction checks (no kick yet) and goes on to its append, where it waits.
      const txId = `tx-${randomUUID()}`;
      const bet = recorder.record(guardedRequest(txId, player));
      await appending.reached;
      kickGate.open();
      await new Promise((r) => setTimeout(r, 300));
      expect(order).toEqual([]); // the kick's event is in, but it waits for the transaction that missed it
      appending.open();
      await Promise.all([bet, kicked]);
      expect(order).toEqual(['bet recorded', 'kick acknowledged']);
      expect(await bet).toMatchObject({ kind: 'claimed', revoked: false, append: { kind: 'appended' } });
    } finally {
      await recorder.close();
    }
  });

  it('a transaction whose fence connection went silent (its backend stopped, the socket open) appends nothing once the fence cannot be confirmed', async () => {
    const player = await startedPlayer(store, 'lost');
    const checked = gate();
    const slowCheck = checkedThenWaiting(store, player, checked);
    const recorder = claimThenAppend(pool, slowCheck);
    let stopped: number | undefined;
    try {
      const txId = `tx-${randomUUID()}`;
      const bet = recorder.record(guardedRequest(txId, player));
      bet.catch(() => undefined);
      await checked.reached;
      const holder = await pool.query<{ pid: number }>(
        `SELECT DISTINCT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
          WHERE l.locktype = 'advisory' AND l.classid = $1 AND l.granted AND a.application_name = $2 AND a.datname = current_database()`,
        [KICK_FENCE, KICK_FENCE_APPLICATION],
      );
      stopped = holder.rows[0]!.pid;
      // The backend stops answering, as a server cut off by a partition does: no error, no end.
      process.kill(stopped, 'SIGSTOP');
      checked.open();
      await expect(bet).rejects.toThrow('Query read timeout');
      expect(await store.readStream(`round|${txId}`)).toEqual([]);
    } finally {
      if (stopped !== undefined) process.kill(stopped, 'SIGCONT');
      await recorder.close();
    }
  });

  it('a kick that lost its fence while every fence connection is taken keeps trying to take it again, and is acknowledged once it can', async () => {
    // A query pool of 2, so the fence has 2 connections: the kick's (killed) and one a transaction of another player holds.
    const small = createPool(env.db.url, 2);
    const other = await startedPlayer(store, 'lost');
    const player = await startedPlayer(store, 'lost');
    const otherChecked = gate();
    const slowOther = checkedThenWaiting(store, other, otherChecked);
    const recorder = claimThenAppend(small, slowOther);
    try {
      const kickGate = gate();
      const kicked = recorder.exclusive(player, async (fenced) => {
        await kickGate.pass();
        return kick(fenced, player);
      });
      await kickGate.reached;
      await endFenceConnections();
      // Both fence connections are taken again: one by a transaction of another player (waiting), one queued behind it.
      const first = recorder.record(guardedRequest(`tx-${randomUUID()}`, other));
      await otherChecked.reached;
      const second = recorder.record(guardedRequest(`tx-${randomUUID()}`, other));
      kickGate.open();
      // Past the pool's 5 s wait for a connection: the kick's re-take is still trying, not failed.
      await new Promise((r) => setTimeout(r, 6000));
      otherChecked.open();
      expect(await within(kicked, 10_000)).toMatchObject({ nextRevision: 1 });
      await Promise.all([first, second]);
    } finally {
      await recorder.close();
      await small.end();
    }
  }, 30_000);

  it('a transaction whose fence connection died during its append, while a kick was acknowledged, is recorded and reported; one with no kick is not reported', async () => {
    const missed: KickMissed[] = [];
    const appending = gate();
    const heldAppend = appendingAfter(store, appending);
    const recorder = claimThenAppend(pool, heldAppend, { kickMissed: (m) => missed.push(m) });
    try {
      const player = await startedPlayer(store, 'lost');
      const txId = `tx-${randomUUID()}`;
      const bet = recorder.record(guardedRequest(txId, player));
      await appending.reached;
      await endFenceConnections();
      await recorder.exclusive(player, (fenced) => kick(fenced, player));
      appending.open();
      const outcome = await bet;
      expect(outcome).toMatchObject({ kind: 'claimed', append: { kind: 'appended' } });
      expect(missed).toHaveLength(1);
      expect(missed[0]).toMatchObject({ guardStream: player, streamId: `round|${txId}` });
      expect(comparePositions(missed[0]!.kickPosition!, missed[0]!.position!)).toBeLessThan(0);

      // The same loss with no kick: recorded, nothing to report.
      const quiet = await startedPlayer(store, 'lost');
      const second = gate();
      const again = claimThenAppend(pool, appendingAfter(store, second), { kickMissed: (m) => missed.push(m) });
      try {
        const quietBet = again.record(guardedRequest(`tx-${randomUUID()}`, quiet));
        await second.reached;
        await endFenceConnections();
        second.open();
        expect(await quietBet).toMatchObject({ kind: 'claimed', append: { kind: 'appended' } });
        expect(missed).toHaveLength(1);
      } finally {
        await again.close();
      }
    } finally {
      await recorder.close();
    }
  });

  it('an append whose answer is lost with its fence, while a kick was acknowledged, is found in the log and reported; one that did not land is not; one that cannot be looked for is reported as a possible miss', async () => {
    const missed: KickMissed[] = [];
    let appending = gate();
    let landsFirst = true;
    let roundsReadable = true;
    // The append reaches the store (or not), and its answer is lost, as when EventStoreDB's connection drops.
    const answerLost = Object.assign(Object.create(store) as EventStore, {
      append: async (...args: Parameters<EventStore['append']>) => {
        if (!args[0].startsWith('round|')) return store.append(...args);
        await appending.pass();
        if (landsFirst) await store.append(...args);
        throw Object.assign(new Error('14 UNAVAILABLE: connection dropped'), { code: 14 });
      },
      readStream: async (...args: Parameters<EventStore['readStream']>) => {
        if (!roundsReadable && args[0].startsWith('round|')) throw Object.assign(new Error('14 UNAVAILABLE: still down'), { code: 14 });
        return store.readStream(...args);
      },
    });
    const recorder = claimThenAppend(pool, answerLost, { kickMissed: (m) => missed.push(m) });
    /** A BET of a new player whose append (landing or not) loses its answer and its fence while the player is kicked: its round stream. */
    const lostWhileKicked = async (lands: boolean, readable: boolean) => {
      [landsFirst, roundsReadable, appending] = [lands, readable, gate()];
      const player = await startedPlayer(store, 'lost');
      const txId = `tx-${randomUUID()}`;
      const bet = recorder.record(guardedRequest(txId, player));
      bet.catch(() => undefined);
      await appending.reached;
      await endFenceConnections();
      await recorder.exclusive(player, (fenced) => kick(fenced, player));
      appending.open();
      await expect(bet).rejects.toThrow('connection dropped');
      return { player, stream: `round|${txId}` };
    };
    try {
      const first = await lostWhileKicked(true, true);
      const landed = await store.readStream(first.stream);
      expect(landed).toHaveLength(1);
      expect(missed).toHaveLength(1);
      expect(missed[0]).toMatchObject({ guardStream: first.player, streamId: first.stream, position: landed[0]!.position });
      expect(comparePositions(missed[0]!.kickPosition!, missed[0]!.position!)).toBeLessThan(0);

      // The same, but the append did not land: nothing was recorded after the kick, nothing to report.
      const second = await lostWhileKicked(false, true);
      expect(await store.readStream(second.stream)).toEqual([]);
      expect(missed).toHaveLength(1);

      // Landed, but its stream cannot be read to tell: the kick is reported as one that may have been missed.
      const third = await lostWhileKicked(true, false);
      expect(missed).toHaveLength(2);
      expect(missed[1]).toMatchObject({ guardStream: third.player, streamId: third.stream, position: undefined });
      expect(missed[1]!.kickPosition).toBeDefined();
    } finally {
      await recorder.close();
    }
  });
});

/**
 * The same rule on the Postgres store, whose recorder checks the guard and appends in one statement: a
 * kick could commit between the statement's guard check and its commit, and be acknowledged before the
 * transaction it did not stop was recorded (and then sent). The statement holds the fence shared from
 * before its check to its commit; the kick appends under it exclusive.
 */
describe('transaction recorder in one statement (Postgres store): a kick is ordered with the transactions of its player', () => {
  let pool: Pool;
  let store: PostgresEventStore;
  let recorder: TransactionRecorder;
  withStoreDatabase('pgrecordfence', (d) => {
    ({ pool, store } = d);
    recorder = store.transactionRecorder();
    return () => recorder.close();
  });

  const started = async () => {
    const player = await startedPlayer(store, 'pgfenced');
    return player;
  };

  it('a kick waits for a transaction whose statement is past its kick check: the transaction is recorded before the kick is acknowledged', async () => {
    const player = await started();
    const txId = `tx-${randomUUID()}`;
    // Another session holds the same (provider, id) uncommitted: the record's statement checks the guard,
    // then waits on that row at its registry insert, inside its transaction.
    const other = await pool.connect();
    try {
      await other.query('BEGIN');
      await other.query(`INSERT INTO tx_registry (provider_id, transaction_id, content_hash, round_stream, operator_id, player_ref) VALUES ('studio-a', $1, 'other', 'round|other', 'op-1', 'someone')`, [txId]);
      const order: string[] = [];
      const bet = recorder.record(guardedRequest(txId, player)).then((o) => (order.push('bet recorded'), o));
      const waiting = async () => (await pool.query(`SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%ledger_claim_and_record%'`)).rowCount;
      expect(await eventually(waiting, (n) => n === 1)).toBe(1);
      const kicked = recorder.exclusive(player, async (fenced) => (await kick(fenced, player), order.push('kick acknowledged')));
      await new Promise((r) => setTimeout(r, 200));
      expect(order).toEqual([]); // the kick waits while the BET's statement is between its check and its commit
      await other.query('ROLLBACK');
      await Promise.all([bet, kicked]);
      expect(order).toEqual(['bet recorded', 'kick acknowledged']);
      expect(await bet).toMatchObject({ kind: 'claimed', revoked: false, append: { kind: 'appended' } });
      // In the log, too, the BET comes before the kick that did not stop it.
      const [recorded] = await store.readStream(`round|${txId}`);
      const [, revoked] = await store.readStream(player);
      expect(BigInt(recorded!.position.split('.')[0]!) <= BigInt(revoked!.position.split('.')[0]!)).toBe(true);
    } finally {
      await other.query('ROLLBACK').catch(() => undefined);
      other.release();
    }
  });

  /**
   * A kick under way: its statement (es_append_fenced, exclusive) has appended and holds the fence, not yet
   * committed. `commit()` ends it.
   */
  const kickUnderWay = async (player: string) => {
    const client = await pool.connect();
    await client.query('BEGIN');
    await client.query(`SELECT * FROM es_append_fenced($1, true, NULL, NULL, $1, NULL, ARRAY[$2::uuid], ARRAY['SessionsRevoked'], ARRAY['{}'::jsonb], ARRAY['{}'::jsonb])`, [player, randomUUID()]);
    return {
      commit: async () => {
        await client.query('COMMIT');
        client.release();
      },
    };
  };

  it('a transaction that comes while a kick is under way waits for it, then is refused by it; another player\'s does not wait', async () => {
    const player = await started();
    const bystander = await started();
    const kicking = await kickUnderWay(player);
    const txId = `tx-${randomUUID()}`;
    let settled = false;
    const bet = recorder.record(guardedRequest(txId, player)).finally(() => (settled = true));
    await new Promise((r) => setTimeout(r, 200));
    expect(settled).toBe(false);
    // Another player's transaction, issued while this one waits, is recorded meanwhile.
    const other = await within(recorder.record(guardedRequest(`tx-${randomUUID()}`, bystander)), 5_000);
    expect(other).toMatchObject({ kind: 'claimed', revoked: false, append: { kind: 'appended' } });
    await kicking.commit();
    expect(await bet).toEqual({ kind: 'refused' });
    expect(await store.readStream(`round|${txId}`)).toEqual([]);
  });

  it('a transaction recorded after its claim (guarded) is refused by a kick that came since, waits for one under way, and is recorded when none came', async () => {
    const player = await started();
    const guard = { stream: player, fromRevision: 1, eventType: 'SessionsRevoked' };
    const append = (round: string) => recorder.guarded(guard).append(round, [{ id: randomUUID(), type: 'TransactionRecorded', data: {} }], 'no_stream');
    expect((await append(`round|ok-${randomUUID()}`)).nextRevision).toBe(0);
    // A kick under way: the guarded append waits for it, then finds it.
    const kicking = await kickUnderWay(player);
    const round = `round|late-${randomUUID()}`;
    let settled = false;
    const late = append(round).finally(() => (settled = true));
    late.catch(() => undefined);
    await new Promise((r) => setTimeout(r, 200));
    expect(settled).toBe(false);
    await kicking.commit();
    await expect(late).rejects.toBeInstanceOf(GuardBrokenError);
    expect(await store.readStream(round)).toEqual([]);
    // And after it, at once.
    await expect(append(`round|after-${randomUUID()}`)).rejects.toBeInstanceOf(GuardBrokenError);
  });

  it('a kick whose append goes beside an append to a round a fenced record holds does not wait in a circle', async () => {
    // A fence held by the kick on a connection of its own while its append, batched by the store with an
    // outcome's append to a round, waited for that round's lock, held by a record waiting for the fence,
    // was a circle no database sees: everything waited for ever. The kick's fence is taken in its append.
    const player = await started();
    const round = `round|circle-${randomUUID()}`;
    await store.append(round, [{ id: randomUUID(), type: 'Opened', data: {} }], 'no_stream');
    let go!: () => void;
    const gate = new Promise<void>((r) => (go = r));
    const kicked = recorder.exclusive(player, async (fenced) => {
      await gate; // the kick between its decision and its append
      const outcome = store.append(round, [{ id: randomUUID(), type: 'Outcome', data: {} }], 'any');
      await kick(fenced, player);
      return outcome;
    });
    await new Promise((r) => setTimeout(r, 100));
    const bet = recorder.record({ ...guardedRequest(`tx-${randomUUID()}`, player), entry: { contentHash: 'h', roundStream: round }, expectedRevision: 0 });
    await new Promise((r) => setTimeout(r, 300));
    go();
    expect(typeof (await within(kicked, 10_000))).toBe('object');
    // It came before the kick's append: recorded, as a transaction before a kick is.
    expect(await within(bet, 10_000)).toMatchObject({ kind: 'claimed', revoked: false, append: { kind: 'appended' } });
  });
});
