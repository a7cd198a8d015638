import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { catalogSchema, type CatalogInput } from '../../shared/catalog/schema.ts';
import { ConfigError, loadConfig, type Config } from '../../shared/config.ts';
import { createLogger } from '../../shared/logger.ts';
import { startService, StartupError, type RunningService } from '../service.ts';
import { startDemoProvider, type DemoProvider } from './demo-provider.ts';
import { startDemoWallet, type DemoWallet } from './demo-wallet.ts';
import { catalogUnfitForStory, runStory, type StoryResult } from './story.ts';

/*
 * `npm run sandbox`'s run (main.ts parses its options first): the whole system on one machine, with a demo
 * wallet per demo operator and a demo provider, playing a short scripted story through the real APIs; then
 * it stays up for you to explore. `--exit` stops after the story: exit 0 when every step behaved as
 * expected, 1 otherwise.
 */


const SANDBOX_DATABASE_URL = 'postgres://127.0.0.1:5432/ledger_sandbox';
const SANDBOX_REDIS_URL = 'redis://127.0.0.1:6379/15';
const STALE_ROUND_AFTER_SECONDS = 5;
const RECONCILE_INTERVAL_SECONDS = 1;
const CATALOG_FILE = path.join(import.meta.dirname, 'catalog.json');

const print = (line = '') => process.stdout.write(`${line}\n`);

/** A sandbox starts from nothing: drop its own database (the service creates it again on start). */
async function dropDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  url.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: url.toString() });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

async function flushRedis(redisUrl: string): Promise<void> {
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  try {
    await redis.connect();
    await redis.flushdb();
  } finally {
    redis.disconnect();
  }
}

function sandboxConfig(): { config: Config; ownDatabase: boolean; ownRedis: boolean } {
  const env: NodeJS.ProcessEnv = { ...process.env };
  // Given URLs are used as they are (never emptied); otherwise the sandbox's own database and Redis db 15.
  const ownDatabase = !env.DATABASE_URL;
  const ownRedis = !env.REDIS_URL;
  env.DATABASE_URL ||= SANDBOX_DATABASE_URL;
  env.REDIS_URL ||= SANDBOX_REDIS_URL;
  // The story waits for the reconciler to force-close a round: seconds, not the production hour.
  env.STALE_ROUND_AFTER_SECONDS = String(STALE_ROUND_AFTER_SECONDS);
  env.RECONCILE_INTERVAL_SECONDS = String(RECONCILE_INTERVAL_SECONDS);
  env.ROLES = 'api,worker,projector,reconciler';
  delete env.CATALOG_FILE; // the sandbox loads its own catalog, through the admin API
  env.ADMIN_TOKEN ||= `sandbox-${randomBytes(12).toString('hex')}`;
  // Service logs would drown the story; LOG_LEVEL=info shows them.
  env.LOG_LEVEL ||= 'error';
  return { config: loadConfig(env), ownDatabase, ownRedis };
}

