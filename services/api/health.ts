import { Router } from 'express';
import { projectionFailures, type ProjectionFailure } from '../../projections/runner.ts';
import { runnerNames } from '../read-models.ts';
import type { ServiceContext } from '../context.ts';
import { within } from '../../shared/timeout.ts';


export function healthRouter(ctx: ServiceContext): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    let failing: ProjectionFailure[] = [];
    const checks: Record<string, () => Promise<unknown>> = {
      // Postgres answers, and no read model is stuck on an event it cannot apply (database-wide).
      postgres: async () => {
        failing = await projectionFailures(ctx.pool, runnerNames());
      },
      redis: () => ctx.redis.ping(),
      eventstore: () => ctx.eventStore.ping(),
    };
    const results = await Promise.all(
      Object.entries(checks).map(async ([name, check]) => {
        try {
          await within(check(), 2000, () => {
            throw new Error('timeout');
          });
          return undefined;
        } catch {
          return name;
        }
      }),
    );
    const down = results.filter((n): n is string => n !== undefined);
    if (down.length > 0) res.status(503).json({ error: `not ready: ${down.join(', ')} unavailable`, down });
    // A stuck read model is reported, not a reason to leave rotation: transactions, launches and kicks
    // read no read model, so a 503 here would turn one bad event into an outage of the money path.
    else if (failing.length > 0) res.json({ status: 'degraded', failingProjections: failing });
    else res.json({ status: 'ready' });
  });
  return router;
}
