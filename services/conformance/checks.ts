import { randomBytes } from 'node:crypto';
import { ADMIN_SESSION, RECONCILER_SESSION, STALE_ROLLBACK_PREFIX, type TransactionRequest } from '../rounds/events.ts';
import { joinUrl, sendCall, signedCall, type OutboundResult } from '../../shared/http/outbound.ts';
import { HEADER, sign } from '../../shared/http/signature.ts';
import { classify } from '../rounds/wallet-reply.ts';

/**
 * Checks an operator's wallet against API document part 4.2 (and 2.10-2.13), calling it exactly as the
 * service does: signed per contract section 3 over path plus query, bodies shaped as the service sends
 * them. Every check reads the balance before and after through the balance endpoint, so the player
 * must see no other activity during the run.
 */
export interface ConformanceOptions {
  walletUrl: string;
  operatorSecret: string;
  /** A funded test player; default a fresh `conformance-<random>` (the demo wallet funds new players). */
  playerRef?: string;
  currency?: string;
  gameId?: string;
  timeoutMs?: number;
}

export type CheckStatus = 'PASS' | 'FAIL' | 'SKIP';

export interface CheckResult {
  id: string;
  title: string;
  status: CheckStatus;
  /** For a FAIL: what was sent, what came back, what was expected. For a SKIP: why. */
  sent?: string;
  got?: string;
  expected?: string;
  note?: string;
}

export interface ConformanceReport {
  walletUrl: string;
  playerRef: string;
  runId: string;
  results: CheckResult[];
  passed: number;
  failed: number;
  skipped: number;
}

/** One call made by the checker and what came of it. */
interface Exchange {
  method: 'GET' | 'POST';
  target: string;
  body?: string;
  /** How this call differs from a correct one (bad signature, replayed nonce...). */
  how?: string;
  outcome: OutboundResult;
  /** The limit it was made with (--timeout-ms). */
  timeoutMs: number;
}

class CheckFailed extends Error {
  constructor(
    readonly sent: string,
    readonly got: string,
    readonly expected: string,
  ) {
    super(expected);
  }
}

class CheckSkipped extends Error {}

/** Things a later check builds on, filled in by earlier ones. */
interface RunState {
  bet?: { body: string; reply: string; balance: number };
  win?: { body: string; reply: string };
  rollback?: { body: string; reply: string };
  declinedBet?: { id: string; amount: number; applied: boolean };
  staleRollback?: { body: string; reply: string };
}

interface Check {
  id: string;
  title: string;
  needsBalance: boolean;
  run(ctx: Ctx): Promise<string | void>;
}

const clip = (s: string, max = 400) => (s.length > max ? `${s.slice(0, max)}… (${s.length} chars)` : s);

function describeSent(ex: Exchange): string {
  return `${ex.method} ${ex.target}${ex.body !== undefined ? ` ${clip(ex.body)}` : ''}${ex.how ? ` [${ex.how}]` : ''}`;
}

function describeGot(ex: Exchange): string {
  const o = ex.outcome;
  switch (o.kind) {
    case 'timeout':
      return `no reply within the timeout (${ex.timeoutMs} ms)`;
    case 'unreachable':
      return `could not reach the wallet: ${o.error}`;
    case 'oversized':
      return `${o.status} with a body over ${o.limitBytes} bytes (not read further)`;
    case 'response':
      return `${o.status} ${o.contentType ?? '(no content-type)'} ${clip(o.body) || '(empty body)'}`;
    default: {
      const unknown: never = o;
      return String(unknown);
    }
  }
}

const failOn = (ex: Exchange, expected: string): never => {
  throw new CheckFailed(describeSent(ex), describeGot(ex), expected);
};

const status200 = (ex: Exchange): boolean => ex.outcome.kind === 'response' && ex.outcome.status === 200;

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * A 200 TransactionResponse (2.12) as the service reads a wallet's reply (classify: status OK or
 * DECLINED, balance an integer, neither named twice). Anything else fails the check.
 */
function txReply(ex: Exchange): { status: 'OK' | 'DECLINED'; balance: number; text: string } {
  if (ex.outcome.kind !== 'response' || ex.outcome.status !== 200) return failOn(ex, '200 with a TransactionResponse {"status":"OK"|"DECLINED","balance":<integer>}');
  const read = classify(ex.outcome);
  if (read.kind !== 'reply') {
    return failOn(ex, 'a TransactionResponse: JSON {"status":"OK"|"DECLINED","balance":<integer minor units>}, each named once (the service counts any other 200 as a failed call)');
  }
  return { status: read.reply.status, balance: read.reply.balance, text: read.reply.body };
}

