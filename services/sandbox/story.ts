import { randomBytes } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import type { CatalogInput } from '../../shared/catalog/schema.ts';
import { ProviderClient, verifyReplayToken, type DemoProvider, type TransactionReply } from './demo-provider.ts';
import type { DemoWallet } from './demo-wallet.ts';
import { readResponse, SignedClient, type ApiResponse } from './signed-client.ts';

/**
 * The sandbox's scripted story: one player's afternoon, through the real HTTP APIs with real
 * signatures, each step checking its own outcome against the demo wallet and the service's audit routes.
 */
export interface StoryWorld {
  serviceUrl: string;
  adminToken: string;
  /** The demo catalog with the started servers' addresses filled in. */
  catalog: CatalogInput;
  /** One demo wallet per operator of the catalog, by operator id. */
  wallets: ReadonlyMap<string, DemoWallet>;
  provider: DemoProvider;
  staleRoundAfterSeconds: number;
  reconcileIntervalSeconds: number;
  print(line: string): void;
}

export interface StoryResult {
  steps: number;
  checks: number;
  failures: string[];
  /** What the closing "where to look" lines point at. */
  examples: {
    providerId: string;
    operatorId: string;
    roundId: string;
    /** The game of the story's rounds. */
    gameId: string;
    playerRef: string;
    grantId: string | undefined;
    /** The interval of the settlement statement the story ends with: its own traffic. */
    statement: { from: string; to: string } | undefined;
  };
}

interface Grant {
  id: string;
  status: string;
  externalRef?: string;
  spins: number;
  betAmountMinor: number;
  currency: string;
  gameId: string;
  playerRef: string;
}

interface AuditTx {
  transactionId: string;
  type: string;
  origin: string;
  status: string;
}
interface AuditRound {
  streamId: string;
  history: Array<{ event: { type: string; data: { request?: { metadata?: Record<string, unknown> }; walletBody?: string } }; stateAfter: { completed: boolean; outstandingBets: string[]; transactions: AuditTx[] } }>;
}

/** A TransactionRecord of GET /v1/operator/transactions (contract section 9), the fields the story reads. */
interface OperatorTx {
  transactionId: string;
  roundId: string;
  playerRef: string;
  type: string;
  amount: number;
  currency: string;
  status: string;
  recordedAt: string;
}
interface Figure {
  count: number;
  amountMinor: number;
}
interface StatementFigures {
  bets: Figure;
  wins: Figure;
  refunds: Figure;
  ggrMinor: number;
}
/** GET /v1/operator/reports/settlement (contract section 9). */
interface Statement {
  from: string;
  to: string;
  lines: Array<StatementFigures & { providerId: string; gameId: string; currency: string }>;
  adjustments: Record<string, { credits: Figure; debits: Figure }>;
  unsettled: Record<string, { pending: Figure; failed: Figure; dead: Figure }>;
  totals: Record<string, StatementFigures>;
}

class StepFailed extends Error {}

const short = (text: string, max = 110) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(probe: () => Promise<T | undefined> | T | undefined, timeoutMs: number, everyMs = 100): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) return undefined;
    await sleep(everyMs);
  }
}

/** What the story plays with in a catalog: its first provider's game (one with replays if any), two operators, an active campaign of that game. */
function cast(catalog: CatalogInput) {
  const provider = catalog.providers[0];
  const game = provider?.games.find((g) => g.replayBaseUrl !== '') ?? provider?.games[0];
  const [op, otherOp] = catalog.operators;
  const campaign = game && catalog.campaigns.find((c) => c.gameId === game.id && c.active);
  return provider && game && op && otherOp && campaign ? { provider, game, op, otherOp, campaign } : undefined;
}

/** Why the story cannot be played with this catalog, or undefined when it can. */
export const catalogUnfitForStory = (catalog: CatalogInput): string | undefined =>
  cast(catalog) ? undefined : 'the story needs a catalog with a provider that has a game, two operators and an active campaign for that game';

