import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { isRefusal } from '../../shared/decider.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';
import { withTransaction, type Pool } from '../../shared/db/pool.ts';
import type { Projection } from '../../projections/runner.ts';
import { roundDecider, type AttemptBy, type RoundCommand, type RoundState } from '../../services/rounds/decider.ts';
import type { TransactionRequest } from '../../services/rounds/events.ts';

/**
 * Random round histories for property tests of read models: random commands run through the rounds
 * decider (refusals append nothing), so each history is one the ledger could record, and their events
 * cut into random batches as the projection runner's batches vary with load.
 */

export const ROUNDS = ['r0', 'r1', 'r2'];
export const stream = (roundId: string) => `round|studio-a|op-1|${roundId}`;

export type Step =
  | { kind: 'tx'; round: number; type: 'BET' | 'WIN' | 'ROLLBACK'; amount: number; complete: boolean; target: number; currency: string; player: string; wrongAmount: boolean }
  | { kind: 'outcome'; round: number; target: number; outcome: 'OK' | 'DECLINED' | 'failed' | 'timed_out'; by: AttemptBy }
  | { kind: 'dead'; round: number; target: number }
  | { kind: 'redrive'; round: number; target: number }
  | { kind: 'close'; round: number }
  | { kind: 'tick'; seconds: number };

export const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('tx' as const),
      round: fc.nat(ROUNDS.length - 1),
      type: fc.constantFrom('BET' as const, 'BET' as const, 'WIN' as const, 'ROLLBACK' as const),
      amount: fc.nat(10_000),
      complete: fc.boolean(),
      target: fc.nat(50),
      currency: fc.constantFrom('EUR', 'EUR', 'EUR', 'USD'),
      player: fc.constantFrom('p1', 'p1', 'p1', 'p2'),
      wrongAmount: fc.boolean(),
    }),
  },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('outcome' as const), round: fc.nat(ROUNDS.length - 1), target: fc.nat(50), outcome: fc.constantFrom('OK' as const, 'DECLINED' as const, 'failed' as const, 'timed_out' as const), by: fc.constantFrom<AttemptBy>('submission', 'worker') }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('dead' as const), round: fc.nat(ROUNDS.length - 1), target: fc.nat(50) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('close' as const), round: fc.nat(ROUNDS.length - 1) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('redrive' as const), round: fc.nat(ROUNDS.length - 1), target: fc.nat(50) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('tick' as const), seconds: fc.nat(120) }) },
);

export interface History {
  events: RecordedEvent[];
  states: Map<string, RoundState>;
}

/** Runs the steps through the decider: refusals append nothing, everything else is recorded as the ledger would. */
export function record(steps: Step[]): History {
  let clock = Date.parse('2026-11-24T12:00:00Z');
  let n = 0;
  const states = new Map<string, RoundState>(ROUNDS.map((r) => [stream(r), roundDecider.initialState()]));
  const revisions = new Map<string, number>();
  const events: RecordedEvent[] = [];
  for (const s of steps) {
    clock += 1000;
    const now = new Date(clock);
    if (s.kind === 'tick') {
      clock += s.seconds * 1000;
      continue;
    }
    const roundId = ROUNDS[s.round]!;
    const id = stream(roundId);
    const state = states.get(id)!;
    const txs = [...state.txs.values()];
    const pick = (i: number) => (txs.length === 0 ? undefined : txs[i % txs.length]);
    let command: RoundCommand | undefined;
    switch (s.kind) {
      case 'tx': {
        const bet = s.type === 'ROLLBACK' ? pick(s.target) : undefined;
        if (s.type === 'ROLLBACK' && !bet) continue;
        const request: TransactionRequest = {
          transactionId: `tx-${n++}`,
          sessionToken: 's1',
          type: s.type,
          roundId,
          roundComplete: s.type !== 'ROLLBACK' && s.complete,
          ...(bet ? { originalTransactionId: bet.request.transactionId } : {}),
          playerRef: s.player,
          amount: bet && !s.wrongAmount ? bet.request.amount : s.amount,
          currency: bet ? bet.request.currency : s.currency,
          gameId: 'fruit-1',
        };
        command = { type: 'RecordTransaction', request, providerId: 'studio-a', operatorId: 'op-1', origin: 'provider', contentHash: request.transactionId, session: 'active', now };
        break;
      }
      case 'outcome': {
        const tx = pick(s.target);
        if (!tx) continue;
        const outcome =
          s.outcome === 'OK' || s.outcome === 'DECLINED'
            ? { kind: 'reply' as const, reply: { status: s.outcome, balance: 1000, body: '{}' } }
            : s.outcome === 'failed'
              ? { kind: 'failed' as const, detail: 'wallet answered 500', httpStatus: 500 }
              : { kind: 'timed_out' as const };
        command = { type: 'RecordOutcome', transactionId: tx.request.transactionId, attempt: tx.attempts + 1, outcome, by: s.by, now };
        break;
      }
      case 'redrive': {
        // An admin's re-drive: refused unless the transaction is a dead credit (one is picked when there is one).
        const dead = txs.filter((t) => t.status === 'dead' || t.status === 'invalid');
        const tx = dead.length > 0 ? dead[s.target % dead.length] : pick(s.target);
        if (!tx) continue;
        command = { type: 'Redrive', transactionId: tx.request.transactionId, by: 'ops', reason: 'wallet fixed', now };
        break;
      }
      case 'dead': {
        const tx = pick(s.target);
        if (!tx) continue;
        command = { type: 'DeadLetter', transactionId: tx.request.transactionId, retryWindowSeconds: 60, now };
        break;
      }
      case 'close':
        command = { type: 'CloseStaleRound', staleAfterSeconds: 30, callsUnderWay: [], now };
        break;
    }
    const decision = roundDecider.decide(command, state);
    if (isRefusal(decision)) continue;
    let next = state;
    for (const e of decision) {
      const revision = (revisions.get(id) ?? -1) + 1;
      revisions.set(id, revision);
      next = roundDecider.evolve(next, e, { revision });
      events.push({ id: randomUUID(), streamId: id, revision, type: e.type, data: e.data as RecordedEvent['data'], metadata: {}, position: `1.${events.length + 1}`, createdAt: now });
    }
    states.set(id, next);
  }
  return { events, states };
}

/** The events cut into consecutive batches at the given points (the runner's batches vary with load). */
export function batches(events: RecordedEvent[], cuts: number[]): RecordedEvent[][] {
  const points = [...new Set(cuts.map((c) => c % Math.max(events.length, 1)))].sort((a, b) => a - b);
  const out: RecordedEvent[][] = [];
  let from = 0;
  for (const p of [...points, events.length]) {
    if (p > from) out.push(events.slice(from, p));
    from = Math.max(from, p);
  }
  return out;
}


/** Applies the batches to the projection in one transaction, from empty tables when `fresh` (as a rebuild would). */
export async function applyBatches(pool: Pool, projection: Projection, batches: RecordedEvent[][], fresh = true): Promise<void> {
  await withTransaction(pool, async (client) => {
    if (fresh) await projection.reset(client);
    for (const batch of batches) await projection.apply(batch, client);
  });
}