/**
 * A repeat of `first` (identical body, fresh nonce and signature) after a BET of its own, in a round of
 * its own (the service never sends a BET into a completed round), has moved the balance: the wallet must
 * answer the stored reply, not today's balance, and apply nothing. The BET must be taken: one declined
 * would move nothing. `needs`: the check that made `first`; `why`: what the unchanged balance shows.
 */
async function expectRepeatReplayed(ctx: Ctx, first: { body: string; reply: string } | undefined, needs: string, how: string, why: string): Promise<void> {
  if (!first) throw new CheckSkipped(`needs ${needs}`);
  const id = ctx.id('between');
  const between = txReply(await ctx.send(ctx.tx({ transactionId: id, type: 'BET', roundId: ctx.round(id), amount: 50, roundComplete: false })));
  if (between.status !== 'OK') throw new CheckSkipped('the BET that moves the balance before the repeat was declined: nothing to tell a stored reply from today\'s balance');
  const before = await ctx.balance('before the repeat');
  expectReplay(await ctx.send(first.body, how), first.reply);
  await ctx.expectBalance(before, 'after the repeat', why);
}

/** A transaction the wallet must apply: 200, status OK, balance as given. */
function expectOk(ex: Exchange, balance: number, why: string): string {
  const r = txReply(ex);
  if (r.status !== 'OK' || r.balance !== balance) failOn(ex, `200 {"status":"OK","balance":${balance}} (${why})`);
  return r.text;
}

/** A repeat: the stored reply again, same status and balance (the reply of the first time, not today's balance). */
function expectReplay(ex: Exchange, first: string): void {
  const r = txReply(ex);
  const stored = parseJson(first) as { status: string; balance: number };
  if (r.status !== stored.status || r.balance !== stored.balance) {
    failOn(ex, `the stored reply of the first time, verbatim: ${first}`);
  }
}

class Ctx {
  readonly state: RunState = {};
  readonly replies200: Exchange[] = [];
  private seq = 0;

  constructor(
    readonly options: Required<ConformanceOptions>,
    readonly runId: string,
  ) {}

  id(label: string): string {
    return `conf-${this.runId}-${label}-${++this.seq}`;
  }

  round(label: string): string {
    return `conf-${this.runId}-round-${label}`;
  }

  /** A TransactionRequest as the service builds it (same fields, same key order). */
  tx(fields: Pick<TransactionRequest, 'transactionId' | 'type' | 'roundId' | 'amount'> & Partial<TransactionRequest>): string {
    const t: TransactionRequest = {
      transactionId: fields.transactionId,
      sessionToken: fields.sessionToken ?? `conformance-session-${this.runId}`,
      type: fields.type,
      roundId: fields.roundId,
      roundComplete: fields.roundComplete ?? false,
      ...(fields.originalTransactionId !== undefined ? { originalTransactionId: fields.originalTransactionId } : {}),
      playerRef: this.options.playerRef,
      amount: fields.amount,
      currency: this.options.currency,
      gameId: fields.gameId ?? this.options.gameId,
      ...(fields.direction !== undefined ? { direction: fields.direction } : {}),
      ...(fields.metadata !== undefined ? { metadata: fields.metadata } : {}),
    };
    return JSON.stringify(t);
  }

  private record(ex: Exchange): Exchange {
    if (status200(ex)) this.replies200.push(ex);
    return ex;
  }

  /** A correctly signed call, through the service's own outbound code. */
  async call(method: 'GET' | 'POST', target: string, body?: string, how?: string): Promise<Exchange> {
    const outcome = await signedCall({
      baseUrl: this.options.walletUrl,
      pathAndQuery: target,
      method,
      ...(body !== undefined ? { rawBody: body } : {}),
      secret: this.options.operatorSecret,
      timeoutMs: this.options.timeoutMs,
    });
    return this.record({ method, target, ...(body !== undefined ? { body } : {}), ...(how ? { how } : {}), outcome, timeoutMs: this.options.timeoutMs });
  }

  send(body: string, how?: string): Promise<Exchange> {
    return this.call('POST', '/v1/wallet/transaction', body, how);
  }

