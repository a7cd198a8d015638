import { randomUUID } from 'node:crypto';
import type { RunningService } from '../../services/service.ts';
import { OP1, OP2, PROV_A, testCatalog, type TestCatalogOptions } from '../helpers/catalog.ts';
import { startFakeProvider, startFakeWallet, type FakeProvider, type FakeWallet } from '../helpers/fakes.ts';
import { describeHoldBack } from '../helpers/db.ts';
import { waitForProjection } from '../../projections/runner.ts';
import { START } from '../../shared/eventstore/port.ts';
import { createTestEnv, startInProcess, type TestEnv } from '../helpers/service.ts';
import { signedRequest, type TestResponse } from '../helpers/signing.ts';

export interface MoneyHarness {
  env: TestEnv;
  svc: RunningService & { url: string };
  wallet: FakeWallet;
  /** Operator two's wallet. */
  wallet2: FakeWallet;
  provider: FakeProvider;
  launch(playerRef?: string, over?: Record<string, unknown>, as?: typeof OP1): Promise<string>;
  tx(body: Record<string, unknown>, as?: typeof PROV_A): Promise<TestResponse<Record<string, unknown>>>;
  bet(token: string, over?: Record<string, unknown>): Record<string, unknown>;
  walletCallsFor(transactionId: string): Array<{ body: unknown; nonce: string | undefined; rawBody: string; signatureValid: boolean }>;
  until(check: () => Promise<boolean> | boolean, timeoutMs?: number): Promise<void>;
  /**
   * Every read model of the service has applied everything committed to the log so far, by position: the
   * runners' lag counts only what the log can be read to now, and Postgres reads it up to the oldest
   * transaction open anywhere on the server (another file's test's too), so "no lag" can come before an
   * event the log holds back a moment.
   */
  caughtUp(timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * The wallet timeout of a file that scripts a hung or slow wallet (`{ hang: true }`, `delayMs`): short, so its
 * tests see the timeout quickly. Every other file gets the default below, 5 s: nothing in it waits on a
 * timeout, and under the suite's load (three files at a time on two cores) a wallet call answered in time can
 * still outlast 500 ms and turn a test's BET into a 504.
 */
export const SCRIPTED_HANG_TIMEOUT = { walletTimeoutMs: 500 } as const;

export async function startMoneyHarness(label: string, env: Record<string, string> = {}, catalog: TestCatalogOptions = {}): Promise<MoneyHarness> {
  const testEnv = await createTestEnv(label);
  const [wallet, wallet2, provider] = await Promise.all([startFakeWallet(OP1.secret), startFakeWallet(OP2.secret), startFakeProvider(PROV_A.secret)]);
  let svc: (RunningService & { url: string }) | undefined;
  try {
    svc = await startInProcess(testEnv, { DISPATCH_BACKOFF_BASE_MS: '100', DISPATCH_BACKOFF_MAX_MS: '400', RECOVERY_SWEEP_SECONDS: '1', ...env });
    await svc.ctx.catalog.apply(testCatalog({ walletUrl: wallet.url, wallet2Url: wallet2.url, providerUrl: provider.url, walletTimeoutMs: 5000, ...catalog }));
  } catch (err) {
    // The caller gets no harness to close: what was started is closed here (vitest runs the next file in this process).
    await svc?.stop().catch(() => undefined);
    await Promise.all([wallet.close(), wallet2.close(), provider.close()]);
    await testEnv.cleanup();
    throw err;
  }
  const h: MoneyHarness = {
    env: testEnv,
    svc,
    wallet,
    wallet2,
    provider,
    async launch(playerRef = `p-${randomUUID().slice(0, 8)}`, over = {}, as = OP1) {
      const res = await signedRequest<{ sessionToken: string }>(svc.url, {
        path: '/v1/operator/games/launch',
        body: { playerRef, gameId: 'fruit-1', currency: 'EUR', mode: 'REAL', ...over },
        as,
      });
      if (res.status !== 200) throw new Error(`launch failed: ${res.status} ${res.text}`);
      return res.json.sessionToken;
    },
    tx: (body, as = PROV_A) => signedRequest(svc.url, { path: '/v1/wallet/transaction', body, as }),
    bet: (token, over = {}) => ({
      transactionId: `tx-${randomUUID()}`,
      sessionToken: token,
      type: 'BET',
      roundId: `r-${randomUUID()}`,
      roundComplete: false,
      playerRef: 'unset',
      amount: 100,
      currency: 'EUR',
      gameId: 'fruit-1',
      ...over,
    }),
    walletCallsFor: (id) => wallet.calls.filter((c) => (c.body as { transactionId?: string } | undefined)?.transactionId === id),
    async until(check, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      while (!(await check())) {
        if (Date.now() > deadline) throw new Error(`condition not met in time; ${await describeHoldBack(testEnv.db.url).catch((e: unknown) => String(e))}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    async caughtUp(timeoutMs = 20_000) {
      const head =
        svc.ctx.eventStore.kind === 'postgres'
          ? (await svc.ctx.pool.query<{ p: string }>(`SELECT e.transaction_id::text || '.' || e.global_position AS p FROM es_events e ORDER BY e.transaction_id DESC, e.global_position DESC LIMIT 1`)).rows[0]?.p
          : await svc.ctx.eventStore.headPosition();
      if (head === undefined || head === START) return;
      for (const runner of svc.runners) {
        if (!(await waitForProjection(svc.ctx.pool, runner.projection.name, head, timeoutMs))) {
          throw new Error(`read model ${runner.projection.name} did not reach ${head} in time; ${await describeHoldBack(testEnv.db.url).catch((e: unknown) => String(e))}`);
        }
      }
    },
    async close() {
      await svc.stop();
      await Promise.all([wallet.close(), wallet2.close(), provider.close()]);
      await testEnv.cleanup();
    },
  };
  return h;
}
