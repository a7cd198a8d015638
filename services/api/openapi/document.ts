import { readFileSync } from 'node:fs';
import type { z } from 'zod';
import { parameters, securitySchemes, sharedResponses } from './components.ts';
import { componentSchemas, schemaFor, type JsonSchema } from './json-schema.ts';
import { routes } from './routes.ts';
import { isShared, type Audience, type OperationSpec, type ResponseEntry, type ResponseSpec, type StatusKey } from './spec.ts';
import { webhooks } from './webhooks.ts';

export type OpenApiDocument = Record<string, unknown> & { openapi: string; info: { title: string; version: string; description: string } };

export const TITLE = 'Seamless-wallet ledger API';

const packageVersion = (): string => {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
  return typeof pkg.version === 'string' ? pkg.version : '0.0.0';
};

const DESCRIPTION = `A seamless-wallet gaming aggregator: providers submit BET, WIN and ROLLBACK for operators' players, the service settles each one against the operator's wallet in real time and keeps the complete history. Generated from the zod schemas the service validates requests with.

| who | routes | authentication |
|---|---|---|
| operators | \`/v1/operator/*\` | operator signature (\`X-Operator-Id\`, \`X-Timestamp\`, \`X-Nonce\`, \`X-Signature\`) |
| providers | \`/v1/wallet/*\` | provider signature (\`X-Provider-Id\`, \`X-Timestamp\`, \`X-Nonce\`, \`X-Signature\`) |
| platform team, auditors | \`/v1/admin/*\`, \`/v1/audit/*\`, \`/metrics\` | \`Authorization: Bearer <ADMIN_TOKEN>\` |
| anyone | \`/healthz\`, \`/readyz\`, \`/openapi.json\`, \`/docs\` | none |

**Webhooks** lists what partners implement and the service calls, signed: the operator wallet's transaction and balance callbacks, and the provider's free-spin and session-revoke endpoints.

**Signatures:** see the security schemes for the exact signing string. The target is the path only for calls to the service, path plus query for calls made by it. "Try it out" cannot sign a request: use \`scripts/signed-curl.sh\` or your own signer.

**Errors** are JSON \`{"error": "<message>"}\`, except the 401 \`text/plain\` body \`invalid signature\`. An unknown route is 404, a body that is not JSON 400, a body over 64 KiB 413; a 500 reveals no detail.

**Money:** amounts are integers in the currency's minor unit, never floats; currencies are upper-case ISO-4217 codes.`;

const tags = [
  { name: 'Operator API', description: 'Called by operators (casinos), signed with the operator secret (API document 4.1).' },
  { name: 'Operator API: free spins', description: 'Free-spin grants (API document 2.7, 3.1, 4.1.5 to 4.1.8).' },
  { name: 'Provider API', description: 'Called by providers (studios), signed with the provider secret (contract section 5).' },
  { name: 'Admin', description: 'Platform team, bearer ADMIN_TOKEN.' },
  { name: 'Audit', description: 'Read-only views of the history of record, bearer ADMIN_TOKEN.' },
  { name: 'Health', description: 'Probes and metrics.' },
  { name: 'Documentation', description: 'This document and page.' },
];

const security: Record<Audience, Array<Record<string, string[]>>> = {
  operator: [{ operatorSignature: [] }],
  provider: [{ providerSignature: [] }],
  admin: [{ adminBearer: [] }],
  public: [],
};

const paramRef = (name: keyof typeof parameters) => ({ $ref: `#/components/parameters/${name}` });

const signingHeaders: Record<Audience, unknown[]> = {
  operator: [paramRef('OperatorId'), paramRef('Timestamp'), paramRef('Nonce')],
  provider: [paramRef('ProviderId'), paramRef('Timestamp'), paramRef('Nonce')],
  admin: [],
  public: [],
};