  balanceTarget(playerRef = this.options.playerRef): string {
    return `/v1/wallet/balance?playerRef=${encodeURIComponent(playerRef)}`;
  }

  /** The player's balance from the balance endpoint; fails the check when it does not answer as 2.13 says. */
  async balance(when: string): Promise<number> {
    const ex = await this.call('GET', this.balanceTarget(), undefined, when);
    const parsed = ex.outcome.kind === 'response' && ex.outcome.status === 200 ? parseJson(ex.outcome.body) : undefined;
    const balance = typeof parsed === 'object' && parsed !== null ? (parsed as { balance?: unknown }).balance : undefined;
    if (typeof balance !== 'number' || !Number.isSafeInteger(balance)) return failOn(ex, '200 {"balance":<integer minor units>}');
    return balance;
  }

  /** The balance endpoint agrees with what the transaction replies said. */
  async expectBalance(expected: number, when: string, why: string): Promise<void> {
    const ex = await this.call('GET', this.balanceTarget(), undefined, when);
    const parsed = ex.outcome.kind === 'response' && ex.outcome.status === 200 ? parseJson(ex.outcome.body) : undefined;
    const balance = typeof parsed === 'object' && parsed !== null ? (parsed as { balance?: unknown }).balance : undefined;
    if (balance !== expected) failOn(ex, `200 {"balance":${expected}} (${why})`);
  }

  /**
   * A deliberately wrong call: signed, then altered as `tamper` says. Sent with undici directly because
   * the service's outbound code only ever makes correct calls.
   */
  async tampered(
    how: string,
    method: 'GET' | 'POST',
    target: string,
    body: string | undefined,
    tamper: { secret?: string; timestamp?: number; nonce?: string | null; signedTarget?: string; signedBody?: string },
  ): Promise<Exchange> {
    const timestamp = String(tamper.timestamp ?? Math.floor(Date.now() / 1000));
    const nonce = tamper.nonce === undefined ? randomBytes(16).toString('hex') : tamper.nonce;
    const signature = sign(tamper.secret ?? this.options.operatorSecret, {
      timestamp,
      nonce: nonce ?? '',
      method,
      target: this.signedTarget(tamper.signedTarget ?? target),
      body: tamper.signedBody ?? body ?? '',
    });
    const headers: Record<string, string> = { [HEADER.timestamp]: timestamp, [HEADER.signature]: signature };
    if (nonce !== null) headers[HEADER.nonce] = nonce;
    return this.raw(how, method, target, body, headers);
  }

  /** What the wallet sees as path plus query: the walletUrl may carry a path prefix. */
  signedTarget(target: string): string {
    const url = joinUrl(this.options.walletUrl, target);
    return url.pathname + url.search;
  }

  /** Sends exactly these headers (a replay sends the same ones twice), bounded as the service's calls are (sendCall). */
  async raw(how: string, method: 'GET' | 'POST', target: string, body: string | undefined, headers: Record<string, string>): Promise<Exchange> {
    const url = joinUrl(this.options.walletUrl, target);
    const outcome = await sendCall({ url, method, headers, body, timeoutMs: this.options.timeoutMs });
    return this.record({ method, target, ...(body !== undefined ? { body } : {}), how, outcome, timeoutMs: this.options.timeoutMs });
  }

  /** A harmless transaction for the signature checks: a zero-amount WIN in a round of its own. */
  probeBody(label: string): string {
    return this.tx({ transactionId: this.id(label), type: 'WIN', roundId: this.round(label), amount: 0, roundComplete: true });
  }
}

const WRONG_SECRET = 'not-the-operator-secret';

/** Refused means any non-200: the service treats every non-200 as "not done". */
function expectRefused(ex: Exchange, why: string): void {
  if (ex.outcome.kind === 'response' && ex.outcome.status !== 200) return;
  failOn(ex, `a refusal (any non-200; part 7.1 lists 401 or 400) because ${why}`);
}

