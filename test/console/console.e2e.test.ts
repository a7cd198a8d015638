import { existsSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_CSP } from '../../services/console/static.ts';
import { roundStream } from '../../services/rounds/events.ts';
import { ADMIN_TOKEN } from '../helpers/service.ts';
import { startMoneyHarness, type MoneyHarness } from '../money/harness.ts';
import { signedRequest } from '../helpers/signing.ts';
import { OP1 } from '../helpers/catalog.ts';

const CHROMIUM = '/usr/bin/chromium';
/** Screenshots of each page, for a look after a run (never committed: test-results/ is ignored). */
const OUT = path.resolve(import.meta.dirname, '../../test-results/console');

/**
 * Issue #23: the back-office console at /console, in a real browser (headless Chromium), against a real
 * service: log in with the admin token (kept for the tab, never in a URL), the overview's charts, search,
 * a round's timeline and time travel, the player page, stuck money and its re-drive, the operators and a
 * CSV statement; all by keyboard too, with nothing asked of another host and no console error.
 */
describe('the back-office console in a real browser (headless Chromium)', () => {
  let h: MoneyHarness;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let base: string;
  const run = randomUUID().slice(0, 8);
  const playerRef = `con-${run}`;
  const roundA = `con-A-${run}`;
  const roundD = `con-D-${run}`;
  const betA = `con-a-bet-${run}`;
  const winA = `con-a-win-${run}`;
  const betD = `con-d-bet-${run}`;
  const winD = `con-d-win-${run}`;
  /** The wallet fails the dead-lettered WIN until the test lets it through. */
  let failWinD = true;

  /** Everything that went wrong in the browser: other hosts, failed requests, error statuses, console errors. */
  const problems: string[] = [];
  /** Every URL the page asked for. */
  const requested: string[] = [];
  /** A 401 the test provokes on purpose (a wrong token on the login form). */
  let expecting401 = false;

  const caughtUp = () => h.caughtUp();

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM}: run \`npm run setup:browser\` (scripts/install-browser.sh) first`);
    await mkdir(OUT, { recursive: true });
    h = await startMoneyHarness('console', { DISPATCH_RETRY_WINDOW_SECONDS: '2' });
    base = `${h.svc.url}/console`;
    const index = await fetch(base);
    if (index.status !== 200) throw new Error(`GET /console answered ${index.status}: services/api/app.ts must mount consoleStatic() (services/console/static.ts)`);

    // Round A: a BET and a WIN the wallet applied; the WIN completes the round.
    const token = await h.launch(playerRef);
    const at = (roundId: string) => ({ sessionToken: token, roundId, playerRef, currency: 'EUR', gameId: 'fruit-1' });
    expect((await h.tx({ ...at(roundA), transactionId: betA, type: 'BET', roundComplete: false, amount: 100 })).status).toBe(200);
    expect((await h.tx({ ...at(roundA), transactionId: winA, type: 'WIN', roundComplete: true, amount: 250 })).status).toBe(200);

    // Round D: a WIN the wallet fails until its retries stop (dead), for the re-drive.
    expect((await h.tx({ ...at(roundD), transactionId: betD, type: 'BET', roundComplete: false, amount: 10 })).status).toBe(200);
    h.wallet.setChaos((tx) => (failWinD && tx.transactionId === winD ? { fail: 500 } : undefined));
    expect((await h.tx({ ...at(roundD), transactionId: winD, type: 'WIN', roundComplete: true, amount: 40 })).status).toBe(502);
    await h.until(async () => {
      const { rows } = await h.svc.ctx.pool.query(`SELECT status FROM rm_transactions WHERE transaction_id = $1`, [winD]);
      return rows[0]?.status === 'dead';
    }, 20_000);
    await caughtUp();

    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    page.on('request', (r) => {
      const url = r.url();
      requested.push(url);
      if (url.startsWith('data:') || url.startsWith('blob:')) return;
      if (new URL(url).hostname !== '127.0.0.1') problems.push(`request to another host: ${url}`);
      if (new URL(url).pathname.startsWith('/v1/') && !expecting401 && r.headers()['authorization'] !== `Bearer ${ADMIN_TOKEN}`) problems.push(`API request without the bearer token: ${url}`);
    });
    page.on('requestfailed', (r) => {
      const error = r.failure()?.errorText ?? '?';
      // A page left while its fetch was under way aborts it (on purpose); anything else is a failure.
      if (error !== 'net::ERR_ABORTED') problems.push(`request failed: ${r.url()} (${error})`);
    });
    page.on('response', (r) => {
      if (r.status() >= 400 && !(expecting401 && r.status() === 401)) problems.push(`HTTP ${r.status()}: ${r.url()}`);
    });
    page.on('console', (m) => {
      if (m.type() !== 'error') return;
      if (expecting401 && m.text().includes('status of 401')) return;
      problems.push(`console error: ${m.text()}`);
    });
    page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await h?.close();
  });

  const shot = (name: string) => page.screenshot({ path: path.join(OUT, `${name}.png`), fullPage: true });
  const title = () => page.locator('h1#page-title');
  const storedToken = () => page.evaluate(() => Object.values(sessionStorage));
  const logIn = async (token = ADMIN_TOKEN) => {
    await page.getByLabel('Admin token').fill(token);
    await page.getByRole('button', { name: 'Log in' }).click();
  };
  /**
   * Opens a route as a fresh page load (focus starts at the top of the document) and waits until it has
   * loaded, as a reader does: the title is there at once and the data follows (app.js), and until then a
   * page's main may hold only "Loading…" (nothing to Tab to).
   */
  const open = async (hash: string) => {
    await page.goto(`${base}${hash}`);
    await page.reload();
    await expect.poll(() => title().count()).toBe(1);
    await expect.poll(() => loadingIn(), { message: hash }).toBe(0);
  };
  /** How many "Loading…" placeholders (dom.js loading()) the page's main still shows. */
  const loadingIn = () => page.locator('main p.muted[role="status"]').filter({ hasText: /…$/ }).count();
  /**
   * Holds the page's requests that `match` at the service's door until `release()`; `reached` resolves at the
   * first. Routed until unrouteAll: unrouted, Playwright lets a held request through at once.
   */
  const hold = async (match: string | ((url: URL) => boolean)) => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let asked!: () => void;
    const reached = new Promise<void>((r) => (asked = r));
    await page.route(match, async (route) => {
      asked();
      await held;
      await route.continue().catch(() => undefined); // the page may have aborted it meanwhile
    });
    return { reached, release };
  };
  /** Is the focused element's focus visible (an outline drawn)? */
  const focusVisible = () =>
    page.evaluate(() => {
      const el = document.activeElement as HTMLElement | null;
      if (!el || el === document.body) return false;
      const s = getComputedStyle(el);
      return el.matches(':focus-within') && s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2;
    });
  const focused = () =>
    page.evaluate(() => {
      const el = document.activeElement as HTMLElement | null;
      return { tag: el?.tagName.toLowerCase() ?? '', id: el?.id ?? '', text: (el?.textContent ?? '').trim().slice(0, 80), label: el?.getAttribute('aria-label') ?? '', href: el?.getAttribute('href') ?? '', inMain: !!el?.closest('main') };
    });
  /** Presses Tab until `want` holds for the focused element, checking that every focus on the way is visible. */
  const tabTo = async (want: (f: Awaited<ReturnType<typeof focused>>) => boolean, max = 60) => {
    for (let i = 0; i < max; i++) {
      await page.keyboard.press('Tab');
      const f = await focused();
      expect(await focusVisible(), `focus visible on ${JSON.stringify(f)}`).toBe(true);
      if (want(f)) return f;
    }
    throw new Error('Tab never reached the element');
  };

  it('serves the page, its modules and Chart.js from the package itself, with its security headers', async () => {
    for (const path of ['/console', '/console/']) {
      const res = await fetch(`${h.svc.url}${path}`);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      expect(res.headers.get('content-security-policy')).toBe(CONSOLE_CSP);
      expect(res.headers.get('cache-control')).toBe('no-store');
      const html = await res.text();
      // Every script and style sheet is the service's own.
      for (const [, url] of html.matchAll(/(?:src|href)="([^"#]+)"/g)) expect(url, url).toMatch(/^\/console\//);
    }
    const module = await fetch(`${h.svc.url}/console/assets/app.js`);
    expect(module.status).toBe(200);
    expect(module.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(module.headers.get('x-content-type-options')).toBe('nosniff');
    const chart = await fetch(`${h.svc.url}/console/vendor/chart.umd.js`);
    expect(chart.status).toBe(200);
    expect(chart.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(await chart.text()).toContain('window.Chart=');
    // Nothing else of the package or the folder.
    for (const path of ['/console/assets/index.html', '/console/assets/../static.ts', '/console/assets/%2e%2e/static.ts', '/console/vendor/chart.js', '/console/assets/nope.js']) {
      expect((await fetch(`${h.svc.url}${path}`)).status, path).toBe(404);
    }
  });

  it('asks for the admin token once, keeps it for the tab across a reload, and forgets it on log out', async () => {
    await page.goto(base);
    await expect.poll(() => title().textContent()).toBe('Log in');
    expect(await page.locator('nav[aria-label="Console"]').isVisible()).toBe(false);
    const headers = (await page.request.get(base)).headers();
    expect(headers['content-security-policy']).toBe(CONSOLE_CSP);
    expect(headers['x-content-type-options']).toBe('nosniff');
    expect(headers['referrer-policy']).toBe('no-referrer');
    expect(headers['cache-control']).toBe('no-store');

    // A wrong token is refused and not kept.
    expecting401 = true;
    await logIn('not-the-token');
    await expect.poll(() => page.locator('#login-status').textContent()).toContain('refused');
    expecting401 = false;
    expect(await storedToken()).toEqual([]);

    await logIn();
    await expect.poll(() => title().textContent()).toBe('Overview');
    expect(await storedToken()).toEqual([ADMIN_TOKEN]);
    expect(await page.locator('nav[aria-label="Console"]').isVisible()).toBe(true);

    await page.reload();
    await expect.poll(() => title().textContent()).toBe('Overview');
    expect(await page.locator('#login-form').count()).toBe(0);

    await page.getByRole('button', { name: 'Log out' }).click();
    await expect.poll(() => title().textContent()).toBe('Log in');
    expect(await storedToken()).toEqual([]);
    await page.reload();
    await expect.poll(() => title().textContent()).toBe('Log in');

    await logIn();
    await expect.poll(() => title().textContent()).toBe('Overview');
  });

  it('draws the overview with Chart.js, refreshes it live, and switches between the last hour and day', async () => {
    await page.goto(`${base}#/overview`);
    await expect.poll(() => page.locator('#overview-updated').textContent()).toContain('Updated');
    const canvases = page.locator('main canvas');
    expect(await canvases.count()).toBe(4);
    const charts = await page.evaluate(() => {
      const Chart = (window as unknown as { Chart?: { getChart(c: HTMLCanvasElement): { data: { datasets: Array<{ data: unknown[] }> } } | undefined } }).Chart;
      return [...document.querySelectorAll('main canvas')].map((c) => {
        const chart = Chart?.getChart(c as HTMLCanvasElement);
        return { drawn: !!chart, width: (c as HTMLCanvasElement).width, points: chart?.data.datasets.reduce((n, d) => n + d.data.length, 0) ?? 0 };
      });
    });
    for (const c of charts) expect(c).toMatchObject({ drawn: true });
    expect(charts.every((c) => c.width > 0 && c.points > 0)).toBe(true);
    // The transactions of the setup are in the last hour's buckets, and the dead WIN is counted.
    const txTotal = await page.evaluate(() => {
      const Chart = (window as unknown as { Chart: { getChart(c: Element): { data: { datasets: Array<{ data: number[] }> } } } }).Chart;
      return Chart.getChart(document.getElementById('chart-transactions')!).data.datasets[0]!.data.reduce((a, b) => a + b, 0);
    });
    expect(txTotal).toBeGreaterThanOrEqual(4);
    expect(Number(await page.locator('[data-tile="dead"] .tile-value').textContent())).toBeGreaterThanOrEqual(1);
    expect(await page.locator('.notice-error').count()).toBe(0);

    // Live: asked again within 5 s or so without anything being done.
    await page.waitForRequest((r) => r.url().includes('/v1/admin/console/overview?window=hour'), { timeout: 8_000 });
    const day = page.waitForRequest((r) => r.url().includes('/v1/admin/console/overview?window=day'));
    await page.getByRole('button', { name: 'Last day' }).click();
    await day;
    await expect.poll(() => page.locator('#overview-updated').textContent()).toContain('Last day');
    expect(await page.getByRole('button', { name: 'Last day' }).getAttribute('aria-pressed')).toBe('true');
    await page.getByRole('button', { name: 'Last hour' }).click();
    await expect.poll(() => page.locator('#overview-updated').textContent()).toContain('Last hour');
    await shot('overview');
  });

  it('a window chosen while a refresh is under way is the one shown, not the late answer of the other', async () => {
    await open('#/overview');
    const updated = () => page.locator('#overview-updated').textContent();
    await expect.poll(updated).toContain('Last hour');
    const hourAsked = (url: URL) => url.pathname.endsWith('/v1/admin/console/overview') && url.searchParams.get('window') === 'hour';
    let gate: Awaited<ReturnType<typeof hold>> | undefined;
    try {
      // A refresh of the last hour, held at the service's door.
      gate = await hold(hourAsked);
      await page.getByRole('button', { name: 'Last hour' }).click();
      await gate.reached;
      // Meanwhile the last day is chosen, and shown.
      await page.getByRole('button', { name: 'Last day' }).click();
      await expect.poll(updated).toContain('Last day');
      // The hour's answer arrives late: it is not drawn over the day.
      const late = page.waitForResponse((r) => hourAsked(new URL(r.url())));
      gate.release();
      await late;
      await new Promise((r) => setTimeout(r, 300));
      expect(await updated()).toContain('Last day');
      expect(await page.getByRole('button', { name: 'Last day' }).getAttribute('aria-pressed')).toBe('true');
    } finally {
      gate?.release();
      await page.unrouteAll({ behavior: 'ignoreErrors' });
    }
  });

  it('finds a round by its id and opens its timeline with each wallet call', async () => {
    await page.getByLabel('Search by transaction id, round id, player ref or grant id').fill(roundA);
    await page.keyboard.press('Enter');
    await expect.poll(() => page.evaluate(() => location.hash)).toBe(`#/search?q=${roundA}`);
    const link = page.locator('#search-results li[data-kind="round"] a');
    await expect.poll(() => link.count()).toBe(1);
    await shot('search');
    await link.click();
    await expect.poll(() => page.evaluate(() => location.hash)).toBe(`#/round/studio-a/op-1/${roundA}`);
    const types = () => page.locator('#timeline li').evaluateAll((lis) => lis.map((li) => li.getAttribute('data-type')));
    await expect.poll(types).toEqual(['TransactionRecorded', 'TransactionSettled', 'TransactionRecorded', 'TransactionSettled']);
    const calls = page.locator('table.wallet-calls tbody tr');
    expect(await calls.count()).toBe(2);
    expect(await calls.nth(1).textContent()).toContain(winA);
    expect(await calls.nth(1).textContent()).toContain('applied');
    expect(await page.locator('#timeline').textContent()).toContain('250 EUR minor');

    // The transaction id leads to the same round.
    await page.goto(`${base}#/search?q=${encodeURIComponent(winA)}`);
    await expect.poll(() => page.locator('#search-results li[data-kind="transaction"] a').getAttribute('href')).toBe(`#/round/studio-a/op-1/${roundA}`);
  });

  it('travels through the round: the state after each event, by slider, keys and buttons', async () => {
    await page.goto(`${base}#/round/studio-a/op-1/${roundA}`);
    const slider = page.getByLabel('Show the round as it was after event');
    await expect.poll(() => slider.inputValue()).toBe('4');
    const stateTxs = () => page.locator('table.state-transactions tbody tr').evaluateAll((rows) => rows.map((r) => r.querySelector('code')?.textContent));
    const completed = () => page.locator('#travel-state [data-field="completed"]').textContent();
    expect(await stateTxs()).toEqual([betA, winA]);
    expect(await completed()).toBe('yes');
    await shot('round');

    await slider.focus();
    await page.keyboard.press('ArrowLeft');
    await expect.poll(() => page.locator('#travel-at').textContent()).toContain('After event 3 of 4: TransactionRecorded');
    expect(await stateTxs()).toEqual([betA, winA]); // the WIN is recorded, not settled yet
    expect(await page.locator('table.state-transactions tbody tr').nth(1).textContent()).toContain('recorded');
    await page.keyboard.press('Home');
    await expect.poll(() => page.locator('#travel-at').textContent()).toContain('After event 1 of 4');
    expect(await stateTxs()).toEqual([betA]); // the WIN is not there yet
    expect(await completed()).toBe('no');
    expect(await page.locator('#timeline li.future').count()).toBe(3);
    await page.getByRole('button', { name: 'Next' }).click();
    await expect.poll(() => slider.inputValue()).toBe('2');
    expect(await page.locator('table.state-transactions tbody tr').first().textContent()).toContain('applied');
    await page.getByRole('button', { name: 'Latest' }).click();
    await expect.poll(stateTxs).toEqual([betA, winA]);
    expect(await completed()).toBe('yes');

    // A replay link: shown as a link (to the provider's site, which the test does not open).
    await page.getByRole('button', { name: 'Get replay link' }).click();
    await expect.poll(() => page.locator('#replay-link').getAttribute('href')).toMatch(/^https:\/\/replay\.studio-a\.test\/fruit\?token=/);
  });

  it("shows the player's sessions, rounds and grants, a grant's stake of 0 as the wallet's default", async () => {
    const grant = (betAmountMinor: number) =>
      signedRequest<{ id: string }>(h.svc.url, {
        path: '/v1/operator/free-spins/grants',
        body: { playerRef, idempotencyKey: randomUUID(), gameId: 'fruit-1', spins: 5, currency: 'EUR', betAmountMinor },
        as: OP1,
      });
    const [byDefault, fixed] = [await grant(0), await grant(20)];
    expect([byDefault.status, fixed.status]).toEqual([201, 201]);
    await caughtUp();
    await page.goto(`${base}#/round/studio-a/op-1/${roundA}`);
    await page.getByRole('link', { name: playerRef }).click();
    await expect.poll(() => page.evaluate(() => location.hash)).toBe(`#/player/op-1/${playerRef}`);
    const sessions = page.locator('table.sessions tbody tr');
    await expect.poll(() => sessions.count()).toBe(1);
    expect(await sessions.first().textContent()).toContain('active');
    const rounds = page.locator('table.rounds tbody tr');
    expect(await rounds.count()).toBe(2);
    const roundTexts = await rounds.allTextContents();
    expect(roundTexts.find((t) => t.includes(roundA))).toContain('250 EUR minor');
    expect(roundTexts.find((t) => t.includes(roundD))).toBeDefined();
    const grantRow = (id: string) => page.locator('table.grants tbody tr', { hasText: id });
    await expect.poll(() => page.locator('table.grants tbody tr').count()).toBe(2);
    expect(await grantRow(byDefault.json.id).locator('td').nth(5).textContent()).toBe('wallet default (EUR)');
    expect(await grantRow(fixed.json.id).locator('td').nth(5).textContent()).toBe('20 EUR minor');
    await shot('player');
  });

  it('lists the dead WIN among the stuck money and re-drives it: the wallet gets it once more, the round shows TransactionRedriven', async () => {
    await page.goto(`${base}#/stuck`);
    const row = page.locator(`tr[data-transaction="${winD}"]`);
    await expect.poll(() => row.getAttribute('data-status')).toBe('dead');
    expect(await row.textContent()).toContain('40 EUR minor');
    expect(await row.locator('.error-text').textContent()).not.toBe('—');
    await shot('stuck');

    const before = h.walletCallsFor(winD).length;
    failWinD = false;
    await row.getByRole('button', { name: 'Re-drive' }).click();
    await page.getByLabel('Who re-drives it').fill('console test');
    await page.getByLabel('Why').fill('the wallet is back');
    await page.getByRole('button', { name: 'Re-drive now' }).click();
    await expect.poll(() => page.locator('.redrive-status').textContent()).toContain('Re-driven');
    await h.until(() => h.walletCallsFor(winD).length === before + 1);
    await h.until(() => h.wallet.effects.get(winD) === 1);
    await new Promise((r) => setTimeout(r, 500));
    expect(h.walletCallsFor(winD).length).toBe(before + 1); // once more, not again and again

    await page.goto(`${base}#/round/studio-a/op-1/${roundD}`);
    const types = () => page.locator('#timeline li').evaluateAll((lis) => lis.map((li) => li.getAttribute('data-type')));
    await expect.poll(types).toContain('TransactionRedriven');
    const redriven = page.locator('#timeline li[data-type="TransactionRedriven"]');
    expect(await redriven.textContent()).toContain('re-driven by console test: the wallet is back');
    // Its wallet call, applied, follows (reload until the worker's outcome is recorded; each reload waited
    // for, since a click while one is under way cancels it).
    await expect
      .poll(async () => {
        await Promise.all([page.waitForResponse((r) => r.url().includes('/v1/audit/rounds/')), page.getByRole('button', { name: 'Reload' }).click()]);
        return (await types()).slice(-2);
      }, { timeout: 10_000 })
      .toEqual(['TransactionRedriven', 'TransactionSettled']);
    await shot('round-redriven');
  });

  it("shows each operator's catalog entry and a settlement statement, and downloads it as CSV", async () => {
    await page.goto(`${base}#/operators`);
    const op1 = page.locator('section.operator[data-operator="op-1"]');
    await expect.poll(() => op1.count()).toBe(1);
    const text = (await op1.textContent()) ?? '';
    expect(text).toContain('Operator One');
    expect(text).toContain(h.wallet.url);
    expect(text).toContain('5,000 ms');
    expect(text).toContain('10,000 requests per 1 s');
    expect(text).toContain('fruit-1');
    expect(text).toContain('gems-2');
    expect(await page.locator('section.operator[data-operator="op-2"]').count()).toBe(1);

    await page.getByLabel('Operator', { exact: true }).selectOption('op-1');
    // Round A's BET (100) and WIN (250), round D's BET (10) and its re-driven WIN (40), once the read model has it.
    const line = page.locator('table.statement-lines tbody tr', { hasText: 'fruit-1' });
    await expect
      .poll(async () => {
        await page.getByRole('button', { name: 'Show statement' }).click();
        await page.locator('table.statement-lines').waitFor();
        return (await line.textContent()) ?? '';
      })
      .toContain('2 · 290 EUR minor');
    expect(await line.textContent()).toContain('2 · 110 EUR minor');
    await shot('operators');

    const download = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Download CSV' }).click();
    const file = await download;
    expect(file.suggestedFilename()).toMatch(/^settlement-op-1-.*\.csv$/);
    const csv = await readFile((await file.path())!, 'utf8');
    const [header, ...rows] = csv.trim().split('\r\n');
    expect(header).toBe('providerId,gameId,currency,betCount,betAmountMinor,winCount,winAmountMinor,refundCount,refundAmountMinor,ggrMinor');
    const fruit = rows.find((r) => r.startsWith('studio-a,fruit-1,EUR,'))!.split(',');
    expect(fruit.slice(3, 7)).toEqual(['2', '110', '2', '290']);
  });

  it('offers a re-drive for a WIN its wallet answered DECLINED (dead to the operator, invalid in the history), on the round page and the stuck list, and none for its BET', async () => {
    const roundE = `con-E-${run}`;
    const winE = `con-e-win-${run}`;
    const token = await h.launch(playerRef);
    const at = { sessionToken: token, roundId: roundE, playerRef, currency: 'EUR', gameId: 'fruit-1' };
    expect((await h.tx({ ...at, transactionId: `con-e-bet-${run}`, type: 'BET', roundComplete: false, amount: 10 })).status).toBe(200);
    // A BET the wallet failed, then rolled back: the page shows both its last error and its rollback.
    const failedBet = `con-e-bet2-${run}`;
    h.wallet.script(failedBet, { status: 503, body: {} });
    expect((await h.tx({ ...at, transactionId: failedBet, type: 'BET', roundComplete: false, amount: 5 })).status).toBe(502);
    expect((await h.tx({ ...at, transactionId: `${failedBet}-rb`, type: 'ROLLBACK', originalTransactionId: failedBet, amount: 5 })).status).toBe(200);
    h.wallet.script(winE, { status: 200, body: { status: 'DECLINED', balance: 0 } });
    expect((await h.tx({ ...at, transactionId: winE, type: 'WIN', roundComplete: true, amount: 30 })).status).toBe(502);
    await caughtUp();
    await page.goto(`${base}#/round/studio-a/op-1/${roundE}`);
    const dead = page.locator('.dead-row');
    await expect.poll(() => dead.count()).toBe(1);
    expect(await dead.textContent()).toContain(winE);
    expect(await dead.getByRole('button', { name: 'Re-drive' }).count()).toBe(1);
    const failedRow = page.locator('table.state-transactions tbody tr').filter({ hasText: failedBet }).first();
    expect(await failedRow.textContent()).toContain('wallet answered 503');
    expect(await failedRow.textContent()).toContain(`${failedBet}-rb`);
    // The stuck list is the read model's, drawn once a visit: visited once the read model has the WIN's
    // outcome, which is recorded behind its answer.
    const outcome = async () =>
      (await h.svc.ctx.eventStore.readStream(roundStream('studio-a', 'op-1', roundE))).some((e) => e.type === 'TransactionSettled' && (e.data as { transactionId?: string }).transactionId === winE);
    await expect.poll(outcome).toBe(true);
    await caughtUp();
    await page.goto(`${base}#/stuck`);
    const row = page.locator(`tr[data-transaction="${winE}"]`);
    await expect.poll(() => row.getAttribute('data-status', { timeout: 1000 })).toBe('dead');
    expect(await row.getByRole('button', { name: 'Re-drive' }).count()).toBe(1);
  });

  it('a reload that fails says so on the page, and leaving a page while it reloads is no error', async () => {
    // Each page, its route, its button, where it says why, and what it shows that a failed reload keeps.
    const pages: Array<[string, string, string, string, string]> = [
      [`#/round/studio-a/op-1/${roundA}`, '**/v1/audit/rounds/**', 'Reload', '#round-problem', '#timeline'],
      ['#/stuck', '**/v1/admin/console/stuck', 'Refresh', '#stuck-problem', '#stuck-summary'],
    ];
    for (const [hash, api, button, problemBox, kept] of pages) {
      let gate: Awaited<ReturnType<typeof hold>> | undefined;
      try {
        await open(hash);
        const shown = await page.locator(kept).textContent();
        expect(shown, hash).toBeTruthy();

        // The service answers 503: the page keeps what it showed and says why it could not reload.
        const before = problems.length;
        await page.route(api, (route) => route.fulfill({ status: 503, contentType: 'application/json', body: JSON.stringify({ error: 'the event store is unavailable' }) }));
        await page.getByRole('button', { name: button, exact: true }).click();
        await expect.poll(() => page.locator(problemBox).textContent(), { message: hash }).toContain('Could not reload: the event store is unavailable');
        expect(await page.locator(kept).textContent(), hash).toBe(shown);
        await page.unroute(api);
        // The next reload that succeeds clears it, and focus is on the button again (the round's is drawn anew).
        await page.getByRole('button', { name: button, exact: true }).click();
        await expect.poll(() => page.locator(problemBox).textContent(), { message: hash }).toBe('');
        await expect.poll(async () => (await focused()).text, { message: hash }).toBe(button);

        // The page is left while its reload is under way: its fetch is aborted, and that is no error.
        gate = await hold(api);
        await page.getByRole('button', { name: button, exact: true }).click();
        await gate.reached;
        await page.evaluate(() => (location.hash = '#/overview'));
        await expect.poll(() => title().textContent()).toBe('Overview');
        gate.release();
        await new Promise((r) => setTimeout(r, 200));
        // The 503 and the browser's line about it, and nothing else: the page threw nothing.
        const seen = problems.splice(before);
        expect(seen.some((p) => /503/.test(p)), hash).toBe(true);
        expect(seen.filter((p) => !/503/.test(p)), hash).toEqual([]);
      } finally {
        gate?.release();
        await page.unrouteAll({ behavior: 'ignoreErrors' });
      }
    }
  });

  it('a first load that fails says why in place of "Loading…", on the player, operators and search pages', async () => {
    const pages: Array<[string, string]> = [
      [`#/player/op-1/${playerRef}`, '**/v1/admin/console/players/**'],
      ['#/operators', '**/v1/admin/console/operators'],
      [`#/search?q=${playerRef}`, '**/v1/admin/console/search**'],
    ];
    for (const [hash, api] of pages) {
      const before = problems.length;
      await page.route(api, (route) => route.fulfill({ status: 503, contentType: 'application/json', body: JSON.stringify({ error: 'the event store is unavailable' }) }));
      try {
        await page.evaluate((h) => (location.hash = h), hash);
        await expect.poll(() => page.locator('main').textContent(), { message: hash }).toContain('Could not load this page: the event store is unavailable');
        expect(await page.locator('main').textContent(), hash).not.toMatch(/Loading…|Searching…/);
      } finally {
        await page.unrouteAll({ behavior: 'ignoreErrors' });
        await page.evaluate(() => (location.hash = '#/overview'));
        await expect.poll(() => title().textContent()).toBe('Overview');
      }
      // The 503s and the browser's lines about them, nothing else.
      expect(problems.splice(before).filter((p) => !/503/.test(p)), hash).toEqual([]);
    }
  });

  it('shows the latest of two refreshes, whichever answer comes back last, and a first load that failed is cleared by the next that succeeds', async () => {
    const api = '**/v1/admin/console/stuck';
    const stuckTx = (transactionId: string) => ({
      operatorId: 'op-1', providerId: 'studio-a', roundId: 'r-late', gameId: 'fruit-1', transactionId, type: 'WIN', amount: 100, currency: 'EUR',
      status: 'pending', recordedAt: new Date().toISOString(), ageSeconds: 5, attempts: 0,
    });
    const answer = (body: unknown) => ({ status: 200, contentType: 'application/json', body: JSON.stringify(body) });
    const before = problems.length;
    let release: (() => void) | undefined;
    try {
      // Its first load fails: the page says so.
      await page.route(api, (route) => route.fulfill({ status: 503, contentType: 'application/json', body: JSON.stringify({ error: 'the event store is unavailable' }) }));
      await page.goto(`${base}#/stuck`);
      await page.reload();
      await expect.poll(() => page.locator('main').textContent()).toContain('Could not load this page: the event store is unavailable');
      await page.unroute(api);

      // Two refreshes: the first one's answer is held and comes back after the second's. The page shows the second's.
      const held = new Promise<void>((r) => (release = r));
      let calls = 0;
      await page.route(api, async (route) => {
        if (++calls === 1) {
          await held;
          await route.fulfill(answer({ transactions: [stuckTx('tx-earlier')] })).catch(() => undefined); // aborted by the page meanwhile
        } else await route.fulfill(answer({ transactions: [stuckTx('tx-later-1'), stuckTx('tx-later-2')] }));
      });
      const refresh = page.getByRole('button', { name: 'Refresh', exact: true });
      await refresh.click();
      await expect.poll(() => calls).toBe(1);
      await refresh.click();
      await expect.poll(() => page.locator('#stuck-summary').textContent()).toBe('2 transactions: 2 pending, 0 failed, 0 dead.');
      release!();
      await new Promise((r) => setTimeout(r, 300));
      expect(await page.locator('#stuck-summary').textContent()).toBe('2 transactions: 2 pending, 0 failed, 0 dead.');
      expect(await page.locator('#stuck-list tr[data-transaction]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-transaction')))).toEqual(['tx-later-1', 'tx-later-2']);
      // The first load's failure went with the refresh that succeeded.
      expect(await page.locator('main').textContent()).not.toContain('Could not');
      expect(problems.splice(before).filter((p) => !/503/.test(p))).toEqual([]);
    } finally {
      release?.();
      await page.unrouteAll({ behavior: 'ignoreErrors' });
    }
  });

  it('works by keyboard on every page: a skip link, the nav by Tab, Enter follows links, focus always visible', async () => {
    const pages: Array<[string, string, (f: Awaited<ReturnType<typeof focused>>) => boolean]> = [
      ['#/overview', 'Overview', (f) => f.text === 'Last day'],
      ['#/search', 'Search', (f) => f.id === 'search-q'],
      [`#/round/studio-a/op-1/${roundA}`, `Round ${roundA}`, (f) => f.id === 'travel'],
      [`#/player/op-1/${playerRef}`, `Player ${playerRef} with op-1`, (f) => f.inMain && f.text === roundA],
      ['#/stuck', 'Stuck money', (f) => f.text === 'Refresh'],
      ['#/operators', 'Operators', (f) => f.text === 'Show statement'],
    ];
    for (const [hash, heading, control] of pages) {
      await open(hash);
      await expect.poll(() => title().textContent(), { message: hash }).toBe(heading);
      // The skip link comes first and moves focus into the page.
      await page.keyboard.press('Tab');
      expect(await focused(), hash).toMatchObject({ text: 'Skip to main content' });
      expect(await focusVisible()).toBe(true);
      await page.keyboard.press('Enter');
      expect((await focused()).id).toBe('main');
      expect(await page.evaluate(() => location.hash)).toBe(hash); // the skip link leaves the route alone
      const first = await tabTo(() => true);
      expect(first.inMain, hash).toBe(true);

      // From the top: every nav link by Tab, then the page's own main control.
      await open(hash);
      const navHrefs: string[] = [];
      await tabTo((f) => {
        if (['#/overview', '#/search', '#/stuck', '#/operators'].includes(f.href) && !f.inMain && f.text !== 'Ledger console') navHrefs.push(f.href);
        return f.text === 'Log out';
      });
      expect(navHrefs, hash).toEqual(['#/overview', '#/search', '#/stuck', '#/operators']);
      await tabTo(control);
    }

    // Enter follows a nav link, and focus moves to the new page's title.
    await open('#/overview');
    await tabTo((f) => f.text === 'Stuck money');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.evaluate(() => location.hash)).toBe('#/stuck');
    await expect.poll(() => focused()).toMatchObject({ tag: 'h1', text: 'Stuck money' });

    // Enter follows a link in a page: the player's round opens its timeline.
    await open(`#/player/op-1/${playerRef}`);
    await tabTo((f) => f.inMain && f.text === roundA);
    await page.keyboard.press('Enter');
    await expect.poll(() => page.evaluate(() => location.hash)).toBe(`#/round/studio-a/op-1/${roundA}`);
    // The slider moves with the arrow keys.
    await expect.poll(() => page.locator('#timeline li').count()).toBe(4);
    await tabTo((f) => f.id === 'travel');
    await page.keyboard.press('ArrowLeft');
    await page.keyboard.press('ArrowLeft');
    await expect.poll(() => page.locator('#travel-at').textContent()).toContain('After event 2 of 4');

    // The search form and the statement form by keyboard alone.
    await open('#/search');
    await tabTo((f) => f.id === 'search-q');
    await page.keyboard.type(playerRef);
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator('#search-results li[data-kind="player"] a').count()).toBe(1);
    await open('#/operators');
    await tabTo((f) => f.text === 'Show statement');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator('table.statement-lines tbody tr').count()).toBeGreaterThanOrEqual(1);
  }, 90_000);

  it('asked nothing of another host, never put the token in a URL, and logged no error', async () => {
    expect(requested.length).toBeGreaterThan(20);
    expect(requested.filter((u) => u.includes(ADMIN_TOKEN) || u.includes(encodeURIComponent(ADMIN_TOKEN)))).toEqual([]);
    expect(requested.some((u) => u.endsWith('/console/vendor/chart.umd.js'))).toBe(true);
    expect(problems).toEqual([]);
  });
});
