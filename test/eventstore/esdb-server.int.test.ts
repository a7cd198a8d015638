/**
 * The protocol-level EventStoreDB test server (esdb-server.ts), checked through the real client where the
 * shared contract does not reach: the shapes of WrongExpectedVersion on both append RPCs, idempotency,
 * stream and $all reads in both directions, positions, system events and filters, subscription
 * confirmation / catch-up / live / checkpoints / falling behind / cancellation, and a few requests the
 * client cannot make (filtered $all reads, structured UUIDs, an expired BatchAppend deadline).
 */
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import {
  BACKWARDS,
  END,
  EventStoreDBClient,
  FORWARDS,
  MaxAppendSizeExceededError,
  START,
  StreamNotFoundError,
  UnknownError,
  WrongExpectedVersionError,
  eventTypeFilter,
  excludeSystemEvents,
  jsonEvent,
  streamNameFilter,
  type AllStreamResolvedEvent,
  type AppendExpectedRevision,
  type Position,
  type ResolvedEvent,
} from '@eventstore/db-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generated, startEsdbTestServer, type EsdbTestServer } from './esdb-server.ts';

const ev = (type: string, data: Record<string, unknown> = {}, id: string = randomUUID()) => jsonEvent({ id, type, data });

async function collect<T>(read: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const e of read) out.push(e);
  return out;
}

const failure = (p: Promise<unknown>) => p.then(
  () => {
    throw new Error('expected a failure');
  },
  (err: unknown) => err,
);

const until = async (done: () => boolean, timeoutMs = 5_000) => {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, 5));
  }
};

async function connect(options: Parameters<typeof startEsdbTestServer>[0] = {}) {
  const server = await startEsdbTestServer(options);
  const client = EventStoreDBClient.connectionString(server.connectionString);
  return { server, client };
}

