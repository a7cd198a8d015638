/**
 * A protocol-level EventStoreDB test server: a real gRPC server on 127.0.0.1 built from the client's own
 * generated service definitions and messages, so that the real `@eventstore/db-client` talks to it over the
 * wire as it would to an EventStoreDB 24.10 single node started `--insecure`. The log lives in memory.
 *
 * Where the behaviour comes from: the server's source at tag v24.10.14 (kurrent-io/KurrentDB, formerly
 * EventStore/EventStore; paths below are under src/EventStore.Core/Services). 23.10 differs in that it sends
 * no `caught_up` message and its subscription enumerators place checkpoints differently.
 * - ServerFeatures.GetSupportedMethods: the methods implemented here, lower-cased, with the features the
 *   real server attaches (Streams/Read: position, events; Streams/BatchAppend: deadline_duration)
 *   (Transport/Grpc/ServerFeatures.cs). The client picks BatchAppend when it is listed, Append otherwise.
 * - Streams.Append and Streams.BatchAppend: the commit check of Storage/ReaderIndex/IndexWriter.cs
 *   (CheckCommit): expected revision any / no_stream / stream_exists / exact; idempotency (the same event ids
 *   again at the same place succeed without writing: for `any` and `stream_exists` through the bounded
 *   committed-events cache, for no_stream or a revision through the stream itself); a partial repeat is a
 *   WrongExpectedVersion. Answers as Transport/Grpc/Streams.Append.cs (AppendResp.wrong_expected_version,
 *   current and 20.6.0 fields) and Streams.BatchAppend.cs (google.rpc.Status ALREADY_EXISTS carrying a packed
 *   event_store.client.WrongExpectedVersion; a timeout from the request's deadline capped by the 2 s write
 *   timeout). Every event of a write is its own self-committed prepare (Storage/StorageWriterService.cs), so
 *   its $all position has commit == prepare, and the success position is the last event's
 *   (Storage/StorageChaser.cs acknowledges at the TransactionEnd prepare; RequestManager/Managers/WriteEvents.cs
 *   sends that as both commit and prepare). An idempotent repeat answers with the repeated range's last event
 *   and its position. Positions are byte offsets of records in a transaction file (record sizes approximate
 *   the v2 log format), so they grow with every event and are not contiguous.
 * - Streams.Read: stream reads forwards/backwards from start/end/revision with a count, `stream_not_found` for
 *   a missing stream (Transport/Enumerators/Enumerator.ReadStreamForwards.cs, ...Backwards.cs); $all reads
 *   forwards (inclusive of the given position) and backwards (exclusive), with or without a filter
 *   (Storage/ReaderIndex/AllReader.cs); every $all read applies the default $all filter, which hides
 *   `$epoch-information` and persistent-subscription checkpoints (ReaderIndex/EventFilter.cs); a position
 *   inside a record is `Trying to read from an invalid position.` (INVALID_ARGUMENT). Subscriptions to $all
 *   and to a stream (Enumerator.AllSubscription.cs, AllSubscriptionFiltered.cs, StreamSubscription.cs):
 *   confirmation, catch-up (exclusive of the given position), `caught_up`, live events; for a filtered $all
 *   subscription checkpoints every `checkpointIntervalMultiplier x maxSearchWindow` (window 32 unless set)
 *   considered events in catch-up and live (SubscriptionsService.cs) and one on going live; a reader slower
 *   than the live buffer (32 entries, oldest dropped) goes back to catch-up without a gap or a repeat. A
 *   cancelled call stops and unregisters at once.
 * - System events: at start an epoch record, `$epoch-information`, `$$$scavenges` ($metadata), `$settings`
 *   and the admin/ops user streams; with `standardProjections` (default on) every event of a non-system
 *   stream is followed, a moment later, by `$>` links in `$ce-<category>` and `$et-<type>`, as the
 *   $by_category and $by_event_type projections write them (asynchronously, so they interleave with later
 *   writes). The start-up set is representative of a fresh node, not byte-exact.
 *
 * Not modelled: authentication and ACLs, stream deletion and tombstones, stream metadata ($maxCount, $tb,
 * $maxAge), persistent subscriptions, projections management, gossip/cluster, the fields newer protos add
 * (timestamps and positions on caught_up / checkpoint: the client's 6.2.1 protos do not have them), the
 * ControlOption compatibility messages, per-record size limits, explicit transactions (so commit always
 * equals prepare), the server-side expiry of reads (gRPC's own deadline applies). Filter regexes run as
 * JavaScript RegExp (the server uses .NET Regex; they agree on common patterns).
 */
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import * as grpc from '@grpc/grpc-js';
import type * as FeaturesGrpcTypes from '@eventstore/db-client/generated/serverfeatures_grpc_pb.js';
import type * as FeaturesPbTypes from '@eventstore/db-client/generated/serverfeatures_pb.js';
import type * as SharedPbTypes from '@eventstore/db-client/generated/shared_pb.js';
import type * as StatusPbTypes from '@eventstore/db-client/generated/status_pb.js';
import type * as StreamsGrpcTypes from '@eventstore/db-client/generated/streams_grpc_pb.js';
import type * as StreamsPbTypes from '@eventstore/db-client/generated/streams_pb.js';
import type * as AnyPbTypes from 'google-protobuf/google/protobuf/any_pb.js';
import type * as EmptyPbTypes from 'google-protobuf/google/protobuf/empty_pb.js';
import type * as TimestampPbTypes from 'google-protobuf/google/protobuf/timestamp_pb.js';

// The client's generated CommonJS modules, loaded from where the client loads them so that messages are
// instances of the very classes its serializers check.
const fromClient = createRequire(createRequire(import.meta.url).resolve('@eventstore/db-client/generated/streams_pb.js'));
const streamsPb = fromClient('./streams_pb.js') as typeof StreamsPbTypes;
const sharedPb = fromClient('./shared_pb.js') as typeof SharedPbTypes;
const statusPb = fromClient('./status_pb.js') as typeof StatusPbTypes;
const featuresPb = fromClient('./serverfeatures_pb.js') as typeof FeaturesPbTypes;
const streamsGrpc = fromClient('./streams_grpc_pb.js') as typeof StreamsGrpcTypes;
const featuresGrpc = fromClient('./serverfeatures_grpc_pb.js') as typeof FeaturesGrpcTypes;
const anyPb = fromClient('google-protobuf/google/protobuf/any_pb.js') as typeof AnyPbTypes;
const emptyPb = fromClient('google-protobuf/google/protobuf/empty_pb.js') as typeof EmptyPbTypes;
const timestampPb = fromClient('google-protobuf/google/protobuf/timestamp_pb.js') as typeof TimestampPbTypes;

/** The client's generated modules, for tests that speak the protocol below the client's API. */
export const generated = { streamsPb, sharedPb, streamsGrpc, emptyPb, timestampPb };

type ReadReq = StreamsPbTypes.ReadReq;
type ReadResp = StreamsPbTypes.ReadResp;
type AppendReq = StreamsPbTypes.AppendReq;
type AppendResp = StreamsPbTypes.AppendResp;
type BatchAppendReq = StreamsPbTypes.BatchAppendReq;
type BatchAppendResp = StreamsPbTypes.BatchAppendResp;
type UUIDOption = StreamsPbTypes.ReadReq.Options.UUIDOption;

export const SERVER_VERSION = '24.10.14';

export interface EsdbTestServerOptions {
  /** List Streams/BatchAppend in the server features (EventStoreDB >= 21.10 does); off, the client uses Append. */
  batchAppend?: boolean;
  /** Write `$>` links to `$ce-<category>` and `$et-<type>` after each event, as the standard projections do. */
  standardProjections?: boolean;
  /** Largest write in bytes (the server's MaxAppendSize, default 1 MiB). */
  maxAppendSize?: number;
  /**
   * Entries of the committed-events cache that `any` idempotency relies on. The server's holds 8 MiB at
   * 28 bytes plus the stream name per event (IndexWriter.cs): some 50k events with 50-character names.
   */
  committedEventsCacheSize?: number;
}

