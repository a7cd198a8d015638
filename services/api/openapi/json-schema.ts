import { z } from 'zod';
import { transactionMetadata, METADATA_MAX_BYTES } from '../provider/schemas.ts';

export type JsonSchema = Record<string, unknown>;

/** Names under components.schemas, given to the zod schemas the document refers to. */
export const schemaNames = z.registry<{ id: string; description?: string; examples?: unknown[] }>();

export const componentRef = (id: string): string => `#/components/schemas/${id}`;

/**
 * zod's JSON Schema output (draft 2020-12, OpenAPI 3.1's dialect), as the input a request may carry:
 * defaults make fields optional and a stripping object accepts unknown keys. Response schemas are
 * strict objects without transforms, so input and output read the same for them.
 */
/** A refined zod schema is a clone whose `parent` is the unrefined one; zod converts both. */
const lineage = (schema: z.core.$ZodType): Set<unknown> => {
  const out = new Set<unknown>();
  for (let s: z.core.$ZodType | undefined = schema; s; s = s._zod.parent) out.add(s);
  return out;
};
const metadataSchemas = lineage(transactionMetadata);

const options: z.core.ToJSONSchemaParams = {
  target: 'draft-2020-12',
  io: 'input',
  // The only custom type: metadata, refined in code to a JSON object of at most 8 KiB.
  unrepresentable: ({ zodSchema }) =>
    metadataSchemas.has(zodSchema)
      ? { type: 'object', additionalProperties: true, description: `Any JSON object, at most ${METADATA_MAX_BYTES} bytes as UTF-8 JSON, without a number too large for a double (e.g. 1e400).` }
      : 'throw',
  // zod spells out its date-time and uuid checks as long regular expressions; the format says it.
  override: ({ jsonSchema }) => {
    if (jsonSchema.format === 'date-time' || jsonSchema.format === 'uuid') delete jsonSchema.pattern;
  },
};

const strip = (s: JsonSchema): JsonSchema => {
  const { $schema: _schema, $id: _id, ...rest } = s;
  return rest;
};

/** Every named schema as a component; references between them point into components.schemas. */
export function componentSchemas(): Record<string, JsonSchema> {
  const out: { schemas: Record<string, JsonSchema> } = z.toJSONSchema(schemaNames, { ...options, metadata: schemaNames, uri: componentRef });
  return Object.fromEntries(Object.entries(out.schemas).map(([id, s]) => [id, strip(s)]));
}

/** A $ref for a named schema, or the schema inline (parameters, headers, literal text bodies). */
export function schemaFor(schema: z.ZodType, mustBeNamed = false): JsonSchema {
  const id = schemaNames.get(schema)?.id;
  if (id !== undefined) return { $ref: componentRef(id) };
  if (mustBeNamed) throw new Error('a request or JSON response body schema has no component name; add it to components.ts');
  return strip(z.toJSONSchema(schema, options));
}