export async function runStory(world: StoryWorld): Promise<StoryResult> {
  const { print } = world;
  // The statement the story ends with covers [storyStart, just after its last transaction).
  const storyStart = new Date();
  const failures: string[] = [];
  let checks = 0;
  let steps = 0;

  const roles = cast(world.catalog);
  if (!roles) throw new Error(catalogUnfitForStory(world.catalog));
  const { provider, game, op, otherOp, campaign } = roles;
  const wallet = world.wallets.get(op.id)!;
  const currency = campaign.currency;

  const operatorApi = new SignedClient(world.serviceUrl, { kind: 'operator', id: op.id, secret: op.secret });
  const otherOperatorApi = new SignedClient(world.serviceUrl, { kind: 'operator', id: otherOp.id, secret: otherOp.secret });
  const providerApi = new ProviderClient(world.serviceUrl, provider.id, provider.secret);
  const admin = async <T>(method: 'GET' | 'PUT', path: string, body?: unknown): Promise<ApiResponse<T>> => {
    const res = await fetch(world.serviceUrl + path, {
      method,
      headers: { authorization: `Bearer ${world.adminToken}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return readResponse<T>(res);
  };

  // Fresh ids every run, so the story also works against a database that already holds earlier runs.
  const tag = randomBytes(2).toString('hex');
  const player = `ana-${tag}`;
  const round = (n: number) => `round-${tag}-${n}`;
  const txId = (name: string) => `${tag}-${name}`;

  const step = (title: string) => {
    steps += 1;
    print('');
    print(`[${steps}] ${title}`);
  };
  /** One line per call: who sent it, what, and the status and (shortened) body that came back. */
  const sent = (who: string, what: string, res: Pick<ApiResponse, 'status' | 'text'>) => print(`    ${who.padEnd(13)} ${what}  ->  ${res.status} ${short(res.text.trim(), 90)}`);
  const check = (ok: boolean, what: string, detail = '') => {
    checks += 1;
    if (ok) print(`    ok    ${what}`);
    else {
      print(`    FAIL  ${what}${detail ? ` (${detail})` : ''}`);
      failures.push(`step ${steps}: ${what}${detail ? ` (${detail})` : ''}`);
    }
    return ok;
  };
  /** A check the rest of the step depends on: stop the story when it fails. */
  const must = (ok: boolean, what: string, detail = '') => {
    if (!check(ok, what, detail)) throw new StepFailed(what);
  };

  /** What the player's balance should be, from the story's own bookkeeping; compared with the wallet at every step. */
  let expected = 0;
  let start = 0;
  const walletMoved = (delta: number, before: number, reply: TransactionReply | undefined) => {
    expected += delta;
    const now = wallet.balanceOf(player);
    print(`    wallet ${op.id}/${player}: ${before} -> ${now}`);
    check(now === expected && reply?.balance === now, delta === 0 ? 'the balance did not move' : `the wallet moved the balance by exactly ${delta > 0 ? '+' : ''}${delta}, and the reply carries it`, `wallet ${now}, expected ${expected}, reply ${reply?.balance}`);
  };
  /** Every transaction the story saw the wallet apply, by id (a retry is the same one): what the statement must add up to. */
  const applied = new Map<string, { type: string; amount: number; roundId: string }>();
  const transact = async (label: string, tx: Parameters<ProviderClient['transaction']>[0]) => {
    const before = wallet.balanceOf(player);
    const res = await providerApi.transaction(tx);
    sent(provider.id, `${label}`, res);
    const reply = res.status === 200 ? (res.json as TransactionReply) : undefined;
    if (reply?.status === 'OK') applied.set(tx.transactionId, { type: tx.type, amount: tx.amount, roundId: tx.roundId });
    return { res, before, reply };
  };

  const examples: StoryResult['examples'] = { providerId: provider.id, operatorId: op.id, roundId: round(1), gameId: game.id, playerRef: player, grantId: undefined, statement: undefined };
  let session = '';
  let staleBetId = '';
  let staleBetAt = 0;
  const staleBetAmount = 400;

  const story: Array<[string, () => Promise<void>]> = [
    [
      'The platform team loads the demo catalog (PUT /v1/admin/catalog, bearer ADMIN_TOKEN)',
      async () => {
        const res = await admin('PUT', '/v1/admin/catalog', world.catalog);
        sent('platform', 'PUT /v1/admin/catalog', res);
        must(res.status === 200, 'catalog applied: the operators\' walletUrl and the provider\'s apiBaseUrl point at the demo servers');
      },
    ],
    [
      'Operators list their games (GET /v1/operator/games)',
      async () => {
        for (const [api, o] of [[operatorApi, op], [otherOperatorApi, otherOp]] as const) {
          const res = await api.call<Array<{ gameId: string }>>('GET', '/v1/operator/games');
          const ids = res.json?.map((g) => g.gameId) ?? [];
          sent(o.id, 'GET /v1/operator/games', { ...res, text: ids.join(', ') });
          check(res.status === 200 && [...ids].sort().join() === [...o.visibleGames].sort().join(), `${o.id} sees exactly its visibleGames`, res.text);
        }
      },
    ],
    [
      `${op.id} launches ${game.id} for ${player} (POST /v1/operator/games/launch)`,
      async () => {
        const res = await operatorApi.call<{ launchUrl: string; sessionToken: string }>('POST', '/v1/operator/games/launch', {
          playerRef: player,
          gameId: game.id,
          currency,
          mode: 'REAL',
          language: provider.supportedLanguages[0],
          lobbyUrl: 'https://casino.example/lobby',
        });
        sent(op.id, `launch REAL ${game.id} ${currency}`, res);
        must(res.status === 200 && !!res.json?.sessionToken, 'a session token and launchUrl came back');
        session = res.json!.sessionToken;
        check(res.json!.launchUrl.startsWith(`${game.launchBaseUrl}?token=${session}`), 'launchUrl is the game\'s launchBaseUrl plus the token (embed it in an iframe)');
        const blocked = op.blockedPlayers[0];
        if (blocked) {
          const refused = await operatorApi.call('POST', '/v1/operator/games/launch', { playerRef: blocked, gameId: game.id, currency, mode: 'REAL' });
          sent(op.id, `launch for ${blocked}`, refused);
          check(refused.status === 403, 'a player on the operator\'s blocklist is refused with 403, reason not disclosed');
        }
      },
    ],
    [
      'The provider reads the balance (POST /v1/wallet/balance, forwarded live to the operator\'s wallet)',
      async () => {
        start = wallet.balanceOf(player);
        expected = start;
        const res = await providerApi.balance(session);
        sent(provider.id, 'POST /v1/wallet/balance', res);
        check(res.status === 200 && (res.json as { balance?: number }).balance === expected, `the service answered the wallet's balance verbatim (${expected})`);
      },
    ],
    [
      'A round: BET 500, then WIN 1200 completing it (POST /v1/wallet/transaction)',
      async () => {
        const bet = await transact('BET 500', { transactionId: txId('bet-1'), sessionToken: session, type: 'BET', roundId: round(1), roundComplete: false, playerRef: player, amount: 500, currency, gameId: game.id });
        must(bet.res.status === 200 && bet.reply?.status === 'OK', 'the BET was applied');
        walletMoved(-500, bet.before, bet.reply);
        const win = await transact('WIN 1200, roundComplete', { transactionId: txId('win-1'), sessionToken: session, type: 'WIN', roundId: round(1), roundComplete: true, playerRef: player, amount: 1200, currency, gameId: game.id });
        must(win.res.status === 200 && win.reply?.status === 'OK', 'the WIN was applied');
        walletMoved(1200, win.before, win.reply);
        const late = await transact('BET 100 on the completed round', { transactionId: txId('bet-1b'), sessionToken: session, type: 'BET', roundId: round(1), roundComplete: false, playerRef: player, amount: 100, currency, gameId: game.id });
        check(late.res.status === 409 && wallet.balanceOf(player) === expected, 'a BET on a completed round is refused (409) and never reaches the wallet');
      },
    ],
    [
      'A jackpot: BET 200, WIN 25000 with jackpot metadata (stored and forwarded verbatim)',
      async () => {
        const bet = await transact('BET 200', { transactionId: txId('bet-2'), sessionToken: session, type: 'BET', roundId: round(2), roundComplete: false, playerRef: player, amount: 200, currency, gameId: game.id });
        must(bet.reply?.status === 'OK', 'the BET was applied');
        walletMoved(-200, bet.before, bet.reply);
        const jackpot = { won: true, tier: 'grand', amountMinor: 25000, poolId: 'demo-pool' };
        const win = await transact('WIN 25000 + metadata.jackpot', { transactionId: txId('win-2'), sessionToken: session, type: 'WIN', roundId: round(2), roundComplete: true, playerRef: player, amount: 25000, currency, gameId: game.id, metadata: { jackpot } });
        must(win.reply?.status === 'OK', 'the WIN was applied');
        walletMoved(25000, win.before, win.reply);
        const audit = await admin<AuditRound>('GET', `/v1/audit/rounds/${provider.id}/${op.id}/${round(2)}`);
        const recorded = audit.json?.history.find((h) => h.event.type === 'TransactionRecorded' && h.event.data.request?.metadata !== undefined);
        sent('auditor', `GET /v1/audit/rounds/${provider.id}/${op.id}/${round(2)}`, { ...audit, text: `${audit.json?.history.length ?? 0} events` });
        check(isDeepStrictEqual(recorded?.event.data.request?.metadata, { jackpot }), 'the round\'s history holds the jackpot metadata as sent');
        check(recorded?.event.data.walletBody?.includes(`"metadata":${JSON.stringify({ jackpot })}`) === true, 'and the body sent to the wallet carried it verbatim');
      },
    ],
    [
      'A ROLLBACK: BET 300, then the provider reverses it (and retries the reversal)',
      async () => {
        const bet = await transact('BET 300', { transactionId: txId('bet-3'), sessionToken: session, type: 'BET', roundId: round(3), roundComplete: false, playerRef: player, amount: 300, currency, gameId: game.id });
        must(bet.reply?.status === 'OK', 'the BET was applied');
        walletMoved(-300, bet.before, bet.reply);
        const rollback = { transactionId: txId('rb-3'), sessionToken: session, type: 'ROLLBACK' as const, roundId: round(3), originalTransactionId: txId('bet-3'), playerRef: player, amount: 300, currency, gameId: game.id };
        const rb = await transact(`ROLLBACK of ${txId('bet-3')}`, rollback);
        must(rb.reply?.status === 'OK', 'the ROLLBACK was applied');
        walletMoved(300, rb.before, rb.reply);
        const again = await transact('the same ROLLBACK again (a retry)', rollback);
        check(again.res.status === 200 && again.res.text === rb.res.text, 'a retry is answered with the stored reply, byte for byte');
        const refunds = wallet.entries().filter((e) => e.transactionId === rollback.transactionId).length;
        check(refunds === 1 && wallet.balanceOf(player) === expected, 'and refunded nothing twice', `${refunds} wallet entries`);
      },
    ],
    [
      `A round left open: BET ${staleBetAmount}, then the game client disconnects (no WIN, no roundComplete)`,
      async () => {
        staleBetId = txId('bet-4');
        const bet = await transact(`BET ${staleBetAmount}`, { transactionId: staleBetId, sessionToken: session, type: 'BET', roundId: round(4), roundComplete: false, playerRef: player, amount: staleBetAmount, currency, gameId: game.id });
        must(bet.reply?.status === 'OK', 'the BET was applied');
        staleBetAt = Date.now();
        walletMoved(-staleBetAmount, bet.before, bet.reply);
        print(`    the reconciler force-closes it after ${world.staleRoundAfterSeconds} s without activity; the story comes back to it at the end`);
      },
    ],
    [
      `Free spins: ${op.id} grants campaign ${campaign.id} (POST /v1/operator/free-spins/grants)`,
      async () => {
        const issue = { playerRef: player, campaignId: campaign.id, idempotencyKey: `welcome-${player}` };
        const res = await operatorApi.call<Grant>('POST', '/v1/operator/free-spins/grants', issue);
        sent(op.id, `issue grant, key ${issue.idempotencyKey}`, { ...res, text: res.json?.id ? `grant ${res.json.id} ${res.json.status}, externalRef ${res.json.externalRef}` : res.text });
        must(res.status === 201 && res.json?.status === 'active' && !!res.json.externalRef, 'the grant was created active, with the provider\'s externalRef');
        const grant = res.json!;
        examples.grantId = grant.id;
        const atProvider = world.provider.grants().find((g) => g.requestRef === grant.id);
        print(`    ${provider.id} received POST /v1/free-spins/grants: ${atProvider ? `${atProvider.spins} spins of ${atProvider.betAmountMinor} ${atProvider.currency} for ${atProvider.playerRef}, answered ${atProvider.externalRef}` : 'nothing'}`);
        check(atProvider !== undefined && atProvider.externalRef === grant.externalRef && atProvider.spins === campaign.spins, 'the provider was told synchronously (requestRef = grant id), terms from the campaign');
        const calls = world.provider.received().length;
        const repeat = await operatorApi.call<Grant>('POST', '/v1/operator/free-spins/grants', issue);
        sent(op.id, 'the same request again', { ...repeat, text: repeat.json?.id ? `grant ${repeat.json.id} ${repeat.json.status}` : repeat.text });
        check(repeat.status === 200 && repeat.json?.id === grant.id && world.provider.received().length === calls, 'a repeated idempotencyKey answers the original grant and does not call the provider again');

        // The player opens the game; the provider plays a free spin. The stake is the operator's gift, so the
        // spin's BET carries amount 0; the metadata ties the round to the batch (the service does not read it).
        const freeSpin = { grant: grant.externalRef, spin: 1, of: grant.spins, stakeMinor: grant.betAmountMinor };
        const bet = await transact('free spin 1: BET 0', { transactionId: txId('fs-bet-1'), sessionToken: session, type: 'BET', roundId: round(5), roundComplete: false, playerRef: player, amount: 0, currency, gameId: game.id, metadata: { freeSpin } });
        must(bet.reply?.status === 'OK', 'the free-spin BET of 0 was accepted');
        walletMoved(0, bet.before, bet.reply);
        const win = await transact('free spin 1: WIN 150', { transactionId: txId('fs-win-1'), sessionToken: session, type: 'WIN', roundId: round(5), roundComplete: true, playerRef: player, amount: 150, currency, gameId: game.id, metadata: { freeSpin } });
        must(win.reply?.status === 'OK', 'the free-spin WIN was applied');
        walletMoved(150, win.before, win.reply);

        const read = await operatorApi.call<Grant>('GET', `/v1/operator/free-spins/grants/${grant.id}`);
        sent(op.id, 'GET .../grants/{id}', { ...read, text: `status ${read.json?.status}, externalRef ${read.json?.externalRef}` });
        const list = await operatorApi.call<Grant[]>('GET', `/v1/operator/free-spins/grants?playerRef=${encodeURIComponent(player)}`);
        sent(op.id, `GET .../grants?playerRef=${player}`, { ...list, text: `${list.json?.length ?? 0} grant(s)` });
        check(read.json?.status === 'active' && list.json?.some((g) => g.id === grant.id) === true, 'the grant is shown, by id and in the player\'s list');

        const cancel = await operatorApi.call<Grant>('POST', `/v1/operator/free-spins/grants/${grant.id}/cancel`);
        sent(op.id, 'POST .../grants/{id}/cancel', { ...cancel, text: `status ${cancel.json?.status ?? cancel.text}` });
        check(cancel.status === 200 && cancel.json?.status === 'cancelled' && atProvider?.status === 'cancelled', 'the remaining spins are cancelled, at the provider too');
      },
    ],
    [
      'A replay link for the first round (POST /v1/operator/rounds/replay)',
      async () => {
        const res = await operatorApi.call<{ replayUrl: string }>('POST', '/v1/operator/rounds/replay', { roundId: round(1), gameId: game.id });
        sent(op.id, `replay ${round(1)}`, res);
        must(res.status === 200 && res.json?.replayUrl.startsWith(`${game.replayBaseUrl}?token=`) === true, 'a link to the provider\'s replay page came back');
        const token = new URL(res.json!.replayUrl).searchParams.get('token') ?? '';
        const claims = await verifyReplayToken(token, provider.id, provider.secret).catch((err: Error) => err);
        if (claims instanceof Error) return void check(false, 'the provider\'s replay page accepts the token', claims.message);
        print(`    ${provider.id} verifies the token with its secret: round ${claims.roundId} of ${claims.operatorId}, valid ${claims.exp - claims.iat} s`);
        check(claims.roundId === round(1) && claims.operatorId === op.id, 'the token names this operator\'s round');
        const other = await otherOperatorApi.call('POST', '/v1/operator/rounds/replay', { roundId: round(1), gameId: game.id });
        sent(otherOp.id, `replay ${round(1)}`, other);
        check(other.status === 404, 'another operator asking for the same round gets 404, as for a round that does not exist');
      },
    ],
    [
      `${op.id} kicks ${player} (POST /v1/operator/players/kick)`,
      async () => {
        const res = await operatorApi.call<{ revokedCount: number }>('POST', '/v1/operator/players/kick', { playerRef: player });
        sent(op.id, 'kick', res);
        check(res.status === 200 && res.json?.revokedCount === 1, 'the player\'s one session was ended');
        const told = await until(() => (world.provider.isRevoked(session) ? true : undefined), 5000);
        print(`    ${provider.id} received POST /v1/sessions/revoke: ${told ? 'yes' : 'no'} (best effort, after the answer)`);
        check(told === true, 'the provider was told which session to close');
        const before = wallet.balanceOf(player);
        const refused = await transact('BET 100 with the kicked session', { transactionId: txId('bet-6'), sessionToken: session, type: 'BET', roundId: round(6), roundComplete: false, playerRef: player, amount: 100, currency, gameId: game.id });
        check(refused.res.status === 401 && wallet.balanceOf(player) === before, 'the kicked session is refused (401 invalid session); the wallet saw nothing');
      },
    ],
    [
      `The reconciler force-closes the round left open (STALE_ROUND_AFTER_SECONDS=${world.staleRoundAfterSeconds})`,
      async () => {
        const waitMs = Math.max(0, staleBetAt + world.staleRoundAfterSeconds * 1000 - Date.now());
        const limitMs = waitMs + (world.reconcileIntervalSeconds + 15) * 1000;
        print(`    waiting for it (about ${Math.ceil(waitMs / 1000) + world.reconcileIntervalSeconds} s)...`);
        const before = wallet.balanceOf(player);
        const rollbackId = `stale-rollback:${staleBetId}`;
        const path = `/v1/audit/rounds/${provider.id}/${op.id}/${round(4)}`;
        const closed = await until(async () => {
          const res = await admin<AuditRound>('GET', path);
          const last = res.json?.history.at(-1)?.stateAfter;
          return last?.completed && last.transactions.some((t) => t.transactionId === rollbackId && t.status === 'applied') ? res.json : undefined;
        }, limitMs, 250);
        const entry = wallet.entries().find((e) => e.transactionId === rollbackId);
        print(`    wallet received ROLLBACK ${rollbackId}: ${entry ? `${entry.status}, balance ${entry.balance}` : 'nothing'}`);
        must(closed !== undefined && entry !== undefined, 'the round was force-closed and its bet rolled back');
        const rollback = closed!.history.at(-1)!.stateAfter.transactions.find((t) => t.transactionId === rollbackId);
        check(rollback?.origin === 'reconciler' && rollback.type === 'ROLLBACK', 'the ledger recorded it as the reconciler\'s ROLLBACK of that bet');
        applied.set(rollbackId, { type: 'ROLLBACK', amount: staleBetAmount, roundId: round(4) });
        walletMoved(staleBetAmount, before, { status: 'OK', balance: entry!.balance });
        const events = closed!.history.map((h) => h.event.type);
        sent('auditor', `GET ${path}`, { status: 200, text: events.join(', ') });
        check(events.includes('RoundForceClosed') && closed!.history.at(-1)!.stateAfter.outstandingBets.length === 0, 'its history shows the forced close and no outstanding bet');
      },
    ],
    [
      'Balances add up',
      async () => {
        // The wallet's own record of this player, movement by movement, against the story's bookkeeping.
        const mine = wallet.entries().filter((e) => e.playerRef === player && e.status === 'OK');
        const net = mine.reduce((sum, e) => sum + (e.type === 'BET' ? -e.amount : e.amount), 0);
        const balance = wallet.balanceOf(player);
        print(`    ${player}: started with ${start}, ${mine.length} wallet movements, net ${net > 0 ? '+' : ''}${net}, balance ${balance}`);
        check(balance === start + net && balance === expected, "the wallet balance equals the start plus every BET, WIN and ROLLBACK, and the story's own tally", `start ${start}, net ${net}, tally ${expected}`);
        // The list is a read model: it has the reconciler's refund a moment after the wallet does.
        let res: ApiResponse<{ transactions: Array<{ player_ref: string }> }>;
        let unsettled: number;
        const until = Date.now() + 5000;
        do {
          res = await admin<{ transactions: Array<{ player_ref: string }> }>('GET', '/v1/audit/transactions?status=unsettled');
          unsettled = res.status === 200 ? (res.json?.transactions.filter((t) => t.player_ref === player).length ?? 0) : -1;
          if (unsettled !== 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
        } while (unsettled !== 0 && Date.now() < until);
        sent('auditor', 'GET /v1/audit/transactions?status=unsettled', { ...res, text: `${unsettled} of ${player}` });
        check(unsettled === 0, 'the ledger holds no unsettled transaction of this player');
      },
    ],
    [
      `${op.id} reconciles: its transactions and a settlement statement of exactly the story's traffic (GET /v1/operator/reports/settlement)`,
      async () => {
        // The story's interval: from its start to now, when every transaction it made has been answered and
        // the reconciler's refund seen applied. The statement then ends just after the last one recorded.
        const from = storyStart.toISOString();
        const listPath = `/v1/operator/transactions?from=${from}&to=${new Date(Date.now() + 1).toISOString()}`;
        type Page = { transactions: OperatorTx[]; nextCursor: string | null };
        const listAll = async (): Promise<{ res: ApiResponse<Page>; txs: OperatorTx[] | undefined; pages: number }> => {
          const txs: OperatorTx[] = [];
          let first: ApiResponse<Page> | undefined;
          let cursor: string | null = null;
          let pages = 0;
          do {
            const res: ApiResponse<Page> = await operatorApi.call<Page>('GET', cursor === null ? listPath : `${listPath}&cursor=${encodeURIComponent(cursor)}`);
            first ??= res;
            pages += 1;
            if (res.status !== 200 || !Array.isArray(res.json?.transactions)) return { res, txs: undefined, pages };
            txs.push(...res.json.transactions);
            cursor = res.json.nextCursor;
          } while (cursor !== null && pages < 20);
          return { res: first, txs, pages };
        };
        /** The story's applied transactions the list does not show as applied (yet). */
        const notYet = (txs: OperatorTx[]) => [...applied.keys()].filter((id) => !txs.some((t) => t.transactionId === id && t.status === 'applied'));

        // The reconciliation routes are served from a read model that follows the ledger a moment behind.
        const waitMs = 10_000;
        const startedWaiting = Date.now();
        let listed = await listAll();
        while (listed.txs !== undefined && notYet(listed.txs).length > 0 && Date.now() - startedWaiting < waitMs) {
          await sleep(100);
          listed = await listAll();
        }
        const { res, txs, pages } = listed;
        sent(op.id, `GET ${listPath}`, { ...res, text: txs ? `${txs.length} transaction(s) in ${pages} page(s), the read model caught up in ${Date.now() - startedWaiting} ms` : res.text });
        must(txs !== undefined, 'the transactions list came back');
        const missing = notYet(txs!);
        const seen = (id: string) => txs!.find((t) => t.transactionId === id)?.status ?? 'not listed';
        must(
          missing.length === 0,
          `the list shows all ${applied.size} transactions the story saw applied, as applied`,
          `after ${Math.round(waitMs / 1000)} s the operators' transactions list still lacks ${missing.map((id) => `${id} (${seen(id)})`).join(', ')}`,
        );
        for (const t of txs!) print(`      ${t.recordedAt.slice(11, 23)}  ${t.type.padEnd(8)} ${String(t.amount).padStart(6)} ${t.currency}  ${t.status.padEnd(8)} ${t.roundId.padEnd(13)} ${t.transactionId}`);
        const strangers = txs!.filter((t) => !applied.has(t.transactionId) || t.playerRef !== player);
        check(
          strangers.length === 0 && txs!.every((t) => t.amount === applied.get(t.transactionId)?.amount && t.type === applied.get(t.transactionId)?.type),
          'and nothing else: no other transaction of the operator in the interval, each one\'s type and amount as sent',
          strangers.map((t) => `${t.transactionId} ${t.type} ${t.amount} ${t.status} of ${t.playerRef}`).join(', '),
        );

        const to = new Date(Math.max(...txs!.map((t) => Date.parse(t.recordedAt))) + 1).toISOString();
        examples.statement = { from, to };
        const reportPath = `/v1/operator/reports/settlement?from=${from}&to=${to}`;
        const report = await operatorApi.call<Statement>('GET', reportPath);
        sent(op.id, `GET ${reportPath}`, { ...report, text: report.json?.lines ? `a statement of ${report.json.lines.length} line(s)` : report.text });
        must(report.status === 200 && Array.isArray(report.json?.lines), 'the statement came back');
        const statement = report.json!;

        const fig = (f: Figure | undefined) => (f ? `${f.count} (${f.amountMinor})` : '-');
        const figures = (f: StatementFigures) => `bets ${fig(f.bets)}, wins ${fig(f.wins)}, refunds ${fig(f.refunds)}, GGR ${f.ggrMinor}`;
        print(`    statement [${statement.from}, ${statement.to}), figures as count (amount in minor units):`);
        for (const l of statement.lines) print(`      line         ${l.providerId}/${l.gameId} ${l.currency}: ${figures(l)}`);
        const unsettledText = Object.entries(statement.unsettled).map(([c, u]) => `${c}: pending ${fig(u.pending)}, failed ${fig(u.failed)}, dead ${fig(u.dead)}`);
        print(`      unsettled    ${unsettledText.join('; ') || 'none'}`);
        const adjustmentsText = Object.entries(statement.adjustments).map(([c, a]) => `${c}: credits ${fig(a.credits)}, debits ${fig(a.debits)}`);
        print(`      adjustments  ${adjustmentsText.join('; ') || 'none'}`);
        for (const [c, t] of Object.entries(statement.totals)) print(`      totals       ${c}: ${figures(t)}`);

        // What the story itself sent and saw applied, the reconciler's refund included.
        const tally = (type: string): Figure => {
          const of = [...applied.values()].filter((t) => t.type === type);
          return { count: of.length, amountMinor: of.reduce((sum, t) => sum + t.amount, 0) };
        };
        const mine: StatementFigures = { bets: tally('BET'), wins: tally('WIN'), refunds: tally('ROLLBACK'), ggrMinor: 0 };
        mine.ggrMinor = mine.bets.amountMinor - mine.wins.amountMinor - mine.refunds.amountMinor;
        print(`      the story's own tally: ${figures(mine)}`);
        const same = (a: StatementFigures | undefined) => a !== undefined && isDeepStrictEqual({ bets: a.bets, wins: a.wins, refunds: a.refunds, ggrMinor: a.ggrMinor }, mine);
        const [line] = statement.lines;
        check(
          statement.lines.length === 1 && line!.providerId === provider.id && line!.gameId === game.id && line!.currency === currency && same(line),
          `one line, ${provider.id}/${game.id} ${currency}, whose bets, wins and refunds are the BETs, WINs and ROLLBACKs the story saw applied`,
          statement.lines.map((l) => `${l.providerId}/${l.gameId} ${l.currency}: ${figures(l)}`).join('; '),
        );
        check(Object.keys(statement.totals).join() === currency && same(statement.totals[currency]), `the totals equal them: GGR = bets - wins - refunds = ${mine.ggrMinor}`);
        const won = wallet.balanceOf(player) - start;
        check(statement.totals[currency]?.ggrMinor === -won, `the operator's GGR is what ${player} won, negated (the wallet moved the balance by ${won > 0 ? '+' : ''}${won})`);
        check(unsettledText.length === 0 && adjustmentsText.length === 0, 'nothing unsettled (pending, failed or dead) and no adjustments', `${unsettledText.join('; ')} ${adjustmentsText.join('; ')}`.trim());

        const csv = await operatorApi.call('GET', reportPath, undefined, { accept: 'text/csv' });
        sent(op.id, 'the same with Accept: text/csv', { ...csv, text: csv.contentType });
        const rows = csv.text.split('\r\n').filter((r) => r !== '');
        for (const r of rows) print(`      ${r}`);
        const csvLine = [provider.id, game.id, currency, mine.bets.count, mine.bets.amountMinor, mine.wins.count, mine.wins.amountMinor, mine.refunds.count, mine.refunds.amountMinor, mine.ggrMinor].join(',');
        check(csv.status === 200 && csv.contentType.startsWith('text/csv') && rows[0]?.startsWith('providerId,gameId,currency,') === true && rows.length === 2 && rows[1] === csvLine, 'as CSV: a header row and the same line');
      },
    ],
  ];

  for (const [title, run] of story) {
    step(title);
    try {
      await run();
    } catch (err) {
      if (!(err instanceof StepFailed)) {
        failures.push(`step ${steps}: ${(err as Error).message}`);
        print(`    FAIL  ${(err as Error).message}`);
      }
      print('    the story stops here: the next steps build on this one');
      break;
    }
  }
  return { steps, checks, failures, examples };
}
