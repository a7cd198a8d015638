// Small DOM helpers: elements are built with the DOM API (never from HTML strings), so text from the
// service is always text, and no inline style is ever written (the page's CSP allows none).
import { isAbort } from './api.js';

/**
 * @typedef {string | number | Node | null | undefined | false} Child
 * @typedef {Record<string, string | number | boolean | null | undefined | EventListener>} Attrs
 */

/**
 * An element: `h('a', { href: '#/stuck', class: 'x', onclick: fn }, 'text', child)`.
 * Attributes whose value is false, null or undefined are left out; true sets an empty attribute.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Attrs} [attrs]
 * @param {...(Child | Child[])} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === false || value === null || value === undefined) continue;
    if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value);
    else if (name === 'value' && 'value' in el) /** @type {HTMLInputElement} */ (el).value = String(value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

/**
 * @param {Node} parent
 * @param {Array<Child | Child[]>} children
 */
export function append(parent, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
}

/** @param {Element} el @param {...(Child | Child[])} children */
export function replaceChildren(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

/**
 * A table with a caption and header row; `rows` are arrays of cells (strings or nodes).
 * @param {{ caption: string, headers: string[], rows: Array<Array<Child | Child[]>>, empty?: string, className?: string, rowClass?: (i: number) => string | undefined }} spec
 */
export function table({ caption, headers, rows, empty = 'Nothing to show.', className, rowClass }) {
  if (rows.length === 0) return h('p', { class: 'muted empty' }, `${caption}: ${empty}`);
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: className },
      h('caption', {}, caption),
      h('thead', {}, h('tr', {}, headers.map((x) => h('th', { scope: 'col' }, x)))),
      h('tbody', {}, rows.map((cells, i) => h('tr', { class: rowClass?.(i) }, cells.map((c) => h('td', {}, c))))),
    ),
  );
}

/** @param {string} text @param {'error' | 'info' | 'ok'} [kind] */
export function notice(text, kind = 'info') {
  return h('p', { class: `notice notice-${kind}`, role: kind === 'error' ? 'alert' : 'status' }, text);
}

/**
 * The notice of a page whose first load failed (the router shows it): the page's next load that succeeds
 * removes it.
 * @param {string} text
 */
export function loadFailureNotice(text) {
  const shown = notice(text, 'error');
  shown.dataset.loadFailure = '';
  return shown;
}

/**
 * A page's loads of what it shows: its first, which the router awaits (and shows the failure of), and each
 * `again` (a Reload or Refresh button, or after a re-drive), where nothing awaits it. Only the latest one
 * draws: starting one aborts the one under way, its fetch with it, so an earlier answer that comes back
 * later never replaces a newer one. A load again that fails says so in `problem`; the next load that
 * succeeds clears that, and the first load's failure with it. A page left meanwhile (its signal aborted,
 * the fetch with it) is no error. `again` resolves true when its load drew (the page then shows its
 * answer, which may be a "not found" in place of what it showed).
 * @param {(signal: AbortSignal) => Promise<void>} load
 * @param {HTMLElement} problem
 * @param {AbortSignal} pageSignal
 */
export function pageLoader(load, problem, pageSignal) {
  /** @type {AbortController | undefined} */
  let latest;
  /** @param {AbortSignal} signal */
  const drawn = async (signal) => {
    await load(signal);
    problem.replaceChildren();
    for (const shown of document.querySelectorAll('[data-load-failure]')) shown.remove();
  };
  /** Aborts the load under way and gives the new one its signal, aborted with the page's too. */
  const start = () => {
    latest?.abort();
    const mine = new AbortController();
    latest = mine;
    if (pageSignal.aborted) mine.abort();
    else pageSignal.addEventListener('abort', () => mine.abort(), { once: true, signal: mine.signal });
    return mine.signal;
  };
  return {
    first: () => drawn(start()),
    async again() {
      const signal = start();
      try {
        await drawn(signal);
        return true;
      } catch (err) {
        if (isAbort(err) || signal.aborted) return false;
        replaceChildren(problem, notice(`Could not reload: ${err instanceof Error ? err.message : String(err)}`, 'error'));
        return false;
      }
    },
  };
}

/** @param {string} text */
export function loading(text = 'Loading…') {
  return h('p', { class: 'muted loading', role: 'status' }, text);
}

/** The page title, focusable so that navigation can move focus to it. */
export function pageTitle(/** @type {string} */ text, /** @type {Child[]} */ ...more) {
  return h('h1', { tabindex: '-1', id: 'page-title' }, text, ...more);
}

/** Says something to screen readers (the polite live region). */
export function announce(/** @type {string} */ text) {
  const live = document.getElementById('live');
  if (live) live.textContent = text;
}

const integer = new Intl.NumberFormat('en', { maximumFractionDigits: 0 });

/**
 * An amount in minor units, as the integer it is, with its currency: "1,250 EUR minor". Never converted
 * to major units (a currency's number of decimals is not the console's to guess).
 * @param {number | string | bigint} minor
 * @param {string} [currency]
 */
export function money(minor, currency) {
  const n = typeof minor === 'string' ? minor.replace(/\B(?=(\d{3})+(?!\d))/g, ',') : integer.format(minor);
  return currency ? `${n} ${currency} minor` : `${n} minor`;
}

/** @param {number} n */
export const count = (n) => integer.format(n);

/** An instant as "2026-05-01 10:32:05 UTC" (the console shows UTC everywhere). */
export function utc(/** @type {string | null | undefined} */ iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${d.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** An instant to the millisecond: "2026-05-01 10:32:05.123 UTC" (events of one round are often within a second). */
export function utcMs(/** @type {string | null | undefined} */ iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : `${d.toISOString().slice(0, 23).replace('T', ' ')} UTC`;
}

/** "HH:MM" in UTC, for chart axes. */
export const hhmm = (/** @type {string} */ iso) => new Date(iso).toISOString().slice(11, 16);

/** @param {number} seconds */
export function age(seconds) {
  if (!Number.isFinite(seconds)) return '—';
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

/** @param {number | undefined | null} ms */
export const duration = (ms) => (ms === undefined || ms === null ? '—' : `${integer.format(ms)} ms`);

/** A long opaque token shown shortened: "abcdef…wxyz" (with the whole as its title). */
export function shortToken(/** @type {string} */ token) {
  const text = token.length > 14 ? `${token.slice(0, 6)}…${token.slice(-4)}` : token;
  return h('code', { title: token }, text);
}

/** A status as a badge. */
export function badge(/** @type {string} */ status) {
  return h('span', { class: `badge badge-${status.replace(/[^a-z-]/gi, '')}` }, status);
}

/** @param {string} text */
export const code = (text) => h('code', {}, text);
