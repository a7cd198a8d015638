/**
 * `base` with `params` added to its query, each URL-encoded, joined with ? or & as the base requires, and
 * ahead of any fragment (`#...`): a parameter written after the "#" would be part of the fragment, which
 * the browser never sends. Parameters whose value is undefined are left out. The launch and replay links.
 */
export function withQuery(base: string, params: Record<string, string | undefined>): string {
  const hash = base.indexOf('#');
  const [head, fragment] = hash === -1 ? [base, ''] : [base.slice(0, hash), base.slice(hash)];
  const query = Object.entries(params)
    .filter((kv): kv is [string, string] => kv[1] !== undefined)
    .map(([k, v]) => `${k}=${encodeURIComponent(v)}`)
    .join('&');
  const sep = !head.includes('?') ? '?' : head.endsWith('?') || head.endsWith('&') ? '' : '&';
  return `${head}${sep}${query}${fragment}`;
}
