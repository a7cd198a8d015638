import v8 from 'node:v8';
import { ConfigError, loadConfig } from '../shared/config.ts';
import { createLogger } from '../shared/logger.ts';
import { Cli } from '../shared/cli.ts';
import { runtimeWarnings } from '../shared/runtime.ts';
import { startService, StartupError, type RunningService } from './service.ts';

const USAGE = `usage: npm start   (node dist/main.mjs in the image)

Starts the service: the roles ROLES names (api, worker, projector, reconciler; all four by default) in
this one process, until SIGTERM or SIGINT, which stop it cleanly. It takes no arguments: every setting is
an environment variable (DATABASE_URL, REDIS_URL, EVENT_STORE, PORT, CATALOG_FILE, ...), checked at start;
docs/operations.md lists them all.

  --help   this text

Exit status: 0 stopped by a signal, 1 it failed to start or to stop, 2 bad usage or a setting refused.`;

async function main(): Promise<void> {
  // Before anything starts: "--help" or a stray argument must not start a service.
  new Cli('start', USAGE).parse({ options: { help: { type: 'boolean' } }, allowPositionals: false });
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const logger = createLogger(config.logLevel);
  for (const warning of runtimeWarnings(process.version, process.execArgv, process.env.NODE_OPTIONS)) logger.warn(warning);
  // Left to itself, V8 lets a busy process's heap grow to several times the data that survives a
  // collection (an api process at a steady 300 tx/s on Node 20: 190 MB of heap for 45-65 MB live, 270 MB RSS).
  // Bounding the growth over the live data keeps the process near what it really holds, with no hard
  // limit that a burst of large wallet replies could run into (docs/operations.md, Memory).
  // A process without the api is left to V8 unless told otherwise (defaultHeapGrowingPercent says why).
  if (config.heapGrowingPercent > 0) {
    v8.setFlagsFromString(`--heap-growing-percent=${config.heapGrowingPercent}`);
    logger.info({ heapGrowingPercent: config.heapGrowingPercent }, 'heap growth over live data bounded');
  } else {
    logger.info({ heapGrowingPercent: 0 }, 'heap growth left to V8');
  }

  // The handlers are in place before anything starts: without a listener Node dies of SIGTERM at once,
  // so a signal that arrived while the service was starting (or in the instant after its "service
  // started" line) killed it with its connections and outcome writes open. A signal during the start is
  // remembered and the service is stopped as soon as it is up.
  let service: RunningService | undefined;
  let requested: string | undefined;
  const shutdown = (signal: string) => {
    if (requested) {
      // A second signal is someone who will not wait: the same as before the handlers existed.
      logger.warn({ signal }, 'second signal while stopping; exiting now');
      process.exit(1);
    }
    requested = signal;
    logger.info({ signal }, 'shutdown requested');
    const force = setTimeout(() => {
      logger.error('shutdown took longer than 30 s; exiting');
      process.exit(1);
    }, 30_000);
    force.unref();
    if (service) stopAndExit(service);
  };
  const stopAndExit = (running: RunningService) => {
    running
      .stop()
      .then(() => process.exit(0))
      .catch((err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));

  try {
    service = await startService(config, logger);
  } catch (err) {
    if (err instanceof StartupError) {
      logger.fatal(err.message);
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  if (requested) stopAndExit(service);
}

void main();
