import type { Migration } from '../../shared/db/migrations.ts';
import type { PoolClient } from '../../shared/db/pool.ts';
import type { RecordedEvent } from '../../shared/eventstore/port.ts';
import type { Projection } from '../../projections/runner.ts';
import { periodStart } from '../../shared/periods.ts';
import { ROUND_EVENT_TYPES, roundStreamOperator, type RoundEvent } from '../rounds/events.ts';

/**
 * What the console's overview charts (issue #23), per operator and minute: transactions recorded, wallet
 * calls made, how many failed (no usable answer: an error status, no answer in time, unreachable), and
 * how long they took as a histogram, so that p50 and p99 of any span are read from a few rows (their
 * histograms added) instead of from every call.
 */
export const consoleMigrations: Migration[] = [
  {
    id: 'rm-console-001',
    sql: `
      CREATE TABLE rm_console_minutes (
        operator_id text NOT NULL,
        minute timestamptz NOT NULL,
        transactions int NOT NULL,
        calls int NOT NULL,
        failures int NOT NULL,
        latency int[] NOT NULL,
        PRIMARY KEY (operator_id, minute)
      );
      CREATE INDEX rm_console_minutes_time_idx ON rm_console_minutes (minute);
      -- Not a read model: how far behind the log each projection was, per minute (the most seen), as the
      -- projector processes sample it (see lag-history.ts). Kept two days.
      CREATE TABLE console_lag_minutes (
        name text NOT NULL,
        minute timestamptz NOT NULL,
        events_behind int NOT NULL,
        ms_behind bigint NOT NULL,
        PRIMARY KEY (minute, name)
      );
    `,
  },
];

/** Buckets of the latency histogram: 0 holds calls under 1 ms, bucket i >= 1 those in [1.25^(i-1), 1.25^i) ms. */
export const LATENCY_BUCKETS = 64;
const RATIO = 1.25;
export const latencyBucket = (ms: number): number => (ms < 1 ? 0 : Math.min(LATENCY_BUCKETS - 1, 1 + Math.floor(Math.log(ms) / Math.log(RATIO))));
/** The upper bound of a bucket, in ms: a percentile read from the histogram is at most this (25 % above the truth). */
export const bucketUpperMs = (i: number): number => (i === 0 ? 1 : RATIO ** i);

/** The p-th percentile (0..1) of a histogram, as its bucket's upper bound; null when it holds nothing. */
export function percentileMs(histogram: readonly number[], p: number): number | null {
  const total = histogram.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const rank = Math.ceil(p * total);
  let seen = 0;
  for (let i = 0; i < histogram.length; i++) {
    seen += histogram[i]!;
    if (seen >= rank) return Math.round(bucketUpperMs(i) * 10) / 10;
  }
  return Math.round(bucketUpperMs(histogram.length - 1) * 10) / 10;
}

const minuteOf = (iso: string): string => periodStart(iso, 60_000);

interface Minute {
  operatorId: string;
  minute: string;
  transactions: number;
  calls: number;
  failures: number;
  latency: number[];
}

/** The batch's counts per operator and minute. */
export function foldMinutes(events: RecordedEvent[]): Minute[] {
  const minutes = new Map<string, Minute>();
  const at = (operatorId: string, iso: string): Minute => {
    const minute = minuteOf(iso);
    const key = `${operatorId}\n${minute}`;
    let m = minutes.get(key);
    if (!m) {
      m = { operatorId, minute, transactions: 0, calls: 0, failures: 0, latency: new Array<number>(LATENCY_BUCKETS).fill(0) };
      minutes.set(key, m);
    }
    return m;
  };
  for (const recorded of events) {
    const event = recorded as unknown as RoundEvent;
    switch (event.type) {
      case 'TransactionRecorded':
        at(event.data.operatorId, event.data.recordedAt).transactions += 1;
        break;
      case 'TransactionSettled':
      case 'TransactionAttemptFailed': {
        const operatorId = roundStreamOperator(recorded.streamId);
        // Calls recorded before their duration was (older events) count in no latency chart.
        if (operatorId === undefined || event.data.durationMs === undefined) break;
        const m = at(operatorId, event.type === 'TransactionSettled' ? event.data.settledAt : event.data.failedAt);
        m.calls += 1;
        if (event.type === 'TransactionAttemptFailed') m.failures += 1;
        m.latency[latencyBucket(event.data.durationMs)]! += 1;
        break;
      }
      case 'TransactionDeadLettered':
      case 'TransactionVoided':
      case 'TransactionRedriven':
      case 'TransactionResent':
      case 'RoundForceClosed':
        break;
      default: {
        const unknown: never = event;
        return unknown;
      }
    }
  }
  return [...minutes.values()];
}

export const consoleProjection: Projection = {
  name: 'console',
  tables: [{ name: 'rm_console_minutes', key: ['operator_id', 'minute'] }],
  eventTypes: ROUND_EVENT_TYPES,
  async apply(events: RecordedEvent[], tx: PoolClient) {
    const minutes = foldMinutes(events);
    if (minutes.length === 0) return;
    await tx.query(
      `INSERT INTO rm_console_minutes AS m (operator_id, minute, transactions, calls, failures, latency)
       SELECT x.operator_id, x.minute, x.transactions, x.calls, x.failures, string_to_array(x.latency, ',')::int[]
       FROM unnest($1::text[], $2::timestamptz[], $3::int[], $4::int[], $5::int[], $6::text[]) AS x(operator_id, minute, transactions, calls, failures, latency)
       ON CONFLICT (operator_id, minute) DO UPDATE SET
         transactions = m.transactions + EXCLUDED.transactions, calls = m.calls + EXCLUDED.calls, failures = m.failures + EXCLUDED.failures,
         latency = ARRAY(SELECT a + b FROM unnest(m.latency, EXCLUDED.latency) WITH ORDINALITY AS h(a, b, i) ORDER BY i)`,
      [
        minutes.map((m) => m.operatorId), minutes.map((m) => m.minute), minutes.map((m) => m.transactions), minutes.map((m) => m.calls),
        minutes.map((m) => m.failures), minutes.map((m) => m.latency.join(',')),
      ],
    );
  },
  async reset(tx: PoolClient) {
    await tx.query('DELETE FROM rm_console_minutes');
  },
};
