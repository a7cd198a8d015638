import { parseArgs } from 'node:util';
import { formatReport, runConformance, type ConformanceOptions } from './checks.ts';

const USAGE = `Usage: npm run conformance -- --wallet-url URL --operator-secret SECRET [options]

Checks an operator wallet against API document part 4.2, calling it as the service does.

  --wallet-url URL          the wallet's base address (the catalog's walletUrl), http or https
  --operator-secret SECRET  the operator's shared secret (signs the calls)
  --player REF              a funded test player (default: a fresh conformance-<random> id,
                            which only a wallet that funds new players, like the demo wallet, accepts)
  --currency CODE           upper-case ISO-4217 code (default EUR)
  --game-id ID              gameId sent on the transactions (default conformance-game)
  --timeout-ms N            per-call timeout in ms (default 5000)
  --help                    this text

Exit status: 0 every check passed, 1 a check failed, 2 usage error.`;

class UsageError extends Error {}

function parseOptions(argv: string[]): ConformanceOptions | 'help' {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        'wallet-url': { type: 'string' },
        'operator-secret': { type: 'string' },
        player: { type: 'string' },
        currency: { type: 'string' },
        'game-id': { type: 'string' },
        'timeout-ms': { type: 'string' },
        help: { type: 'boolean' },
      },
    }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (values.help) return 'help';
  const walletUrl = values['wallet-url'];
  const secret = values['operator-secret'];
  if (!walletUrl) throw new UsageError('--wallet-url is required');
  if (!secret) throw new UsageError('--operator-secret is required');
  let url: URL;
  try {
    url = new URL(walletUrl);
  } catch {
    throw new UsageError(`--wallet-url is not a URL: ${walletUrl}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError(`--wallet-url must be http or https: ${walletUrl}`);
  if (values.currency !== undefined && !/^[A-Z]{3}$/.test(values.currency)) throw new UsageError(`--currency must be an upper-case ISO-4217 code: ${values.currency}`);
  if (values.player !== undefined && values.player.length === 0) throw new UsageError('--player must not be empty');
  if (values['game-id'] !== undefined && values['game-id'].length === 0) throw new UsageError('--game-id must not be empty');
  let timeoutMs: number | undefined;
  if (values['timeout-ms'] !== undefined) {
    timeoutMs = Number(values['timeout-ms']);
    if (!/^\d+$/.test(values['timeout-ms']) || !Number.isSafeInteger(timeoutMs) || timeoutMs < 1) {
      throw new UsageError(`--timeout-ms must be a positive integer: ${values['timeout-ms']}`);
    }
  }
  return {
    walletUrl,
    operatorSecret: secret,
    ...(values.player !== undefined ? { playerRef: values.player } : {}),
    ...(values.currency !== undefined ? { currency: values.currency } : {}),
    ...(values['game-id'] !== undefined ? { gameId: values['game-id'] } : {}),
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
  };
}

async function main(): Promise<number> {
  let options: ConformanceOptions | 'help';
  try {
    options = parseOptions(process.argv.slice(2));
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`error: ${err.message}\n\n${USAGE}\n`);
    return 2;
  }
  if (options === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const report = await runConformance(options);
  process.stdout.write(`${formatReport(report)}\n`);
  return report.failed > 0 ? 1 : 0;
}

// Exit explicitly: the outbound keep-alive pool would otherwise hold the process open.
main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`conformance check crashed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
