import { randomUUID } from 'node:crypto';
import express, { type Express } from 'express';
import { adminAuth } from '../../shared/http/admin-auth.ts';
import { exactNumbers, jsonFromRaw, rawBody, refuseNonUtf8AndKeep, refuseUnstorableText, refuseUnstorableUrl, BODY_LIMIT, CATALOG_BODY_LIMIT } from '../../shared/http/body.ts';
import { errorRenderer, renderNotFound, requestIdOf } from '../../shared/http/errors.ts';
import { requestLog } from '../../shared/http/request-log.ts';
import { operatorRateLimit } from '../../shared/http/ratelimit.ts';
import { signatureVerifier } from '../../shared/http/verify.ts';
import { httpMetrics, metricsEndpoint } from '../../shared/metrics.ts';
import type { ServiceContext } from '../context.ts';
import { adminRouter } from './admin.ts';
import { healthRouter } from './health.ts';
import { answerFor } from './answers.ts';
import { docsRoutes } from './openapi/docs.ts';
import { consoleStatic } from '../console/static.ts';

/** Routes per audience; each audience is authenticated before any of its handlers runs. */
export interface AudienceRouters {
  operator?: express.Router[];
  provider?: express.Router[];
  admin?: express.Router[];
  audit?: express.Router[];
}

export function createApp(ctx: ServiceContext, routers: AudienceRouters = {}): Express {
  const app = express();
  app.disable('x-powered-by');
  // Every API call is signed with a fresh nonce, so no reply is ever asked for again conditionally: an
  // ETag (a SHA-1 of every body) would be work no client uses.
  app.set('etag', false);
  app.set('trust proxy', false);

  // The request id (the caller's X-Request-Id if usable) is answered as X-Request-Id and named by the
  // request's log lines: the request log's and an unhandled error's (requestIdOf). The ledger's own
  // lines name the transactionId. It is not carried through every await by an AsyncLocalStorage: on
  // Node 20, where that hooked every promise of the process, it measured 5-10 % of the api's CPU a
  // transaction (Node 24's cheaper AsyncLocalStorage has not been measured for it).
  app.use((req, res, next) => {
    const given = req.headers['x-request-id'];
    res.setHeader('X-Request-Id', typeof given === 'string' && /^[\w.-]{1,64}$/.test(given) ? given : randomUUID());
    next();
  });
  app.use(httpMetrics(app, ctx.metrics));
  app.use(
    requestLog(ctx.logger, {
      requestId: requestIdOf,
      ignore: (url) => url === '/healthz' || url === '/readyz' || url === '/metrics',
    }),
  );

  app.use(healthRouter(ctx));

  const catalog = () => ctx.catalog.snapshot();
  const window = ctx.config.signatureWindowSeconds;

  const operator = express.Router();
  operator.use(
    rawBody,
    signatureVerifier({ kind: 'operator', catalog, redis: ctx.redis, windowSeconds: window }),
    operatorRateLimit(ctx.redis, catalog, (operatorId) => ctx.metrics.rateLimitRefused(operatorId)),
    refuseUnstorableUrl,
    jsonFromRaw,
    ...(routers.operator ?? []),
  );
  app.use('/v1/operator', operator);

  const provider = express.Router();
  provider.use(
    rawBody,
    signatureVerifier({ kind: 'provider', catalog, redis: ctx.redis, windowSeconds: window }),
    refuseUnstorableUrl,
    jsonFromRaw,
    ...(routers.provider ?? []),
  );
  app.use('/v1/wallet', provider);

  const bearer = adminAuth(ctx.config.adminToken);
  // A catalog document may list thousands of blocked players or games (CATALOG_FILE has no bound): its
  // route reads up to CATALOG_BODY_LIMIT; every other admin body, BODY_LIMIT (a parsed body is not read again).
  const json = (limit: string) => express.json({ limit, type: () => true, reviver: exactNumbers, verify: refuseNonUtf8AndKeep });
  const [catalogJson, adminJson] = [json(CATALOG_BODY_LIMIT), json(BODY_LIMIT)];
  const adminBody: express.RequestHandler = (req, res, next) =>
    (req.method === 'PUT' && /^\/catalog\/?$/i.test(req.path) ? catalogJson : adminJson)(req, res, next);
  app.use('/v1/admin', bearer, refuseUnstorableUrl, adminBody, refuseUnstorableText, adminRouter(ctx), ...(routers.admin ?? []));
  app.use('/v1/audit', bearer, refuseUnstorableUrl, ...(routers.audit ?? []));
  // Bearer too: its labels name operators, and this port faces operators and providers.
  app.get('/metrics', bearer, metricsEndpoint(ctx.metrics));

  app.use(docsRoutes()); // GET /openapi.json and /docs, unauthenticated
  app.use(consoleStatic()); // GET /console: the back-office page (its data comes from the bearer routes)
  app.use(renderNotFound);
  app.use(errorRenderer(ctx.logger, answerFor));
  return app;
}
