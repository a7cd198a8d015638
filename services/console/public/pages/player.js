// Player page: a player's sessions (active, kicked, expired), rounds and free-spin grants with one operator.
import { ApiError, getJson, seg } from '../api.js';
import { badge, code, h, loading, money, notice, pageTitle, replaceChildren, shortToken, table, utc } from '../dom.js';
import { href } from '../routes.js';

/**
 * @typedef {{ token: string, providerId: string, gameId: string, currency: string, status: 'active' | 'kicked' | 'expired', createdAt: string, expiresAt: string, revokedAt?: string }} Session
 * @typedef {{ providerId: string, roundId: string, gameId: string, currency: string, status: string, openedAt: string, closedAt?: string, betMinor: number, winMinor: number, refundMinor: number }} PlayerRound
 * @typedef {{ id: string, campaignId?: string, providerId: string, gameId: string, spins: number, betAmountMinor: number, currency: string, status: string, externalRef?: string, expiresAt?: string, lastError?: string, createdAt: string, updatedAt: string }} Grant
 * @typedef {{ transactionId: string, direction: 'DEBIT' | 'CREDIT', amount: number, currency: string, status: string, recordedAt: string }} Adjustment
 */

/** @param {import('../app.js').PageContext} ctx */
export async function playerPage(ctx) {
  const [operatorId = '', playerRef = ''] = ctx.params;
  const grantId = ctx.query.get('grant');
  ctx.setTitle(`Player ${playerRef}`);
  const body = h('div', {}, loading());
  ctx.main.append(pageTitle('Player ', code(playerRef), h('span', { class: 'muted subtitle' }, ` with ${operatorId}`)), body);

  /** @type {{ sessions: Session[], rounds: PlayerRound[], roundsTotal: number, adjustments: Adjustment[], grants: Grant[] }} */
  let player;
  try {
    player = await getJson(`/v1/admin/console/players/${seg(operatorId)}/${seg(playerRef)}`, { signal: ctx.signal });
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) {
      replaceChildren(body, notice(`Operator ${operatorId} has no player ${playerRef} (no session, round, adjustment or grant).`, 'error'));
      return;
    }
    throw err;
  }
  const active = player.sessions.filter((s) => s.status === 'active').length;
  replaceChildren(
    body,
    h('p', {}, `${player.sessions.length} sessions (${active} active), ${player.roundsTotal} rounds, ${player.adjustments.length} adjustments, ${player.grants.length} free-spin grants.`),
    h(
      'section',
      { 'aria-labelledby': 'sessions-title' },
      h('h2', { id: 'sessions-title' }, 'Sessions'),
      table({
        caption: 'Sessions, oldest first',
        className: 'sessions',
        headers: ['Token', 'Status', 'Provider', 'Game', 'Currency', 'Started', 'Expires', 'Kicked'],
        rows: player.sessions.map((s) => [shortToken(s.token), badge(s.status), s.providerId, s.gameId, s.currency, utc(s.createdAt), utc(s.expiresAt), s.revokedAt ? utc(s.revokedAt) : '—']),
        empty: 'none',
      }),
    ),
    h(
      'section',
      { 'aria-labelledby': 'rounds-title' },
      h('h2', { id: 'rounds-title' }, 'Rounds'),
      player.roundsTotal > player.rounds.length ? notice(`These are the newest ${player.rounds.length} of ${player.roundsTotal} rounds; search a round by its id to open an older one.`) : '',
      table({
        caption: 'Rounds, newest first (amounts applied by the wallet)',
        className: 'rounds',
        headers: ['Round', 'Status', 'Game', 'Provider', 'Opened', 'Closed', 'Bets', 'Wins', 'Refunds'],
        rows: player.rounds.map((r) => [
          h('a', { href: href.round(r.providerId, operatorId, r.roundId) }, r.roundId),
          badge(r.status),
          r.gameId,
          r.providerId,
          utc(r.openedAt),
          r.closedAt ? utc(r.closedAt) : '—',
          money(r.betMinor, r.currency),
          money(r.winMinor, r.currency),
          money(r.refundMinor, r.currency),
        ]),
        empty: 'none',
      }),
    ),
    h(
      'section',
      { 'aria-labelledby': 'adjustments-title' },
      h('h2', { id: 'adjustments-title' }, 'Adjustments'),
      table({
        caption: 'Adjustments by the platform, newest first (each opens as its own round)',
        className: 'adjustments',
        headers: ['Transaction', 'Direction', 'Amount', 'Status', 'Recorded'],
        rows: player.adjustments.map((a) => [
          h('a', { href: href.round('platform', operatorId, `adjustment:${a.transactionId}`) }, a.transactionId),
          a.direction === 'CREDIT' ? 'credit' : 'debit',
          money(a.amount, a.currency),
          badge(a.status),
          utc(a.recordedAt),
        ]),
        empty: 'none',
      }),
    ),
    h(
      'section',
      { 'aria-labelledby': 'grants-title' },
      h('h2', { id: 'grants-title' }, 'Free-spin grants'),
      table({
        caption: 'Free-spin grants',
        className: 'grants',
        headers: ['Grant', 'Status', 'Campaign', 'Game', 'Spins', 'Stake per spin', 'Expires', 'Provider ref', 'Last error', 'Updated'],
        rows: player.grants.map((g) => [
          code(g.id),
          badge(g.status),
          g.campaignId ?? '—',
          g.gameId,
          String(g.spins),
          // 0: the operator wallet's default stake (API document: omit or send 0).
          g.betAmountMinor === 0 ? `wallet default (${g.currency})` : money(g.betAmountMinor, g.currency),
          g.expiresAt ? utc(g.expiresAt) : '—',
          g.externalRef ?? '—',
          g.lastError ?? '—',
          utc(g.updatedAt),
        ]),
        rowClass: (i) => (grantId && player.grants[i]?.id === grantId ? 'highlight' : undefined),
        empty: 'none',
      }),
    ),
  );
}
