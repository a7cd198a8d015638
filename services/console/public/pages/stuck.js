// Stuck money: transactions the wallet has not acknowledged (pending, failed, dead), with their age and last
// error; a dead one can be re-driven.
import { getJson } from '../api.js';
import { age, badge, code, count, h, loading, money, pageLoader, pageTitle, replaceChildren, utc } from '../dom.js';
import { redriveControl } from '../redrive.js';
import { href } from '../routes.js';

/**
 * @typedef {{ operatorId: string, providerId: string, roundId: string, gameId: string, transactionId: string, type: string, amount: number,
 *   currency: string, status: string, recordedAt: string, ageSeconds: number, attempts: number, lastError?: string, redrivable: boolean }} StuckTx
 */

/** @param {import('../app.js').PageContext} ctx */
export async function stuckPage(ctx) {
  ctx.setTitle('Stuck money');
  const summary = h('p', { id: 'stuck-summary', role: 'status' });
  const list = h('div', { id: 'stuck-list' }, loading());
  const refreshButton = h('button', { type: 'button', class: 'secondary', id: 'stuck-refresh' }, 'Refresh');
  // A refresh that fails says so here, above the list as last loaded.
  const problem = h('div', { id: 'stuck-problem' });
  const loads = pageLoader(load, problem, ctx.signal);
  refreshButton.addEventListener('click', () => void loads.again());
  ctx.main.append(
    pageTitle('Stuck money'),
    h('p', { class: 'muted' }, 'Transactions the wallet has not acknowledged: pending (no final answer yet, or a WIN, ROLLBACK or adjustment being retried), failed (a BET the wallet never accepted; not retried) and dead (retries stopped, or a credit the wallet declined). Amounts in minor units; times in UTC.'),
    h('div', { class: 'toolbar' }, refreshButton),
    problem,
    summary,
    list,
  );

  /** @param {AbortSignal} signal */
  async function load(signal) {
    /** @type {{ transactions: StuckTx[], total: number }} */
    const answer = await getJson('/v1/admin/console/stuck', { signal });
    const txs = answer.transactions;
    const by = (/** @type {string} */ s) => txs.filter((t) => t.status === s).length;
    const cut = answer.total > txs.length ? ` These are the oldest ${count(txs.length)} of ${count(answer.total)} stuck: settle or re-drive them to see the rest.` : '';
    summary.textContent = txs.length === 0 ? 'Nothing is stuck.' : `${count(txs.length)} ${txs.length === 1 ? 'transaction' : 'transactions'}: ${count(by('pending'))} pending, ${count(by('failed'))} failed, ${count(by('dead'))} dead.${cut}`;
    if (txs.length === 0) {
      list.replaceChildren();
      return;
    }
    const rows = txs.map((t) => {
      const roundLink = h('a', { href: href.round(t.providerId, t.operatorId, t.roundId) }, t.roundId);
      const control = t.redrivable ? redriveControl(t, { signal: ctx.signal }) : undefined;
      const row = h(
        'tr',
        { 'data-transaction': t.transactionId, 'data-status': t.status },
        h('td', {}, code(t.transactionId)),
        h('td', {}, t.type),
        h('td', {}, money(t.amount, t.currency)),
        h('td', {}, badge(t.status)),
        h('td', {}, h('span', { title: utc(t.recordedAt) }, age(t.ageSeconds))),
        h('td', {}, String(t.attempts)),
        h('td', { class: 'error-text' }, t.lastError ?? '—'),
        h('td', {}, t.operatorId),
        h('td', {}, roundLink, h('span', { class: 'muted' }, ` (${t.gameId}, ${t.providerId})`)),
        h('td', {}, control ? control.button : ''),
      );
      // The form opens in a row of its own under the transaction.
      return control ? [row, h('tr', { class: 'form-row' }, h('td', { colspan: '10' }, control.host))] : [row];
    });
    replaceChildren(
      list,
      h(
        'div',
        { class: 'table-wrap' },
        h(
          'table',
          { class: 'stuck' },
          h('caption', {}, 'Unacknowledged transactions, oldest first'),
          h('thead', {}, h('tr', {}, ['Transaction', 'Type', 'Amount', 'Status', 'Age', 'Attempts', 'Last error', 'Operator', 'Round', 'Action'].map((x) => h('th', { scope: 'col' }, x)))),
          h('tbody', {}, rows.flat()),
        ),
      ),
    );
  }

  await loads.first();
}
