import { z } from 'zod';
import { grantSchema, providerGrantRequest } from '../../grants/schemas.ts';
import { transactionMetadata, METADATA_MAX_BYTES } from '../../rounds/schemas.ts';
import { propertyDescriptions, schemaConditionals, type JsonSchema } from './annotations.ts';

export type { JsonSchema };

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
/**
 * Timestamps kept as plain strings in zod (a grant answers its expiresAt as it was given, already
 * checked as an RFC 3339 date-time at issue): the document still says what they are.
 */
const dateTimeStrings = new Set<unknown>([grantSchema.shape.expiresAt.unwrap(), providerGrantRequest.shape.expiresAt.unwrap()]);

const options: z.core.ToJSONSchemaParams = {
  target: 'draft-2020-12',
  io: 'input',
  // The only custom type: metadata, refined in code to a JSON object of at most 8 KiB.
  unrepresentable: ({ zodSchema }) =>
    metadataSchemas.has(zodSchema)
      ? { type: 'object', additionalProperties: true, description: `Any JSON object, at most ${METADATA_MAX_BYTES} bytes as UTF-8 JSON, without a number too large for a double (e.g. 1e400).` }
      : 'throw',
  // zod spells out its date-time and uuid checks as long regular expressions; the format says it.
  // A field's own description (`.meta({ description })`, kept in zod's global registry) is shown too:
  // the components' metadata come from schemaNames, which replaces the global registry here.
  override: ({ zodSchema, jsonSchema }) => {
    const own = z.globalRegistry.get(zodSchema)?.description;
    if (own !== undefined && jsonSchema.description === undefined) jsonSchema.description = own;
    if (dateTimeStrings.has(zodSchema)) jsonSchema.format = 'date-time';
    if (jsonSchema.format === 'date-time' || jsonSchema.format === 'uuid') delete jsonSchema.pattern;
  },
};

const strip = (s: JsonSchema): JsonSchema => {
  const { $schema: _schema, $id: _id, ...rest } = s;
  return rest;
};

/** Adds the OpenAPI layer's property descriptions and per-type rules (annotations.ts) to a component. */
function annotate(id: string, schema: JsonSchema): JsonSchema {
  const properties = schema.properties as Record<string, JsonSchema> | undefined;
  for (const [name, description] of Object.entries(propertyDescriptions[id] ?? {})) {
    const property = properties?.[name];
    if (!property) throw new Error(`annotations.ts describes ${id}.${name}, which the schema does not have`);
    properties[name] = { ...property, description };
  }
  const rules = schemaConditionals[id];
  return rules ? { ...schema, allOf: rules } : schema;
}

/** Every named schema as a component; references between them point into components.schemas. */
export function componentSchemas(): Record<string, JsonSchema> {
  const out: { schemas: Record<string, JsonSchema> } = z.toJSONSchema(schemaNames, { ...options, metadata: schemaNames, uri: componentRef });
  return Object.fromEntries(Object.entries(out.schemas).map(([id, s]) => [id, annotate(id, strip(s))]));
}

/** A $ref for a named schema, or the schema inline (parameters, headers, literal text bodies). */
export function schemaFor(schema: z.ZodType, mustBeNamed = false): JsonSchema {
  const id = schemaNames.get(schema)?.id;
  if (id !== undefined) return { $ref: componentRef(id) };
  if (mustBeNamed) throw new Error('a request or JSON response body schema has no component name; add it to components.ts');
  return strip(z.toJSONSchema(schema, options));
}