function paramsOf(where: 'path' | 'query', shape: z.ZodObject | undefined, descriptions: Record<string, string> = {}): unknown[] {
  if (!shape) return [];
  const schema = schemaFor(shape) as { properties?: Record<string, JsonSchema>; required?: string[] };
  return Object.entries(schema.properties ?? {}).map(([name, s]) => ({
    name,
    in: where,
    required: where === 'path' || (schema.required ?? []).includes(name),
    ...(descriptions[name] !== undefined ? { description: descriptions[name] } : {}),
    schema: s,
  }));
}

function responseObject(spec: ResponseSpec): Record<string, unknown> {
  return {
    description: spec.description,
    ...(spec.headers
      ? {
          headers: Object.fromEntries(
            Object.entries(spec.headers).map(([name, h]) => [name, { description: h.description, required: h.required ?? false, schema: schemaFor(h.schema) }]),
          ),
        }
      : {}),
    ...(spec.content
      ? {
          content: Object.fromEntries(
            Object.entries(spec.content).map(([media, schema]) => [media, { schema: schemaFor(schema, media === 'application/json') }]),
          ),
        }
      : {}),
  };
}

const responseFor = (entry: ResponseEntry) => (isShared(entry) ? { $ref: `#/components/responses/${entry.shared}` } : responseObject(entry));

function operation(op: OperationSpec & { tag?: string }, auth: { security: unknown; headers: unknown[] }): Record<string, unknown> {
  const responses = (Object.entries(op.responses) as Array<[string, ResponseEntry]>).sort(([a], [b]) =>
    a === 'default' ? 1 : b === 'default' ? -1 : Number(a) - Number(b),
  );
  const params = [...auth.headers, ...paramsOf('path', op.pathParams, op.paramDescriptions), ...paramsOf('query', op.query, op.paramDescriptions)];
  return {
    ...(op.tag !== undefined ? { tags: [op.tag] } : {}),
    summary: op.summary,
    description: op.description,
    operationId: op.operationId,
    security: auth.security,
    ...(params.length > 0 ? { parameters: params } : {}),
    ...(op.body
      ? {
          requestBody: {
            required: true,
            ...(op.body.description !== undefined ? { description: op.body.description } : {}),
            content: {
              'application/json': { schema: schemaFor(op.body.schema, true), ...(op.body.example !== undefined ? { example: op.body.example } : {}) },
            },
          },
        }
      : {}),
    responses: Object.fromEntries(responses.map(([status, entry]) => [status, responseFor(entry)])),
  };
}

/** The response a route documents for a status (shared ones resolved), for tests checking real traffic. */
export function documentedResponse(op: OperationSpec, status: StatusKey): ResponseSpec | undefined {
  const entry = (status === 'default' ? undefined : op.responses[status]) ?? op.responses.default;
  if (!entry) return undefined;
  return isShared(entry) ? sharedResponses[entry.shared] : entry;
}

export function buildOpenApiDocument(): OpenApiDocument {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const item = (paths[r.path] ??= {});
    if (item[r.method]) throw new Error(`${r.method.toUpperCase()} ${r.path} is documented twice`);
    item[r.method] = operation(r, { security: security[r.audience], headers: signingHeaders[r.audience] });
  }
  const hooks: Record<string, Record<string, unknown>> = {};
  for (const w of webhooks) {
    hooks[w.name] = { [w.method]: operation(w, { security: [{ serviceSignature: [] }], headers: [paramRef('Timestamp'), paramRef('Nonce')] }) };
  }
  return {
    openapi: '3.1.1',
    info: { title: TITLE, version: packageVersion(), description: DESCRIPTION },
    servers: [{ url: '/', description: 'This service' }],
    tags,
    paths,
    webhooks: hooks,
    components: {
      schemas: componentSchemas(),
      responses: Object.fromEntries(Object.entries(sharedResponses).map(([name, spec]) => [name, responseObject(spec)])),
      parameters,
      securitySchemes,
    },
  };
}

let cached: OpenApiDocument | undefined;

/** Built once per process: it depends only on code. */
export function openApiDocument(): OpenApiDocument {
  return (cached ??= buildOpenApiDocument());
}
