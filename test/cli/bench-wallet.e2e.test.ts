import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { signedRequest } from '../helpers/signing.ts';
import { childEnv } from '../helpers/bundle.ts';

/**
 * The bench's wallet (`test/bench/wallet-server.ts`), which `npm run bench -- --soak --reply-bytes N` runs
 * with WALLET_REPLY_BYTES: every reply padded to exactly N bytes, still the reply the ledger expects, and
 * the same status and balance when the transaction is sent again.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
const SECRET = 'bench-wallet-secret';
const started: ChildProcess[] = [];

async function wallet(env: Record<string, string>): Promise<string> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/bench/wallet-server.ts'], {
    cwd: ROOT,
    env: childEnv({ WALLET_SECRET: SECRET, ...env }),
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  started.push(child);
  return new Promise((resolve, reject) => {
    child.stdout!.once('data', (chunk: Buffer) => resolve(chunk.toString().trim()));
    child.once('exit', (code) => reject(new Error(`the wallet exited (${code}) before printing its URL`)));
  });
}

afterAll(() => {
  for (const child of started) child.kill();
});

const bet = (transactionId: string) => ({ transactionId, playerRef: 'p-1', type: 'BET', amount: 250, currency: 'EUR', roundId: 'r-1' });
const call = (url: string, body: unknown) => signedRequest<{ status: string; balance: number; padding?: string }>(url, { path: '/wallet/transaction', body, as: { kind: 'operator', id: 'op-1', secret: SECRET } });

describe('the bench wallet', () => {
  it('pads every reply to WALLET_REPLY_BYTES, a valid reply that is the same when the transaction is sent again', async () => {
    const url = await wallet({ WALLET_REPLY_BYTES: '4096' });
    const first = await call(url, bet('tx-1'));
    expect(first.status).toBe(200);
    expect(Buffer.byteLength(first.text)).toBe(4096);
    expect(first.json).toMatchObject({ status: 'OK', balance: 1_000_000_000 - 250 });
    const again = await call(url, bet('tx-1'));
    expect(again.json.balance).toBe(first.json.balance);
    expect(Buffer.byteLength(again.text)).toBe(4096);
    const next = await call(url, bet('tx-2'));
    expect(next.json.balance).toBe(1_000_000_000 - 500);
  });

  it('answers the bare reply without WALLET_REPLY_BYTES', async () => {
    const url = await wallet({});
    const reply = await call(url, bet('tx-1'));
    expect(reply.text).toBe(JSON.stringify({ status: 'OK', balance: 1_000_000_000 - 250 }));
  });
});
