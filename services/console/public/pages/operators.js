// Operators: each operator's catalog entry (visible games, wallet URL and timeout, rate limit), and a
// settlement statement for any interval, shown here or downloaded as CSV (fetched with the bearer header,
// then saved from a Blob URL: the token is never put in a URL).
import { ApiError, getBlob, getJson, seg } from '../api.js';
import { announce, code, count, h, loading, money, notice, pageTitle, replaceChildren, table, utc } from '../dom.js';

/**
 * @typedef {{ id: string, name: string, providerId: string }} VisibleGame
 * @typedef {{ id: string, name: string, walletUrl: string, walletTimeoutMs: number, rateLimit: { limit: number, windowSeconds: number }, visibleGames: VisibleGame[] }} Operator
 * @typedef {{ count: number, amountMinor: number }} Figure
 * @typedef {{ bets: Figure, wins: Figure, refunds: Figure, ggrMinor: number }} LineFigures
 * @typedef {{ from: string, to: string, lines: Array<LineFigures & { providerId: string, gameId: string, currency: string }>,
 *   adjustments: Record<string, { credits: Figure, debits: Figure }>, unsettled: Record<string, { pending: Figure, failed: Figure, dead: Figure }>,
 *   totals: Record<string, LineFigures> }} Statement
 */

/** A datetime-local value ("YYYY-MM-DDTHH:MM") for an instant, in UTC. @param {Date} d */
const toInput = (d) => d.toISOString().slice(0, 16);

/** The instant a datetime-local value names, read as UTC; undefined when it is not one. @param {string} value */
export function fromInput(value) {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?$/.test(value)) return undefined;
  const iso = `${value.length === 16 ? `${value}:00` : value}Z`;
  return Number.isNaN(Date.parse(iso)) ? undefined : new Date(iso).toISOString();
}

/** @param {Figure} f @param {string} currency */
const figure = (f, currency) => `${count(f.count)} · ${money(f.amountMinor, currency)}`;

