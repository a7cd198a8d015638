// Round page: the round's events with each wallet call, the round as it was after any chosen event (time
// travel: the audit route answers the state after every event, so moving through it is local), a replay
// link, and a re-drive for a dead transaction.
import { ApiError, getJson, postJson, seg } from '../api.js';
import { badge, code, count, duration, h, loading, money, notice, pageLoader, pageTitle, replaceChildren, table, utc, utcMs } from '../dom.js';
import { redriveControl } from '../redrive.js';
import { href } from '../routes.js';

/**
 * @typedef {{ transactionId: string, type: string, amount: number, origin: string, status: string, attempts: number,
 *   rolledBackBy?: string, reply?: { status: string, balance: number }, lastError?: string, redrivable: boolean }} TxState
 * @typedef {{ completed: boolean, playerRef?: string, gameId?: string, lastActivityAt?: string, outstandingBets: string[], transactions: TxState[] }} RoundState
 * @typedef {{ position: string, streamId: string, revision: number, id: string, type: string, data: any, metadata: any, createdAt: string }} RecordedEvent
 * @typedef {{ event: RecordedEvent, stateAfter: RoundState }} HistoryEntry
 */

/** A one-line account of an event. @param {RecordedEvent} e @param {Map<string, string>} currencyOf */
export function describeEvent(e, currencyOf) {
  const d = e.data ?? {};
  switch (e.type) {
    case 'TransactionRecorded': {
      const r = d.request ?? {};
      return `${r.type}${r.direction ? ` (${r.direction === 'CREDIT' ? 'credit' : 'debit'})` : ''} ${r.transactionId} for ${money(r.amount ?? 0, r.currency)}${r.originalTransactionId ? ` (reverses ${r.originalTransactionId})` : ''}, from ${d.origin}${r.roundComplete ? '; completes the round' : ''}`;
    }
    case 'TransactionSettled':
      return `${d.transactionId}: wallet answered ${d.reply?.status ?? '?'} (${d.outcome}), balance ${money(d.reply?.balance ?? 0, currencyOf.get(d.transactionId))}; attempt ${d.attempt}, ${duration(d.durationMs)}`;
    case 'TransactionAttemptFailed':
      return `${d.transactionId}: ${d.outcome === 'timed_out' ? 'timed out' : 'failed'}${d.httpStatus ? ` (HTTP ${d.httpStatus})` : ''}: ${d.detail}; attempt ${d.attempt}, ${duration(d.durationMs)}`;
    case 'TransactionDeadLettered':
      return `${d.transactionId}: retries stopped after ${d.attempts} attempts; last error: ${d.lastError}`;
    case 'TransactionVoided':
      return `${d.transactionId}: voided by rollback ${d.rollbackTransactionId}`;
    case 'RoundForceClosed':
      return `closed by the stale-round reconciler${Array.isArray(d.rolledBack) && d.rolledBack.length ? `; rolled back ${d.rolledBack.join(', ')}` : ''}`;
    case 'TransactionRedriven':
      return `${d.transactionId}: re-driven by ${d.by}: ${d.reason}`;
    case 'TransactionResent':
      return `${d.transactionId}: resubmitted by its provider, sent again (attempt ${d.attempt})`;
    default:
      return JSON.stringify(d).slice(0, 200);
  }
}

