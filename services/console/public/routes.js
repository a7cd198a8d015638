// Hash routes: '#/overview', '#/search?q=…', '#/round/<providerId>/<operatorId>/<roundId>',
// '#/player/<operatorId>/<playerRef>', '#/stuck', '#/operators'. Ids are percent-encoded segments.
// Nothing secret is ever put in a route (the token is in sessionStorage only).

const enc = encodeURIComponent;

export const href = {
  overview: () => '#/overview',
  /** @param {string} [q] */
  search: (q) => (q ? `#/search?q=${enc(q)}` : '#/search'),
  /** @param {string} providerId @param {string} operatorId @param {string} roundId */
  round: (providerId, operatorId, roundId) => `#/round/${enc(providerId)}/${enc(operatorId)}/${enc(roundId)}`,
  /** @param {string} operatorId @param {string} playerRef @param {string} [grantId] */
  player: (operatorId, playerRef, grantId) => `#/player/${enc(operatorId)}/${enc(playerRef)}${grantId ? `?grant=${enc(grantId)}` : ''}`,
  stuck: () => '#/stuck',
  operators: () => '#/operators',
};

/**
 * @typedef {object} Route
 * @property {string} name overview, search, round, player, stuck, operators, or notfound
 * @property {string[]} params the decoded path segments after the name
 * @property {URLSearchParams} query
 */

/**
 * @param {string} hash location.hash
 * @returns {Route}
 */
export function parseHash(hash) {
  const raw = hash.startsWith('#/') ? hash.slice(2) : '';
  const [path = '', search = ''] = raw.split(/\?(.*)/s, 2);
  const parts = path.split('/').filter((p) => p !== '');
  const query = new URLSearchParams(search);
  /** @type {string[]} */
  let params;
  try {
    params = parts.slice(1).map((p) => decodeURIComponent(p));
  } catch {
    return { name: 'notfound', params: [], query };
  }
  const name = parts[0] ?? 'overview';
  const arity = /** @type {Record<string, number>} */ ({ overview: 0, search: 0, round: 3, player: 2, stuck: 0, operators: 0 });
  if (!(name in arity) || params.length !== arity[name]) return { name: 'notfound', params, query };
  return { name, params, query };
}
