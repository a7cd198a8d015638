// Search: a transaction id, round id, player ref or grant id, and the pages they lead to.
import { getJson } from '../api.js';
import { announce, code, h, loading, notice, pageTitle } from '../dom.js';
import { href } from '../routes.js';

/**
 * @typedef {{ kind: 'transaction' | 'round' | 'player' | 'grant', label: string, operatorId: string, providerId?: string,
 *   roundId?: string, gameId?: string, playerRef?: string, grantId?: string, transactionId?: string }} SearchResult
 */

/** Where a result leads (undefined when the answer lacks what the page needs). @param {SearchResult} r */
export function resultHref(r) {
  if ((r.kind === 'transaction' || r.kind === 'round') && r.providerId && r.roundId) return href.round(r.providerId, r.operatorId, r.roundId);
  if (r.kind === 'player' && r.playerRef) return href.player(r.operatorId, r.playerRef);
  if (r.kind === 'grant' && r.playerRef) return href.player(r.operatorId, r.playerRef, r.grantId);
  return undefined;
}

const KIND_LABEL = { transaction: 'Transaction', round: 'Round', player: 'Player', grant: 'Free-spin grant' };

/** @param {import('../app.js').PageContext} ctx */
export async function searchPage(ctx) {
  ctx.setTitle('Search');
  // As typed: a player ref may begin or end with a space (the service also tries it trimmed).
  const q = ctx.query.get('q') ?? '';
  const input = h('input', { id: 'search-q', name: 'q', type: 'search', value: q, autocomplete: 'off', spellcheck: 'false', required: true, 'aria-describedby': 'search-help' });
  const form = h(
    'form',
    { class: 'search-form', role: 'search' },
    h('label', { for: 'search-q' }, 'Transaction id, round id, player ref or grant id'),
    h('div', { class: 'inline' }, input, h('button', { type: 'submit' }, 'Search')),
    h('p', { id: 'search-help', class: 'muted' }, 'Exact ids. A round or transaction leads to its round page, a player or grant to the player page.'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const text = input.value;
    if (text.trim()) location.hash = href.search(text);
  });
  const results = h('div', { id: 'search-results', 'aria-live': 'polite' });
  ctx.main.append(pageTitle('Search'), form, results);
  if (!q.trim()) return;

  results.append(loading('Searching…'));
  /** @type {{ results: SearchResult[] }} */
  const answer = await getJson(`/v1/admin/console/search?q=${encodeURIComponent(q)}`, { signal: ctx.signal });
  results.replaceChildren();
  const n = answer.results.length;
  announce(n === 0 ? 'No match.' : `${n} ${n === 1 ? 'match' : 'matches'}.`);
  if (n === 0) {
    results.append(notice(`Nothing matches “${q}”.`));
    return;
  }
  results.append(
    h('h2', {}, `${n} ${n === 1 ? 'match' : 'matches'} for `, code(q)),
    h(
      'ul',
      { class: 'results' },
      answer.results.map((r) => {
        const to = resultHref(r);
        const details = [
          `operator ${r.operatorId}`,
          r.providerId ? `provider ${r.providerId}` : '',
          r.gameId ? `game ${r.gameId}` : '',
          r.roundId && r.kind !== 'round' ? `round ${r.roundId}` : '',
          r.playerRef && r.kind !== 'player' ? `player ${r.playerRef}` : '',
        ].filter(Boolean);
        return h(
          'li',
          { 'data-kind': r.kind },
          h('span', { class: 'kind' }, KIND_LABEL[r.kind] ?? r.kind),
          ' ',
          to ? h('a', { href: to }, r.label) : h('span', {}, r.label),
          h('span', { class: 'muted details' }, ` — ${details.join(', ')}`),
        );
      }),
    ),
  );
}
