import type { z } from 'zod';
import { formatPath } from '../catalog/schema.ts';
import { badRequest } from '../errors.ts';

/**
 * zod at the edge: a typed value, or a 400 naming the first bad field. A query parameter given more than
 * once (which the query parser turns into a list) is refused as such, whatever the schema would say of a
 * list: no parameter of this service takes several values.
 */
export function parseOr400<S extends z.ZodType>(schema: S, value: unknown, what = 'body'): z.infer<S> {
  if (what === 'query' && typeof value === 'object' && value !== null) {
    for (const [name, v] of Object.entries(value)) {
      if (Array.isArray(v)) throw badRequest(`${name}: given ${v.length} times; give it once`);
    }
  }
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const where = formatPath(issue.path);
  throw badRequest(where ? `${where}: ${issue.message}` : `${what}: ${issue.message}`);
}
