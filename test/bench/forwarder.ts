// The baseline: the same signature check (nonce in Redis) and a signed forward to the same wallet,
// with no ledger behind it. Prints its URL on stdout.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { CatalogSnapshot } from '../../shared/catalog/store.ts';
import { catalogSchema } from '../../shared/catalog/schema.ts';
import { rawBody, jsonFromRaw } from '../../shared/http/body.ts';
import { errorRenderer } from '../../shared/http/errors.ts';
import { signedCall } from '../../shared/http/outbound.ts';
import { signatureVerifier } from '../../shared/http/verify.ts';
import { createLogger } from '../../shared/logger.ts';
import { createRequestRedis } from '../../services/service.ts';

const doc = catalogSchema.parse(JSON.parse(process.env.BENCH_CATALOG!));
const snapshot = new CatalogSnapshot(doc.providers, doc.operators, doc.campaigns);
const operator = doc.operators[0]!;
const logger = createLogger('silent');
const redis = createRequestRedis(process.env.REDIS_URL!, logger);

const app = express();
app.post(
  '/v1/wallet/transaction',
  rawBody,
  signatureVerifier({ kind: 'provider', catalog: () => snapshot, redis, windowSeconds: 300 }),
  jsonFromRaw,
  async (req: express.Request, res: express.Response) => {
    const r = await signedCall({
      baseUrl: operator.walletUrl,
      pathAndQuery: '/v1/wallet/transaction',
      method: 'POST',
      body: req.body,
      secret: operator.secret,
      timeoutMs: operator.walletTimeoutMs,
    });
    if (r.kind === 'response') res.status(r.status).type('application/json').send(r.body);
    else res.status(r.kind === 'timeout' ? 504 : 502).json({ error: r.kind });
  },
);
app.use(errorRenderer(logger));
const server = http.createServer(app);
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`http://127.0.0.1:${(server.address() as AddressInfo).port}\n`));
