/**
 * npm run bench -- --isolation: contract section 8 rule 8 (tenants do not share their failures), measured.
 * Operator B's WIN fails once and is retried by the worker (due DISPATCH_BACKOFF_BASE_MS after the failure);
 * its retry delay (wallet-side: from the failed call to the call that applied it) is measured alone, then
 * with operator A's wallet hung and A's WINs awaiting retry. Services run as the bench deploys them
 * (api in one process, worker and projector in another); both wallets are fakes in this process.
 *   --backlog N   A's WINs awaiting retry (default 300)
 *   --samples N   B's failed WINs per phase, one after the other (default 5)
 */
import { randomUUID } from 'node:crypto';
import { OP1, OP2, PROV_A, testCatalog } from '../helpers/catalog.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { startFakeWallet, type FakeWallet } from '../helpers/fakes.ts';
import { claimTestRedis } from '../helpers/redis.ts';
import { cleaningUp } from './interrupt.ts';
import { spawnService, type SpawnedService } from '../helpers/service.ts';
import { signedRequest } from '../helpers/signing.ts';

const BACKOFF_BASE_MS = 300;
const A_TIMEOUT_MS = 2000;
const ADMIN = 'bench-isolation';

type Operator = typeof OP1;

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length - 1) * p))]!;

export async function isolationMain({ backlog: BACKLOG, samples: SAMPLES }: { backlog: number; samples: number }): Promise<void> {
  const db = await createTestDatabase('isolation');
  const redis = await claimTestRedis();
  const [walletA, walletB] = await Promise.all([startFakeWallet(OP1.secret), startFakeWallet(OP2.secret)]);
  const services: SpawnedService[] = [];
  const cleanup = async () => {
    await Promise.all(services.map((s) => s.stop()));
    await Promise.all([walletA.close(), walletB.close()]);
    await db.drop();
    await redis.release();
  };
  await cleaningUp(cleanup, async () => {
    const env = {
      DATABASE_URL: db.url,
      REDIS_URL: redis.url,
      PORT: '0',
      ADMIN_TOKEN: ADMIN,
      DISPATCH_BACKOFF_BASE_MS: String(BACKOFF_BASE_MS),
      DISPATCH_BACKOFF_MAX_MS: '5000',
    };
    const api = await spawnService({ ...env, ROLES: 'api' });
    services.push(api);
    services.push(await spawnService({ ...env, ROLES: 'worker,projector' }));
    const catalog = testCatalog({ walletUrl: walletA.url, wallet2Url: walletB.url, walletTimeoutMs: 1000, rateLimit: { limit: 1_000_000, windowSeconds: 1 } });
    catalog.operators[0]!.walletTimeoutMs = A_TIMEOUT_MS;
    const put = await fetch(`${api.url}/v1/admin/catalog`, { method: 'PUT', headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }, body: JSON.stringify(catalog) });
    if (!put.ok) throw new Error(`catalog: ${put.status} ${await put.text()}`);

    const tx = (body: unknown) => signedRequest(api.url, { path: '/v1/wallet/transaction', body, as: PROV_A });
    const player = async (as: Operator, playerRef: string) => {
      const res = await signedRequest<{ sessionToken: string }>(api.url, { path: '/v1/operator/games/launch', body: { playerRef, gameId: 'fruit-1', currency: 'EUR', mode: 'REAL' }, as });
      if (res.status !== 200) throw new Error(`launch: ${res.status} ${res.text}`);
      return (tag: string) => {
        const roundId = `iso-${tag}-${randomUUID()}`;
        const base = { sessionToken: res.json.sessionToken, roundId, playerRef, currency: 'EUR', gameId: 'fruit-1' };
        return {
          bet: { ...base, transactionId: `${roundId}-bet`, type: 'BET', roundComplete: false, amount: 10 },
          win: { ...base, transactionId: `${roundId}-win`, type: 'WIN', roundComplete: true, amount: 25 },
        };
      };
    };
    const callsOf = (w: FakeWallet, id: string) => w.calls.filter((c) => (c.body as { transactionId?: string } | undefined)?.transactionId === id);
    const winsOfA = () => walletA.calls.filter((c) => (c.body as { type?: string } | undefined)?.type === 'WIN').length;

    const roundOfB = await player(OP2, 'iso-b');
    /** B's failed WINs, one after the other: each one's retry delay and B's BET first-attempt time (ms). */
    const sampleB = async (label: string) => {
      const delays: number[] = [];
      const bets: number[] = [];
      for (let i = 0; i < SAMPLES; i++) {
        const r = roundOfB(`${label}${i}`);
        const t = performance.now();
        const bet = await tx(r.bet);
        bets.push(performance.now() - t);
        if (bet.status !== 200) throw new Error(`B's BET: ${bet.status} ${bet.text}`);
        walletB.script(r.win.transactionId, { status: 500, body: { error: 'once' } });
        const win = await tx(r.win);
        if (win.status !== 502) throw new Error(`B's WIN should fail first: ${win.status} ${win.text}`);
        const deadline = Date.now() + 120_000;
        while (!walletB.processed.has(r.win.transactionId)) {
          if (Date.now() > deadline) throw new Error("B's WIN was not retried within 120 s");
          await new Promise((res) => setTimeout(res, 10));
        }
        const [failed, applied] = callsOf(walletB, r.win.transactionId);
        delays.push(applied!.at - failed!.at);
      }
      return { delays, bets };
    };
    const report = (label: string, s: { delays: number[]; bets: number[] }) =>
      console.log(
        `  ${label.padEnd(34)} retry delay median ${pct(s.delays, 0.5)} ms, max ${Math.max(...s.delays)} ms (due after ${BACKOFF_BASE_MS} ms)   ` +
          `B's BET answered in median ${pct(s.bets, 0.5).toFixed(1)} ms   [${s.delays.join(', ')}]`,
      );

    console.log(`tenant isolation (contract 8 rule 8): api and worker+projector processes, DISPATCH_BACKOFF_BASE_MS=${BACKOFF_BASE_MS}, ${SAMPLES} samples per phase`);
    // Warm-up: one of B's so that both processes have their pools and queues up.
    await sampleB('warm');
    const alone = await sampleB('alone');
    report('B alone', alone);

    walletA.setChaos((t) => (t.type === 'WIN' ? { hang: true } : undefined));
    const roundOfA = await player(OP1, 'iso-a');
    const backlog = Array.from({ length: BACKLOG }, (_, i) => roundOfA(`a${i}`));
    for (let i = 0; i < backlog.length; i += 50) await Promise.all(backlog.slice(i, i + 50).map((r) => tx(r.bet)));
    const wins = await Promise.all(backlog.map((r) => tx(r.win)));
    const waiting = wins.filter((w) => w.status === 504).length;
    const before = winsOfA();
    const hung = await sampleB('hung');
    report(`B beside A hung (${waiting} WINs retrying)`, hung);
    console.log(`  A's retries sent while B was measured: ${winsOfA() - before} (each hangs ${A_TIMEOUT_MS} ms)`);
  });
}
