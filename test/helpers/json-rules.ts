type Json = Record<string, unknown>;

/**
 * A JSON Schema evaluator for the few keywords the document's per-type rules use (if/then/else, not,
 * allOf, required, properties, const, enum), so the tests can hold the rules against the zod schemas
 * without a validator dependency. An unknown keyword is an error, never silently true.
 */
export function satisfies(schema: unknown, value: unknown): boolean {
  if (schema === true) return true;
  if (schema === false) return false;
  const s = schema as Json;
  const obj = value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : undefined;
  for (const [k, v] of Object.entries(s)) {
    switch (k) {
      case 'unevaluatedProperties':
        if (v !== true) throw new Error('json-rules.ts evaluates only unevaluatedProperties: true (no constraint)');
        break;
      case 'description':
      case 'then':
      case 'else':
        break;
      case 'const':
        if (value !== v) return false;
        break;
      case 'enum':
        if (!(v as unknown[]).includes(value)) return false;
        break;
      case 'required':
        if (obj && !(v as string[]).every((p) => p in obj)) return false;
        break;
      case 'properties':
        if (obj && !Object.entries(v as Json).every(([p, ps]) => !(p in obj) || satisfies(ps, obj[p]))) return false;
        break;
      case 'not':
        if (satisfies(v, value)) return false;
        break;
      case 'allOf':
        if (!(v as unknown[]).every((sub) => satisfies(sub, value))) return false;
        break;
      case 'if': {
        const branch = satisfies(v, value) ? s.then : s.else;
        if (branch !== undefined && !satisfies(branch, value)) return false;
        break;
      }
      default:
        throw new Error(`json-rules.ts does not evaluate ${k}`);
    }
  }
  return true;
}
