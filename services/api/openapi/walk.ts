import type { Express } from 'express';

/** A route as registered in express: lower-case method and an OpenAPI-style path (/grants/{id}). */
export interface RegisteredRoute {
  method: string;
  path: string;
}

interface Layer {
  rawPath?: unknown;
  handle?: unknown;
  route?: { path: unknown; methods: Record<string, boolean> };
}

const stackOf = (handle: unknown): Layer[] | undefined => {
  const stack = (handle as { stack?: unknown } | undefined)?.stack;
  return typeof handle === 'function' && Array.isArray(stack) ? (stack as Layer[]) : undefined;
};

const join = (prefix: string, p: string): string => (p === '/' ? prefix || '/' : `${prefix}${p}`.replace(/\/{2,}/g, '/'));

const asTemplate = (p: string): string => p.replace(/:(\w+)/g, '{$1}');

/** A trailing `{*name}` (express 5: the rest of the path) is spelled as the one path parameter `{name}`. */
const WILDCARD_TAIL = /\/\{\*(\w+)\}$/;

/**
 * Every (method, path) an express app answers, found by walking its routers (mount paths included),
 * so a test can compare what is served with what is documented. A trailing wildcard `{*name}` is
 * spelled `{name}` (its documentation says which values it serves); a route on any other pattern this
 * cannot spell (a RegExp, a wildcard elsewhere, an optional group, app.all) is an error rather than a
 * silent gap.
 */
export function registeredRoutes(app: Express): RegisteredRoute[] {
  const root = stackOf((app as unknown as { router?: unknown }).router);
  if (!root) throw new Error('not an express 5 app: no router stack');
  const out: RegisteredRoute[] = [];
  const visit = (stack: Layer[], prefix: string) => {
    for (const layer of stack) {
      if (layer.route) {
        const raw = layer.route.path;
        const p = typeof raw === 'string' ? raw.replace(WILDCARD_TAIL, '/:$1') : raw;
        if (typeof p !== 'string' || /[*()?{}]/.test(p)) throw new Error(`route path ${String(raw)} under ${prefix || '/'} cannot be documented`);
        for (const [method, on] of Object.entries(layer.route.methods)) {
          if (!on) continue;
          if (method === '_all') throw new Error(`app.all on ${join(prefix, p)} cannot be documented`);
          out.push({ method, path: asTemplate(join(prefix, p)) });
        }
        continue;
      }
      const nested = stackOf(layer.handle);
      if (!nested) continue; // middleware (auth, body parsing, static files): not a route
      if (typeof layer.rawPath !== 'string') throw new Error(`a router is mounted on ${String(layer.rawPath)}, which cannot be documented`);
      visit(nested, join(prefix, layer.rawPath));
    }
  };
  visit(root, '');
  return out;
}
