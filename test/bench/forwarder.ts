// The baselines: the same signature check (nonce in Redis) and a signed forward to the same wallet, with
// no ledger behind it. Prints its URL on stdout.
//
// With FLOOR_DATABASE_URL set, the floor: the forwarder plus the two writes the ledger's crash safety
// needs, and nothing else. Before the wallet is called, the transaction is recorded (its body under its
// provider and id, one durable commit; an id recorded before is refused, never sent again), and once the
// wallet has answered, the provider is answered and the answer recorded behind. Both writes are batched
// across concurrent transactions with the ledger's Coalescer (two statements in flight). No event log, no
// decision, no read model, no hash chain; nor what the ledger's outcome writer adds to its write behind
// (back-pressure, retries, a round's order, a failed call recorded before its answer): what the ledger
// costs beyond the floor is what those cost. The bench counts the floor's rows at the end.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import pg from 'pg';
import { CatalogSnapshot } from '../../shared/catalog/store.ts';
import { catalogSchema } from '../../shared/catalog/schema.ts';
import { Coalescer, type Settled } from '../../shared/coalesce.ts';
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
const floor = process.env.FLOOR_DATABASE_URL ? await floorWrites(process.env.FLOOR_DATABASE_URL) : undefined;
/** The floor's replies answered and not yet written. */
const behind = new Set<Promise<unknown>>();

const app = express();
app.post(
  '/v1/wallet/transaction',
  rawBody,
  signatureVerifier({ kind: 'provider', catalog: () => snapshot, redis, windowSeconds: 300 }),
  jsonFromRaw,
  async (req: express.Request, res: express.Response) => {
    const key = { providerId: req.caller!.id, transactionId: String((req.body as { transactionId?: unknown }).transactionId) };
    const body = JSON.stringify(req.body);
    if (floor) await floor.record.submit({ ...key, text: body });
    const r = await signedCall({
      baseUrl: operator.walletUrl,
      pathAndQuery: '/v1/wallet/transaction',
      method: 'POST',
      rawBody: body,
      secret: operator.secret,
      timeoutMs: operator.walletTimeoutMs,
    });
    if (r.kind === 'response') res.status(r.status).type('application/json').send(r.body);
    else res.status(r.kind === 'timeout' ? 504 : 502).json({ error: r.kind });
    if (floor) {
      const write = floor.outcome.submit({ ...key, text: r.kind === 'response' ? r.body : r.kind }).catch(() => undefined);
      behind.add(write);
      void write.finally(() => behind.delete(write));
    }
  },
);
app.use(errorRenderer(logger));
const server = http.createServer(app);
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`http://127.0.0.1:${(server.address() as AddressInfo).port}\n`));
// Stopped by the bench (between its pairs, or at the end): the floor's replies still behind their answers
// are written first, as the ledger's are; then exit as a process does, so that a CPU profile
// (BENCH_PROFILE) is written.
process.once('SIGTERM', () => {
  server.close();
  void Promise.all(behind).then(() => process.exit(0));
});

interface Row {
  providerId: string;
  transactionId: string;
  text: string;
}

/** The floor's two writes, each a batched insert of its own table (created here, in the bench's database). */
async function floorWrites(url: string) {
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  pool.on('error', () => undefined);
  await pool.query(`
    CREATE TABLE IF NOT EXISTS floor_records (provider_id text, transaction_id text, body text NOT NULL, PRIMARY KEY (provider_id, transaction_id));
    CREATE TABLE IF NOT EXISTS floor_outcomes (provider_id text, transaction_id text, reply text NOT NULL, PRIMARY KEY (provider_id, transaction_id))`);
  const writer = (table: string, column: string) =>
    new Coalescer<Row, void>(
      async (rows): Promise<Array<Settled<void>>> => {
        const inserted = await pool.query<{ provider_id: string; transaction_id: string }>({
          name: table,
          text: `INSERT INTO ${table} (provider_id, transaction_id, ${column}) SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
            ON CONFLICT DO NOTHING RETURNING provider_id, transaction_id`,
          values: [rows.map((r) => r.providerId), rows.map((r) => r.transactionId), rows.map((r) => r.text)],
        });
        const written = new Set(inserted.rows.map((r) => `${r.provider_id}\n${r.transaction_id}`));
        // Each row written answers one item: a second item of the same id (in this batch or before) is refused.
        return rows.map((r) =>
          written.delete(`${r.providerId}\n${r.transactionId}`) ? { ok: true, value: undefined } : { ok: false, error: new Error(`${r.transactionId} is recorded already`) },
        );
      },
      { maxInFlight: 2, maxBatch: 200 },
    );
  return { record: writer('floor_records', 'body'), outcome: writer('floor_outcomes', 'reply') };
}
