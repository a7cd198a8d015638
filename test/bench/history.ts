/**
 * A large, realistic history for the benches: BET+WIN rounds over 31 days (90 % for one operator, three
 * games in two currencies, 2 % declined, 0.5 % pending, 0.5 % dead), appended through the event-store
 * port by concurrent writers, from a fixed seed: the same size gives the same history.
 */
import { randomUUID } from 'node:crypto';
import type { RoundEvent } from '../../services/rounds/events.ts';
import type { EventStore, JsonObject, NewEvent } from '../../shared/eventstore/port.ts';
import { OP1, OP2 } from '../helpers/catalog.ts';
import { prng } from '../helpers/prng.ts';

export const DAY = 86_400_000;
/** The history's 31 days, well in the past: every interval asked for is wholly in the past. */
export const START = Date.parse('2026-09-01T00:00:00Z');
export const SPAN = 31 * DAY;
const PLAYERS = 20_000;

const GAMES = [
  { providerId: 'studio-a', gameId: 'fruit-1', currency: 'EUR' },
  { providerId: 'studio-a', gameId: 'gems-2', currency: 'EUR' },
  { providerId: 'studio-b', gameId: 'dice-9', currency: 'GBP' },
];

interface RoundPlan {
  stream: string;
  events: NewEvent[];
  transactions: number;
}

/** One round: a BET and (unless declined) its WIN, with their outcomes, recorded at `at`. */
export function plan(i: number, rnd: () => number, at: number, replyBody = '{}'): RoundPlan & { operatorId: string; roundId: string; gameId: string; playerRef: string } {
  const operatorId = rnd() < 0.9 ? OP1.id : OP2.id;
  const g = GAMES[Math.floor(rnd() * GAMES.length)]!;
  const playerRef = `bp-${Math.floor(rnd() * PLAYERS)}`;
  const roundId = `br-${i}`;
  const stream = `round|${g.providerId}|${operatorId}|${roundId}`;
  const iso = (offset: number) => new Date(at + offset).toISOString();
  const base = { sessionToken: 'bench', roundId, playerRef, currency: g.currency, gameId: g.gameId };
  const recorded = (transactionId: string, type: 'BET' | 'WIN', amount: number, offset: number, roundComplete: boolean): RoundEvent => {
    const request = { ...base, transactionId, type, roundComplete, amount };
    return { type: 'TransactionRecorded', data: { providerId: g.providerId, operatorId, origin: 'provider', request, walletBody: JSON.stringify(request), contentHash: transactionId, recordedAt: iso(offset) } };
  };
  const settled = (transactionId: string, outcome: 'applied' | 'declined', offset: number): RoundEvent => ({
    type: 'TransactionSettled',
    data: { transactionId, outcome, reply: { status: outcome === 'applied' ? 'OK' : 'DECLINED', balance: 10_000, body: replyBody }, attempt: 1, settledAt: iso(offset) },
  });
  const bet = `${roundId}-b`;
  const win = `${roundId}-w`;
  const stake = 10 + Math.floor(rnd() * 990);
  const fate = rnd();
  const events: RoundEvent[] = [recorded(bet, 'BET', stake, 0, false)];
  if (fate < 0.02) {
    events.push(settled(bet, 'declined', 5));
  } else {
    events.push(settled(bet, 'applied', 5), recorded(win, 'WIN', Math.floor(rnd() * 2 * stake), 900, true));
    if (fate < 0.025) events.push({ type: 'TransactionAttemptFailed', data: { transactionId: win, outcome: 'failed', detail: 'wallet answered 503', httpStatus: 503, attempt: 1, failedAt: iso(910) } });
    else if (fate < 0.03) events.push({ type: 'TransactionDeadLettered', data: { transactionId: win, attempts: 40, lastError: 'wallet answered 503', deadLetteredAt: iso(DAY) } });
    else events.push(settled(win, 'applied', 905));
  }
  const transactions = events.filter((e) => e.type === 'TransactionRecorded').length;
  return { stream, operatorId, roundId, gameId: g.gameId, playerRef, transactions, events: events.map((e) => ({ id: randomUUID(), type: e.type, data: e.data as unknown as JsonObject })) };
}


export interface History {
  /** A sample of the rounds (the first 100,000, then 1 %). */
  rounds: Array<{ operatorId: string; roundId: string; gameId: string; playerRef: string }>;
  roundCount: number;
  made: number;
  events: number;
  seconds: number;
}

/**
 * Appends rounds until `wanted` transactions are recorded, `concurrency` appends at a time; with
 * `replyBytes`, every outcome's reply body is that many characters of random text (one text for all, from
 * the seed: a wallet of large replies).
 */
export async function appendHistory(store: EventStore, wanted: number, concurrency: number, replyBytes?: number): Promise<History> {
  const rnd = prng(20261125);
  const replyBody = replyBytes === undefined ? '{}' : Array.from({ length: replyBytes }, () => String.fromCharCode(97 + Math.floor(rnd() * 26))).join('');
  const rounds: History['rounds'] = [];
  let made = 0;
  let events = 0;
  let i = 0;
  const t0 = performance.now();
  const next = (): RoundPlan | undefined => {
    if (made >= wanted) return undefined;
    const at = START + Math.floor((made / wanted) * (SPAN - DAY)) + Math.floor(rnd() * 1000);
    const p = plan(i++, rnd, at, replyBody);
    made += p.transactions;
    events += p.events.length;
    if (rounds.length < 100_000 || rnd() < 0.01) rounds.push(p);
    return p;
  };
  let lastReport = Date.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let p = next(); p; p = next()) {
        await store.append(p.stream, p.events, 'no_stream');
        if (Date.now() - lastReport > 10_000) {
          lastReport = Date.now();
          process.stderr.write(`  history: ${made.toLocaleString('en')} of ${wanted.toLocaleString('en')} transactions\n`);
        }
      }
    }),
  );
  return { rounds, roundCount: i, made, events, seconds: (performance.now() - t0) / 1000 };
}
