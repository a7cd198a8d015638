import { Router } from 'express';
import { runnerNames } from '../read-models.ts';
import { projectionLag } from '../../projections/runner.ts';
import type { ServiceContext } from '../context.ts';

/** /v1/admin: platform-admin operations (bearer ADMIN_TOKEN, applied by the caller). */
export function adminRouter(ctx: ServiceContext): Router {
  const router = Router();

  router.put('/catalog', async (req, res) => {
    await ctx.catalog.apply(req.body);
    const snap = ctx.catalog.snapshot();
    res.json({ providers: snap.providers.size, games: snap.games.size, operators: snap.operators.size, campaigns: snap.campaigns.size });
  });

  /** How far behind the log each read model is (events and the age of the oldest one not yet applied). */
  router.get('/projections', async (_req, res) => {
    // The hash chain's runner too: a chain behind is a history not yet linked.
    res.json({ projections: await Promise.all(runnerNames().map((name) => projectionLag(ctx.pool, ctx.eventStore, name))) });
  });

  return router;
}
