import { Cli } from '../../shared/cli.ts';

/*
 * `npm run sandbox`: its options, checked before anything else is loaded (the service, pg, ioredis: about
 * three seconds), so that --help and a bad option answer at once; the run itself is in run.ts.
 */

const USAGE = `usage: npm run sandbox [-- --exit]
       npm run sandbox -- --against URL --catalog FILE [--exit]

The whole system on one machine: a demo wallet per demo operator, a demo provider, and a short scripted story
played through the real APIs; then it stays up for you to explore (Ctrl-C stops it). Its own database
ledger_sandbox and Redis db 15, emptied at every start, unless DATABASE_URL or REDIS_URL name others.

  --exit          stop after the story: exit 0 when every step behaved as expected, 1 otherwise
  --against URL   play the story against a service already running at URL (a compose stack: docker compose
                  run sandbox) instead of starting one: only the demo wallets and provider run here, on HOST
                  and on the ports the stack's catalog names for them; ADMIN_TOKEN, STALE_ROUND_AFTER_SECONDS
                  and RECONCILE_INTERVAL_SECONDS must be the stack's
  --catalog FILE  with --against: the stack's catalog (its CATALOG_FILE), for the partners' secrets and ports
  --help          this text

Exit status: 0 the story passed (with --exit, or stopped by Ctrl-C), 1 it failed or could not run, 2 bad usage.`;

async function main(): Promise<number> {
  const cli: Cli = new Cli('sandbox', USAGE);
  const { values } = cli.parse({ options: { exit: { type: 'boolean' }, against: { type: 'string' }, catalog: { type: 'string' }, help: { type: 'boolean' } } });
  const exitAfterStory = values.exit === true;
  if (values.against !== undefined) {
    if (!URL.canParse(values.against) || !/^https?:$/.test(new URL(values.against).protocol)) cli.fail(`--against must be the service's http(s) URL, not "${values.against}"`);
    if (values.catalog === undefined) cli.fail('--against needs --catalog FILE: the running stack\'s catalog');
    const { againstStack } = await import('./run.ts');
    return againstStack(values.against.replace(/\/+$/, ''), values.catalog, exitAfterStory);
  }
  if (values.catalog !== undefined) cli.fail('--catalog applies only with --against');
  const { runSandbox } = await import('./run.ts');
  return runSandbox(exitAfterStory);
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`sandbox failed: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  },
);
