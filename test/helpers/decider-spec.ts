import { expect } from 'vitest';
import { isRefusal, type Decider, type DomainEvent, type Refusal } from '../../shared/decider.ts';

/**
 * given(events) / when(command) / then(events | refusal): a decider spec reads as the rule it checks.
 * The events are folded with the decider's own evolve (revisions 0, 1, ...), then its decide answers.
 *
 *   spec.given(recorded(bet)).when(rollback).then([recorded(rollback), voided(bet)])
 *   spec.given(recorded(bet)).when(win).thenRefuses('round-in-another-currency')
 */
export function deciderSpec<C, S, E extends DomainEvent, R extends Refusal>(decider: Decider<C, S, E, R>) {
  return {
    given(...events: E[]) {
      const state = events.reduce((s, e, revision) => decider.evolve(s, e, { revision }), decider.initialState());
      return {
        /** The state the events fold into, for a rule that is a pure function of it. */
        state,
        when(command: C) {
          const decision = decider.decide(command, state);
          return {
            decision,
            /** Exactly these events (compared deeply). */
            then(expected: E[]) {
              expect(decision).toEqual(expected);
            },
            /** Events matching these shapes, in order (toMatchObject on each). */
            thenMatches(expected: Array<Partial<E> | Record<string, unknown>>) {
              if (isRefusal(decision)) throw new Error(`expected events, got refusal ${decision.kind}`);
              expect(decision).toHaveLength(expected.length);
              expected.forEach((e, i) => expect(decision[i]).toMatchObject(e));
            },
            /** Nothing to append, and no refusal (an idempotent repeat, an outcome after the fact). */
            thenNothing() {
              expect(decision).toEqual([]);
            },
            /** This refusal: its kind, or the whole refusal with its details. */
            thenRefuses(expected: R['kind'] | R) {
              expect(isRefusal(decision), `expected a refusal, got ${JSON.stringify(decision)}`).toBe(true);
              if (typeof expected === 'string') expect((decision as R).kind).toBe(expected);
              else expect(decision).toEqual(expected);
            },
          };
        },
      };
    },
  };
}