/** @param {import('../app.js').PageContext} ctx */
export async function roundPage(ctx) {
  const [providerId = '', operatorId = '', roundId = ''] = ctx.params;
  ctx.setTitle(`Round ${roundId}`);
  const body = h('div', {}, loading());
  // A reload that fails says so here, above the round as last loaded.
  const problem = h('div', { id: 'round-problem' });
  ctx.main.append(pageTitle('Round ', code(roundId)), problem, body);
  const loads = pageLoader(load, problem, ctx.signal);
  /**
   * Loads the round again. The redraw replaces what had focus (the Reload button, a re-drive's form): focus
   * then goes to the new Reload button, or to the title when the round is no longer found, whichever load
   * drew (a re-drive's reload may supersede a click on Reload).
   */
  const reload = async () => {
    const loaded = await loads.again();
    if (loaded && (!document.activeElement || document.activeElement === document.body)) (document.getElementById('reload-round') ?? document.getElementById('page-title'))?.focus();
  };

  /** @param {AbortSignal} signal */
  async function load(signal) {
    /** @type {{ streamId: string, history: HistoryEntry[] }} */
    let round;
    try {
      round = await getJson(`/v1/audit/rounds/${seg(providerId)}/${seg(operatorId)}/${seg(roundId)}`, { signal });
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) {
        replaceChildren(body, notice(`No round ${roundId} of provider ${providerId} for operator ${operatorId}.`, 'error'));
        return;
      }
      throw err;
    }
    render(round);
  }

  /** @param {{ streamId: string, history: HistoryEntry[] }} round */
  function render(round) {
    const history = round.history;
    const n = history.length;
    const latest = history[n - 1]?.stateAfter;
    /** @type {Map<string, string>} */
    const currencyOf = new Map();
    for (const { event } of history) if (event.type === 'TransactionRecorded') currencyOf.set(event.data.request.transactionId, event.data.request.currency);
    const playerRef = latest?.playerRef;
    const gameId = latest?.gameId;

    // Facts and actions.
    const replayResult = h('div', { id: 'replay-result', 'aria-live': 'polite' });
    const replayButton = h('button', { type: 'button', id: 'replay-button', disabled: !gameId }, 'Get replay link');
    replayButton.addEventListener('click', async () => {
      replayButton.disabled = true;
      replaceChildren(replayResult, loading('Asking for a link…'));
      try {
        /** @type {{ replayUrl: string }} */
        const answer = await postJson('/v1/admin/rounds/replay-link', { operatorId, roundId, gameId }, { signal: ctx.signal });
        replaceChildren(
          replayResult,
          h(
            'p',
            { class: 'notice notice-ok' },
            'Replay link (signed, short-lived, on the provider’s site): ',
            h('a', { href: answer.replayUrl, target: '_blank', rel: 'noopener noreferrer', id: 'replay-link' }, 'open the replay'),
            ' ',
            h('input', { type: 'text', readonly: true, value: answer.replayUrl, 'aria-label': 'Replay URL', class: 'replay-url' }),
          ),
        );
      } catch (err) {
        const text = err instanceof ApiError && err.status === 400 ? `No replay: ${err.message}` : `Could not get a replay link: ${err instanceof Error ? err.message : String(err)}`;
        replaceChildren(replayResult, notice(text, 'error'));
      } finally {
        replayButton.disabled = false;
      }
    });
    const reloadButton = h('button', { type: 'button', class: 'secondary', id: 'reload-round' }, 'Reload');
    reloadButton.addEventListener('click', () => void reload());

    const facts = h(
      'dl',
      { class: 'facts' },
      h('dt', {}, 'Provider'), h('dd', {}, providerId),
      h('dt', {}, 'Operator'), h('dd', {}, operatorId),
      h('dt', {}, 'Game'), h('dd', {}, gameId ?? '—'),
      h('dt', {}, 'Player'), h('dd', {}, playerRef ? h('a', { href: href.player(operatorId, playerRef) }, playerRef) : '—'),
      h('dt', {}, 'Status'), h('dd', {}, latest?.completed ? badge('complete') : badge('open')),
      h('dt', {}, 'Events'), h('dd', {}, count(n)),
      h('dt', {}, 'Stream'), h('dd', {}, code(round.streamId)),
    );

    // Dead credits now (the wallet's DECLINED ones included): re-drive. `redrivable` is the service's own rule.
    const dead = (latest?.transactions ?? []).filter((t) => t.redrivable);
    const redrive =
      dead.length > 0
        ? h(
            'section',
            { class: 'card', 'aria-labelledby': 'dead-title' },
            h('h2', { id: 'dead-title' }, 'Dead transactions'),
            dead.map((t) => {
              const control = redriveControl({ operatorId, providerId, roundId, transactionId: t.transactionId }, { signal: ctx.signal, onDone: () => setTimeout(() => void reload(), 300) });
              return h('div', { class: 'dead-row' }, h('p', {}, `${t.type} `, code(t.transactionId), ` ${money(t.amount, currencyOf.get(t.transactionId))}, ${t.attempts} attempts; last error: ${t.lastError ?? '—'} `, control.button), control.host);
            }),
          )
        : '';

    // Time travel.
    const slider = h('input', { type: 'range', id: 'travel', min: '1', max: String(n), step: '1', value: String(n), 'aria-describedby': 'travel-at' });
    const at = h('output', { id: 'travel-at', for: 'travel' });
    const stateBox = h('div', { id: 'travel-state' });
    const first = h('button', { type: 'button', class: 'secondary', 'data-step': 'first' }, 'First');
    const prev = h('button', { type: 'button', class: 'secondary', 'data-step': 'prev' }, 'Previous');
    const next = h('button', { type: 'button', class: 'secondary', 'data-step': 'next' }, 'Next');
    const last = h('button', { type: 'button', class: 'secondary', 'data-step': 'last' }, 'Latest');
    const timelineItems = history.map((entry, i) => {
      const e = entry.event;
      const pick = h('button', { type: 'button', class: 'link-button', 'aria-label': `Show the round after event ${i + 1}, ${e.type}` }, `#${i + 1}`);
      pick.addEventListener('click', () => select(i + 1));
      return h(
        'li',
        { class: `event event-${e.type}`, 'data-type': e.type, 'data-index': String(i + 1) },
        pick,
        ' ',
        h('time', { datetime: e.createdAt }, utcMs(e.createdAt)),
        ' ',
        h('span', { class: 'event-type' }, e.type),
        h('span', { class: 'event-summary' }, describeEvent(e, currencyOf)),
      );
    });

    /** @param {number} index 1-based */
    function select(index) {
      const i = Math.min(Math.max(1, index), n);
      slider.value = String(i);
      const entry = history[i - 1];
      if (!entry) return;
      const text = `After event ${i} of ${n}: ${entry.event.type}, ${utcMs(entry.event.createdAt)}`;
      at.textContent = text;
      slider.setAttribute('aria-valuetext', text);
      first.disabled = prev.disabled = i === 1;
      next.disabled = last.disabled = i === n;
      timelineItems.forEach((li, k) => {
        li.classList.toggle('chosen', k === i - 1);
        li.classList.toggle('future', k > i - 1);
        if (k === i - 1) li.setAttribute('aria-current', 'step');
        else li.removeAttribute('aria-current');
      });
      const s = entry.stateAfter;
      replaceChildren(
        stateBox,
        h(
          'dl',
          { class: 'facts' },
          h('dt', {}, 'Completed'), h('dd', { 'data-field': 'completed' }, s.completed ? 'yes' : 'no'),
          h('dt', {}, 'Last activity'), h('dd', {}, utc(s.lastActivityAt)),
          h('dt', {}, 'Outstanding bets'), h('dd', {}, s.outstandingBets.length ? s.outstandingBets.join(', ') : 'none'),
        ),
        table({
          caption: `Transactions after event ${i}`,
          className: 'state-transactions',
          headers: ['Transaction', 'Type', 'Amount', 'Origin', 'Status', 'Attempts', 'Wallet reply', 'Last error', 'Rolled back by'],
          rows: s.transactions.map((t) => [
            code(t.transactionId),
            t.type,
            money(t.amount, currencyOf.get(t.transactionId)),
            t.origin,
            badge(t.status),
            String(t.attempts),
            t.reply ? `${t.reply.status}, balance ${money(t.reply.balance, currencyOf.get(t.transactionId))}` : '—',
            t.lastError ?? '—',
            // A BET that failed and was then rolled back has both.
            t.rolledBackBy ? code(t.rolledBackBy) : '—',
          ]),
          empty: 'none yet',
        }),
      );
    }
    slider.addEventListener('input', () => select(Number(slider.value)));
    first.addEventListener('click', () => select(1));
    prev.addEventListener('click', () => select(Number(slider.value) - 1));
    next.addEventListener('click', () => select(Number(slider.value) + 1));
    last.addEventListener('click', () => select(n));

    // Wallet calls: each attempt's outcome.
    const calls = history
      .map((x) => x.event)
      .filter((e) => e.type === 'TransactionSettled' || e.type === 'TransactionAttemptFailed')
      .map((e) => {
        const d = e.data;
        const ok = e.type === 'TransactionSettled';
        return [
          code(d.transactionId),
          String(d.attempt ?? '—'),
          badge(ok ? d.outcome : d.outcome === 'timed_out' ? 'timed-out' : 'failed'),
          ok ? `200 ${d.reply?.status ?? ''}` : d.httpStatus ? String(d.httpStatus) : '—',
          duration(d.durationMs),
          utcMs(ok ? d.settledAt : d.failedAt),
          ok ? '' : String(d.detail ?? ''),
        ];
      });

    replaceChildren(
      body,
      h('div', { class: 'toolbar' }, replayButton, reloadButton),
      replayResult,
      facts,
      redrive,
      h(
        'section',
        { class: 'card travel', 'aria-labelledby': 'travel-title' },
        h('h2', { id: 'travel-title' }, 'Time travel'),
        h('label', { for: 'travel' }, 'Show the round as it was after event'),
        h('div', { class: 'travel-controls' }, slider, h('div', { class: 'inline' }, first, prev, next, last)),
        h('p', {}, at),
        stateBox,
      ),
      h('section', { 'aria-labelledby': 'timeline-title' }, h('h2', { id: 'timeline-title' }, 'Timeline'), h('ol', { class: 'timeline', id: 'timeline' }, timelineItems)),
      h('section', { 'aria-labelledby': 'calls-title' }, h('h2', { id: 'calls-title' }, 'Wallet calls'), table({ caption: 'Every call to the operator’s wallet', headers: ['Transaction', 'Attempt', 'Outcome', 'HTTP', 'Duration', 'At', 'Detail'], rows: calls, className: 'wallet-calls', empty: 'none' })),
    );
    if (n > 0) select(n);
  }

  await loads.first();
}
