import { existsSync, statSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { Cli } from '../shared/cli.ts';
import { OP1 } from '../test/helpers/catalog.ts';
import { signedRequest } from '../test/helpers/signing.ts';
import type { MoneyHarness } from '../test/money/harness.ts';

/*
 * `npm run screenshots`: one screenshot of each page of the back-office console (issue #23) for
 * docs/console.md. It starts the whole service in this process on a database and a Redis database of its
 * own (as the tests do: dropped and released at the end), with a fake wallet and provider, plays some
 * traffic through the real signed APIs (rounds, a retried WIN, a dead-lettered WIN, a kick, a free-spin
 * grant), then drives headless Chromium through the console.
 */

const ROOT = path.resolve(import.meta.dirname, '..');
const CHROMIUM = '/usr/bin/chromium';
const USAGE = `usage: npm run screenshots [-- --out DIR]

Starts the service with a database of its own, a fake operator wallet and provider, plays some traffic,
and saves one screenshot of each page of the console (/console) as PNG, taken with headless Chromium.

  --out DIR   where the PNG files go (created when missing); default docs/screenshots
  --help      this text

Needs Postgres (TEST_PG_URL, default postgres://postgres@127.0.0.1:5432/postgres) and Redis (TEST_REDIS_URL,
default redis://127.0.0.1:6379) as the tests do, and Chromium at ${CHROMIUM} (npm run setup:browser).
Exit status: 0 every screenshot saved, 1 it failed, 2 bad usage.`;

const PAGES = ['login', 'overview', 'search', 'round', 'player', 'stuck', 'operators'] as const;

const print = (line: string) => process.stdout.write(`${line}\n`);

interface Story {
  playerRef: string;
  /** A round whose WIN failed once and was applied on its retry. */
  retriedRound: string;
  /** The WIN whose retries stopped. */
  deadWin: string;
}

/** Traffic for the pages to show: a few players and rounds, wallet latency and failures, a dead WIN, a kick, a grant. */
async function playTraffic(h: MoneyHarness): Promise<Story> {
  const run = randomUUID().slice(0, 6);
  const playerRef = `player-${run}`;
  const ok = async (what: string, p: Promise<{ status: number; text: string }>, ...want: number[]) => {
    const res = await p;
    if (!(want.length ? want : [200]).includes(res.status)) throw new Error(`${what}: HTTP ${res.status} ${res.text}`);
  };
  h.wallet.setLatency('BET', 25);
  h.wallet.setLatency('WIN', 60);
  const token = await h.launch(playerRef);
  const at = (roundId: string) => ({ sessionToken: token, roundId, playerRef, currency: 'EUR', gameId: 'fruit-1' });
  for (let i = 1; i <= 6; i++) {
    const roundId = `round-${run}-${i}`;
    await ok('bet', h.tx({ ...at(roundId), transactionId: `bet-${run}-${i}`, type: 'BET', roundComplete: false, amount: 100 * i }));
    await ok('win', h.tx({ ...at(roundId), transactionId: `win-${run}-${i}`, type: 'WIN', roundComplete: true, amount: i % 2 === 0 ? 150 * i : 0 }));
  }
  // A WIN the wallet fails once: retried by the worker, then applied.
  const retriedRound = `round-${run}-retried`;
  await ok('bet', h.tx({ ...at(retriedRound), transactionId: `bet-${run}-r`, type: 'BET', roundComplete: false, amount: 500 }));
  h.wallet.script(`win-${run}-r`, { status: 503, body: { error: 'maintenance' } });
  await ok('win', h.tx({ ...at(retriedRound), transactionId: `win-${run}-r`, type: 'WIN', roundComplete: true, amount: 1250 }), 200, 502);
  await h.until(() => h.wallet.effects.get(`win-${run}-r`) === 1);
  // A WIN the wallet never accepts: dead once the retry window is over.
  const deadWin = `win-${run}-dead`;
  h.wallet.script(deadWin, ...Array.from({ length: 200 }, () => ({ status: 500, body: {} })));
  await ok('bet', h.tx({ ...at(`round-${run}-dead`), transactionId: `bet-${run}-dead`, type: 'BET', roundComplete: false, amount: 200 }));
  await ok('win', h.tx({ ...at(`round-${run}-dead`), transactionId: deadWin, type: 'WIN', roundComplete: true, amount: 900 }), 502);
  // Another player, kicked; a free-spin grant for the first.
  const other = `player-${run}-b`;
  const otherToken = await h.launch(other);
  await ok('bet', h.tx({ sessionToken: otherToken, roundId: `round-${run}-b`, playerRef: other, currency: 'EUR', gameId: 'fruit-1', transactionId: `bet-${run}-b`, type: 'BET', roundComplete: true, amount: 40 }));
  await ok('kick', signedRequest(h.svc.url, { path: '/v1/operator/players/kick', body: { playerRef: other }, as: OP1 }));
  await h.launch(playerRef); // a second session of the first player
  await ok(
    'grant',
    signedRequest(h.svc.url, { path: '/v1/operator/free-spins/grants', body: { playerRef, idempotencyKey: randomUUID(), gameId: 'fruit-1', spins: 10, currency: 'EUR', betAmountMinor: 20 }, as: OP1 }),
    201,
  );
  await h.until(async () => {
    const { rows } = await h.svc.ctx.pool.query(`SELECT status FROM rm_transactions WHERE transaction_id = $1`, [deadWin]);
    return rows[0]?.status === 'dead';
  }, 30_000);
  await h.until(async () => (await Promise.all(h.svc.runners.map((r) => r.lag()))).every((l) => l.eventsBehind === 0), 30_000);
  return { playerRef, retriedRound, deadWin };
}

async function takeScreenshots(page: Page, base: string, out: string, story: Story, adminToken: string): Promise<void> {
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(m.text());
  });
  page.on('pageerror', (err) => problems.push(err.message));
  const save = async (name: (typeof PAGES)[number]) => {
    const file = path.join(out, `${name}.png`);
    await page.screenshot({ path: file, fullPage: true });
    print(`  ${path.relative(process.cwd(), file) || file}`);
  };
  const heading = (text: string) => page.locator('h1#page-title', { hasText: text }).waitFor({ timeout: 15_000 });

  await page.goto(`${base}#/overview`);
  await heading('Log in');
  await save('login');
  await page.getByLabel('Admin token').fill(adminToken);
  await page.getByRole('button', { name: 'Log in' }).click();
  await heading('Overview');
  await page.locator('#overview-updated', { hasText: 'Updated' }).waitFor();
  await save('overview');

  await page.goto(`${base}#/search?q=${encodeURIComponent(story.retriedRound)}`);
  await page.locator('#search-results li a').first().waitFor();
  await save('search');

  await page.goto(`${base}#/round/studio-a/op-1/${encodeURIComponent(story.retriedRound)}`);
  await page.locator('#timeline li').first().waitFor();
  await page.getByLabel('Show the round as it was after event').focus();
  await page.keyboard.press('ArrowLeft'); // the state before the WIN's applied retry
  await save('round');

  await page.goto(`${base}#/player/op-1/${encodeURIComponent(story.playerRef)}`);
  await page.locator('table.sessions').waitFor();
  await save('player');

  await page.goto(`${base}#/stuck`);
  const row = page.locator(`tr[data-transaction="${story.deadWin}"]`);
  await row.waitFor();
  await row.getByRole('button', { name: 'Re-drive' }).click();
  await page.getByLabel('Who re-drives it').fill('ops@example.com');
  await page.getByLabel('Why').fill('the wallet was down for maintenance; it is back');
  await save('stuck');

  await page.goto(`${base}#/operators`);
  await page.locator('section.operator').first().waitFor();
  await page.getByRole('button', { name: 'Show statement' }).click();
  await page.locator('table.statement-lines').waitFor();
  await save('operators');

  if (problems.length > 0) throw new Error(`the console logged errors:\n  ${problems.join('\n  ')}`);
}