/** @param {import('../app.js').PageContext} ctx */
export async function operatorsPage(ctx) {
  ctx.setTitle('Operators');
  const list = h('div', { id: 'operator-list' }, loading());
  const statementBox = h('section', { class: 'card', 'aria-labelledby': 'statement-title', id: 'statement' });
  ctx.main.append(pageTitle('Operators'), statementBox, list);

  /** @type {{ operators: Operator[] }} */
  const answer = await getJson('/v1/admin/console/operators', { signal: ctx.signal });
  const operators = answer.operators;

  replaceChildren(
    list,
    operators.length === 0
      ? notice('No operator is in the catalog.')
      : operators.map((o) =>
          h(
            'section',
            { class: 'card operator', 'aria-labelledby': `op-${o.id}`, 'data-operator': o.id },
            h('h2', { id: `op-${o.id}` }, o.name, ' ', h('span', { class: 'muted' }, `(${o.id})`)),
            h(
              'dl',
              { class: 'facts' },
              h('dt', {}, 'Wallet URL'), h('dd', {}, code(o.walletUrl)),
              h('dt', {}, 'Wallet timeout'), h('dd', {}, `${count(o.walletTimeoutMs)} ms`),
              h('dt', {}, 'Rate limit'), h('dd', {}, `${count(o.rateLimit.limit)} requests per ${count(o.rateLimit.windowSeconds)} s`),
            ),
            table({
              caption: `Games visible to ${o.name}`,
              headers: ['Game', 'Name', 'Provider'],
              rows: o.visibleGames.map((g) => [code(g.id), g.name, g.providerId]),
              empty: 'none',
            }),
          ),
        ),
  );

  // The settlement statement.
  const now = new Date();
  const select = h('select', { id: 'statement-operator', name: 'operator', required: true }, operators.map((o) => h('option', { value: o.id }, `${o.name} (${o.id})`)));
  const from = h('input', { id: 'statement-from', name: 'from', type: 'datetime-local', required: true, value: toInput(new Date(now.getTime() - 86_400_000)), 'aria-describedby': 'statement-help' });
  const to = h('input', { id: 'statement-to', name: 'to', type: 'datetime-local', required: true, value: toInput(new Date(Math.ceil((now.getTime() + 60_000) / 60_000) * 60_000)), 'aria-describedby': 'statement-help' });
  const show = h('button', { type: 'submit', id: 'statement-show' }, 'Show statement');
  const download = h('button', { type: 'button', id: 'statement-csv', class: 'secondary' }, 'Download CSV');
  const result = h('div', { id: 'statement-result', 'aria-live': 'polite' });
  const form = h(
    'form',
    { class: 'statement-form' },
    h('div', { class: 'field' }, h('label', { for: select.id }, 'Operator'), select),
    h('div', { class: 'field' }, h('label', { for: from.id }, 'From (UTC, included)'), from),
    h('div', { class: 'field' }, h('label', { for: to.id }, 'To (UTC, excluded)'), to),
    h('div', { class: 'field actions' }, show, download),
  );
  replaceChildren(
    statementBox,
    h('h2', { id: 'statement-title' }, 'Settlement statement'),
    h('p', { id: 'statement-help', class: 'muted' }, 'What the operator’s wallet applied in [from, to), per provider, game and currency, with adjustments and what is not settled; at most 31 days. Times are UTC.'),
    form,
    result,
  );

  /** The query of the interval, or a message saying what is wrong. */
  function interval() {
    const f = fromInput(from.value);
    const t = fromInput(to.value);
    if (!f || !t) return { error: 'Give both dates and times.' };
    if (Date.parse(t) <= Date.parse(f)) return { error: '“To” must be later than “from”.' };
    return { operatorId: select.value, from: f, to: t, query: `from=${encodeURIComponent(f)}&to=${encodeURIComponent(t)}` };
  }

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const i = interval();
    if ('error' in i) {
      replaceChildren(result, notice(i.error ?? '', 'error'));
      return;
    }
    replaceChildren(result, loading());
    try {
      /** @type {Statement} */
      const s = await getJson(`/v1/admin/operators/${seg(i.operatorId)}/settlement?${i.query}`, { signal: ctx.signal });
      replaceChildren(result, renderStatement(i.operatorId, s));
    } catch (err) {
      if (ctx.signal.aborted) return;
      replaceChildren(result, notice(`No statement: ${err instanceof Error ? err.message : String(err)}`, 'error'));
    }
  });

  download.addEventListener('click', async () => {
    const i = interval();
    if ('error' in i) {
      replaceChildren(result, notice(i.error ?? '', 'error'));
      return;
    }
    download.disabled = true;
    try {
      const blob = await getBlob(`/v1/admin/operators/${seg(i.operatorId)}/settlement?${i.query}`, 'text/csv', { signal: ctx.signal });
      const url = URL.createObjectURL(blob);
      const a = h('a', { href: url, download: `settlement-${i.operatorId}-${i.from.slice(0, 16).replace(/:/g, '')}-${i.to.slice(0, 16).replace(/:/g, '')}.csv`, hidden: true });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
      announce('The CSV statement is downloaded.');
    } catch (err) {
      if (ctx.signal.aborted) return;
      const text = err instanceof ApiError ? `No CSV (${err.status}): ${err.message}` : `No CSV: ${err instanceof Error ? err.message : String(err)}`;
      replaceChildren(result, notice(text, 'error'));
    } finally {
      download.disabled = false;
    }
  });
}

/** @param {string} operatorId @param {Statement} s */
function renderStatement(operatorId, s) {
  const currencies = [...new Set([...Object.keys(s.totals), ...Object.keys(s.adjustments), ...Object.keys(s.unsettled)])].sort();
  return h(
    'div',
    { class: 'statement' },
    h('h3', {}, `Statement of ${operatorId}, ${utc(s.from)} to ${utc(s.to)}`),
    table({
      caption: 'Lines (count · amount)',
      className: 'statement-lines',
      headers: ['Provider', 'Game', 'Currency', 'Bets', 'Wins', 'Refunds', 'GGR'],
      rows: s.lines.map((l) => [l.providerId, code(l.gameId), l.currency, figure(l.bets, l.currency), figure(l.wins, l.currency), figure(l.refunds, l.currency), money(l.ggrMinor, l.currency)]),
      empty: 'no applied transaction in the interval',
    }),
    table({
      caption: 'Per currency',
      className: 'statement-totals',
      headers: ['Currency', 'Bets', 'Wins', 'Refunds', 'GGR', 'Adjustment credits', 'Adjustment debits', 'Pending', 'Failed', 'Dead'],
      rows: currencies.map((c) => {
        const t = s.totals[c];
        const a = s.adjustments[c];
        const u = s.unsettled[c];
        const f = (/** @type {Figure | undefined} */ x) => (x ? figure(x, c) : '—');
        return [c, f(t?.bets), f(t?.wins), f(t?.refunds), t ? money(t.ggrMinor, c) : '—', f(a?.credits), f(a?.debits), f(u?.pending), f(u?.failed), f(u?.dead)];
      }),
      empty: 'nothing in the interval',
    }),
  );
}