/** The whole system on one machine, then the story (see main.ts); the exit status. */
export async function runSandbox(exitAfterStory: boolean): Promise<number> {
  let setup: ReturnType<typeof sandboxConfig>;
  try {
    setup = sandboxConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      return 2;
    }
    throw err;
  }
  const { config, ownDatabase, ownRedis } = setup;
  const logger = createLogger(config.logLevel);
  const catalog: CatalogInput = catalogSchema.parse(JSON.parse(await readFile(CATALOG_FILE, 'utf8')));

  try {
    if (ownDatabase) await dropDatabase(config.databaseUrl);
  } catch (err) {
    process.stderr.write(`cannot empty the sandbox database ${config.databaseUrl}: ${(err as Error).message}\nIs Postgres running? Or set DATABASE_URL.\n`);
    return 1;
  }
  try {
    if (ownRedis) await flushRedis(config.redisUrl);
  } catch (err) {
    process.stderr.write(`cannot flush Redis ${config.redisUrl}: ${(err as Error).message}\nIs Redis running? Or set REDIS_URL.\n`);
    return 1;
  }

  const wallets = new Map<string, DemoWallet>();
  const providers = new Map<string, DemoProvider>();
  let service: RunningService | undefined;
  let stopping: Promise<void> | undefined;
  const stopAll = () =>
    (stopping ??= (async () => {
      await service?.stop();
      await Promise.all([...wallets.values(), ...providers.values()].map((s) => s.close()));
    })());

  const onSignal = (signal: string) => {
    print(`\n${signal}: stopping the sandbox...`);
    const force = setTimeout(() => process.exit(1), 30_000);
    force.unref();
    stopAll().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`stop failed: ${(err as Error).message}\n`);
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', () => onSignal('SIGINT'));
  process.once('SIGTERM', () => onSignal('SIGTERM'));

  for (const o of catalog.operators) {
    const w = await startDemoWallet({ secret: o.secret, signatureWindowSeconds: config.signatureWindowSeconds, logger });
    wallets.set(o.id, w);
    o.walletUrl = w.url;
  }
  for (const p of catalog.providers) {
    const d = await startDemoProvider({ providerId: p.id, secret: p.secret, signatureWindowSeconds: config.signatureWindowSeconds, logger });
    providers.set(p.id, d);
    p.apiBaseUrl = d.url;
  }
  try {
    service = await startService(config, logger);
  } catch (err) {
    await stopAll();
    const code = (err as { code?: string }).code;
    if (code === 'EADDRINUSE') process.stderr.write(`port ${config.port} is in use: stop what runs there, or pick another with PORT=8081 npm run sandbox\n`);
    else if (err instanceof StartupError) process.stderr.write(`${err.message}\n`);
    else throw err;
    return 1;
  }
  const url = service.url!;

  print('Seamless-wallet sandbox');
  print(`  service        ${url}   (all roles; stale rounds force-closed after ${STALE_ROUND_AFTER_SECONDS} s, reconciler sweeps every ${RECONCILE_INTERVAL_SECONDS} s)`);
  print(`  ADMIN_TOKEN    ${config.adminToken}`);
  print(`  database       ${config.databaseUrl}${ownDatabase ? '   (the sandbox\'s own: emptied at every start)' : '   (from DATABASE_URL, left as it was)'}`);
  print(`  redis          ${config.redisUrl}${ownRedis ? '   (the sandbox\'s own: flushed at every start)' : '   (from REDIS_URL, left as it was)'}`);
  for (const o of catalog.operators) print(`  operator       ${o.id.padEnd(14)} secret ${o.secret.padEnd(22)} demo wallet ${o.walletUrl}`);
  for (const p of catalog.providers) print(`  provider       ${p.id.padEnd(14)} secret ${p.secret.padEnd(22)} demo provider ${p.apiBaseUrl}`);
  print('  Amounts are integers in minor units (cents). Every call below is signed as docs/signing.md describes.');

  let result: StoryResult;
  try {
    result = await runStory({
      serviceUrl: url,
      adminToken: config.adminToken!,
      catalog,
      wallets,
      provider: providers.get(catalog.providers[0]!.id)!,
      staleRoundAfterSeconds: STALE_ROUND_AFTER_SECONDS,
      reconcileIntervalSeconds: RECONCILE_INTERVAL_SECONDS,
      print,
    });
  } catch (err) {
    if (stopping) return new Promise<number>(() => undefined);
    process.stderr.write(`the story could not run: ${(err as Error).stack ?? String(err)}\n`);
    await stopAll();
    return 1;
  }

  if (stopping) return new Promise<number>(() => undefined); // Ctrl-C during the story: the signal handler exits
  print('');
  const passed = result.failures.length === 0 && result.checks > 0; // a story that checked nothing passed nothing
  if (passed) print(`Story complete: ${result.steps} steps, ${result.checks} checks, all as expected.`);
  else if (result.checks === 0) print('Story FAILED: it checked nothing.');
  else {
    print(`Story FAILED: ${result.failures.length} of ${result.checks} checks did not behave as expected:`);
    for (const f of result.failures) print(`  - ${f}`);
  }
  printWhereToLook(url, config, catalog, result, wallets, exitAfterStory);

  if (exitAfterStory) {
    await stopAll();
    return passed ? 0 : 1;
  }
  print('');
  print('The sandbox keeps running. Ctrl-C stops it.');
  return new Promise<number>(() => undefined); // the signal handlers exit
}

