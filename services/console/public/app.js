// The console's shell: log in and out, the hash router, and each page's lifetime (its fetches are aborted
// and its timers and charts disposed when another page is shown).
import { checkToken, forgetToken, getToken, isAbort, onUnauthorized, setToken, ApiError } from './api.js';
import { announce, h, loadFailureNotice, notice, pageTitle } from './dom.js';
import { href, parseHash } from './routes.js';
import { overviewPage } from './pages/overview.js';
import { searchPage } from './pages/search.js';
import { roundPage } from './pages/round.js';
import { playerPage } from './pages/player.js';
import { stuckPage } from './pages/stuck.js';
import { operatorsPage } from './pages/operators.js';

/**
 * What a page is given.
 * @typedef {object} PageContext
 * @property {HTMLElement} main
 * @property {string[]} params
 * @property {URLSearchParams} query
 * @property {AbortSignal} signal aborted when the page is left
 * @property {(fn: () => void) => void} onDispose
 * @property {(title: string) => void} setTitle
 */

/** @typedef {(ctx: PageContext) => Promise<void> | void} Page */

/** @type {Record<string, Page>} */
const PAGES = {
  overview: overviewPage,
  search: searchPage,
  round: roundPage,
  player: playerPage,
  stuck: stuckPage,
  operators: operatorsPage,
  notfound: (ctx) => {
    ctx.setTitle('Not found');
    ctx.main.append(pageTitle('Page not found'), h('p', {}, 'There is no such page. ', h('a', { href: href.overview() }, 'Go to the overview'), '.'));
  },
};

const main = /** @type {HTMLElement} */ (document.getElementById('main'));
const nav = /** @type {HTMLElement} */ (document.getElementById('nav'));
const quickSearch = /** @type {HTMLFormElement} */ (document.getElementById('quick-search'));
const logoutButton = /** @type {HTMLButtonElement} */ (document.getElementById('logout'));
const skipLink = /** @type {HTMLAnchorElement} */ (document.getElementById('skip-link'));

/** @type {{ controller: AbortController, disposers: Array<() => void> } | undefined} */
let current;

function leavePage() {
  if (!current) return;
  current.controller.abort();
  for (const fn of current.disposers) {
    try {
      fn();
    } catch {
      // a dispose that fails must not keep the next page from showing
    }
  }
  current = undefined;
}

/** Shows the page of the current hash. @param {{ focus: boolean }} opts */
async function showRoute({ focus }) {
  leavePage();
  const route = parseHash(location.hash);
  const controller = new AbortController();
  /** @type {Array<() => void>} */
  const disposers = [];
  current = { controller, disposers };
  main.replaceChildren();
  for (const link of nav.querySelectorAll('a[data-route]')) {
    if (link.getAttribute('data-route') === route.name) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  /** @type {PageContext} */
  const ctx = {
    main,
    params: route.params,
    query: route.query,
    signal: controller.signal,
    onDispose: (fn) => disposers.push(fn),
    setTitle: (title) => {
      document.title = `${title} · Ledger console`;
    },
  };
  const page = PAGES[route.name] ?? PAGES.notfound;
  let done;
  try {
    done = Promise.resolve(page?.(ctx));
  } catch (err) {
    done = Promise.reject(err);
  }
  // The page's title is there at once (the data follows): moving focus to it tells where one is now.
  if (focus) document.getElementById('page-title')?.focus();
  try {
    await done;
  } catch (err) {
    if (isAbort(err) || controller.signal.aborted) return;
    if (err instanceof ApiError && err.status === 401) return; // the login form is shown
    // Nothing is loading any more: the page's "Loading…" goes, the reason takes its place.
    for (const l of main.querySelectorAll('.loading')) l.remove();
    main.append(loadFailureNotice(`Could not load this page: ${err instanceof Error ? err.message : String(err)}`));
  }
}

function showChrome(/** @type {boolean} */ signedIn) {
  nav.hidden = !signedIn;
  quickSearch.hidden = !signedIn;
  logoutButton.hidden = !signedIn;
}

/** The login page: the admin token, asked once for this tab. @param {string} [message] */
function showLogin(message) {
  leavePage();
  showChrome(false);
  document.title = 'Log in · Ledger console';
  const input = h('input', { id: 'token', name: 'token', type: 'password', autocomplete: 'off', required: true, spellcheck: 'false', 'aria-describedby': 'token-help' });
  const status = h('div', { id: 'login-status' });
  const button = h('button', { type: 'submit' }, 'Log in');
  // method=post: were this script ever not to run, the browser would post the token, not put it in a URL.
  const form = h(
    'form',
    { class: 'login card', method: 'post', action: '/console', id: 'login-form' },
    h('label', { for: 'token' }, 'Admin token'),
    input,
    h('p', { id: 'token-help', class: 'muted' }, "The service's ADMIN_TOKEN. It is kept in this browser tab only (sessionStorage) until you log out or close the tab, and sent only as an Authorization header."),
    button,
    status,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const token = input.value.trim();
    if (!token) return;
    button.disabled = true;
    status.replaceChildren(notice('Checking the token…'));
    const result = await checkToken(token);
    button.disabled = false;
    if (!result.ok) {
      status.replaceChildren(notice(result.message ?? 'Refused.', 'error'));
      input.select();
      return;
    }
    setToken(token);
    input.value = '';
    announce('Logged in.');
    if (!location.hash.startsWith('#/')) history.replaceState(null, '', href.overview());
    void enter({ focus: true });
  });
  main.replaceChildren(pageTitle('Log in'), message ? notice(message, 'error') : '', form);
  input.focus();
}

async function enter(/** @type {{ focus: boolean }} */ opts) {
  showChrome(true);
  await showRoute(opts);
}

function logout() {
  forgetToken();
  showLogin();
  announce('Logged out. The token is forgotten.');
}

skipLink.addEventListener('click', (event) => {
  // The hash is the router's: the skip link moves focus without changing it.
  event.preventDefault();
  main.focus();
});

logoutButton.addEventListener('click', logout);

quickSearch.addEventListener('submit', (event) => {
  event.preventDefault();
  const q = /** @type {HTMLInputElement} */ (quickSearch.elements.namedItem('q')).value;
  if (!q.trim()) return;
  location.hash = href.search(q);
});

window.addEventListener('hashchange', () => {
  if (!location.hash.startsWith('#/')) return; // an in-page anchor
  if (getToken()) void showRoute({ focus: true });
});

onUnauthorized(() => showLogin('The service refused the token (it may have changed). Log in again.'));

if (getToken()) void enter({ focus: false });
else showLogin();
