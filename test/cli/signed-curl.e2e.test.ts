import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { roundDetails, settlementStatement, transactionsPage } from '../../services/reconciliation/schemas.ts';
import { OP1 } from '../helpers/catalog.ts';
import { signedRequest } from '../helpers/signing.ts';
import { startMoneyHarness, type MoneyHarness } from '../money/harness.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

describe('scripts/signed-curl.sh', () => {
  // The whole service (its read models too) with a fake wallet and provider: the reconciliation routes
  // answer from a projection of real traffic.
  let h: MoneyHarness;
  const player = `curl-${randomUUID().slice(0, 8)}`;
  const roundId = `curl-round-${randomUUID().slice(0, 8)}`;
  // An interval around the traffic below: RFC 3339 in UTC, as typed by hand (no characters to escape).
  const from = new Date(Date.now() - 60_000).toISOString();
  const to = new Date(Date.now() + 3_600_000).toISOString();
  beforeAll(async () => {
    h = await startMoneyHarness('signedcurl');
    // One round for the reconciliation routes: a BET of 100 and a WIN of 30 completing it, both applied.
    const token = await h.launch(player);
    const base = { sessionToken: token, roundId, playerRef: player, currency: 'EUR', gameId: 'fruit-1' };
    expect((await h.tx({ ...base, transactionId: `${roundId}-bet`, type: 'BET', roundComplete: false, amount: 100 })).status).toBe(200);
    expect((await h.tx({ ...base, transactionId: `${roundId}-win`, type: 'WIN', roundComplete: true, amount: 30 })).status).toBe(200);
    // The routes are served from a read model that follows the ledger a moment behind.
    await h.until(async () => {
      const res = await signedRequest<{ transactions: Array<{ status: string }> }>(h.svc.url, { path: `/v1/operator/transactions?roundId=${roundId}&gameId=fruit-1`, as: OP1 });
      return res.status === 200 && res.json.transactions.length === 2 && res.json.transactions.every((t) => t.status === 'applied');
    });
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  });

  // Asynchronous: the service answers from this very process.
  const curl = (...args: string[]) =>
    new Promise<{ status: number; stdout: string }>((resolve) => {
      execFile('bash', ['scripts/signed-curl.sh', ...args], { cwd: ROOT, timeout: 20_000, env: { ...process.env, SW_URL: h.svc.url, SW_ID: OP1.id, SW_SECRET: OP1.secret } }, (err, stdout) =>
        resolve({ status: err ? Number((err as { code?: unknown }).code ?? 1) : 0, stdout }),
      );
    });

  it('--help prints its usage (exit 0); a missing or lowercase method, or a path without /, is bad usage (exit 2) and calls nothing', async () => {
    const help = await curl('--help');
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('usage: scripts/signed-curl.sh METHOD PATH');
    for (const args of [[], ['GET'], ['get', '/v1/operator/games'], ['GET', 'v1/operator/games']]) {
      expect((await curl(...args)).status, args.join(' ')).toBe(2);
    }
  });

  it('exits 22 when the service answers 400 or more, still printing its answer', async () => {
    const r = await curl('GET', '/v1/operator/rounds/no-such-round?gameId=fruit-1');
    expect(r.status).toBe(22);
    expect(r.stdout).toContain('round not found');
  });

  it('takes curl options after the path when there is no body (GET /path -i)', async () => {
    const r = await curl('GET', '/v1/operator/games', '-i');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^HTTP\/1\.1 200/);
  });

  it('signs a body, with curl options after it', async () => {
    const r = await curl('POST', '/v1/operator/players/kick', '{"playerRef":"curl-p"}', '-i');
    expect(r.stdout).toMatch(/^HTTP\/1\.1 200/);
    expect(r.stdout).toContain('"revokedCount":0');
  });

  it('sends a query string but signs the path only: the transactions list and a round (contract sections 3 and 9)', async () => {
    const list = await curl('GET', `/v1/operator/transactions?from=${from}&to=${to}&playerRef=${player}&limit=1`, '-i');
    expect(list.status).toBe(0);
    expect(list.stdout).toMatch(/^HTTP\/1\.1 200/);
    const first = transactionsPage.parse(JSON.parse(list.stdout.slice(list.stdout.indexOf('\r\n\r\n') + 4)));
    expect(first.transactions).toEqual([expect.objectContaining({ transactionId: `${roundId}-bet`, type: 'BET', amount: 100, status: 'applied', playerRef: player })]);
    expect(first.nextCursor).toEqual(expect.any(String));
    // The next page, by the cursor the first one gave.
    const next = await curl('GET', `/v1/operator/transactions?from=${from}&to=${to}&playerRef=${player}&limit=1&cursor=${first.nextCursor}`);
    const second = transactionsPage.parse(JSON.parse(next.stdout));
    expect(second.transactions.map((t) => [t.transactionId, t.type, t.amount, t.status])).toEqual([[`${roundId}-win`, 'WIN', 30, 'applied']]);

    const round = await curl('GET', `/v1/operator/rounds/${roundId}?gameId=fruit-1`);
    expect(roundDetails.parse(JSON.parse(round.stdout))).toMatchObject({ roundId, gameId: 'fruit-1', status: 'complete', betMinor: 100, winMinor: 30, refundMinor: 0 });
  });

  it('fetches the settlement statement, as JSON and with -H \'Accept: text/csv\' as CSV', async () => {
    const json = await curl('GET', `/v1/operator/reports/settlement?from=${from}&to=${to}`);
    expect(json.status).toBe(0);
    const statement = settlementStatement.parse(JSON.parse(json.stdout));
    const figures = { bets: { count: 1, amountMinor: 100 }, wins: { count: 1, amountMinor: 30 }, refunds: { count: 0, amountMinor: 0 }, ggrMinor: 70 };
    expect(statement).toEqual({ from, to, lines: [{ providerId: 'studio-a', gameId: 'fruit-1', currency: 'EUR', ...figures }], adjustments: {}, unsettled: {}, totals: { EUR: figures } });

    const csv = await curl('GET', `/v1/operator/reports/settlement?from=${from}&to=${to}`, '-i', '-H', 'Accept: text/csv');
    expect(csv.status).toBe(0);
    const [head, body] = csv.stdout.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 200/);
    expect(head).toMatch(/^content-type: text\/csv/im);
    expect(body!.trimEnd().split('\r\n')).toEqual([
      'providerId,gameId,currency,betCount,betAmountMinor,winCount,winAmountMinor,refundCount,refundAmountMinor,ggrMinor',
      'studio-a,fruit-1,EUR,1,100,1,30,0,0,70',
    ]);
  });
});
