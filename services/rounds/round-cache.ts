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
 * decision that appends nothing is made again on a fresh read (see KnownState). Bounded in rounds and
 * in bytes; the round used least recently goes first. Snapshots are immutable (the decider returns new
 * state), so they are shared, not copied.
 *
 * The bound in bytes is what keeps a partner from taking the process's memory: a round holds every
 * transaction's request body (up to 64 KB) and wallet reply (up to 1 MiB, kept verbatim), so a wallet
 * that pads its replies would otherwise make 20,000 cached rounds hold gigabytes. A miss costs one read
 * of the round, never a wrong decision.
 */
export class RoundCache {
  private readonly rounds = new Map<string, RoundSnapshot & { bytes: number }>();
  private bytes = 0;

  constructor(
    private readonly maxRounds = 20_000,
    private readonly maxBytes = 32 * 1024 * 1024,
  ) {}

  /** What this process knows of the round, or undefined. */
  get(roundStream: string): KnownState<RoundState> | undefined {
    const known = this.rounds.get(roundStream);
    if (!known) return undefined;
    this.rounds.delete(roundStream);
    this.rounds.set(roundStream, known);
    return { state: known.state, revision: known.revision, unverified: true };
  }

  /**
   * Keeps a snapshot unless a later one is already kept. A round that is over (complete, every
   * transaction settled for good) is let go: little more comes to it. So is one larger than the whole
   * bound in bytes.
   */
  put(roundStream: string, snapshot: RoundSnapshot): void {
    const kept = this.rounds.get(roundStream);
    if (kept && kept.revision > snapshot.revision) return;
    if (kept) this.drop(roundStream, kept);
    if (isClosed(snapshot.state) && [...snapshot.state.txs.values()].every((t) => isFinal(t.status))) return;
    const bytes = roundBytes(snapshot.state);
    if (bytes > this.maxBytes) return;
    this.rounds.set(roundStream, { state: snapshot.state, revision: snapshot.revision, bytes });
    this.bytes += bytes;
    for (const [oldest, entry] of this.rounds) {
      if (this.rounds.size <= this.maxRounds && this.bytes <= this.maxBytes) break;
      this.drop(oldest, entry);
    }
  }

  private drop(roundStream: string, entry: { bytes: number }): void {
    this.rounds.delete(roundStream);
    this.bytes -= entry.bytes;
  }

  get size(): number {
    return this.rounds.size;
  }

  /** What the kept rounds hold, as roundBytes estimates it. */
  get heldBytes(): number {
    return this.bytes;
  }
}

/**
 * About what a round takes in memory: a fixed part per round and per transaction (the objects, the
 * map; measured at about 1.8 KB for a one-BET round in a heap snapshot), plus its strings that come
 * from partners, two bytes a character (the most a JavaScript string takes).
 */
export function roundBytes(state: RoundState): number {
  let bytes = 512;
  for (const t of state.txs.values()) bytes += 1024 + 2 * (t.walletBody.length + (t.reply?.body.length ?? 0) + (t.lastError?.length ?? 0));
  return bytes;
}
