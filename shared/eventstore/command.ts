import { randomUUID } from 'node:crypto';
import { WrongExpectedRevisionError, type AppendResult, type EventStore, type ExpectedRevision, type JsonObject, type Position, type RecordedEvent } from './port.ts';

/** A domain event before it is stored: the discriminated-union member, with its data. */
export interface DomainEvent<T extends string = string, D extends JsonObject = JsonObject> {
  type: T;
  data: D;
}

export interface Decider<State, Event extends DomainEvent> {
  initialState: () => State;
  evolve: (state: State, event: Event, recorded: RecordedEvent) => State;
}

export interface CommandResult<State, Event extends DomainEvent, R> {
  events: Event[];
  /** The state the decision was made on. */
  state: State;
  /** The state with the new events applied. */
  next: State;
  /** Revision of the last event in the stream after the command (-1: stream still empty). */
  revision: number;
  /** Global position of the last event appended; undefined when nothing was appended. */
  position: Position | undefined;
  result: R;
}

export function fold<State, Event extends DomainEvent>(decider: Decider<State, Event>, recorded: RecordedEvent[]): State {
  return recorded.reduce((s, r) => decider.evolve(s, r as unknown as Event, r), decider.initialState());
}

/** A stream's state and the revision it was read at (-1 when the stream does not exist). */
export async function readState<State, Event extends DomainEvent>(
  store: EventStore,
  streamId: string,
  decider: Decider<State, Event>,
): Promise<{ state: State; revision: number }> {
  const recorded = await store.readStream(streamId);
  return { state: fold(decider, recorded), revision: recorded.length === 0 ? -1 : recorded[recorded.length - 1]!.revision };
}

/** The state after events the caller appended (appended: what the store answered). */
export function evolveAppended<State, Event extends DomainEvent>(decider: Decider<State, Event>, state: State, streamId: string, events: Event[], appended: AppendResult): State {
  const base = appended.nextRevision - events.length + 1;
  return events.reduce(
    (s, e, i) => decider.evolve(s, e, { id: '', streamId, revision: base + i, type: e.type, data: e.data, metadata: {}, position: appended.position, createdAt: new Date() }),
    state,
  );
}

/**
 * A state the caller already holds, and the revision it was folded at. `unverified`: it may be behind
 * the stream (a cache). A decision made on it stands only if it appends, since the append at that
 * revision proves nothing came after; a decision that appends nothing, or refuses, may rest on an event
 * it has not seen (an absence), so the stream is then read and the decision made again.
 */
export interface KnownState<State> {
  state: State;
  revision: number;
  unverified?: boolean;
}

/**
 * Reads a stream, folds it into state, lets `decide` return the events to append (and a result for the
 * caller), and appends them at the revision it read. When another writer got there first, it reads and
 * decides again: the decision is always made against the stream's latest history.
 */
export async function handleCommand<State, Event extends DomainEvent, R>(
  store: EventStore,
  streamId: string,
  decider: Decider<State, Event>,
  decide: (state: State) => { events: Event[]; result: R },
  options: { maxAttempts?: number; metadata?: JsonObject; known?: KnownState<State> } = {},
): Promise<CommandResult<State, Event, R>> {
  const maxAttempts = options.maxAttempts ?? 20;
  let known = options.known;
  for (let attempt = 1; ; attempt++) {
    // The first decision may use state the caller holds; after a conflict it is always read afresh.
    let state: State;
    let revision: number;
    let verified = true;
    if (known) {
      ({ state, revision } = known);
      verified = known.unverified !== true;
      known = undefined;
    } else {
      const recorded = await store.readStream(streamId);
      state = fold(decider, recorded);
      revision = recorded.length === 0 ? -1 : recorded[recorded.length - 1]!.revision;
    }
    let decision: { events: Event[]; result: R } | undefined;
    try {
      decision = decide(state);
    } catch (err) {
      if (verified) throw err;
    }
    if (!verified && (decision === undefined || decision.events.length === 0)) {
      // Not a conflict: decide again on the stream as it is, without spending an attempt.
      attempt--;
      continue;
    }
    const { events, result } = decision!;
    if (events.length === 0) return { events, state, next: state, revision, position: undefined, result };
    const expected: ExpectedRevision = revision === -1 ? 'no_stream' : revision;
    try {
      const appended = await store.append(
        streamId,
        events.map((e) => ({ id: randomUUID(), type: e.type, data: e.data, ...(options.metadata ? { metadata: options.metadata } : {}) })),
        expected,
      );
      const next = evolveAppended(decider, state, streamId, events, appended);
      return { events, state, next, revision: appended.nextRevision, position: appended.position, result };
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError) || attempt >= maxAttempts) throw err;
    }
  }
}
