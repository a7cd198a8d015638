// The console's only way to the service: same-origin fetches with the admin token as a bearer header.
// The token lives in this tab's sessionStorage (asked once, kept across reloads of the tab, forgotten on
// log out or when the service refuses it); it is never put in a URL.

const TOKEN_KEY = 'ledger-console-admin-token';

/** @returns {string | null} */
export function getToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

/** @param {string} token */
export function setToken(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
}

export function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** An answer other than 2xx, with the service's `error` text when it gave one. */
export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} message
   * @param {unknown} [body]
   */
  constructor(status, message, body) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.body = body;
  }
}

/** @type {Set<() => void>} */
const unauthorizedListeners = new Set();

/** Called when the service answers 401: the token is forgotten and the app asks for it again. */
export function onUnauthorized(/** @type {() => void} */ listener) {
  unauthorizedListeners.add(listener);
}

/**
 * @typedef {object} RequestOptions
 * @property {'GET' | 'POST'} [method]
 * @property {unknown} [body] sent as JSON
 * @property {string} [accept] default application/json
 * @property {AbortSignal} [signal]
 * @property {string} [token] a token to try instead of the stored one (the login form)
 */

/**
 * @param {string} path an absolute path under /v1
 * @param {RequestOptions} [options]
 * @returns {Promise<Response>}
 */
async function send(path, options = {}) {
  const token = options.token ?? getToken();
  if (!token) throw new ApiError(401, 'not signed in');
  /** @type {Record<string, string>} */
  const headers = { Authorization: `Bearer ${token}`, Accept: options.accept ?? 'application/json' };
  /** @type {RequestInit} */
  const init = { method: options.method ?? 'GET', headers, signal: options.signal, credentials: 'omit', cache: 'no-store', referrerPolicy: 'no-referrer' };
  if (options.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(options.body);
  }
  const res = await fetch(path, init);
  if (res.ok) return res;
  const text = await res.text();
  /** @type {unknown} */
  let body = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: the text is the message
  }
  const message = body && typeof body === 'object' && 'error' in body && typeof body.error === 'string' ? body.error : text || `HTTP ${res.status}`;
  if (res.status === 401 && options.token === undefined) {
    forgetToken();
    for (const listener of unauthorizedListeners) listener();
  }
  throw new ApiError(res.status, message, body);
}

/**
 * A JSON answer.
 * @template T
 * @param {string} path
 * @param {RequestOptions} [options]
 * @returns {Promise<T>}
 */
export async function getJson(path, options = {}) {
  const res = await send(path, options);
  return /** @type {Promise<T>} */ (res.json());
}

/**
 * POST a JSON body; the JSON answer.
 * @template T
 * @param {string} path
 * @param {unknown} body
 * @param {RequestOptions} [options]
 * @returns {Promise<T>}
 */
export async function postJson(path, body, options = {}) {
  const res = await send(path, { ...options, method: 'POST', body });
  return /** @type {Promise<T>} */ (res.json());
}

/**
 * Any other answer as a Blob (a CSV statement).
 * @param {string} path
 * @param {string} accept
 * @param {RequestOptions} [options]
 */
export async function getBlob(path, accept, options = {}) {
  const res = await send(path, { ...options, accept });
  return res.blob();
}

/** Does the service take this token? (GET /v1/admin/projections, which only reads.) */
export async function checkToken(/** @type {string} */ token) {
  try {
    await send('/v1/admin/projections', { token });
    return { ok: true };
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return { ok: false, message: 'The service refused this token.' };
    return { ok: false, message: `The service could not be asked: ${err instanceof Error ? err.message : String(err)}` };
  }
}

/** A path segment. */
export const seg = (/** @type {string} */ s) => encodeURIComponent(s);

/** @param {unknown} err */
export const isAbort = (err) => err instanceof DOMException && err.name === 'AbortError';
