import express, { type Express } from 'express';
import { adminAuth } from '../../shared/http/admin-auth.ts';
import { errorRenderer, renderNotFound } from '../../shared/http/errors.ts';
import { httpMetrics, metricsEndpoint } from '../../shared/metrics.ts';
import type { ServiceContext } from '../context.ts';
import { answerFor } from './answers.ts';
import { healthRouter } from './health.ts';

/**
 * What a process without the api role serves on PORT: /healthz, /readyz and /metrics (bearer
 * ADMIN_TOKEN, as on the API port), nothing else, so workers, projectors and reconcilers can be
 * probed and scraped.
 */
export function createOpsApp(ctx: ServiceContext): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', false);
  app.use(httpMetrics(app, ctx.metrics));
  app.use(healthRouter(ctx));
  app.get('/metrics', adminAuth(ctx.config.adminToken), metricsEndpoint(ctx.metrics));
  app.use(renderNotFound);
  app.use(errorRenderer(ctx.logger, answerFor));
  return app;
}