describe.each([
  { path: 'BatchAppend', batchAppend: true },
  { path: 'Append', batchAppend: false },
])('EventStoreDB test server, writes over $path', ({ path, batchAppend }) => {
  let server: EsdbTestServer;
  let client: EventStoreDBClient;
  beforeAll(async () => ({ server, client } = await connect({ batchAppend, maxAppendSize: 4_096 })));
  afterAll(async () => {
    await client.dispose();
    await server.close();
  });

  it(`is the RPC the client picks from the server features`, async () => {
    await client.appendToStream(`pick-${randomUUID()}`, ev('A'), { expectedRevision: 'no_stream' });
    const counts = server.callCounts();
    expect(counts.GetSupportedMethods).toBe(1);
    expect(counts[path]).toBeGreaterThan(0);
    expect(counts[batchAppend ? 'Append' : 'BatchAppend']).toBeUndefined();
  });

  it('answers WrongExpectedVersion with the expected and current revisions as EventStoreDB sends them', async () => {
    const stream = `wev-${randomUUID()}`;
    await client.appendToStream(stream, [ev('A'), ev('B')], { expectedRevision: 'no_stream' });
    const cases: [AppendExpectedRevision, string, AppendExpectedRevision, bigint | 'no_stream'][] = [
      ['no_stream', stream, 'no_stream', 1n],
      [0n, stream, 0n, 1n],
      [5n, stream, 5n, 1n],
      [3n, `missing-${randomUUID()}`, 3n, 'no_stream'],
      ['stream_exists', `missing-${randomUUID()}`, 'stream_exists', 'no_stream'],
    ];
    for (const [expectedRevision, target, expected, current] of cases) {
      const err = await failure(client.appendToStream(target, ev('X'), { expectedRevision }));
      expect(err).toBeInstanceOf(WrongExpectedVersionError);
      expect(err).toMatchObject({ streamName: target, expectedVersion: expected, actualVersion: current });
    }
    expect((await collect(client.readStream(stream))).map((e) => e.event?.type)).toEqual(['A', 'B']);
  });

  it('applies the idempotency rule: the same ids at the same place succeed without writing; a partial repeat is refused', async () => {
    const stream = `idem-${randomUUID()}`;
    const batch = [ev('A'), ev('B')];
    const first = await client.appendToStream(stream, batch, { expectedRevision: 'no_stream' });
    await client.appendToStream(stream, ev('C'), { expectedRevision: 1n });
    for (const expectedRevision of ['no_stream', 'any', 'stream_exists'] as const) {
      const again = await client.appendToStream(stream, batch, { expectedRevision });
      // The repeated range's last event and its position, not the stream's head.
      expect(again).toEqual({ success: true, nextExpectedRevision: 1n, position: first.position });
    }
    const partial = await failure(client.appendToStream(stream, [batch[0]!, ev('Z')], { expectedRevision: 'no_stream' }));
    expect(partial).toMatchObject({ actualVersion: 2n });
    const partialAny = await failure(client.appendToStream(stream, [batch[0]!, ev('Z')], { expectedRevision: 'any' }));
    expect(partialAny).toBeInstanceOf(WrongExpectedVersionError);
    // Idempotency is per stream: the same ids in another stream are new events there.
    const other = `idem-other-${randomUUID()}`;
    await client.appendToStream(other, batch, { expectedRevision: 'any' });
    expect((await collect(client.readStream(stream))).map((e) => e.event?.type)).toEqual(['A', 'B', 'C']);
    expect(await collect(client.readStream(other))).toHaveLength(2);
  });

  it("reports the last event's $all position on success, commit equal to prepare", async () => {
    const stream = `pos-${randomUUID()}`;
    const result = await client.appendToStream(stream, [ev('A'), ev('B'), ev('C')], { expectedRevision: 'any' });
    const events = (await collect(client.readStream(stream))).map((e) => e.event!);
    expect(result.nextExpectedRevision).toBe(2n);
    expect(result.position).toEqual(events[2]!.position);
    for (const e of events) expect(e.position!.commit).toBe(e.position!.prepare);
    expect(events[0]!.position!.commit < events[1]!.position!.commit).toBe(true);
  });

  it("keeps `any` idempotency only while the ids are in the committed-events cache; an exact expectation reads the stream", async () => {
    const small = await connect({ batchAppend, committedEventsCacheSize: 2 });
    try {
      const stream = `cache-${randomUUID()}`;
      const batch = [ev('A'), ev('B')];
      await small.client.appendToStream(stream, batch, { expectedRevision: 'no_stream' });
      await small.client.appendToStream(`other-${randomUUID()}`, [ev('X'), ev('Y')]); // evicts A and B
      expect((await small.client.appendToStream(stream, batch, { expectedRevision: 'no_stream' })).nextExpectedRevision).toBe(1n);
      expect((await small.client.appendToStream(stream, batch, { expectedRevision: 'any' })).nextExpectedRevision).toBe(3n); // written again
      expect(await collect(small.client.readStream(stream))).toHaveLength(4);
    } finally {
      await small.client.dispose();
      await small.server.close();
    }
  });

  it('refuses a write over the maximum append size', async () => {
    const err = await failure(client.appendToStream(`big-${randomUUID()}`, ev('Big', { pad: 'x'.repeat(5_000) })));
    expect(err).toBeInstanceOf(MaxAppendSizeExceededError);
    expect((err as MaxAppendSizeExceededError).maxAppendSize).toBe(4_096);
  });
});