export interface EsdbTestServer {
  connectionString: string;
  close(): Promise<void>;
  /** Calls received per method name (`Read`, `Append`, `BatchAppend`, `GetSupportedMethods`). */
  callCounts(): Record<string, number>;
  /** Read calls with the subscription option that are still running on the server. */
  activeSubscriptions(): number;
  /** Read calls (reads and subscriptions) still running on the server. */
  activeReads(): number;
  /** How many times a subscription fell behind its live buffer and went back to catch-up. */
  fellBehind(): number;
  /** Events of the users' streams (not `$`) handed to gRPC by reads and subscriptions so far, read by the client or not. */
  eventsSent(): number;
  /** Holds every read that arrives from now on (as a stuck node would) until the returned function is called. */
  holdReads(): () => void;
  /**
   * Holds the next write to a stream whose name starts with `prefix` (Append or BatchAppend), as a slow
   * node would, after it has arrived (`reached`) and before it is written, until `release` is called.
   * `answerLost`: the write is then made, but answered as timed out, as a node whose answer did not come
   * back in time (the client cannot tell whether it was written).
   */
  holdNextAppend(prefix: string, options?: { answerLost?: boolean }): { reached: Promise<void>; release(): void };
  /** Ends every running subscription with UNAVAILABLE, as a node going down does to its subscribers. */
  dropSubscriptions(): void;
  /** Writes an event directly, as a server-side writer (a projection, the node itself) would. */
  writeEvent(streamId: string, type: string, data: unknown, metadata?: unknown): void;
}

// ---------------------------------------------------------------------------------------------------------
// The log

/** ExpectedVersion values of the server (Core/Data/ExpectedVersion.cs). */
const ANY = -2;
const NO_STREAM = -1;
const STREAM_EXISTS = -4;

/** A transaction-file position: commit and prepare, byte offsets (TFPos). -1/-1 is "before the start". */
interface TFPos {
  commit: bigint;
  prepare: bigint;
}
const ULONG_MAX = (1n << 64n) - 1n;
const tf = (commit: bigint, prepare: bigint = commit): TFPos => ({ commit, prepare });
function cmpPos(a: TFPos, b: TFPos): number {
  if (a.commit !== b.commit) return a.commit < b.commit ? -1 : 1;
  return a.prepare === b.prepare ? 0 : a.prepare < b.prepare ? -1 : 1;
}
/** Position.FromInt64 of the server: -1 becomes ulong.MaxValue on the wire. */
const wire = (n: bigint): string => (n < 0n ? ULONG_MAX : n).toString();

interface StoredEvent {
  id: string; // lower-case 8-4-4-4-12
  streamId: string;
  revision: number;
  type: string;
  isJson: boolean;
  data: Uint8Array;
  metadata: Uint8Array;
  created: bigint; // .NET ticks since the Unix epoch
  pos: bigint; // commit == prepare for self-committed prepares
}

interface LogRecord {
  pos: bigint;
  post: bigint;
  event?: StoredEvent;
}

interface ProposedEvent {
  id: string;
  type: string;
  isJson: boolean;
  data: Uint8Array;
  metadata: Uint8Array;
}

type WriteResult =
  | { kind: 'success'; firstEventNumber: number; lastEventNumber: number; position: bigint }
  | { kind: 'wrong_expected_version'; currentVersion: number };

type CommitCheck =
  | { decision: 'ok'; currentVersion: number }
  | { decision: 'wrong_expected_version' | 'corrupted_idempotency'; currentVersion: number }
  | { decision: 'idempotent'; currentVersion: number; start: number; end: number; position: bigint };

const utf8 = new TextEncoder();

/** Size of a v2 prepare record on disk: length prefix and suffix, fixed fields, two strings, data, metadata. */
function recordSize(streamId: string, type: string, data: Uint8Array, metadata: Uint8Array): bigint {
  return BigInt(8 + 80 + 1 + utf8.encode(streamId).length + 1 + utf8.encode(type).length + data.length + metadata.length);
}

class Log {
  private readonly records: LogRecord[] = [];
  private readonly streams = new Map<string, StoredEvent[]>();
  /** Event id -> where it was last committed: the server's bounded committed-events cache. */
  private readonly committed = new Map<string, { streamId: string; revision: number }>();
  private readonly listeners = new Set<(event: StoredEvent) => void>();
  private end = 0n;

  constructor(private readonly cacheSize: number) {
    this.appendRecord(128n); // the epoch record a fresh node starts its log with
  }

  /** Log position of the last record (LastIndexedPosition): -1 on an empty log. */
  lastIndexedPosition(): bigint {
    return this.records.at(-1)?.pos ?? -1n;
  }

  /** The writer checkpoint: where the next record goes (HeadOfTf resolves to it). */
  endOfLog(): bigint {
    return this.end;
  }

  isRecordBoundary(position: bigint): boolean {
    if (position === this.end) return true;
    const i = this.firstAtOrAfter(position);
    return i < this.records.length && this.records[i]!.pos === position;
  }

  lastEventNumber(streamId: string): number {
    const events = this.streams.get(streamId);
    return events && events.length > 0 ? events.length - 1 : -1;
  }

  stream(streamId: string): readonly StoredEvent[] | undefined {
    const events = this.streams.get(streamId);
    return events && events.length > 0 ? events : undefined;
  }

