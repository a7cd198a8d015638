import { Cli } from '../../shared/cli.ts';
import { exitStatus, formatReport, runConformance, type ConformanceOptions } from './checks.ts';

const USAGE = `usage: npm run conformance -- --wallet-url URL --operator-secret SECRET [options]

Checks an operator wallet against the rules of "The wallet you implement" in docs/operators.md, calling
it as the service does.

  --wallet-url URL          the wallet's base address (the catalog's walletUrl), http or https
  --operator-secret SECRET  the operator's shared secret (signs the calls)
  --player REF              a funded test player (default: a fresh conformance-<random> id,
                            which only a wallet that funds new players, like the demo wallet, accepts)
  --currency CODE           upper-case ISO-4217 code (default EUR)
  --game-id ID              gameId sent on the transactions (default conformance-game)
  --timeout-ms N            per-call timeout in ms, 1..600000 (default 5000)
  --help                    this text

Exit status: 0 every check that ran passed, 1 a check failed or none ran (all skipped), 2 usage error.`;

const cli: Cli = new Cli('conformance', USAGE);

/** The options, or exit: 0 after --help, 2 on bad usage. */
function parseOptions(): ConformanceOptions {
  const { values } = cli.parse({
    options: {
      'wallet-url': { type: 'string' },
      'operator-secret': { type: 'string' },
      player: { type: 'string' },
      currency: { type: 'string' },
      'game-id': { type: 'string' },
      'timeout-ms': { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  const walletUrl = values['wallet-url'];
  const secret = values['operator-secret'];
  if (!walletUrl) cli.fail('--wallet-url is required');
  if (!secret) cli.fail('--operator-secret is required');
  let url: URL;
  try {
    url = new URL(walletUrl);
  } catch {
    cli.fail(`--wallet-url is not a URL: ${walletUrl}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') cli.fail(`--wallet-url must be http or https: ${walletUrl}`);
  if (values.currency !== undefined && !/^[A-Z]{3}$/.test(values.currency)) cli.fail(`--currency must be an upper-case ISO-4217 code: ${values.currency}`);
  if (values.player !== undefined && values.player.length === 0) cli.fail('--player must not be empty');
  if (values['game-id'] !== undefined && values['game-id'].length === 0) cli.fail('--game-id must not be empty');
  const timeoutMs = values['timeout-ms'] !== undefined ? cli.whole('timeout-ms', values['timeout-ms'], 1, 600_000) : undefined;
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
  const options = parseOptions();
  const report = await runConformance(options);
  process.stdout.write(`${formatReport(report)}\n`);
  // Every check skipped: nothing about the wallet was verified, which is no pass.
  if (report.passed === 0 && report.failed === 0) process.stdout.write('No check ran: nothing about the wallet was verified.\n');
  return exitStatus(report);
}

// Exit explicitly: the outbound keep-alive pool would otherwise hold the process open.
main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`conformance check crashed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