const CHECKS: Check[] = [
  {
    id: 'balance.read',
    title: 'signed GET /v1/wallet/balance?playerRef= answers 200 {"balance": <integer>}',
    needsBalance: false,
    async run(ctx) {
      await ctx.balance('signed over path plus query');
    },
  },
  {
    id: 'signature.balance.bad-signature',
    title: 'balance call signed with the wrong secret is refused',
    needsBalance: true, // a wallet that refuses every balance call refuses this one too: it shows nothing then
    async run(ctx) {
      expectRefused(await ctx.tampered('signed with a wrong secret', 'GET', ctx.balanceTarget(), undefined, { secret: WRONG_SECRET }), 'the signature is wrong');
    },
  },
  {
    id: 'signature.balance.query-signed',
    title: 'balance call whose playerRef was altered after signing is refused (the query is signed)',
    needsBalance: true, // a wallet that refuses every balance call refuses this one too: it shows nothing then
    async run(ctx) {
      const signedFor = ctx.balanceTarget();
      const ex = await ctx.tampered(`signed for ${signedFor}, playerRef changed in flight`, 'GET', ctx.balanceTarget(`${ctx.options.playerRef}-other`), undefined, { signedTarget: signedFor });
      expectRefused(ex, 'the signature covers path plus query (part 5.2) and the query was altered');
    },
  },
  {
    id: 'signature.transaction.bad-signature',
    title: 'transaction signed with the wrong secret is refused',
    needsBalance: false,
    async run(ctx) {
      const ex = await ctx.tampered('signed with a wrong secret', 'POST', '/v1/wallet/transaction', ctx.probeBody('badsig'), { secret: WRONG_SECRET });
      expectRefused(ex, 'the signature is wrong');
    },
  },
  {
    id: 'signature.transaction.tampered-body',
    title: 'transaction whose body was altered after signing is refused',
    needsBalance: false,
    async run(ctx) {
      const body = ctx.probeBody('tampered');
      const altered = body.replace('"amount":0', '"amount":1');
      const ex = await ctx.tampered('signature over a body with amount 0, amount changed to 1 in flight', 'POST', '/v1/wallet/transaction', altered, { signedBody: body });
      expectRefused(ex, 'the signature covers the SHA-256 of the body');
    },
  },
  {
    id: 'signature.expired-timestamp',
    title: 'transaction with an X-Timestamp a day old is refused',
    needsBalance: false,
    async run(ctx) {
      const ex = await ctx.tampered('X-Timestamp 24 h ago, correctly signed', 'POST', '/v1/wallet/transaction', ctx.probeBody('expired'), {
        timestamp: Math.floor(Date.now() / 1000) - 86_400,
      });
      expectRefused(ex, 'the timestamp is outside any reasonable window');
    },
  },
  {
    id: 'signature.missing-nonce',
    title: 'transaction without X-Nonce is refused',
    needsBalance: false,
    async run(ctx) {
      const ex = await ctx.tampered('no X-Nonce header', 'POST', '/v1/wallet/transaction', ctx.probeBody('nononce'), { nonce: null });
      expectRefused(ex, 'a missing nonce is rejected (part 5.4)');
    },
  },
  {
    id: 'signature.replayed-nonce',
    title: 'a correctly signed transaction is accepted once; the same request again (same nonce) is refused',
    needsBalance: false,
    async run(ctx) {
      const body = ctx.probeBody('replay');
      const timestamp = String(Math.floor(Date.now() / 1000));
      const nonce = randomBytes(16).toString('hex');
      const signature = sign(ctx.options.operatorSecret, { timestamp, nonce, method: 'POST', target: ctx.signedTarget('/v1/wallet/transaction'), body });
      const headers = { [HEADER.timestamp]: timestamp, [HEADER.nonce]: nonce, [HEADER.signature]: signature };
      const first = await ctx.raw('correctly signed', 'POST', '/v1/wallet/transaction', body, headers);
      if (!status200(first)) failOn(first, '200: a correctly signed call succeeds');
      const second = await ctx.raw('the same request again: same nonce, timestamp and signature', 'POST', '/v1/wallet/transaction', body, headers);
      expectRefused(second, 'a reused nonce is a replay (part 5.4)');
    },
  },
  {
    id: 'bet.debits',
    title: 'BET debits exactly its amount and reports the new balance',
    needsBalance: true,
    async run(ctx) {
      const before = await ctx.balance('before the BET');
      const amount = 100;
      const body = ctx.tx({ transactionId: ctx.id('bet'), type: 'BET', roundId: ctx.round('main'), amount, roundComplete: false });
      const ex = await ctx.send(body);
      const r = txReply(ex);
      if (r.status === 'DECLINED' && before < amount) failOn(ex, `OK: the test player needs funds (at least 1000 minor units; it has ${before})`);
      const reply = expectOk(ex, before - amount, `${before} - ${amount}`);
      await ctx.expectBalance(before - amount, 'after the BET', 'the BET debited once');
      ctx.state.bet = { body, reply, balance: before - amount };
    },
  },
  {
    id: 'idempotency.bet-repeat',
    title: 'a repeated BET (identical body, fresh nonce) replays the stored reply and is not applied again',
    needsBalance: true,
    async run(ctx) {
      await expectRepeatReplayed(ctx, ctx.state.bet, 'the BET of bet.debits', 'repeat of an earlier BET: identical body, fresh nonce and signature', 'a repeat is not applied again');
    },
  },
  {
    id: 'win.zero-amount',
    title: 'a zero-amount WIN is valid: 200 OK, balance unchanged',
    needsBalance: true,
    async run(ctx) {
      const before = await ctx.balance('before the WIN');
      const ex = await ctx.send(ctx.tx({ transactionId: ctx.id('win0'), type: 'WIN', roundId: ctx.round('main'), amount: 0, roundComplete: false }));
      expectOk(ex, before, 'a zero WIN changes nothing and is never DECLINED');
      await ctx.expectBalance(before, 'after the WIN', 'a zero WIN changes nothing');
    },
  },
  {
    id: 'win.credits',
    title: 'WIN credits exactly its amount (roundComplete true) and reports the new balance',
    needsBalance: true,
    async run(ctx) {
      const before = await ctx.balance('before the WIN');
      const amount = 30;
      const body = ctx.tx({ transactionId: ctx.id('win'), type: 'WIN', roundId: ctx.round('main'), amount, roundComplete: true });
      const reply = expectOk(await ctx.send(body), before + amount, `${before} + ${amount}; a WIN is never DECLINED`);
      await ctx.expectBalance(before + amount, 'after the WIN', 'the WIN credited once');
      ctx.state.win = { body, reply };
    },
  },
  {
    id: 'idempotency.win-repeat',
    title: 'a repeated WIN replays the stored reply and is not credited again',
    needsBalance: true,
    async run(ctx) {
      await expectRepeatReplayed(ctx, ctx.state.win, 'the WIN of win.credits', 'repeat: identical body, fresh nonce and signature', 'a repeat is not applied again');
    },
  },
  {
    id: 'win.without-bet',
    title: 'WIN in a round with no BET (free spins), carrying metadata, is credited',
    needsBalance: true,
    async run(ctx) {
      const before = await ctx.balance('before the WIN');
      const amount = 25;
      const body = ctx.tx({
        transactionId: ctx.id('fswin'),
        type: 'WIN',
        roundId: ctx.round('freespins'),
        amount,
        roundComplete: true,
        metadata: { jackpot: { won: true, tier: 'mini', amountMinor: amount, poolId: 'conformance' } },
      });
      expectOk(await ctx.send(body), before + amount, `${before} + ${amount}; a WIN is never DECLINED, with or without a BET`);
      await ctx.expectBalance(before + amount, 'after the WIN', 'the WIN credited once');
    },
  },
  {
    id: 'rollback.refunds-bet',
    title: "ROLLBACK refunds the referenced BET's amount",
    needsBalance: true,
    async run(ctx) {
      const amount = 70;
      const betId = ctx.id('bet');
      const start = await ctx.balance('before the BET');
      expectOk(await ctx.send(ctx.tx({ transactionId: betId, type: 'BET', roundId: ctx.round('rollback'), amount, roundComplete: false })), start - amount, 'the BET to roll back');
      const body = ctx.tx({ transactionId: ctx.id('rollback'), type: 'ROLLBACK', roundId: ctx.round('rollback'), amount, originalTransactionId: betId });
      const reply = expectOk(await ctx.send(body), start, `the bet's ${amount} refunded; a ROLLBACK is never DECLINED`);
      await ctx.expectBalance(start, 'after the ROLLBACK', 'the bet refunded once');
      ctx.state.rollback = { body, reply };
    },
  },
  {
    id: 'idempotency.rollback-repeat',
    title: 'a repeated ROLLBACK replays the stored reply and does not refund again',
    needsBalance: true,
    async run(ctx) {
      await expectRepeatReplayed(ctx, ctx.state.rollback, 'the ROLLBACK of rollback.refunds-bet', 'repeat: identical body, fresh nonce and signature', 'a rollback refunds once');
    },
  },
  {
    id: 'rollback.refunds-once',
    title: 'a second ROLLBACK (another transactionId) of a bet already refunded refunds nothing',
    needsBalance: true,
    async run(ctx) {
      const rb = ctx.state.rollback;
      if (!rb) throw new CheckSkipped('needs the ROLLBACK of rollback.refunds-bet');
      const first = JSON.parse(rb.body) as TransactionRequest;
      const before = await ctx.balance('before the second ROLLBACK');
      // Any answer will do (the service never sends this: a second ROLLBACK of one BET is refused before the wallet); the money must not move.
      await ctx.send(ctx.tx({ ...first, transactionId: ctx.id('rollback-again') }), `a second ROLLBACK of ${first.originalTransactionId ?? 'its BET'}, already refunded by ${first.transactionId}`);
      await ctx.expectBalance(before, 'after the second ROLLBACK', 'a bet is refunded at most once');
    },
  },
  {
    id: 'rollback.unknown-bet',
    title: 'ROLLBACK of a bet the wallet never saw answers 200 OK and refunds nothing',
    needsBalance: true,
    async run(ctx) {
      const before = await ctx.balance('before the ROLLBACK');
      const neverSent = ctx.id('unsent-bet');
      const ex = await ctx.send(ctx.tx({ transactionId: ctx.id('rollback'), type: 'ROLLBACK', roundId: ctx.round('unknown'), amount: 40, originalTransactionId: neverSent }));
      // The reconciler rolls back bets whose only attempt timed out, which the wallet may never have
      // received: nothing to refund, and a non-200 would only be retried until dead-lettered.
      expectOk(ex, before, 'nothing to refund; a ROLLBACK is never DECLINED');
      await ctx.expectBalance(before, 'after the ROLLBACK', 'nothing was refunded');
    },
  },
  {
    id: 'rollback.tombstone',
    title: 'a BET arriving after its ROLLBACK (it timed out on the way) is refused and takes nothing',
    needsBalance: true,
    async run(ctx) {
      const amount = 80;
      const betId = ctx.id('late-bet');
      const before = await ctx.balance('before the ROLLBACK');
      const rb = await ctx.send(ctx.tx({ transactionId: ctx.id('rollback'), type: 'ROLLBACK', roundId: ctx.round('late'), amount, originalTransactionId: betId }));
      expectOk(rb, before, 'the BET is not here yet: nothing to refund, but remember that it was rolled back');
      // The BET that timed out reaches the wallet after its ROLLBACK was answered: if it is debited now,
      // nothing will ever refund it.
      const bet = await ctx.send(ctx.tx({ transactionId: betId, type: 'BET', roundId: ctx.round('late'), amount, roundComplete: false }), 'the BET arrives after its ROLLBACK');
      const refused = bet.outcome.kind === 'response' && bet.outcome.status !== 200;
      if (!refused) {
        const r = txReply(bet);
        if (r.status !== 'DECLINED' || r.balance !== before) {
          failOn(bet, `a refusal of the late BET: 200 {"status":"DECLINED","balance":${before}} or any non-200 (its ROLLBACK came first; keep a tombstone for it)`);
        }
      }
      await ctx.expectBalance(before, 'after the late BET', 'a BET rolled back before it arrived takes nothing');
    },
  },
  {
    id: 'rollback.bet-amount',
    title: "ROLLBACK carrying another amount than its BET refunds the BET's amount",
    needsBalance: true,
    async run(ctx) {
      const amount = 80;
      const claimed = 800;
      const betId = ctx.id('bet');
      const start = await ctx.balance('before the BET');
      expectOk(await ctx.send(ctx.tx({ transactionId: betId, type: 'BET', roundId: ctx.round('amount'), amount, roundComplete: false })), start - amount, 'the BET to roll back');
      const body = ctx.tx({ transactionId: ctx.id('rollback'), type: 'ROLLBACK', roundId: ctx.round('amount'), amount: claimed, originalTransactionId: betId });
      expectOk(await ctx.send(body, `amount ${claimed}, its BET's ${amount}`), start, `the BET's ${amount} refunded, not the ${claimed} the ROLLBACK carries`);
      await ctx.expectBalance(start, 'after the ROLLBACK', `the BET's ${amount} refunded`);
    },
  },
  {
    id: 'declined.bet-beyond-balance',
    title: 'BET beyond the balance: 200 DECLINED with the balance unchanged (or OK if the wallet gives credit)',
    needsBalance: true,
    async run(ctx) {
      const before = await ctx.balance('before the BET');
      const amount = before + 1;
      if (!Number.isSafeInteger(amount) || amount < 1) throw new CheckSkipped(`cannot bet beyond a balance of ${before}`);
      const id = ctx.id('bigbet');
      const ex = await ctx.send(ctx.tx({ transactionId: id, type: 'BET', roundId: ctx.round('declined'), amount, roundComplete: false }));
      const r = txReply(ex);
      if (r.status === 'DECLINED') {
        if (r.balance !== before) failOn(ex, `200 {"status":"DECLINED","balance":${before}}: a DECLINED leaves the balance unchanged`);
        await ctx.expectBalance(before, 'after the DECLINED', 'a DECLINED leaves the balance unchanged');
        ctx.state.declinedBet = { id, amount, applied: false };
        return;
      }
      if (r.balance !== before - amount) failOn(ex, `200 {"status":"DECLINED","balance":${before}}, or OK with the balance ${before - amount} if the wallet gives credit`);
      await ctx.expectBalance(before - amount, 'after the BET', 'the BET debited once');
      ctx.state.declinedBet = { id, amount, applied: true };
      return 'the wallet accepted the bet on credit (allowed); rollback.declined-bet refunds it';
    },
  },
  {
    id: 'rollback.declined-bet',
    title: 'ROLLBACK of a DECLINED bet answers 200 OK and refunds nothing',
    needsBalance: true,
    async run(ctx) {
      const bet = ctx.state.declinedBet;
      if (!bet) throw new CheckSkipped('needs the BET of declined.bet-beyond-balance');
      const before = await ctx.balance('before the ROLLBACK');
      const expected = bet.applied ? before + bet.amount : before;
      const ex = await ctx.send(ctx.tx({ transactionId: ctx.id('rollback'), type: 'ROLLBACK', roundId: ctx.round('declined'), amount: bet.amount, originalTransactionId: bet.id }));
      expectOk(ex, expected, bet.applied ? 'the bet (accepted on credit) refunded' : 'a declined bet took nothing, so nothing is refunded; a ROLLBACK is never DECLINED');
      await ctx.expectBalance(expected, 'after the ROLLBACK', bet.applied ? 'the bet refunded once' : 'nothing was refunded');
    },
  },
  {
    id: 'adjustment.credit-debit',
    title: 'ADJUSTMENT applies its direction: CREDIT then DEBIT, both 200 OK (admin form: gameId "", metadata.reason)',
    needsBalance: true,
    async run(ctx) {
      const amount = 40;
      const before = await ctx.balance('before the ADJUSTMENTs');
      for (const [direction, expected] of [
        ['CREDIT', before + amount],
        ['DEBIT', before],
      ] as const) {
        const id = ctx.id('adj');
        const body = ctx.tx({
          transactionId: id,
          sessionToken: ADMIN_SESSION,
          type: 'ADJUSTMENT',
          roundId: `adjustment:${id}`,
          amount,
          gameId: '',
          direction,
          metadata: { reason: 'conformance check' },
        });
        expectOk(await ctx.send(body), expected, `${direction} ${amount}; an ADJUSTMENT is never DECLINED`);
        await ctx.expectBalance(expected, `after the ${direction}`, `the ${direction} applied once`);
      }
    },
  },
  {
    id: 'stale-rollback.refunds',
    title: 'stale-round ROLLBACK (transactionId stale-rollback:<bet>, sessionToken system:stale-round-reconciler) refunds the bet',
    needsBalance: true,
    async run(ctx) {
      const amount = 60;
      const betId = ctx.id('bet');
      const start = await ctx.balance('before the BET');
      expectOk(await ctx.send(ctx.tx({ transactionId: betId, type: 'BET', roundId: ctx.round('stale'), amount, roundComplete: false })), start - amount, 'the BET to roll back');
      const body = ctx.tx({
        transactionId: `${STALE_ROLLBACK_PREFIX}${betId}`,
        sessionToken: RECONCILER_SESSION,
        type: 'ROLLBACK',
        roundId: ctx.round('stale'),
        amount,
        originalTransactionId: betId,
      });
      const reply = expectOk(await ctx.send(body), start, `the bet's ${amount} refunded`);
      await ctx.expectBalance(start, 'after the ROLLBACK', 'the bet refunded once');
      ctx.state.staleRollback = { body, reply };
    },
  },
  {
    id: 'stale-rollback.repeat',
    title: 'a repeated stale-round ROLLBACK (the next sweep) replays the stored reply and does not refund again',
    needsBalance: true,
    async run(ctx) {
      await expectRepeatReplayed(ctx, ctx.state.staleRollback, 'the ROLLBACK of stale-rollback.refunds', 'repeat: identical body, fresh nonce and signature', 'a rollback refunds once');
    },
  },
  {
    id: 'format.json-replies',
    title: 'every 200 reply is JSON (content-type application/json)',
    needsBalance: false,
    async run(ctx) {
      const bad = ctx.replies200.find((ex) => !/^application\/([\w.+-]+\+)?json\b/i.test(ex.outcome.kind === 'response' ? (ex.outcome.contentType ?? '') : ''));
      if (bad) failOn(bad, 'content-type application/json');
      if (ctx.replies200.length === 0) throw new CheckSkipped('no 200 reply to look at');
    },
  },
];