  subscribe(listener: (event: StoredEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Events at or after `from` (forwards, (pos,pos) >= from), in log order. */
  *forwardFrom(from: TFPos): Generator<LogRecord> {
    for (let i = this.firstAtOrAfter(from.commit); i < this.records.length; i++) yield this.records[i]!;
  }

  /** Records whose post-position is at or before `from` (backwards reads), newest first. */
  *backwardFrom(from: TFPos): Generator<LogRecord> {
    for (let i = this.firstAtOrAfter(from.commit + 1n) - 1; i >= 0; i--) {
      const r = this.records[i]!;
      if (cmpPos(tf(r.post), from) <= 0) yield r;
    }
  }

  /**
   * One page of AllReader.FilteredReadAllEventsForward: scans records from `from`, stops at `maxCount`
   * matches or `maxSearchWindow` considered events; `isEnd` only when the scan ran out of records.
   */
  readPage(from: TFPos, maxCount: number, maxSearchWindow: number, allowed: (e: StoredEvent) => boolean) {
    const events: StoredEvent[] = [];
    let considered = 0;
    let nextPos = from;
    let isEnd = true;
    for (const r of this.forwardFrom(from)) {
      if (events.length >= maxCount || considered >= maxSearchWindow) {
        isEnd = false;
        break;
      }
      const e = r.event;
      if (!e || cmpPos(tf(e.pos), from) < 0) continue;
      considered++;
      if (allowed(e)) events.push(e);
      nextPos = tf(r.post, 0n);
    }
    return { events, currentPos: from, nextPos, isEnd, considered };
  }

  /** Resolves a `$>` link ("<revision>@<stream>") to its event; undefined when it points nowhere. */
  resolveLink(link: StoredEvent): StoredEvent | undefined {
    const text = Buffer.from(link.data).toString('utf8');
    const at = text.indexOf('@');
    if (at < 0) return undefined;
    const revision = Number(text.slice(0, at));
    return this.streams.get(text.slice(at + 1))?.[revision];
  }

  /** IndexWriter.CheckCommit, without deletion (no stream here is deleted). */
  private checkCommit(streamId: string, expectedVersion: number, ids: string[]): CommitCheck {
    const current = this.lastEventNumber(streamId);
    const events = this.streams.get(streamId) ?? [];
    if (expectedVersion === STREAM_EXISTS && current < 0 && this.lastEventNumber(`$$${streamId}`) < 0) {
      return { decision: 'wrong_expected_version', currentVersion: current };
    }
    if (expectedVersion === ANY || expectedVersion === STREAM_EXISTS) {
      let start = -1;
      let end = -1;
      for (const [i, id] of ids.entries()) {
        const info = this.committed.get(id);
        if (!info || info.streamId !== streamId) {
          return { decision: i === 0 ? 'ok' : 'corrupted_idempotency', currentVersion: current };
        }
        if (i === 0) start = info.revision;
        end = info.revision;
      }
      if (ids.length === 0) return { decision: 'ok', currentVersion: current };
      return { decision: 'idempotent', currentVersion: current, start, end, position: events[end]!.pos };
    }
    if (expectedVersion < current) {
      let n = expectedVersion;
      for (const id of ids) {
        n++;
        const info = this.committed.get(id);
        if (info && info.streamId === streamId && info.revision === n) continue;
        if (events[n]?.id === id) continue;
        return { decision: n === expectedVersion + 1 ? 'wrong_expected_version' : 'corrupted_idempotency', currentVersion: current };
      }
      if (n === expectedVersion) return { decision: 'wrong_expected_version', currentVersion: current };
      return { decision: 'idempotent', currentVersion: current, start: expectedVersion + 1, end: n, position: events[n]!.pos };
    }
    if (expectedVersion > current) return { decision: 'wrong_expected_version', currentVersion: current };
    return { decision: 'ok', currentVersion: current };
  }

  /** StorageWriterService.WritePrepares + the request manager's answer. */
  write(streamId: string, expectedVersion: number, proposed: ProposedEvent[]): WriteResult {
    const check = this.checkCommit(
      streamId,
      expectedVersion,
      proposed.map((e) => e.id),
    );
    switch (check.decision) {
      case 'wrong_expected_version':
      case 'corrupted_idempotency': // "the transaction is not idempotent, so WrongExpectedVersion is ok answer"
        return { kind: 'wrong_expected_version', currentVersion: check.currentVersion };
      case 'idempotent':
        return { kind: 'success', firstEventNumber: check.start, lastEventNumber: check.end, position: check.position };
      case 'ok':
        break;
    }
    const current = check.currentVersion;
    if (proposed.length === 0) {
      // An empty prepare: it takes log space, commits nothing, answers with the stream's current version.
      const record = this.appendRecord(recordSize(streamId, '', new Uint8Array(), new Uint8Array()));
      return { kind: 'success', firstEventNumber: current + 1, lastEventNumber: current, position: record.pos };
    }
    let events = this.streams.get(streamId);
    if (!events) this.streams.set(streamId, (events = []));
    const created = BigInt(Date.now()) * 10_000n;
    const written: StoredEvent[] = [];
    for (const [i, p] of proposed.entries()) {
      const record = this.appendRecord(recordSize(streamId, p.type, p.data, p.metadata));
      const event: StoredEvent = { ...p, streamId, revision: current + 1 + i, created, pos: record.pos };
      record.event = event;
      events.push(event);
      written.push(event);
      this.remember(event);
    }
    for (const event of written) for (const listener of [...this.listeners]) listener(event);
    return { kind: 'success', firstEventNumber: current + 1, lastEventNumber: current + proposed.length, position: written.at(-1)!.pos };
  }

  private remember(event: StoredEvent): void {
    this.committed.delete(event.id);
    this.committed.set(event.id, { streamId: event.streamId, revision: event.revision });
    if (this.committed.size > this.cacheSize) this.committed.delete(this.committed.keys().next().value!);
  }

  private appendRecord(size: bigint): LogRecord {
    const record: LogRecord = { pos: this.end, post: this.end + size };
    this.records.push(record);
    this.end = record.post;
    return record;
  }

  private firstAtOrAfter(position: bigint): number {
    let lo = 0;
    let hi = this.records.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.records[mid]!.pos < position) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

// ---------------------------------------------------------------------------------------------------------
// Filters (ReaderIndex/EventFilter.cs)

type EventFilter = (event: StoredEvent) => boolean;

/** The default $all filter: non-system streams pass; $epoch-information and $all persistent-subscription streams do not. */
const defaultAllFilter: EventFilter = (e) => {
  if (!e.streamId.startsWith('$')) return true;
  if (e.streamId === '$epoch-information') return false;
  if (e.streamId.startsWith('$persistentsubscription-$all::') && (e.streamId.endsWith('-checkpoint') || e.streamId.endsWith('-parked'))) {
    return false;
  }
  return true;
};

function toEventFilter(filter: StreamsPbTypes.ReadReq.Options.FilterOptions): EventFilter {
  const Case = streamsPb.ReadReq.Options.FilterOptions.FilterCase;
  const onStream = filter.getFilterCase() === Case.STREAM_IDENTIFIER;
  const expression = onStream ? filter.getStreamIdentifier() : filter.getEventType();
  if (!expression) throw rpcError(grpc.status.INVALID_ARGUMENT, `Invalid argument: ${filter.getFilterCase()}`);
  const field = (e: StoredEvent) => (onStream ? e.streamId : e.type);
  const regex = expression.getRegex();
  if (regex) {
    let compiled: RegExp;
    try {
      compiled = new RegExp(regex);
    } catch {
      throw rpcError(grpc.status.UNKNOWN, 'Exception was thrown by handler.');
    }
    return (e) => defaultAllFilter(e) && compiled.test(field(e));
  }
  const prefixes = expression.getPrefixList();
  return (e) => defaultAllFilter(e) && prefixes.some((p) => field(e).startsWith(p));
}

// ---------------------------------------------------------------------------------------------------------
// Wire helpers

class RpcError extends Error {
  constructor(
    readonly code: grpc.status,
    readonly details: string,
    readonly metadata?: grpc.Metadata,
  ) {
    super(details);
  }
}
const rpcError = (code: grpc.status, details: string, metadata?: Record<string, string>): RpcError => {
  let md: grpc.Metadata | undefined;
  if (metadata) {
    md = new grpc.Metadata();
    for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  }
  return new RpcError(code, details, md);
};
/** What ASP.NET Core gRPC answers for an exception a handler did not map. */
const handlerException = () => rpcError(grpc.status.UNKNOWN, 'Exception was thrown by handler.');
const invalidPosition = () => rpcError(grpc.status.INVALID_ARGUMENT, 'Trying to read from an invalid position.');

class Cancelled extends Error {}

const GUID = /^\{?([0-9a-f]{8})-?([0-9a-f]{4})-?([0-9a-f]{4})-?([0-9a-f]{4})-?([0-9a-f]{12})\}?$/i;

/** Uuid.FromDto: a string in any Guid.Parse form, or most/least significant bits. */
function uuidFromDto(dto: SharedPbTypes.UUID | undefined): string {
  if (!dto) throw new Error("Value cannot be null. (Parameter 'dto')");
  if (dto.getValueCase() === sharedPb.UUID.ValueCase.STRUCTURED) {
    const s = dto.getStructured()!;
    const hex = (v: string) => BigInt.asUintN(64, BigInt(v)).toString(16).padStart(16, '0');
    const h = hex(s.getMostSignificantBits()) + hex(s.getLeastSignificantBits());
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  }
  if (dto.getValueCase() !== sharedPb.UUID.ValueCase.STRING) throw new Error(`Invalid argument: ${dto.getValueCase()}`);
  const m = GUID.exec(dto.getString());
  if (!m) throw new Error('Unrecognized Guid format.');
  return m.slice(1).join('-').toLowerCase();
}

function uuidToDto(id: string, option: UUIDOption): SharedPbTypes.UUID {
  const dto = new sharedPb.UUID();
  if (option.getContentCase() === streamsPb.ReadReq.Options.UUIDOption.ContentCase.STRING) return dto.setString(id);
  const hex = id.replace(/-/g, '');
  const structured = new sharedPb.UUID.Structured()
    .setMostSignificantBits(BigInt.asIntN(64, BigInt(`0x${hex.slice(0, 16)}`)).toString())
    .setLeastSignificantBits(BigInt.asIntN(64, BigInt(`0x${hex.slice(16)}`)).toString());
  return dto.setStructured(structured);
}

const streamName = (identifier: SharedPbTypes.StreamIdentifier | undefined): string =>
  identifier ? Buffer.from(identifier.getStreamName_asU8()).toString('utf8') : '';
const streamIdentifier = (name: string) => new sharedPb.StreamIdentifier().setStreamName(Uint8Array.from(Buffer.from(name, 'utf8')));

/** StreamRevision(ulong).ToInt64(): ulong.MaxValue is -1. */
const revisionToInt64 = (value: string): number => (BigInt(value) === ULONG_MAX ? -1 : Number(BigInt(value)));

function recordedEvent(e: StoredEvent, option: UUIDOption): StreamsPbTypes.ReadResp.ReadEvent.RecordedEvent {
  const r = new streamsPb.ReadResp.ReadEvent.RecordedEvent()
    .setId(uuidToDto(e.id, option))
    .setStreamIdentifier(streamIdentifier(e.streamId))
    .setStreamRevision(String(e.revision))
    .setPreparePosition(wire(e.pos))
    .setCommitPosition(wire(e.pos))
    .setCustomMetadata(e.metadata)
    .setData(e.data);
  const md = r.getMetadataMap();
  md.set('type', e.type);
  md.set('created', e.created.toString());
  md.set('content-type', e.isJson ? 'application/json' : 'application/octet-stream');
  return r;
}

function eventResp(log: Log, e: StoredEvent, option: UUIDOption, resolveLinks: boolean): ReadResp {
  const read = new streamsPb.ReadResp.ReadEvent();
  if (resolveLinks && e.type === '$>') {
    const target = log.resolveLink(e);
    if (target) read.setEvent(recordedEvent(target, option));
    read.setLink(recordedEvent(e, option));
  } else {
    read.setEvent(recordedEvent(e, option));
  }
  read.setCommitPosition(wire(e.pos)); // the original (link or event) position
  return new streamsPb.ReadResp().setEvent(read);
}

/** Writes with back-pressure; rejects with Cancelled once the call is cancelled. */
async function send<T>(call: grpc.ServerWritableStream<unknown, T> | grpc.ServerDuplexStream<unknown, T>, message: T, signal: AbortSignal): Promise<void> {
  if (signal.aborted) throw new Cancelled();
  if (call.write(message)) return;
  await new Promise<void>((resolve, reject) => {
    const done = () => {
      call.off('drain', done);
      signal.removeEventListener('abort', abort);
      resolve();
    };
    const abort = () => {
      call.off('drain', done);
      reject(new Cancelled());
    };
    call.on('drain', done);
    signal.addEventListener('abort', abort, { once: true });
  });
}

/** The live channel of a subscription: 32 entries, the oldest dropped when full, each with a sequence number. */
class LiveChannel<T> {
  private readonly items: { seq: number; item: T }[] = [];
  private seq = 0;
  private wake: (() => void) | undefined;

  push(item: T): void {
    this.items.push({ seq: ++this.seq, item });
    if (this.items.length > 32) this.items.shift();
    this.wake?.();
  }

  async next(signal: AbortSignal): Promise<{ seq: number; item: T }> {
    while (this.items.length === 0) {
      if (signal.aborted) throw new Cancelled();
      await new Promise<void>((resolve) => {
        const done = () => {
          this.wake = undefined;
          signal.removeEventListener('abort', done);
          resolve();
        };
        this.wake = done;
        signal.addEventListener('abort', done, { once: true });
      });
    }
    return this.items.shift()!;
  }
}

// ---------------------------------------------------------------------------------------------------------
// The server

const READ_BATCH_SIZE = 32; // Enumerator.ReadBatchSize
const WRITE_TIMEOUT_MS = 2_000; // --write-timeout-ms default

export async function startEsdbTestServer(options: EsdbTestServerOptions = {}): Promise<EsdbTestServer> {
  const batchAppendListed = options.batchAppend ?? true;
  const maxAppendSize = options.maxAppendSize ?? 1024 * 1024;
  const log = new Log(options.committedEventsCacheSize ?? 50_000);
  const counts: Record<string, number> = {};
  const count = (method: string) => (counts[method] = (counts[method] ?? 0) + 1);
  const subscriptions = new Map<AbortController, grpc.ServerWritableStream<ReadReq, ReadResp>>();
  const reads = new Set<AbortController>();
  let held: Promise<void> | undefined;
  interface AppendHold {
    prefix: string;
    arrive(): void;
    released: Promise<void>;
    answerLost: boolean;
  }
  let appendHold: AppendHold | undefined;
  /** The hold a write to `stream` waits on (holdNextAppend), taken by the first write it matches. */
  const takeAppendHold = (stream: string): AppendHold | undefined => {
    if (!appendHold || !stream.startsWith(appendHold.prefix)) return undefined;
    const hold = appendHold;
    appendHold = undefined;
    hold.arrive();
    return hold;
  };
  let fellBehind = 0;
  let eventsSent = 0;
  /** Every call in progress, with how to end it when the server goes away. */
  const calls = new Map<AbortController, () => void>();
  let closed = false;

  const json = (v: unknown) => Uint8Array.from(Buffer.from(JSON.stringify(v), 'utf8'));
  const system = (streamId: string, type: string, data: unknown, metadata?: unknown, isJson = true) =>
    log.write(streamId, ANY, [
      {
        id: randomUUID(),
        type,
        isJson,
        data: typeof data === 'string' && !isJson ? Uint8Array.from(Buffer.from(data)) : json(data),
        metadata: metadata === undefined ? new Uint8Array() : json(metadata),
      },
    ]);

  // What a fresh single node writes as it starts (representative: see the header).
  const instanceId = randomUUID();
  system('$epoch-information', '$epoch-information', { epochNumber: 0, epochPosition: 0, epochId: randomUUID(), prevEpochPosition: -1, leaderInstanceId: instanceId });
  system('$$$scavenges', '$metadata', { $maxAge: 2_592_000 });
  system('$settings', '$settings', { $userStreamAcl: { $r: '$all', $w: '$all', $d: '$all', $mr: '$all', $mw: '$all' }, $systemStreamAcl: { $r: '$admins', $w: '$admins', $d: '$admins', $mr: '$admins', $mw: '$admins' } });
  for (const user of ['admin', 'ops']) {
    system(`$user-${user}`, '$user', { loginName: user, fullName: user === 'admin' ? 'Event Store Administrator' : 'Event Store Operations', groups: user === 'admin' ? ['$admins'] : ['$ops'] });
    system('$users', '$UserCreated', user, undefined, false);
  }

  // $by_category and $by_event_type: links written a moment after the event, by a separate writer.
  const pendingLinks: StoredEvent[] = [];
  let linkFlush: NodeJS.Immediate | undefined;
  if (options.standardProjections ?? true) {
    log.subscribe((e) => {
      if (e.streamId.startsWith('$')) return;
      pendingLinks.push(e);
      linkFlush ??= setImmediate(() => {
        linkFlush = undefined;
        for (const source of pendingLinks.splice(0)) {
          const link = (stream: string) =>
            log.write(stream, ANY, [
              {
                id: randomUUID(),
                type: '$>',
                isJson: false,
                data: Uint8Array.from(Buffer.from(`${source.revision}@${source.streamId}`)),
                metadata: json({ $v: '1:-1:1:4', $c: Number(source.pos), $p: Number(source.pos), $o: source.streamId, $causedBy: source.id }),
              },
            ]);
          const dash = source.streamId.indexOf('-');
          if (dash > 0) link(`$ce-${source.streamId.slice(0, dash)}`);
          if (!source.type.startsWith('$')) link(`$et-${source.type}`);
        }
      });
    });
  }

  const unavailable = { code: grpc.status.UNAVAILABLE, details: 'Server is shutting down' };
  /** Runs a handler with an AbortController that fires when the client cancels or the server closes. */
  const track = (
    call: grpc.ServerReadableStream<unknown, unknown> | grpc.ServerWritableStream<unknown, unknown> | grpc.ServerDuplexStream<unknown, unknown>,
    shut: () => void = () => call.emit('error', unavailable),
  ) => {
    const controller = new AbortController();
    calls.set(controller, shut);
    call.on('cancelled', () => controller.abort());
    controller.signal.addEventListener('abort', () => calls.delete(controller), { once: true });
    return controller;
  };

  // --- ServerFeatures ------------------------------------------------------------------------------------

  const features: FeaturesGrpcTypes.IServerFeaturesServer = {
    getSupportedMethods(_call, callback) {
      count('GetSupportedMethods');
      const method = (service: string, name: string, ...features: string[]) =>
        new featuresPb.SupportedMethod().setServiceName(service.toLowerCase()).setMethodName(name.toLowerCase()).setFeaturesList(features);
      const methods = [
        method('event_store.client.server_features.ServerFeatures', 'GetSupportedMethods'),
        method('event_store.client.streams.Streams', 'Read', 'position', 'events'),
        method('event_store.client.streams.Streams', 'Append'),
      ];
      if (batchAppendListed) methods.push(method('event_store.client.streams.Streams', 'BatchAppend', 'deadline_duration'));
      callback(null, new featuresPb.SupportedMethods().setEventStoreServerVersion(SERVER_VERSION).setMethodsList(methods));
    },
  };

  // --- Streams.Append ------------------------------------------------------------------------------------

  const expectedOf = (o: StreamsPbTypes.AppendReq.Options): number => {
    const Case = streamsPb.AppendReq.Options.ExpectedStreamRevisionCase;
    switch (o.getExpectedStreamRevisionCase()) {
      case Case.REVISION:
        return revisionToInt64(o.getRevision());
      case Case.ANY:
        return ANY;
      case Case.STREAM_EXISTS:
        return STREAM_EXISTS;
      case Case.NO_STREAM:
        return NO_STREAM;
      default:
        throw rpcError(grpc.status.INVALID_ARGUMENT, `Invalid argument: ${o.getExpectedStreamRevisionCase()}`);
    }
  };

  const append: grpc.handleClientStreamingCall<AppendReq, AppendResp> = (call, callback) => {
    count('Append');
    const controller = track(call, () => callback(unavailable as grpc.ServiceError));
    let options: StreamsPbTypes.AppendReq.Options | undefined;
    const events: ProposedEvent[] = [];
    let size = 0;
    let answered = false;
    const answer = (...args: Parameters<typeof callback>) => {
      if (answered || controller.signal.aborted) return;
      answered = true;
      calls.delete(controller);
      callback(...args);
    };
    call.on('data', (req: AppendReq) => {
      if (answered) return;
      try {
        if (!options) {
          if (req.getContentCase() !== streamsPb.AppendReq.ContentCase.OPTIONS) throw handlerException();
          options = req.getOptions()!;
          expectedOf(options);
          return;
        }
        if (req.getContentCase() !== streamsPb.AppendReq.ContentCase.PROPOSED_MESSAGE) throw handlerException();
        const m = req.getProposedMessage()!;
        const md = m.getMetadataMap();
        const type = md.get('type');
        if (type === undefined) throw missingMetadata('type');
        const contentType = md.get('content-type');
        if (contentType === undefined) throw missingMetadata('content-type');
        const event = proposed(m.getId(), type, contentType, m.getData_asU8(), m.getCustomMetadata_asU8());
        size += eventSize(event);
        if (size > maxAppendSize) {
          throw rpcError(grpc.status.INVALID_ARGUMENT, `Maximum Append Size of ${maxAppendSize} Exceeded.`, {
            exception: 'maximum-append-size-exceeded',
            'maximum-append-size': String(maxAppendSize),
          });
        }
        events.push(event);
      } catch (err) {
        // The handler throws as it reads: the call ends with the error at once.
        answer(err instanceof RpcError ? err : handlerException());
      }
    });
    call.on('end', async () => {
      if (answered || controller.signal.aborted) return;
      if (!options) return answer(handlerException());
      // Without a hold the write goes on in the same turn, as before (no await).
      const hold = takeAppendHold(streamName(options.getStreamIdentifier()));
      if (hold) await hold.released;
      const expected = expectedOf(options);
      const result = log.write(streamName(options.getStreamIdentifier()), expected, events);
      if (hold?.answerLost) return answer(rpcError(grpc.status.DEADLINE_EXCEEDED, 'Timeout', {}));
      const resp = new streamsPb.AppendResp();
      if (result.kind === 'success') {
        const success = new streamsPb.AppendResp.Success();
        if (result.lastEventNumber === -1) success.setNoStream(new sharedPb.Empty());
        else success.setCurrentRevision(String(result.lastEventNumber));
        success.setPosition(new streamsPb.AppendResp.Position().setCommitPosition(wire(result.position)).setPreparePosition(wire(result.position)));
        return answer(null, resp.setSuccess(success));
      }
      const wev = new streamsPb.AppendResp.WrongExpectedVersion();
      const Case = streamsPb.AppendReq.Options.ExpectedStreamRevisionCase;
      switch (options.getExpectedStreamRevisionCase()) {
        case Case.ANY:
          wev.setExpectedAny(new sharedPb.Empty()).setAny2060(new sharedPb.Empty());
          break;
        case Case.STREAM_EXISTS:
          wev.setExpectedStreamExists(new sharedPb.Empty()).setStreamExists2060(new sharedPb.Empty());
          break;
        case Case.NO_STREAM:
          // The server also sets expected_revision_20_6_0 = ulong.MaxValue here; jspb cannot encode that
          // uint64 (it takes numbers), so the deprecated field is left out. The client reads only the new ones.
          wev.setExpectedNoStream(new sharedPb.Empty());
          break;
        default:
          wev.setExpectedRevision(String(expected)).setExpectedRevision2060(expected);
      }
      if (result.currentVersion === -1) wev.setCurrentNoStream(new sharedPb.Empty()).setNoStream2060(new sharedPb.Empty());
      else wev.setCurrentRevision(String(result.currentVersion)).setCurrentRevision2060(result.currentVersion);
      answer(null, resp.setWrongExpectedVersion(wev));
    });
  };

  const missingMetadata = (property: string) =>
    rpcError(grpc.status.INVALID_ARGUMENT, `Required Metadata Property '${property}' is missing`, {
      exception: 'missing-required-metadata-property',
      'required-metadata-properties': 'type,content-type',
    });

  /** The server's Event: a non-empty id and type; JSON when the content type says so. */
  const proposed = (id: SharedPbTypes.UUID | undefined, type: string, contentType: string, data: Uint8Array, metadata: Uint8Array): ProposedEvent => {
    const eventId = uuidFromDto(id);
    if (eventId === '00000000-0000-0000-0000-000000000000') throw new Error("Empty eventId provided. (Parameter 'eventId')");
    if (!type) throw new Error("Empty eventType provided. (Parameter 'eventType')");
    return { id: eventId, type, isJson: contentType === 'application/json', data: Uint8Array.from(data), metadata: Uint8Array.from(metadata) };
  };
  const eventSize = (e: ProposedEvent) => e.data.length + e.metadata.length + e.type.length * 2;

  // --- Streams.BatchAppend -------------------------------------------------------------------------------

  const packStatus = (code: grpc.status, message: string, details: { serializeBinary(): Uint8Array }, typeName: string) => {
    const any = new anyPb.Any();
    any.pack(details.serializeBinary(), typeName);
    return new statusPb.Status().setCode(code as number).setMessage(message).setDetails(any);
  };

  const batchAppend: grpc.handleBidiStreamingCall<BatchAppendReq, BatchAppendResp> = (call) => {
    count('BatchAppend');
    const controller = track(call);
    interface Pending {
      streamId: string;
      expected: number;
      events: ProposedEvent[];
      size: number;
      timer: NodeJS.Timeout;
    }
    const pending = new Map<string, Pending>();
    const respond = (correlation: SharedPbTypes.UUID | undefined, stream: string, fill: (r: BatchAppendResp) => void) => {
      const resp = new streamsPb.BatchAppendResp();
      if (correlation) resp.setCorrelationId(correlation);
      resp.setStreamIdentifier(streamIdentifier(stream));
      fill(resp);
      if (!controller.signal.aborted) call.write(resp);
    };
    const timeoutStatus = () => packStatus(grpc.status.DEADLINE_EXCEEDED, 'Timeout', new sharedPb.Timeout(), 'event_store.client.Timeout');
    const badRequest = (message: string) => packStatus(grpc.status.INVALID_ARGUMENT, 'BadRequest', new sharedPb.BadRequest().setMessage(message), 'event_store.client.BadRequest');

    call.on('data', async (req: BatchAppendReq) => {
      let stream = '';
      try {
        const correlationId = uuidFromDto(req.getCorrelationId());
        const o = req.getOptions();
        if (o) {
          stream = streamName(o.getStreamIdentifier());
          const deadline = o.getDeadline();
          const requested = deadline ? deadline.toDate().getTime() - Date.now() : Number.POSITIVE_INFINITY;
          const timeout = Math.min(requested, WRITE_TIMEOUT_MS);
          if (!o.hasStreamIdentifier()) {
            respond(req.getCorrelationId(), stream, (r) => r.setError(badRequest('Required field StreamIdentifier not set.')));
            return;
          }
          if (timeout <= 0) {
            respond(req.getCorrelationId(), stream, (r) => r.setError(timeoutStatus()));
            return;
          }
          if (!pending.has(correlationId)) {
            const Case = streamsPb.BatchAppendReq.Options.ExpectedStreamPositionCase;
            const expected = (() => {
              switch (o.getExpectedStreamPositionCase()) {
                case Case.STREAM_POSITION:
                  return revisionToInt64(o.getStreamPosition());
                case Case.ANY:
                  return ANY;
                case Case.STREAM_EXISTS:
                  return STREAM_EXISTS;
                case Case.NO_STREAM:
                  return NO_STREAM;
                default:
                  throw new Error(`Invalid argument: ${o.getExpectedStreamPositionCase()}`);
              }
            })();
            const correlation = req.getCorrelationId();
            const timer = setTimeout(() => {
              const p = pending.get(correlationId);
              if (!p) return;
              pending.delete(correlationId);
              respond(correlation, p.streamId, (r) => r.setError(timeoutStatus()));
            }, timeout);
            timer.unref();
            pending.set(correlationId, { streamId: stream, expected, events: [], size: 0, timer });
          }
        }
        const write = pending.get(correlationId);
        if (!write) return;
        stream = write.streamId;
        for (const m of req.getProposedMessagesList()) {
          const md = m.getMetadataMap();
          const type = md.get('type');
          const contentType = md.get('content-type');
          if (type === undefined || contentType === undefined) throw new Error("The given key was not present in the dictionary.");
          const event = proposed(m.getId(), type, contentType, m.getData_asU8(), m.getCustomMetadata_asU8());
          write.size += eventSize(event);
          write.events.push(event);
        }
        if (write.size > maxAppendSize) {
          pending.delete(correlationId);
          clearTimeout(write.timer);
          const details = new sharedPb.MaximumAppendSizeExceeded().setMaxappendsize(maxAppendSize);
          respond(req.getCorrelationId(), write.streamId, (r) =>
            r.setError(packStatus(grpc.status.INVALID_ARGUMENT, 'MaximumAppendSizeExceeded', details, 'event_store.client.MaximumAppendSizeExceeded')),
          );
        }
        if (!req.getIsFinal()) return;
        if (!pending.delete(correlationId)) return;
        clearTimeout(write.timer);
        const hold = takeAppendHold(write.streamId);
        if (hold) await hold.released;
        const result = log.write(write.streamId, write.expected, write.events);
        if (hold?.answerLost) {
          respond(req.getCorrelationId(), write.streamId, (r) => r.setError(timeoutStatus()));
          return;
        }
        respond(req.getCorrelationId(), write.streamId, (r) => {
          if (result.kind === 'success') {
            const success = new streamsPb.BatchAppendResp.Success();
            if (result.lastEventNumber >= 0) success.setCurrentRevision(String(result.lastEventNumber));
            else success.setNoStream(new emptyPb.Empty());
            success.setPosition(new sharedPb.AllStreamPosition().setCommitPosition(wire(result.position)).setPreparePosition(wire(result.position)));
            r.setSuccess(success);
            return;
          }
          // WrongExpectedVersion.Create: current revision or current_no_stream; the expected one as asked.
          const details = new sharedPb.WrongExpectedVersion();
          if (result.currentVersion === -1) details.setCurrentNoStream(new emptyPb.Empty());
          else details.setCurrentStreamRevision(String(result.currentVersion));
          if (write.expected === ANY) details.setExpectedAny(new emptyPb.Empty());
          else if (write.expected === NO_STREAM) details.setExpectedNoStream(new emptyPb.Empty());
          else if (write.expected === STREAM_EXISTS) details.setExpectedStreamExists(new emptyPb.Empty());
          else details.setExpectedStreamPosition(String(write.expected));
          r.setError(packStatus(grpc.status.ALREADY_EXISTS, 'WrongExpectedVersion', details, 'event_store.client.WrongExpectedVersion'));
        });
      } catch (err) {
        respond(req.getCorrelationId(), stream, (r) => r.setError(badRequest(err instanceof Error ? err.message : String(err))));
      }
    });
    const finish = () => {
      for (const p of pending.values()) clearTimeout(p.timer);
      pending.clear();
      calls.delete(controller);
    };
    call.on('end', () => {
      finish();
      if (!controller.signal.aborted) call.end();
    });
    controller.signal.addEventListener('abort', finish, { once: true });
  };

  // --- Streams.Read --------------------------------------------------------------------------------------

  const read: grpc.handleServerStreamingCall<ReadReq, ReadResp> = (call) => {
    count('Read');
    const controller = track(call);
    const signal = controller.signal;
    const isSubscription = call.request.getOptions()?.getCountOptionCase() === streamsPb.ReadReq.Options.CountOptionCase.SUBSCRIPTION;
    if (isSubscription) subscriptions.set(controller, call);
    reads.add(controller);
    const hold = held;
    const run = async () => {
      if (hold) {
        await Promise.race([hold, new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))]);
        if (signal.aborted) throw new Cancelled();
      }
      await runRead(call, signal);
    };
    run().then(
      () => {
        if (!signal.aborted) call.end();
      },
      (err: unknown) => {
        if (signal.aborted || err instanceof Cancelled) return; // cancelled by the client, or ended by the server already
        const e = err instanceof RpcError ? err : handlerException();
        call.emit('error', { code: e.code, details: e.details, metadata: e.metadata });
      },
    ).finally(() => {
      subscriptions.delete(controller);
      reads.delete(controller);
      calls.delete(controller);
    });
  };

  async function runRead(call: grpc.ServerWritableStream<ReadReq, ReadResp>, signal: AbortSignal): Promise<void> {
    const o = call.request.getOptions();
    if (!o) throw handlerException();
    const uuidOption = o.getUuidOption();
    if (!uuidOption) throw rpcError(grpc.status.INVALID_ARGUMENT, ' `uuidOption` is a required argument of type EventStore.Client.Streams.ReadReq+Types+Options+Types+UUIDOption');
    const O = streamsPb.ReadReq.Options;
    const onStream = o.getStreamOptionCase() === O.StreamOptionCase.STREAM;
    const onAll = o.getStreamOptionCase() === O.StreamOptionCase.ALL;
    const isCount = o.getCountOptionCase() === O.CountOptionCase.COUNT;
    const isSubscription = o.getCountOptionCase() === O.CountOptionCase.SUBSCRIPTION;
    const forwards = o.getReadDirection() === O.ReadDirection.FORWARDS;
    const filtered = o.getFilterOptionCase() === O.FilterOptionCase.FILTER;
    const noFilter = o.getFilterOptionCase() === O.FilterOptionCase.NO_FILTER;
    const resolveLinks = o.getResolveLinks();
    const out = (e: StoredEvent) => {
      if (!signal.aborted && !e.streamId.startsWith('$')) eventsSent++; // send writes it, or throws Cancelled before writing anything
      return send(call, eventResp(log, e, uuidOption, resolveLinks), signal);
    };

    if (onStream && isCount && noFilter) return readStream(o, forwards, out, call, signal);
    if (onAll && isCount && (noFilter || filtered)) {
      const filter = filtered ? toEventFilter(o.getFilter()!) : defaultAllFilter;
      return readAll(o.getAll()!, forwards, Number(BigInt(o.getCount())), filter, out);
    }
    if (onStream && isSubscription && forwards && noFilter) return subscribeToStream(o.getStream()!, out, call, signal);
    if (onAll && isSubscription && forwards && (noFilter || filtered)) return subscribeToAll(o, out, call, signal);
    const names = [
      onStream ? 'Stream' : onAll ? 'All' : 'None',
      isCount ? 'Count' : isSubscription ? 'Subscription' : 'None',
      forwards ? 'Forwards' : 'Backwards',
      filtered ? 'Filter' : noFilter ? 'NoFilter' : 'None',
    ];
    throw rpcError(grpc.status.INVALID_ARGUMENT, `The combination of (${names.join(', ')}) is invalid.`);
  }

  async function readStream(
    o: StreamsPbTypes.ReadReq.Options,
    forwards: boolean,
    out: (e: StoredEvent) => Promise<void>,
    call: grpc.ServerWritableStream<ReadReq, ReadResp>,
    signal: AbortSignal,
  ): Promise<void> {
    const s = o.getStream()!;
    const name = streamName(s.getStreamIdentifier());
    const RevisionCase = streamsPb.ReadReq.Options.StreamOptions.RevisionOptionCase;
    const from =
      s.getRevisionOptionCase() === RevisionCase.START ? 0 : s.getRevisionOptionCase() === RevisionCase.END ? -1 : s.getRevisionOptionCase() === RevisionCase.REVISION ? revisionToInt64(s.getRevision()) : undefined;
    if (from === undefined) throw handlerException();
    const maxCount = Number(BigInt(o.getCount()));
    // The storage reader refuses a page of 0 events and a negative start (Ensure.Positive / Nonnegative in
    // IndexReader), which the enumerator answers as an unexpected result.
    if (maxCount === 0 || (forwards && from < 0)) throw rpcError(grpc.status.UNKNOWN, 'Unexpected ReadStreamResult: Error');
    const events = log.stream(name);
    if (!events) {
      await send(call, new streamsPb.ReadResp().setStreamNotFound(new streamsPb.ReadResp.StreamNotFound().setStreamIdentifier(streamIdentifier(name))), signal);
      return;
    }
    let sent = 0;
    if (forwards) {
      for (let r = from; r < events.length && sent < maxCount; r++, sent++) await out(events[r]!);
    } else {
      for (let r = from < 0 ? events.length - 1 : Math.min(from, events.length - 1); r >= 0 && sent < maxCount; r--, sent++) await out(events[r]!);
    }
  }

  /** The position a client asked for, checked as the storage reader checks it. */
  function allPosition(all: StreamsPbTypes.ReadReq.Options.AllOptions): TFPos | 'start' | 'end' {
    const Case = streamsPb.ReadReq.Options.AllOptions.AllOptionCase;
    switch (all.getAllOptionCase()) {
      case Case.START:
        return 'start';
      case Case.END:
        return 'end';
      case Case.POSITION: {
        const p = all.getPosition()!;
        const commit = BigInt(p.getCommitPosition());
        const prepare = BigInt(p.getPreparePosition());
        if (commit < prepare) throw handlerException(); // Position's constructor refuses it
        if (commit === ULONG_MAX && prepare === ULONG_MAX) return 'end';
        return tf(commit, prepare);
      }
      default:
        throw handlerException();
    }
  }

  function checkBoundary(pos: TFPos): void {
    if (pos.commit < log.endOfLog() && !log.isRecordBoundary(pos.commit)) throw invalidPosition();
  }

  async function readAll(
    all: StreamsPbTypes.ReadReq.Options.AllOptions,
    forwards: boolean,
    maxCount: number,
    filter: EventFilter,
    out: (e: StoredEvent) => Promise<void>,
  ): Promise<void> {
    const asked = allPosition(all);
    const end = tf(log.endOfLog());
    const from = asked === 'start' ? tf(0n) : asked === 'end' ? end : asked;
    checkBoundary(from);
    let sent = 0;
    if (sent >= maxCount) return;
    const records = forwards ? log.forwardFrom(from) : log.backwardFrom(cmpPos(from, end) > 0 ? end : from);
    for (const r of records) {
      const e = r.event;
      if (!e || (forwards && cmpPos(tf(e.pos), from) < 0) || !filter(e)) continue;
      await out(e);
      if (++sent >= maxCount) return;
    }
  }

  async function subscribeToStream(
    s: StreamsPbTypes.ReadReq.Options.StreamOptions,
    out: (e: StoredEvent) => Promise<void>,
    call: grpc.ServerWritableStream<ReadReq, ReadResp>,
    signal: AbortSignal,
  ): Promise<void> {
    const name = streamName(s.getStreamIdentifier());
    const RevisionCase = streamsPb.ReadReq.Options.StreamOptions.RevisionOptionCase;
    const live = new LiveChannel<StoredEvent>();
    const lastAtConfirmation = log.lastEventNumber(name);
    const unsubscribe = log.subscribe((e) => {
      if (e.streamId === name && e.revision > lastAtConfirmation) live.push(e);
    });
    try {
      await send(call, confirmation(), signal);
      let checkpoint =
        s.getRevisionOptionCase() === RevisionCase.START ? -1 : s.getRevisionOptionCase() === RevisionCase.END ? lastAtConfirmation : revisionToInt64(s.getRevision());
      let seq = 0;
      const goLive = async () => {
        await send(call, caughtUp(), signal);
        for (;;) {
          const next = await live.next(signal);
          const inOrder = next.seq === seq + 1;
          seq = next.seq;
          if (next.item.revision <= checkpoint) continue;
          if (!inOrder) {
            fellBehind++;
            return; // catch up again
          }
          await out(next.item);
          checkpoint = next.item.revision;
        }
      };
      if (checkpoint >= lastAtConfirmation) await goLive();
      for (;;) {
        for (const e of log.stream(name)?.slice(checkpoint + 1) ?? []) {
          await out(e);
          checkpoint = e.revision;
        }
        await goLive();
      }
    } finally {
      unsubscribe();
    }
  }

  const confirmation = () => new streamsPb.ReadResp().setConfirmation(new streamsPb.ReadResp.SubscriptionConfirmation().setSubscriptionId(randomUUID()));
  const caughtUp = () => new streamsPb.ReadResp().setCaughtUp(new streamsPb.ReadResp.CaughtUp());

  async function subscribeToAll(
    o: StreamsPbTypes.ReadReq.Options,
    out: (e: StoredEvent) => Promise<void>,
    call: grpc.ServerWritableStream<ReadReq, ReadResp>,
    signal: AbortSignal,
  ): Promise<void> {
    const filterOptions = o.hasFilter() ? o.getFilter()! : undefined;
    const filter = filterOptions ? toEventFilter(filterOptions) : defaultAllFilter;
    const maxSearchWindow = filterOptions?.getWindowCase() === streamsPb.ReadReq.Options.FilterOptions.WindowCase.MAX ? filterOptions.getMax() : READ_BATCH_SIZE;
    if (filterOptions && filterOptions.getCheckpointintervalmultiplier() === 0) throw handlerException();
    const checkpointInterval = filterOptions ? filterOptions.getCheckpointintervalmultiplier() * maxSearchWindow : undefined;
    const asked = allPosition(o.getAll()!);

    // SubscribeToLive: registered before the confirmation, with the log's last position at that moment.
    type Live = { event: StoredEvent } | { checkpoint: TFPos };
    const live = new LiveChannel<Live>();
    const lastIndexed = log.lastIndexedPosition();
    let intervalCounter = 0;
    const unsubscribe = log.subscribe((e) => {
      if (e.pos <= lastIndexed) return;
      if (filter(e)) live.push({ event: e });
      if (checkpointInterval === undefined) return;
      if (++intervalCounter >= checkpointInterval) {
        live.push({ checkpoint: tf(e.pos) });
        intervalCounter = 0;
      }
    });
    const sendCheckpoint = (p: TFPos) =>
      send(call, new streamsPb.ReadResp().setCheckpoint(new streamsPb.ReadResp.Checkpoint().setCommitPosition(wire(p.commit)).setPreparePosition(wire(p.prepare))), signal);

    try {
      await send(call, confirmation(), signal);
      const confirmationLastPos = tf(lastIndexed);
      // The event or checkpoint most recently sent: events after it and checkpoints at or after it go on.
      let checkpoint = asked === 'start' ? tf(-1n) : asked === 'end' ? confirmationLastPos : asked;
      let lastSentCheckpoint: TFPos | undefined;
      const checkpointOnce = async (p: TFPos) => {
        // There is no checkpoint before the first record (the failsafe of SendCheckpointToSubscription), and
        // MoveNextAsync drops a checkpoint that is not after the last one sent.
        if (p.commit < 0n && p.prepare < 0n) return;
        if (lastSentCheckpoint && cmpPos(p, lastSentCheckpoint) <= 0) return;
        lastSentCheckpoint = p;
        await sendCheckpoint(p);
      };
      let seq = 0;

      const goLive = async (): Promise<void> => {
        await send(call, caughtUp(), signal);
        for (;;) {
          const next = await live.next(signal);
          const inOrder = next.seq === seq + 1;
          seq = next.seq;
          const item = next.item;
          if ('event' in item && cmpPos(tf(item.event.pos), checkpoint) <= 0) continue;
          if ('checkpoint' in item && cmpPos(item.checkpoint, checkpoint) < 0) continue;
          if (!inOrder) {
            // Fell behind (not sent to clients): a checkpoint, if filtered, then catch up from the log.
            fellBehind++;
            if (checkpointInterval !== undefined) await checkpointOnce(checkpoint);
            return;
          }
          if ('event' in item) {
            await out(item.event);
            checkpoint = tf(item.event.pos);
          } else {
            await checkpointOnce(item.checkpoint);
            checkpoint = item.checkpoint;
          }
        }
      };

      const catchUp = async (): Promise<void> => {
        let counter = 0;
        let start = checkpoint.commit < 0n && checkpoint.prepare < 0n ? tf(0n) : checkpoint;
        for (;;) {
          if (signal.aborted) throw new Cancelled();
          checkBoundary(start);
          const page = checkpointInterval === undefined ? log.readPage(start, READ_BATCH_SIZE, Number.MAX_SAFE_INTEGER, filter) : log.readPage(start, READ_BATCH_SIZE, maxSearchWindow, filter);
          for (const e of page.events) {
            if (cmpPos(tf(e.pos), checkpoint) <= 0) continue;
            await out(e);
            checkpoint = tf(e.pos);
          }
          if (checkpointInterval === undefined) {
            if (page.events.length < READ_BATCH_SIZE) return;
          } else {
            // The page's start is a checkpoint once the page has moved past it (not on an empty page: the
            // record there has not been looked at yet).
            if (cmpPos(checkpoint, page.currentPos) < 0 && cmpPos(page.currentPos, page.nextPos) < 0) checkpoint = page.currentPos;
            counter += page.considered;
            if (page.isEnd) {
              // Going live always sends one; with nothing better, the first record of the log.
              if (cmpPos(checkpoint, tf(0n)) < 0 && cmpPos(tf(0n), page.nextPos) < 0) checkpoint = tf(0n);
              await checkpointOnce(checkpoint);
              return;
            }
            if (counter >= checkpointInterval) {
              counter %= checkpointInterval;
              await checkpointOnce(checkpoint);
            }
          }
          start = page.nextPos;
          await new Promise((r) => setImmediate(r)); // one page per turn, as the server's reads are queued
        }
      };

      if (cmpPos(checkpoint, confirmationLastPos) >= 0) await goLive();
      for (;;) {
        await catchUp();
        await goLive();
      }
    } finally {
      unsubscribe();
    }
  }

  // --- wiring --------------------------------------------------------------------------------------------

  const server = new grpc.Server();
  server.addService(featuresGrpc.ServerFeaturesService, features);
  const streams: Partial<StreamsGrpcTypes.IStreamsServer> = { read, append, batchAppend };
  server.addService(streamsGrpc.StreamsService, streams as grpc.UntypedServiceImplementation);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );

  return {
    connectionString: `esdb://127.0.0.1:${port}?tls=false`,
    callCounts: () => ({ ...counts }),
    activeSubscriptions: () => subscriptions.size,
    activeReads: () => reads.size,
    fellBehind: () => fellBehind,
    eventsSent: () => eventsSent,
    holdReads() {
      let release!: () => void;
      const hold = new Promise<void>((resolve) => (release = resolve));
      held = hold;
      return () => {
        if (held === hold) held = undefined;
        release();
      };
    },
    holdNextAppend(prefix, options = {}) {
      let arrive!: () => void;
      const reached = new Promise<void>((r) => (arrive = r));
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      appendHold = { prefix, arrive, released, answerLost: options.answerLost ?? false };
      return { reached, release };
    },
    dropSubscriptions() {
      for (const [controller, call] of [...subscriptions]) {
        subscriptions.delete(controller);
        controller.abort();
        call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'Server Is Not Ready' });
      }
    },
    writeEvent(streamId, type, data, metadata) {
      system(streamId, type, data, metadata);
    },
    async close() {
      if (closed) return;
      closed = true;
      if (linkFlush) clearImmediate(linkFlush);
      for (const [controller, shut] of [...calls]) {
        controller.abort();
        shut();
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 500);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
  };
}
