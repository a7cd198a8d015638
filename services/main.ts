import { ConfigError, loadConfig } from '../shared/config.ts';
import { createLogger } from '../shared/logger.ts';
import { startService, StartupError } from './service.ts';

async function main(): Promise<void> {
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
  let service;
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
  const shutdown = (signal: string) => {
    logger.info({ signal }, 'shutdown requested');
    const force = setTimeout(() => {
      logger.error('shutdown took longer than 30 s; exiting');
      process.exit(1);
    }, 30_000);
    force.unref();
    service
      .stop()
      .then(() => process.exit(0))
      .catch((err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
}

void main();
