import Negotiator from 'negotiator';

/**
 * The media type of `offers` that a request's Accept header prefers (of ranges of equal weight, the one it
 * names first; the first offer for a wildcard, and when there is no Accept header), or undefined when it
 * accepts none. Each media range is read by its type
 * and its `q` alone: a parameter such as `charset=utf-8` or `header=present` asks for a variant of the
 * type, and the one variant served is the answer (its Content-Type says which). Negotiator, as Express's
 * req.accepts, matches a range with parameters only to an offer with the same ones, so that
 * `text/csv; charset=utf-8` would get JSON.
 */
export function preferredType<T extends string>(accept: string | undefined, offers: readonly [T, ...T[]]): T | undefined {
  const ranges = (accept ?? '*/*')
    .split(',')
    .map((range) => {
      const [type = '', ...params] = range.split(';');
      return [type.trim(), ...params.filter((p) => /^\s*q\s*=/i.test(p)).map((p) => p.trim())].join(';');
    })
    .join(',');
  return new Negotiator({ headers: { accept: ranges } }).mediaType([...offers]) as T | undefined;
}
