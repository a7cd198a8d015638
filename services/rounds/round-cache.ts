import type { KnownState } from '../../shared/eventstore/command.ts';
import { isClosed, isFinal, type RoundState } from './decider.ts';

/** A round's state and the revision it was folded at. */
export interface RoundSnapshot {
  state: RoundState;
  revision: number;
}

/**
 * The rounds this process last wrote or read, each with the revision it was folded at, so that the
 * next transaction of a round is decided without reading the round again. Another process may have
 * appended since, so what it hands out is unverified: the append at that revision checks it, and a
 * decision that appends nothing is made again on a fresh read (see KnownState). Bounded; the round
 * used least recently goes first. Snapshots are immutable (the decider returns new state), so they are
 * shared, not copied.
 */
export class RoundCache {
  private readonly rounds = new Map<string, RoundSnapshot>();

  constructor(private readonly max = 20_000) {}

  /** What this process knows of the round, or undefined. */
  get(roundStream: string): KnownState<RoundState> | undefined {
    const known = this.rounds.get(roundStream);
    if (!known) return undefined;
    this.rounds.delete(roundStream);
    this.rounds.set(roundStream, known);
    return { ...known, unverified: true };
  }

  /**
   * Keeps a snapshot unless a later one is already kept. A round that is over (complete, every
   * transaction settled for good) is let go: little more comes to it.
   */
  put(roundStream: string, snapshot: RoundSnapshot): void {
    const kept = this.rounds.get(roundStream);
    if (kept && kept.revision > snapshot.revision) return;
    this.rounds.delete(roundStream);
    if (isClosed(snapshot.state) && [...snapshot.state.txs.values()].every((t) => isFinal(t.status))) return;
    this.rounds.set(roundStream, { state: snapshot.state, revision: snapshot.revision });
    if (this.rounds.size > this.max) this.rounds.delete(this.rounds.keys().next().value!);
  }

  get size(): number {
    return this.rounds.size;
  }
}