describe('EventStoreDB test server, reads', () => {
  let server: EsdbTestServer;
  let client: EventStoreDBClient;
  const stream = `read-${randomUUID()}`;
  beforeAll(async () => {
    ({ server, client } = await connect());
    await client.appendToStream(stream, ['A', 'B', 'C', 'D', 'E'].map((t) => ev(t)), { expectedRevision: 'no_stream' });
  });
  afterAll(async () => {
    await client.dispose();
    await server.close();
  });
  const types = (events: ResolvedEvent[]) => events.map((e) => e.event?.type);

  it('reads a stream forwards and backwards from start, end and a revision, with a count', async () => {
    expect(types(await collect(client.readStream(stream, { fromRevision: 1n, maxCount: 2 })))).toEqual(['B', 'C']);
    expect(types(await collect(client.readStream(stream, { direction: BACKWARDS, fromRevision: END, maxCount: 2 })))).toEqual(['E', 'D']);
    expect(types(await collect(client.readStream(stream, { direction: BACKWARDS, fromRevision: 2n })))).toEqual(['C', 'B', 'A']);
    expect(types(await collect(client.readStream(stream, { direction: BACKWARDS, fromRevision: 99n, maxCount: 1 })))).toEqual(['E']);
    expect(await collect(client.readStream(stream, { fromRevision: 9n }))).toEqual([]);
  });

  it('answers stream_not_found for a missing stream in either direction, and refuses a forwards read from the end or of 0 events', async () => {
    for (const direction of [FORWARDS, BACKWARDS] as const) {
      const err = await failure(collect(client.readStream(`nope-${randomUUID()}`, { direction })));
      expect(err).toBeInstanceOf(StreamNotFoundError);
    }
    expect(await failure(collect(client.readStream(stream, { fromRevision: END })))).toBeInstanceOf(UnknownError);
    expect(await failure(collect(client.readStream(stream, { maxCount: 0 })))).toBeInstanceOf(UnknownError);
  });

  it('gives $all positions that increase with every event; forwards is inclusive of the position, backwards exclusive', async () => {
    const all = (await collect(client.readAll({ maxCount: 1_000 }))).map((e) => e.event!);
    for (let i = 1; i < all.length; i++) expect(all[i]!.position.commit > all[i - 1]!.position.commit).toBe(true);
    const mine = all.filter((e) => e.streamId === stream);
    const c = mine[2]!;
    const forwards = await collect(client.readAll({ fromPosition: c.position, maxCount: 2 }));
    expect(forwards.map((e) => e.event?.type)).toEqual(['C', 'D']);
    const backwards = await collect(client.readAll({ direction: BACKWARDS, fromPosition: c.position, maxCount: 2 }));
    expect(backwards.map((e) => e.event?.type)).toEqual(['B', 'A']);
    const head = await collect(client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1 }));
    expect(head[0]!.event!.position).toEqual(all.at(-1)!.position);
    expect(await collect(client.readAll({ fromPosition: END }))).toEqual([]);
  });

  it('refuses a position inside a record', async () => {
    const [first] = await collect(client.readStream(stream, { maxCount: 1 }));
    const inside: Position = { commit: first!.event!.position!.commit + 1n, prepare: first!.event!.position!.commit + 1n };
    const err = await failure(collect(client.readAll({ fromPosition: inside })));
    expect(String((err as Error).message)).toContain('Trying to read from an invalid position.');
  });

  it('mixes system events into $all, hides $epoch-information there, and links events as the standard projections do', async () => {
    const all = (await collect(client.readAll({ maxCount: 1_000 }))).map((e) => e.event!);
    const system = all.filter((e) => e.streamId.startsWith('$'));
    expect(system.map((e) => e.type)).toEqual(expect.arrayContaining(['$metadata', '$settings', '$>']));
    expect(all.some((e) => e.streamId === '$epoch-information')).toBe(false);
    expect(await collect(client.readStream('$epoch-information'))).toHaveLength(1);
    const category = await collect(client.readStream('$ce-read', { resolveLinkTos: true }));
    expect(category.map((e) => [e.link?.type, e.event?.streamId, e.event?.type])).toEqual(['A', 'B', 'C', 'D', 'E'].map((t) => ['$>', stream, t]));
    const byType = await collect(client.readStream('$et-C'));
    expect(byType.map((e) => Buffer.from(e.event!.data as Uint8Array).toString())).toEqual([`2@${stream}`]);
  });
});