async function main(): Promise<number> {
  const cli = new Cli('screenshots', USAGE);
  const { values } = cli.parse({ options: { out: { type: 'string' }, help: { type: 'boolean' } } });
  if (values.out !== undefined && values.out.trim() === '') cli.fail('--out needs a folder');
  const out = path.resolve(values.out ?? path.join(ROOT, 'docs/screenshots'));
  if (existsSync(out) && !statSync(out).isDirectory()) cli.fail(`--out ${values.out ?? out}: a file is there, not a folder`);
  if (!existsSync(CHROMIUM)) {
    process.stderr.write(`Chromium not found at ${CHROMIUM}: run npm run setup:browser first\n`);
    return 1;
  }
  await mkdir(out, { recursive: true });
  // Loaded once the options are good: a bad one or --help answers without the service and the browser driver.
  const [{ chromium }, { startMoneyHarness }, { ADMIN_TOKEN }] = await Promise.all([import('playwright-core'), import('../test/money/harness.ts'), import('../test/helpers/service.ts')]);

  let h: MoneyHarness | undefined;
  let browser: Browser | undefined;
  try {
    print('Starting the service with a database of its own…');
    h = await startMoneyHarness('screenshots', { DISPATCH_RETRY_WINDOW_SECONDS: '3' });
    const base = `${h.svc.url}/console`;
    const index = await fetch(base);
    if (index.status !== 200) throw new Error(`GET /console answered ${index.status}: is consoleStatic() mounted in services/api/app.ts?`);
    print('Playing some traffic…');
    const story = await playTraffic(h);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    // Nothing but the service itself.
    await page.route(/^(?!data:|blob:)/, (route) => (new URL(route.request().url()).hostname === '127.0.0.1' ? route.continue() : route.abort()));
    print(`Screenshots into ${out}:`);
    await takeScreenshots(page, base, out, story, ADMIN_TOKEN);
    print(`Done: ${PAGES.length} screenshots.`);
    return 0;
  } catch (err) {
    process.stderr.write(`screenshots failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    return 1;
  } finally {
    await browser?.close().catch(() => undefined);
    await h?.close().catch(() => undefined);
  }
}

process.exit(await main());
