import { spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CHECK_IDS } from '../../services/conformance/checks.ts';
import { startDemoWallet, type DemoWallet, type DemoWalletDefects } from '../../services/sandbox/demo-wallet.ts';
import { childEnv, entryArgs } from '../helpers/bundle.ts';
import { startSilentHost } from '../helpers/silent-host.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const SECRET = 'conformance-test-secret';

/** Runs the conformance check as `npm run conformance` does (its bundle). */
function runCli(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, [...entryArgs('conformance'), ...args], {
    cwd: ROOT,
    env: childEnv({ HOME: process.env.HOME ?? '/tmp' }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const killer = setTimeout(() => child.kill('SIGKILL'), 25_000);
  return new Promise((resolve) =>
    child.once('exit', (code) => {
      clearTimeout(killer);
      resolve({ code, out, err });
    }),
  );
}

/** check id → PASS/FAIL/SKIP, from the report's one line per check. */
function statuses(out: string): Map<string, string> {
  return new Map([...out.matchAll(/^(PASS|FAIL|SKIP)\s+(\S+)/gm)].map((m) => [m[2]!, m[1]!]));
}
const failing = (out: string) => [...statuses(out)].filter(([, s]) => s === 'FAIL').map(([id]) => id).sort();

/** The indented details under one check's line. */
function detailsOf(out: string, id: string): string {
  const lines = out.split('\n');
  const at = lines.findIndex((l) => new RegExp(`^(PASS|FAIL|SKIP)\\s+${id.replace(/\./g, '\\.')}\\s`).test(l));
  const rest = lines.slice(at + 1);
  const end = rest.findIndex((l) => !l.startsWith('      '));
  return rest.slice(0, end).join('\n');
}

const wallets: DemoWallet[] = [];
async function wallet(defects: DemoWalletDefects = {}): Promise<DemoWallet> {
  const w = await startDemoWallet({ secret: SECRET }, defects);
  wallets.push(w);
  return w;
}
afterEach(async () => {
  await Promise.all(wallets.splice(0).map((w) => w.close()));
});

describe('npm run conformance against the demo wallet', () => {
  it('passes every check, moves the test player as the checks say, and passes again on a second run', async () => {
    const w = await wallet();
    const first = await runCli(['--wallet-url', w.url, '--operator-secret', SECRET, '--player', 'p-conf']);
    expect(first.code, first.out + first.err).toBe(0);
    expect([...statuses(first.out).keys()]).toEqual(CHECK_IDS);
    expect(failing(first.out)).toEqual([]);
    expect(first.out).not.toMatch(/^SKIP/m);
    expect(first.out).toMatch(new RegExp(`^Summary: ${CHECK_IDS.length} passed, 0 failed, 0 skipped`, 'm'));
    // Net effect of the checks: BETs of 100 and four of 50 (one before each repeat) kept, WINs 30 and 25; every other move is undone.
    expect(w.balanceOf('p-conf')).toBe(100_000 - 100 - 4 * 50 + 30 + 25);
    const applied = w.entries().filter((e) => e.playerRef === 'p-conf');
    expect(applied.some((e) => e.transactionId.startsWith('stale-rollback:'))).toBe(true);
    // Declined: the BET beyond the balance, and the BET that arrived after its ROLLBACK.
    expect(applied.filter((e) => e.status === 'DECLINED').map((e) => e.type)).toEqual(['BET', 'BET']);

    // Fresh transaction ids per run: a second run against the same wallet and player passes too.
    const second = await runCli(['--wallet-url', w.url, '--operator-secret', SECRET, '--player', 'p-conf', '--currency', 'USD', '--game-id', 'g-2']);
    expect(second.code, second.out).toBe(0);
    expect(w.balanceOf('p-conf')).toBe(100_000 - 2 * 245);
  });

  it('never sends a BET or a WIN into a round it completed, as the service never does', async () => {
    const inner = await wallet();
    const bodies: Array<{ transactionId: string; type: string; roundId: string; roundComplete?: boolean }> = [];
    // A proxy in front of the demo wallet that keeps every transaction body sent.
    const proxy = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        if (req.url === '/v1/wallet/transaction' && body.length > 0) bodies.push(JSON.parse(body.toString()) as (typeof bodies)[number]);
        const upstream = http.request(inner.url + (req.url ?? '/'), { method: req.method, headers: req.headers }, (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        });
        upstream.end(body);
      });
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    try {
      const run = await runCli(['--wallet-url', `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, '--operator-secret', SECRET]);
      expect(run.code, run.out).toBe(0);
      const completed = new Map<string, string>();
      const late: string[] = [];
      for (const b of bodies) {
        const closer = completed.get(b.roundId);
        // A repeat of the transaction that completed it is a repeat, not a new play.
        if (closer !== undefined && closer !== b.transactionId && (b.type === 'BET' || b.type === 'WIN')) late.push(`${b.type} ${b.transactionId} after ${closer}`);
        if (b.roundComplete === true && !completed.has(b.roundId)) completed.set(b.roundId, b.transactionId);
      }
      expect(late).toEqual([]);
      expect(completed.size).toBeGreaterThan(0);
    } finally {
      proxy.closeAllConnections();
      await new Promise((r) => proxy.close(r));
    }
  });

  it('uses a fresh conformance-<random> player by default', async () => {
    const w = await wallet();
    const run = await runCli([`--wallet-url=${w.url}`, `--operator-secret=${SECRET}`]);
    expect(run.code, run.out).toBe(0);
    const players = new Set(w.entries().map((e) => e.playerRef));
    expect(players.size).toBe(1);
    expect([...players][0]).toMatch(/^conformance-[0-9a-f]+$/);
  });
});

/** The checks that read a transaction's reply first (the rest need one of them, and are skipped). */
const FAILS_ON_EVERY_REPLY = [
  'adjustment.credit-debit',
  'bet.debits',
  'declined.bet-beyond-balance',
  'rollback.bet-amount',
  'rollback.refunds-bet',
  'rollback.tombstone',
  'rollback.unknown-bet',
  'stale-rollback.refunds',
  'win.credits',
  'win.without-bet',
  'win.zero-amount',
];

describe('npm run conformance against broken wallets', () => {
  const cases: Array<{ name: string; defects: DemoWalletDefects; fails: string[]; detailId: string; detail: RegExp }> = [
    {
      name: 'accepts bad signatures',
      detailId: 'signature.transaction.bad-signature',
      defects: { acceptBadSignatures: true },
      fails: [
        'signature.balance.bad-signature',
        'signature.balance.query-signed',
        'signature.expired-timestamp',
        'signature.replayed-nonce',
        'signature.transaction.bad-signature',
        'signature.transaction.tampered-body',
      ],
      detail: /sent: +POST \/v1\/wallet\/transaction .*\[signed with a wrong secret\]\n +got: +200 .*\n +expected: +a refusal/,
    },
    {
      name: 're-applies a repeated transaction',
      detailId: 'idempotency.bet-repeat',
      defects: { reapplyRepeats: ['BET', 'WIN', 'ROLLBACK', 'ADJUSTMENT'] },
      fails: ['idempotency.bet-repeat', 'idempotency.rollback-repeat', 'idempotency.win-repeat', 'stale-rollback.repeat'],
      detail: /sent: +POST \/v1\/wallet\/transaction \{"transactionId":"conf-[^"]+-bet-\d+".*\[repeat of an earlier BET.*\]\n +got: +200 application\/json \{"status":"OK","balance":\d+\}\n +expected: +the stored reply of the first time, verbatim: \{"status":"OK","balance":\d+\}/,
    },
    {
      name: 'refunds a repeated rollback twice',
      detailId: 'idempotency.rollback-repeat',
      defects: { reapplyRepeats: ['ROLLBACK'] },
      fails: ['idempotency.rollback-repeat', 'stale-rollback.repeat'],
      detail: /"type":"ROLLBACK".*\[repeat: identical body, fresh nonce and signature\]\n +got: +200 .*\n +expected: +the stored reply/,
    },
    {
      name: 'answers DECLINED to a WIN',
      detailId: 'win.credits',
      defects: { declineWins: true },
      fails: ['win.credits', 'win.without-bet', 'win.zero-amount'],
      detail: /got: +200 application\/json \{"status":"DECLINED","balance":\d+\}\n +expected: +200 \{"status":"OK","balance":\d+\} \(\d+ \+ 30; a WIN is never DECLINED\)/,
    },
    {
      name: 'has no balance endpoint',
      detailId: 'balance.read',
      defects: { balanceEndpoint: 'missing' },
      fails: ['balance.read'],
      detail: /sent: +GET \/v1\/wallet\/balance\?playerRef=conformance-\w+ .*\n +got: +404 .*\n +expected: +200 \{"balance":<integer minor units>\}/,
    },
    {
      name: 'answers a non-integer balance',
      detailId: 'balance.read',
      defects: { balanceEndpoint: 'non-integer' },
      fails: ['balance.read'],
      detail: /got: +200 application\/json \{"balance":\d+\.5\}\n +expected: +200 \{"balance":<integer minor units>\}/,
    },
    {
      name: 'keeps no tombstone for a ROLLBACK of a bet it has not seen, so the late BET takes the stake',
      detailId: 'rollback.tombstone',
      defects: { forgetUnseenRollbacks: true },
      fails: ['rollback.tombstone'],
      detail: /sent: +POST \/v1\/wallet\/transaction \{"transactionId":"conf-[^"]+-late-bet-\d+".*"type":"BET".*\[the BET arrives after its ROLLBACK.*\]\n +got: +200 application\/json \{"status":"OK","balance":(\d+)\}\n +expected: +a refusal of the late BET/,
    },
    {
      name: "refunds the ROLLBACK's amount instead of its BET's",
      detailId: 'rollback.bet-amount',
      defects: { refundRollbackAmount: true },
      fails: ['rollback.bet-amount'],
      detail: /sent: +POST \/v1\/wallet\/transaction \{"transactionId":"conf-[^"]+-rollback-\d+".*"type":"ROLLBACK".*"amount":800.*\[amount 800, its BET's 80\]\n +got: +200 application\/json \{"status":"OK","balance":\d+\}\n +expected: +200 \{"status":"OK","balance":\d+\} \(the BET's 80 refunded, not the 800 the ROLLBACK carries\)/,
    },
    {
      name: "answers a repeat with today's balance instead of its stored reply",
      detailId: 'idempotency.win-repeat',
      defects: { replayTodaysBalance: ['BET', 'WIN', 'ROLLBACK'] },
      fails: ['idempotency.bet-repeat', 'idempotency.rollback-repeat', 'idempotency.win-repeat', 'stale-rollback.repeat'],
      detail: /"type":"WIN".*\[repeat: identical body, fresh nonce and signature\]\n +got: +200 application\/json \{"status":"OK","balance":(\d+)\}\n +expected: +the stored reply of the first time, verbatim: \{"status":"OK","balance":(?!\1\})\d+\}/,
    },
    {
      name: 'refunds a bet again under a second ROLLBACK id',
      detailId: 'rollback.refunds-once',
      defects: { refundEveryRollback: true },
      fails: ['rollback.refunds-once'],
      detail: /sent: +GET \/v1\/wallet\/balance\?playerRef=conformance-\w+ .*\n +got: +200 application\/json \{"balance":(\d+)\}\n +expected: +200 \{"balance":(?!\1\})\d+\} \(a bet is refunded at most once\)/,
    },
    {
      name: 'names status twice in its replies, which the service reads as no reply at all',
      detailId: 'bet.debits',
      defects: { nameStatusTwice: true },
      fails: FAILS_ON_EVERY_REPLY,
      detail: /got: +200 application\/json \{"status":"DECLINED","balance":\d+,"status":"OK"\}\n +expected: +a TransactionResponse: JSON \{"status":"OK"\|"DECLINED","balance":<integer minor units>\}, each named once/,
    },
    {
      name: 'refuses the stale-rollback: id form',
      detailId: 'stale-rollback.refunds',
      defects: { refuseStaleRollbackIds: true },
      fails: ['stale-rollback.refunds'],
      detail: /sent: +POST \/v1\/wallet\/transaction \{"transactionId":"stale-rollback:conf-[^"]+","sessionToken":"system:stale-round-reconciler".*\n +got: +400 /,
    },
  ];

  for (const c of cases) {
    it(`fails a wallet that ${c.name}, naming the check and what was sent, got and expected`, async () => {
      const w = await wallet(c.defects);
      const run = await runCli(['--wallet-url', w.url, '--operator-secret', SECRET]);
      expect(run.code, run.out + run.err).toBe(1);
      expect(failing(run.out)).toEqual([...c.fails].sort());
      expect(detailsOf(run.out, c.detailId)).toMatch(c.detail);
      expect(run.out).toMatch(new RegExp(`^Summary: \\d+ passed, ${c.fails.length} failed, \\d+ skipped \\(${CHECK_IDS.length} checks\\)$`, 'm'));
    });
  }

  it('skips what needs the balance endpoint when it is broken, instead of failing it', async () => {
    const w = await wallet({ balanceEndpoint: 'missing' });
    const run = await runCli(['--wallet-url', w.url, '--operator-secret', SECRET]);
    const s = statuses(run.out);
    expect(s.get('bet.debits')).toBe('SKIP');
    expect(s.get('signature.transaction.bad-signature')).toBe('PASS');
    expect(detailsOf(run.out, 'bet.debits')).toMatch(/note: +needs a working balance endpoint/);
    // A balance endpoint that refuses every call refuses a badly signed one too: that proves nothing.
    expect([s.get('signature.balance.bad-signature'), s.get('signature.balance.query-signed')]).toEqual(['SKIP', 'SKIP']);
  });

  it('fails a wallet that serves its replies as text/plain on the format check only', async () => {
    const inner = await wallet();
    // A proxy in front of the demo wallet that relabels every reply text/plain.
    const proxy = http.createServer((req, res) => {
      const upstream = http.request(inner.url + (req.url ?? '/'), { method: req.method, headers: req.headers }, (up) => {
        res.writeHead(up.statusCode ?? 502, { 'content-type': 'text/plain' });
        up.pipe(res);
      });
      req.pipe(upstream);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    try {
      const run = await runCli(['--wallet-url', `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, '--operator-secret', SECRET]);
      expect(run.code, run.out).toBe(1);
      expect(failing(run.out)).toEqual(['format.json-replies']);
      expect(detailsOf(run.out, 'format.json-replies')).toMatch(/got: +200 text\/plain \{"balance":\d+\}\n +expected: +content-type application\/json/);
    } finally {
      proxy.closeAllConnections();
      await new Promise((r) => proxy.close(r));
    }
  });

  it('reports an unreachable wallet once and skips the rest', async () => {
    const w = await wallet();
    const url = w.url;
    await w.close();
    wallets.splice(wallets.indexOf(w), 1);
    const run = await runCli(['--wallet-url', url, '--operator-secret', SECRET, '--timeout-ms', '2000']);
    expect(run.code).toBe(1);
    expect(failing(run.out)).toEqual(['balance.read']);
    expect(detailsOf(run.out, 'balance.read')).toMatch(/got: +could not reach the wallet/);
    expect(run.out).toMatch(new RegExp(`^Summary: 0 passed, 1 failed, ${CHECK_IDS.length - 1} skipped`, 'm'));
  });

  it('says what timeout a wallet that never answers was given', async () => {
    const mute = http.createServer(() => {});
    await new Promise<void>((r) => mute.listen(0, '127.0.0.1', r));
    try {
      const run = await runCli(['--wallet-url', `http://127.0.0.1:${(mute.address() as AddressInfo).port}`, '--operator-secret', SECRET, '--timeout-ms', '300']);
      expect(run.code).toBe(1);
      expect(detailsOf(run.out, 'balance.read')).toMatch(/got: +no reply within the timeout \(300 ms\)\n/);
    } finally {
      mute.closeAllConnections();
      await new Promise((r) => mute.close(r));
    }
  });

  it('gives up on each call to a host that drops connection attempts at the timeout, its deliberately wrong calls too', async () => {
    const silent = await startSilentHost();
    try {
      // Each connect waits; the run must still end, every call given up at 300 ms (undici's own connect
      // timeout is 10 s: the signature checks' calls waited for it, and the run for minutes).
      const run = await runCli(['--wallet-url', silent.url, '--operator-secret', SECRET, '--timeout-ms', '300']);
      expect(run.code, run.out + run.err).toBe(1);
      expect(detailsOf(run.out, 'balance.read')).toMatch(/got: +no reply within the timeout \(300 ms\)\n/);
      expect(detailsOf(run.out, 'signature.transaction.tampered-body')).toMatch(/got: +no reply within the timeout \(300 ms\)\n/);
    } finally {
      await silent.close();
    }
  });

  it('fails when the operator secret is wrong: the wallet refuses the correctly formed calls', async () => {
    const w = await wallet();
    const run = await runCli(['--wallet-url', w.url, '--operator-secret', 'wrong-secret']);
    expect(run.code).toBe(1);
    expect(detailsOf(run.out, 'balance.read')).toMatch(/got: +401 text\/plain invalid signature/);
    expect(w.entries()).toEqual([]);
  });
});

