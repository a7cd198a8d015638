/**
 * The decider pattern (oskardudycz/EventSourcing.NodeJS samples/decider): a capability's rules as three
 * pure functions. `evolve` folds the stream's events into state; `decide` answers a command on that
 * state with the events to append, or with a refusal. No I/O, no clock (the time comes in the command),
 * so every rule is specified by given(events) / when(command) / then(events | refusal).
 */

/** A domain event before it is stored: the discriminated-union member, with its data. */
export interface DomainEvent<T extends string = string, D extends { [key: string]: unknown } = { [key: string]: unknown }> {
  type: T;
  data: D;
}

/** What evolve may know of a stored event beyond its type and data. */
export interface EventMeta {
  /** 0-based revision of the event in its stream. */
  revision: number;
}

/**
 * A rule said no. Data, not an HTTP status: the API maps each kind to its status and message in one
 * table (services/api/answers.ts), so the contract's error list can be checked against one file.
 */
export interface Refusal<K extends string = string> {
  kind: K;
}

export type Decision<Event, R extends Refusal> = Event[] | R;

export interface Decider<Command, State, Event extends DomainEvent, R extends Refusal = never> {
  initialState: () => State;
  evolve: (state: State, event: Event, meta: EventMeta) => State;
  decide: (command: Command, state: State) => Decision<Event, R>;
}

/** The error a command handler throws for a refusal; the API's error renderer looks its kind up. */
export class Refused<R extends Refusal = Refusal> extends Error {
  override name = 'Refused';
  constructor(readonly refusal: R) {
    super(`refused: ${refusal.kind}`);
  }
}

export const isRefusal = <E, R extends Refusal>(d: Decision<E, R>): d is R => !Array.isArray(d);

/** The events of a decision; throws Refused for a refusal. */
export function eventsOrThrow<E, R extends Refusal>(d: Decision<E, R>): E[] {
  if (isRefusal(d)) throw new Refused(d);
  return d;
}

/** Folds stored events (revision order) into state. */
export function fold<State, Event extends DomainEvent>(
  decider: Pick<Decider<never, State, Event, Refusal>, 'initialState' | 'evolve'>,
  events: ReadonlyArray<{ type: string; data: unknown; revision: number }>,
): State {
  return events.reduce((s, e) => decider.evolve(s, e as unknown as Event, e), decider.initialState());
}