/**
 * --against: the story against a running stack. The stack's catalog names where its operators' wallets
 * and its providers are; this process serves them there (on HOST, every interface in a container) and
 * plays the story through the stack's API once it is ready.
 */
export async function againstStack(serviceUrl: string, catalogFile: string, exitAfterStory: boolean): Promise<number> {
  let config: Config;
  let catalog: CatalogInput;
  try {
    config = loadConfig(process.env);
    catalog = catalogSchema.parse(JSON.parse(await readFile(catalogFile, 'utf8')));
  } catch (err) {
    process.stderr.write(`${err instanceof ConfigError ? err.message : `--catalog ${catalogFile}: ${(err as Error).message}`}\n`);
    return 2;
  }
  if (!config.adminToken) {
    process.stderr.write('ADMIN_TOKEN must be set to the stack\'s: the story reads its audit routes\n');
    return 2;
  }
  const unfit = catalogUnfitForStory(catalog);
  if (unfit) {
    process.stderr.write(`--catalog ${catalogFile}: ${unfit}\n`);
    return 2;
  }
  const logger = createLogger(config.logLevel);
  const port = (url: string) => Number(new URL(url).port || 80);
  const wallets = new Map<string, DemoWallet>();
  const providers = new Map<string, DemoProvider>();
  const stopAll = () => Promise.all([...wallets.values(), ...providers.values()].map((s) => s.close()));
  try {
    for (const o of catalog.operators) wallets.set(o.id, await startDemoWallet({ secret: o.secret, port: port(o.walletUrl), host: config.host, signatureWindowSeconds: config.signatureWindowSeconds, logger }));
    for (const p of catalog.providers) {
      providers.set(p.id, await startDemoProvider({ providerId: p.id, secret: p.secret, port: port(p.apiBaseUrl), host: config.host, signatureWindowSeconds: config.signatureWindowSeconds, logger }));
    }
  } catch (err) {
    await stopAll();
    process.stderr.write(`cannot serve the demo partners where the catalog names them: ${(err as Error).message}\n`);
    return 1;
  }
  const ready = await waitReady(serviceUrl, 120_000);
  if (!ready) {
    await stopAll();
    process.stderr.write(`${serviceUrl}/readyz did not answer ready within 120 s\n`);
    return 1;
  }
  print(`Seamless-wallet sandbox, against ${serviceUrl}`);
  for (const o of catalog.operators) print(`  operator       ${o.id.padEnd(14)} demo wallet served here for ${o.walletUrl}`);
  for (const p of catalog.providers) print(`  provider       ${p.id.padEnd(14)} demo provider served here for ${p.apiBaseUrl}`);
  let result: StoryResult;
  try {
    result = await runStory({
      serviceUrl,
      adminToken: config.adminToken,
      catalog,
      wallets,
      provider: providers.get(catalog.providers[0]!.id)!,
      staleRoundAfterSeconds: config.staleRoundAfterSeconds,
      reconcileIntervalSeconds: config.reconcileIntervalSeconds,
      print,
    });
  } catch (err) {
    process.stderr.write(`the story could not run: ${(err as Error).stack ?? String(err)}\n`);
    await stopAll();
    return 1;
  }
  const passed = result.failures.length === 0 && result.checks > 0;
  print('');
  if (passed) print(`Story complete: ${result.steps} steps, ${result.checks} checks, all as expected.`);
  else {
    print(`Story FAILED: ${result.failures.length} of ${result.checks} checks did not behave as expected:`);
    for (const f of result.failures) print(`  - ${f}`);
  }
  if (exitAfterStory) {
    await stopAll();
    return passed ? 0 : 1;
  }
  print('The demo partners keep running. Ctrl-C stops them.');
  process.once('SIGINT', () => void stopAll().then(() => process.exit(0)));
  process.once('SIGTERM', () => void stopAll().then(() => process.exit(0)));
  return new Promise<number>(() => undefined);
}