export const CHECK_IDS: readonly string[] = CHECKS.map((c) => c.id);

export async function runConformance(options: ConformanceOptions): Promise<ConformanceReport> {
  const full: Required<ConformanceOptions> = {
    walletUrl: options.walletUrl,
    operatorSecret: options.operatorSecret,
    playerRef: options.playerRef ?? `conformance-${randomBytes(6).toString('hex')}`,
    currency: options.currency ?? 'EUR',
    gameId: options.gameId ?? 'conformance-game',
    timeoutMs: options.timeoutMs ?? 5000,
  };
  // Unique per run, so that running twice against one wallet sends no id it has seen.
  const runId = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
  const ctx = new Ctx(full, runId);
  const results: CheckResult[] = [];
  let balanceWorks = true;
  let unreachable: string | undefined;
  for (const check of CHECKS) {
    const base = { id: check.id, title: check.title };
    if (unreachable) {
      results.push({ ...base, status: 'SKIP', note: `the wallet could not be reached (${unreachable})` });
      continue;
    }
    if (check.needsBalance && !balanceWorks) {
      results.push({ ...base, status: 'SKIP', note: 'needs a working balance endpoint to verify balances (see balance.read)' });
      continue;
    }
    try {
      const note = await check.run(ctx);
      results.push({ ...base, status: 'PASS', ...(note ? { note } : {}) });
    } catch (err) {
      if (err instanceof CheckSkipped) results.push({ ...base, status: 'SKIP', note: err.message });
      else if (err instanceof CheckFailed) {
        results.push({ ...base, status: 'FAIL', sent: err.sent, got: err.got, expected: err.expected });
        if (check.id === 'balance.read') {
          balanceWorks = false;
          if (err.got.startsWith('could not reach')) unreachable = err.got;
        }
      } else throw err;
    }
  }
  const count = (s: CheckStatus) => results.filter((r) => r.status === s).length;
  return { walletUrl: full.walletUrl, playerRef: full.playerRef, runId, results, passed: count('PASS'), failed: count('FAIL'), skipped: count('SKIP') };
}

/** The exit status of a run: 0 when every check that ran passed, 1 when one failed or none ran (all skipped: nothing verified). */
export function exitStatus(report: Pick<ConformanceReport, 'passed' | 'failed'>): 0 | 1 {
  return report.failed > 0 || report.passed === 0 ? 1 : 0;
}

/** The human report: one line per check, the details of a FAIL under it, a summary line last. */
export function formatReport(report: ConformanceReport): string {
  const width = Math.max(...report.results.map((r) => r.id.length));
  const lines = [`Wallet conformance check of ${report.walletUrl} (player ${report.playerRef}, run ${report.runId})`, ''];
  for (const r of report.results) {
    lines.push(`${r.status}  ${r.id.padEnd(width)}  ${r.title}`);
    if (r.status === 'FAIL') {
      lines.push(`      sent:     ${r.sent}`, `      got:      ${r.got}`, `      expected: ${r.expected}`);
    }
    if (r.note) lines.push(`      note:     ${r.note}`);
  }
  lines.push('', `Summary: ${report.passed} passed, ${report.failed} failed, ${report.skipped} skipped (${report.results.length} checks)`);
  return lines.join('\n');
}