describe('EventStoreDB test server, subscriptions', () => {
  let server: EsdbTestServer;
  let client: EventStoreDBClient;
  beforeAll(async () => ({ server, client } = await connect({ standardProjections: false })));
  afterAll(async () => {
    await client.dispose();
    await server.close();
  });

  it('confirms, catches up, reports caught-up, then delivers live events through the filter; unsubscribing ends it on the server', async () => {
    const stream = `sub-${randomUUID()}`;
    await client.appendToStream(stream, [ev('Old1'), ev('Old2')]);
    const sub = client.subscribeToAll({ fromPosition: START, filter: excludeSystemEvents() });
    const seen: AllStreamResolvedEvent[] = [];
    let caughtUpAfter = -1;
    sub.on('caughtUp', () => (caughtUpAfter = seen.length));
    const confirmed = once(sub, 'confirmation');
    const reader = (async () => {
      for await (const e of sub) {
        seen.push(e);
        if (seen.length === 4) break;
      }
    })();
    await confirmed;
    expect(sub.id).toMatch(/^[0-9a-f-]{36}$/);
    await until(() => caughtUpAfter >= 0);
    server.writeEvent('$$' + stream, '$metadata', { $maxCount: 10 }); // filtered out
    await client.appendToStream(stream, [ev('Live1'), ev('Live2')]);
    await reader;
    expect(seen.map((e) => e.event?.type)).toEqual(['Old1', 'Old2', 'Live1', 'Live2']);
    expect(caughtUpAfter).toBe(2);
    // Leaving the loop only destroys the client's stream; unsubscribing cancels the call, and the server
    // lets go of the subscription.
    expect(server.activeSubscriptions()).toBeGreaterThan(0);
    await sub.unsubscribe();
    await until(() => server.activeSubscriptions() === 0);
  });

  it('filters by stream prefix and by event type regex', async () => {
    const id = randomUUID().slice(0, 8);
    await client.appendToStream(`keep${id}-1`, [ev('Yes'), ev('No')]);
    await client.appendToStream(`drop${id}-1`, [ev('Yes')]);
    await client.appendToStream(`keep${id}-2`, [ev('Yes')]);
    const take = async (filter: Parameters<typeof client.subscribeToAll>[0], n: number) => {
      const out: string[] = [];
      const sub = client.subscribeToAll(filter);
      for await (const e of sub) {
        out.push(`${e.event!.streamId}/${e.event!.type}`);
        if (out.length === n) break;
      }
      return out;
    };
    expect(await take({ fromPosition: START, filter: streamNameFilter({ prefixes: [`keep${id}`] }) }, 3)).toEqual([`keep${id}-1/Yes`, `keep${id}-1/No`, `keep${id}-2/Yes`]);
    const byRegex = await take({ fromPosition: START, filter: streamNameFilter({ regex: `^(keep|drop)${id}-` }) }, 4);
    expect(byRegex).toHaveLength(4);
    expect(await take({ fromPosition: START, filter: eventTypeFilter({ regex: '^N' }) }, 1)).toEqual([`keep${id}-1/No`]);
  });

  it('sends checkpoints every checkpointInterval x 32 considered events in catch-up and live, and at the end of catch-up', async () => {
    const fresh = await connect({ standardProjections: false });
    try {
      const noise = `noise-${randomUUID()}`;
      const matches: number[] = [10, 40, 65];
      for (let i = 0; i < 73; i++) {
        fresh.server.writeEvent(noise, matches.includes(i) ? 'Match' : 'Noise', { i });
      }
      const positionOf = async (i: number) => (await collect(fresh.client.readStream(noise, { fromRevision: BigInt(i), maxCount: 1 })))[0]!.event!.position!;
      const log: string[] = [];
      const sub = fresh.client.subscribeToAll({
        fromPosition: START,
        filter: eventTypeFilter({ prefixes: ['Match'], checkpointInterval: 1, checkpointReached: (_s, p) => void log.push(`checkpoint ${p.commit}`) }),
      });
      let caughtUp = false;
      sub.on('caughtUp', () => (caughtUp = true));
      const reader = (async () => {
        for await (const e of sub) {
          log.push(`event ${e.event!.position.commit}`);
          if (e.event!.data && (e.event!.data as { i: number }).i === 200) break;
        }
      })();
      await until(() => caughtUp);
      const p = await Promise.all(matches.map(positionOf));
      // 80 considered events (7 system, 73 written) in pages of 32: two interval checkpoints and one at the end.
      expect(log).toEqual(p.flatMap((x) => [`event ${x.commit}`, `checkpoint ${x.commit}`]));
      log.length = 0;
      for (let i = 73; i < 73 + 40; i++) fresh.server.writeEvent(noise, 'Noise', { i });
      fresh.server.writeEvent(noise, 'Match', { i: 200 });
      await reader;
      const live32 = await positionOf(73 + 31);
      const last = await positionOf(73 + 40);
      expect(log).toEqual([`checkpoint ${live32.commit}`, `event ${last.commit}`]);
    } finally {
      await fresh.client.dispose();
      await fresh.server.close();
    }
  });

  it('sends its first checkpoint at the start of the log when nothing matches (not the ulong.MaxValue of KDB-710)', async () => {
    const fresh = await connect({ standardProjections: false });
    try {
      const checkpoints: Position[] = [];
      const sub = fresh.client.subscribeToAll({
        fromPosition: START,
        filter: eventTypeFilter({ prefixes: ['Nothing'], checkpointInterval: 10, checkpointReached: (_s, p) => void checkpoints.push(p) }),
      });
      sub.on('data', () => undefined);
      await once(sub, 'caughtUp');
      expect(checkpoints).toEqual([{ commit: 0n, prepare: 0n }]);
      await sub.unsubscribe();
    } finally {
      await fresh.client.dispose();
      await fresh.server.close();
    }
  });

  it('a reader that falls behind the live buffer gets every event once, in order, through catch-up', async () => {
    const stream = `slow-${randomUUID()}`;
    const sub = client.subscribeToAll({ fromPosition: END, filter: streamNameFilter({ prefixes: [stream] }) });
    await once(sub, 'caughtUp');
    const pad = 'x'.repeat(1_000);
    for (let i = 0; i < 1_000; i++) server.writeEvent(stream, 'E', { i, pad });
    await new Promise((r) => setTimeout(r, 50)); // the server is now blocked on flow control
    for (let i = 1_000; i < 2_000; i++) server.writeEvent(stream, 'E', { i, pad });
    const got: number[] = [];
    for await (const e of sub) {
      got.push((e.event!.data as { i: number }).i);
      if (got.length === 2_000) break;
    }
    expect(got).toEqual(Array.from({ length: 2_000 }, (_, i) => i));
    expect(server.fellBehind()).toBeGreaterThan(0);
    await sub.unsubscribe();
  });

  it('subscribes to a stream: catch-up from a revision (exclusive), then live', async () => {
    const stream = `one-${randomUUID()}`;
    await client.appendToStream(stream, [ev('A'), ev('B'), ev('C')]);
    const sub = client.subscribeToStream(stream, { fromRevision: 0n });
    const seen: string[] = [];
    const reader = (async () => {
      for await (const e of sub) {
        seen.push(e.event!.type);
        if (seen.length === 3) break;
      }
    })();
    await once(sub, 'caughtUp');
    await client.appendToStream(stream, ev('D'));
    await reader;
    expect(seen).toEqual(['B', 'C', 'D']);
  });
});