describe('npm run conformance usage', () => {
  const usage: Array<[string[], RegExp]> = [
    [[], /--wallet-url is required/],
    [['--wallet-url', 'http://127.0.0.1:1'], /--operator-secret is required/],
    [['--wallet-url', 'not a url', '--operator-secret', 's'], /--wallet-url is not a URL/],
    [['--wallet-url', 'ftp://x', '--operator-secret', 's'], /must be http or https/],
    [['--wallet-url', 'http://127.0.0.1:1', '--operator-secret', 's', '--timeout-ms', '1.5'], /--timeout-ms must be a whole number from 1 to 600000/],
    [['--wallet-url', 'http://127.0.0.1:1', '--operator-secret', 's', '--currency', 'eur'], /--currency must be an upper-case ISO-4217 code/],
    [['--wallet-url', 'http://127.0.0.1:1', '--operator-secret', 's', '--bogus'], /unknown option --bogus\n/],
  ];
  it('exits 2 with a message naming the problem and the usage, calling nothing', async () => {
    const runs = await Promise.all(usage.map(([args]) => runCli(args)));
    runs.forEach((run, i) => {
      expect(run.code, run.err).toBe(2);
      expect(run.err).toMatch(usage[i]![1]);
      expect(run.err).toContain('usage: npm run conformance');
      expect(run.out).toBe('');
    });
  });
});
