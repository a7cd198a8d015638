import { existsSync, readFileSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../../services/service.ts';
import { OP1, testCatalog } from '../helpers/catalog.ts';
import { createTestEnv, startInProcess, type TestEnv } from '../helpers/service.ts';

const CHROMIUM = '/usr/bin/chromium';
const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

describe('/docs in a real browser (headless Chromium)', () => {
  let env: TestEnv;
  let svc: RunningService & { url: string };
  let browser: Browser;
  let page: Page;
  /** Everything that went wrong while the page loaded: failed requests, error statuses, console errors, foreign origins. */
  const problems: string[] = [];

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM}: run \`npm run setup:browser\` (scripts/install-browser.sh) first`);
    env = await createTestEnv('docspage');
    svc = await startInProcess(env, { ROLES: 'api' });
    await svc.ctx.catalog.apply(testCatalog()); // op-1, for the signed "Try it out" below
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    page = await browser.newPage();
    const origin = new URL(svc.url).origin;
    page.on('request', (r) => {
      const url = r.url();
      if (!url.startsWith('data:') && new URL(url).origin !== origin) problems.push(`request to another origin: ${url}`);
    });
    page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()} (${r.failure()?.errorText ?? '?'})`));
    page.on('response', (r) => {
      if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`);
    });
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
    });
    page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
    await page.goto(`${svc.url}/docs`, { waitUntil: 'load' });
    await page.locator('.opblock').first().waitFor({ timeout: 20_000 });
  });

  afterAll(async () => {
    await browser?.close();
    await svc?.stop();
    await env?.cleanup();
  });

  it('shows the title and version of the document', async () => {
    expect(await page.title()).toBe('Seamless-wallet ledger API');
    const title = page.locator('.information-container .title');
    await expect.poll(() => title.textContent()).toContain('Seamless-wallet ledger API');
    expect(await title.textContent()).toContain(VERSION);
    expect(await title.textContent()).toContain('OAS 3.1');
  });

  it('renders the operation blocks of each audience', async () => {
    const block = (method: string, path: string) => page.locator(`.opblock-${method}:has(.opblock-summary-path[data-path="${path}"])`);
    for (const [method, path] of [
      ['post', '/v1/operator/games/launch'],
      ['post', '/v1/operator/free-spins/grants/{id}/cancel'],
      ['post', '/v1/wallet/transaction'],
      ['put', '/v1/admin/catalog'],
      ['get', '/v1/audit/rounds/{providerId}/{operatorId}/{roundId}'],
      ['get', '/healthz'],
    ] as const) {
      await expect.poll(() => block(method, path).count(), { message: `${method.toUpperCase()} ${path}` }).toBe(1);
    }
    expect(await page.locator('.opblock').count()).toBeGreaterThanOrEqual(25);
  });

  it('lists the webhooks partners implement', async () => {
    const text = (await page.locator('#swagger-ui').textContent()) ?? '';
    expect(text).toContain('Webhooks');
    expect(text).toContain('operatorWalletTransaction');
    expect(text).toContain('providerRevokeSessions');
  });

  it('expands an operation with its request body schema and signing headers', async () => {
    const launch = page.locator('.opblock-post:has(.opblock-summary-path[data-path="/v1/operator/games/launch"])');
    await launch.locator('.opblock-summary').first().click();
    const body = launch.locator('.opblock-body');
    await expect.poll(() => body.textContent()).toContain('X-Operator-Id');
    const text = (await body.textContent()) ?? '';
    expect(text).toContain('X-Nonce');
    expect(text).toContain('playerRef');
    expect(text).toContain('launch blocked');
  });

  it('signs "Try it out" after Authorize with the id and, in the X-Signature box, the secret', async () => {
    await page.evaluate(
      ([id, secret]) => {
        const ui = (window as unknown as { ui: { preauthorizeApiKey(name: string, value: string): void } }).ui;
        ui.preauthorizeApiKey('operatorId', id!);
        ui.preauthorizeApiKey('signatureTimestamp', 'auto');
        ui.preauthorizeApiKey('signatureNonce', 'auto');
        ui.preauthorizeApiKey('operatorSignature', secret!);
      },
      [OP1.id, OP1.secret],
    );
    const sent = page.waitForRequest((r) => r.url().endsWith('/v1/operator/games'));
    const games = page.locator('.opblock-get:has(.opblock-summary-path[data-path="/v1/operator/games"])');
    await games.locator('.opblock-summary').first().click();
    await games.locator('button.try-out__btn').click();
    await games.locator('button.execute').click();
    const headers = (await sent).headers();
    expect(headers['x-operator-id']).toBe(OP1.id);
    expect(headers['x-signature']).toMatch(/^[0-9a-f]{64}$/); // the signature, never the secret
    expect(headers['x-timestamp']).toMatch(/^\d{10}$/);
    expect(headers['x-nonce']).not.toBe('auto');
    const status = games.locator('.live-responses-table .response .response-col_status').first();
    await expect.poll(() => status.textContent(), { timeout: 10_000 }).toContain('200');
  });

  it('loaded everything from the service itself, with no failed request and no console error', () => {
    expect(problems).toEqual([]);
  });
});
