import { randomUUID } from 'node:crypto';
import { fold, isRefusal, Refused, type Decider, type DomainEvent, type Refusal } from '../decider.ts';
import { WrongExpectedRevisionError, type AppendResult, type EventStore, type ExpectedRevision, type JsonObject, type Position, type StreamStore } from './port.ts';

export interface CommandResult<State, Event extends DomainEvent> {
  events: Event[];
  /** The state the decision was made on. */
  state: State;
  /** The state with the new events applied. */
  next: State;
  /** Revision of the last event in the stream after the command (-1: stream still empty). */
  revision: number;
  /** Global position of the last event appended; undefined when nothing was appended. */
  position: Position | undefined;
}

/** A stream's state and the revision it was read at (-1 when the stream does not exist). */
export async function readState<State, Event extends DomainEvent>(
  store: Pick<EventStore, 'readStream'>,
  streamId: string,
  decider: Pick<Decider<never, State, Event, Refusal>, 'initialState' | 'evolve'>,
): Promise<{ state: State; revision: number; position: Position | undefined }> {
  const recorded = await store.readStream(streamId);
  const last = recorded.at(-1);
  // position: the last event's in the global log, for a read model to be waited for (undefined: no event).
  return { state: fold(decider, recorded), revision: last ? last.revision : -1, position: last?.position };
}

/** The state after events the caller appended (appended: what the store answered). */
export function evolveAppended<State, Event extends DomainEvent>(
  decider: Pick<Decider<never, State, Event, Refusal>, 'evolve'>,
  state: State,
  events: Event[],
  appended: AppendResult,
): State {
  const base = appended.nextRevision - events.length + 1;
  return events.reduce((s, e, i) => decider.evolve(s, e, { revision: base + i }), state);
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
 * The command handler: reads the stream, folds it, asks the decider, and appends its events at the
 * revision it read. When another writer got there first, it reads and decides again: the decision is
 * always made against the stream's latest history. A refusal is thrown as Refused.
 */
export async function handleCommand<Command, State, Event extends DomainEvent, R extends Refusal>(
  store: StreamStore,
  streamId: string,
  decider: Decider<Command, State, Event, R>,
  command: Command,
  options: { maxAttempts?: number; metadata?: JsonObject; known?: KnownState<State> } = {},
): Promise<CommandResult<State, Event>> {
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
      ({ state, revision } = await readState(store, streamId, decider));
    }
    const decision = decider.decide(command, state);
    if (!verified && (isRefusal(decision) || decision.length === 0)) {
      // Not a conflict: decide again on the stream as it is, without spending an attempt.
      attempt--;
      continue;
    }
    if (isRefusal(decision)) throw new Refused(decision);
    const events = decision;
    if (events.length === 0) return { events, state, next: state, revision, position: undefined };
    const expected: ExpectedRevision = revision === -1 ? 'no_stream' : revision;
    try {
      const appended = await store.append(
        streamId,
        events.map((e) => ({ id: randomUUID(), type: e.type, data: e.data, ...(options.metadata ? { metadata: options.metadata } : {}) })),
        expected,
      );
      return { events, state, next: evolveAppended(decider, state, events, appended), revision: appended.nextRevision, position: appended.position };
    } catch (err) {
      if (!(err instanceof WrongExpectedRevisionError) || attempt >= maxAttempts) throw err;
    }
  }
}
