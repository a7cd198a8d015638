import type { Logger } from 'pino';
import type { Pool } from '../../shared/db/pool.ts';
import { everyInterval } from '../../shared/periodic.ts';
import type { ProjectionLag } from '../../projections/runner.ts';

/** A runner as the sampler sees it. */
export interface LagSampled {
  readonly projection: { name: string };
  isOwner(): boolean;
  lag(): Promise<ProjectionLag>;
}

const KEEP = "interval '2 days'";

/**
 * The console's chart of projection lag over the last hour and day: every `everyMs`, each projector
 * process writes the lag of the projections it owns into the minute's row, keeping the most it saw.
 */
export function startLagSampler(pool: Pool, runners: LagSampled[], logger: Logger, everyMs = 10_000): { stop(): Promise<void> } {
  let ticks = 0;
  const sample = async () => {
    const lags = await Promise.all(runners.filter((r) => r.isOwner()).map((r) => r.lag()));
    if (lags.length > 0) {
      await pool.query(
        `INSERT INTO console_lag_minutes AS l (name, minute, events_behind, ms_behind)
         SELECT x.name, date_trunc('minute', now()), x.events, x.ms FROM unnest($1::text[], $2::int[], $3::bigint[]) AS x(name, events, ms)
         ON CONFLICT (minute, name) DO UPDATE SET events_behind = GREATEST(l.events_behind, EXCLUDED.events_behind), ms_behind = GREATEST(l.ms_behind, EXCLUDED.ms_behind)`,
        [lags.map((l) => l.name), lags.map((l) => l.eventsBehind), lags.map((l) => Math.round(l.msBehind))],
      );
    }
    if (ticks++ % 360 === 0) await pool.query(`DELETE FROM console_lag_minutes WHERE minute < now() - ${KEEP}`);
  };
  return everyInterval(everyMs, () => sample().catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'projection lag not sampled')));
}