describe('EventStoreDB test server, below the client API', () => {
  let server: EsdbTestServer;
  let raw: InstanceType<typeof generated.streamsGrpc.StreamsClient>;
  const { streamsPb, sharedPb } = generated;
  const stream = `raw-${randomUUID()}`;
  beforeAll(async () => {
    server = await startEsdbTestServer({ standardProjections: false });
    const client = EventStoreDBClient.connectionString(server.connectionString);
    await client.appendToStream(stream, [ev('A'), ev('B'), ev('A')], { expectedRevision: 'no_stream' });
    await client.dispose();
    raw = new generated.streamsGrpc.StreamsClient(server.connectionString.replace(/^esdb:\/\/|\?.*$/g, ''), grpc.credentials.createInsecure());
  });
  afterAll(async () => {
    raw.close();
    await server.close();
  });

  const readAll = (build: (o: InstanceType<typeof streamsPb.ReadReq.Options>) => void) => {
    const o = new streamsPb.ReadReq.Options()
      .setAll(new streamsPb.ReadReq.Options.AllOptions().setStart(new sharedPb.Empty()))
      .setCount('1000')
      .setUuidOption(new streamsPb.ReadReq.Options.UUIDOption().setString(new sharedPb.Empty()))
      .setNoFilter(new sharedPb.Empty());
    build(o);
    return collect(raw.read(new streamsPb.ReadReq().setOptions(o)) as AsyncIterable<InstanceType<typeof streamsPb.ReadResp>>);
  };
  const typesOf = (resps: InstanceType<typeof streamsPb.ReadResp>[]) => resps.map((r) => r.getEvent()!.getEvent()!.getMetadataMap().get('type'));

  it('reads $all with a filter, forwards and backwards', async () => {
    const filter = new streamsPb.ReadReq.Options.FilterOptions()
      .setStreamIdentifier(new streamsPb.ReadReq.Options.FilterOptions.Expression().setPrefixList([stream]))
      .setCount(new sharedPb.Empty())
      .setCheckpointintervalmultiplier(1);
    expect(typesOf(await readAll((o) => o.setFilter(filter)))).toEqual(['A', 'B', 'A']);
    const byType = new streamsPb.ReadReq.Options.FilterOptions()
      .setEventType(new streamsPb.ReadReq.Options.FilterOptions.Expression().setRegex('^A$'))
      .setMax(8)
      .setCheckpointintervalmultiplier(1);
    const backwards = await readAll((o) =>
      o.setFilter(byType).setReadDirection(streamsPb.ReadReq.Options.ReadDirection.BACKWARDS).setAll(new streamsPb.ReadReq.Options.AllOptions().setEnd(new sharedPb.Empty())),
    );
    expect(backwards.map((r) => r.getEvent()!.getEvent()!.getStreamRevision())).toEqual(['2', '0']);
  });

  it('answers with structured UUIDs when asked', async () => {
    const [structured] = await readAll((o) => o.setUuidOption(new streamsPb.ReadReq.Options.UUIDOption().setStructured(new sharedPb.Empty())).setCount('1'));
    const [asString] = await readAll((o) => o.setCount('1'));
    const id = structured!.getEvent()!.getEvent()!.getId()!;
    expect(id.hasStructured()).toBe(true);
    const hex = (v: string) => BigInt.asUintN(64, BigInt(v)).toString(16).padStart(16, '0');
    const h = hex(id.getStructured()!.getMostSignificantBits()) + hex(id.getStructured()!.getLeastSignificantBits());
    expect(`${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`).toBe(asString!.getEvent()!.getEvent()!.getId()!.getString());
  });

  it('refuses an invalid combination of read options', async () => {
    const err = await failure(
      readAll((o) =>
        o
          .setStream(new streamsPb.ReadReq.Options.StreamOptions().setStreamIdentifier(new sharedPb.StreamIdentifier().setStreamName(Buffer.from(stream))).setStart(new sharedPb.Empty()))
          .setSubscription(new streamsPb.ReadReq.Options.SubscriptionOptions())
          .setReadDirection(streamsPb.ReadReq.Options.ReadDirection.BACKWARDS),
      ),
    );
    expect(err).toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: 'The combination of (Stream, Subscription, Backwards, NoFilter) is invalid.' });
  });

  it('times out a BatchAppend whose deadline has passed, and answers per correlation id on one call', async () => {
    const call = raw.batchAppend();
    const responses: InstanceType<typeof streamsPb.BatchAppendResp>[] = [];
    call.on('data', (r: InstanceType<typeof streamsPb.BatchAppendResp>) => responses.push(r));
    const request = (deadlineMs: number, expected: 'any' | 'no_stream') => {
      const correlation = new sharedPb.UUID().setString(randomUUID());
      const options = new streamsPb.BatchAppendReq.Options()
        .setStreamIdentifier(new sharedPb.StreamIdentifier().setStreamName(Buffer.from(stream)))
        .setDeadline(generated.timestampPb.Timestamp.fromDate(new Date(Date.now() + deadlineMs)));
      if (expected === 'any') options.setAny(new generated.emptyPb.Empty());
      else options.setNoStream(new generated.emptyPb.Empty());
      const message = new streamsPb.BatchAppendReq.ProposedMessage().setId(new sharedPb.UUID().setString(randomUUID())).setData(Buffer.from('{}'));
      message.getMetadataMap().set('type', 'T').set('content-type', 'application/json');
      call.write(new streamsPb.BatchAppendReq().setCorrelationId(correlation).setOptions(options).setProposedMessagesList([message]).setIsFinal(true));
      return correlation.getString();
    };
    const expired = request(-1_000, 'any');
    const conflict = request(10_000, 'no_stream');
    const ok = request(10_000, 'any');
    call.end();
    await once(call, 'end');
    const byId = new Map(responses.map((r) => [r.getCorrelationId()!.getString(), r]));
    expect(byId.get(expired)!.getError()!.getCode()).toBe(grpc.status.DEADLINE_EXCEEDED);
    const wev = byId.get(conflict)!.getError()!;
    expect(wev.getCode()).toBe(grpc.status.ALREADY_EXISTS);
    const details = wev.getDetails()!.unpack(sharedPb.WrongExpectedVersion.deserializeBinary, 'event_store.client.WrongExpectedVersion')!;
    expect([details.getCurrentStreamRevision(), details.hasExpectedNoStream()]).toEqual(['2', true]);
    expect(byId.get(ok)!.getSuccess()!.getCurrentRevision()).toBe('3');
  });
});