async function waitReady(url: string, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const ok = await fetch(`${url}/readyz`).then((r) => r.ok, () => false);
    if (ok) return true;
    await new Promise((r) => setTimeout(r, 1000));
  }
  return false;
}

function printWhereToLook(url: string, config: Config, catalog: CatalogInput, result: StoryResult, wallets: ReadonlyMap<string, DemoWallet>, stopping: boolean): void {
  const { providerId, operatorId, roundId, playerRef, grantId } = result.examples;
  const op = catalog.operators.find((o) => o.id === operatorId)!;
  const prov = catalog.providers.find((p) => p.id === providerId)!;
  const game = prov.games[0]!;
  const bearer = `curl -s -H "Authorization: Bearer $ADMIN_TOKEN"`;
  print('');
  // With --exit, every address below closes a moment later: the commands are for a sandbox left running.
  print(stopping ? 'Where to look next, in a sandbox left running (npm run sandbox, without --exit: this one stops now)' : 'Where to look next');
  print(`  export ADMIN_TOKEN=${config.adminToken}`);
  print('  The API, browsable:');
  print(`    ${url}/docs                     (open in a browser; the OpenAPI 3.1 document is ${url}/openapi.json)`);
  print('  Metrics (Prometheus text):');
  print(`    ${bearer} ${url}/metrics | grep -E '^(wallet_call|http_request)'`);
  print('  Audit: the history of record, event by event:');
  print(`    ${bearer} '${url}/v1/audit/rounds/${providerId}/${operatorId}/${roundId}'`);
  print(`    ${bearer} '${url}/v1/audit/players/${operatorId}/${playerRef}/sessions'`);
  if (grantId) print(`    ${bearer} '${url}/v1/audit/grants/${grantId}'`);
  print(`    ${bearer} '${url}/v1/audit/transactions?status=unresolved'`);
  print(`    ${bearer} '${url}/v1/audit/events?limit=50'`);
  print(`    DATABASE_URL='${config.databaseUrl}' npm run audit -- verify     (every read model equals a rebuild from the history)`);
  print('  Signed calls by hand, as the operator and as the provider (scripts/signed-curl.sh):');
  print(`    export SW_URL=${url} SW_ID=${op.id} SW_SECRET=${op.secret}`);
  print('    scripts/signed-curl.sh GET /v1/operator/games');
  print(`    scripts/signed-curl.sh POST /v1/operator/games/launch '{"playerRef":"bob","gameId":"${game.id}","currency":"${prov.currencies[0]}","mode":"REAL"}'`);
  print(`    SW_KIND=provider SW_ID=${prov.id} SW_SECRET=${prov.secret} scripts/signed-curl.sh POST /v1/wallet/balance '{"sessionToken":"<token from the launch>"}'`);
  print('  Reconciliation, as the operator (the query string is sent but not signed; quote the path for the shell):');
  print(`    scripts/signed-curl.sh GET '/v1/operator/rounds/${roundId}?gameId=${result.examples.gameId}'`);
  if (result.examples.statement) {
    const { from, to } = result.examples.statement;
    print(`    scripts/signed-curl.sh GET '/v1/operator/transactions?from=${from}&to=${to}&limit=5'`);
    print(`    scripts/signed-curl.sh GET '/v1/operator/reports/settlement?from=${from}&to=${to}' -H 'Accept: text/csv'`);
  }
  const wallet = wallets.get(op.id);
  if (wallet) {
    print('  The wallet conformance checker, against the demo wallet (then against yours):');
    print(`    npm run conformance -- --wallet-url ${wallet.url} --operator-secret ${op.secret}`);
  }
}
