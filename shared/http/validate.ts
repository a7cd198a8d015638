import type { z } from 'zod';
import { formatPath } from '../catalog/schema.ts';
import { badRequest } from '../errors.ts';

/** zod at the edge: a typed value, or a 400 naming the first bad field. */
export function parseOr400<S extends z.ZodType>(schema: S, value: unknown, what = 'body'): z.infer<S> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const where = formatPath(issue.path);
  throw badRequest(where ? `${where}: ${issue.message}` : `${what}: ${issue.message}`);
}
