import { readFileSync } from 'node:fs';
import type { z } from 'zod';
import { parameters, securitySchemes, sharedResponses } from './components.ts';
import { parameterExamples } from './examples.ts';
import { componentSchemas, schemaFor, schemaNames, type JsonSchema } from './json-schema.ts';
import { routes } from './routes.ts';
import { isShared, type Audience, type OperationSpec, type ResponseEntry, type ResponseSpec, type StatusKey } from './spec.ts';
import { webhooks } from './webhooks.ts';

export type OpenApiDocument = Record<string, unknown> & { openapi: string; info: { title: string; version: string; description: string } & Record<string, unknown> };

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

**Signatures:** see the security schemes for the exact signing string. The target is the path only for calls to the service, path plus query for calls made by it. In \`/docs\`, "Try it out" signs partner requests in the browser: Authorize with your id and, in the X-Signature box, your secret (see the signature schemes). A generated client signs in one middleware: the four headers are each operation's security, not its parameters.

**Errors** are JSON \`{"error": "<message>"}\`, except the 401 \`text/plain\` body \`invalid signature\`. An unknown route is 404, a body that is not JSON 400, a body over 64 KiB 413; a 500 reveals no detail.

**Request ids:** every response carries \`X-Request-Id\`: the one you sent, if it matches \`^[\\w.-]{1,64}$\`, else a fresh UUID. Quote it when reporting a problem.

**Money:** amounts are integers in the currency's minor unit, never floats; currencies are upper-case ISO-4217 codes.`;

const tags = [
  { name: 'Operator API', description: 'Called by operators (casinos), signed with the operator secret. Guide: docs/operators.md.' },
  { name: 'Operator API: free spins', description: 'Free-spin grants: issue through the game\'s provider, list, read, cancel. Guide: docs/operators.md (free spins).' },
  {
    name: 'Operator API: reconciliation',
    description: 'Your transactions with the status to reconcile against your wallet, one round, and the settlement statement (JSON or CSV). Guide: docs/operators.md (reconciling your wallet).',
  },
  {
    name: 'Operator API: history',
    description: 'Your own events in chain order with their links, and your signed checkpoints: recompute your hash chain and check it against the signatures. Guide: docs/operators.md (verifying your own history).',
  },
  { name: 'Provider API', description: 'Called by providers (studios), signed with the provider secret. Guide: docs/providers.md.' },
  { name: 'Admin', description: 'Platform team, bearer ADMIN_TOKEN.' },
  {
    name: 'Admin: console',
    description: "The back-office console's data, bearer ADMIN_TOKEN: the overview, search, a player, the stuck transactions (re-driven with `POST /v1/admin/transactions/redrive`), the operators, an operator's statement and a round's replay link. Guide: docs/console.md.",
  },
  { name: 'Audit', description: 'Read-only views of the history of record, bearer ADMIN_TOKEN.' },
  { name: 'Health', description: 'Probes and metrics.' },
  { name: 'Documentation', description: 'This document and page.' },
];

const security: Record<Audience, Array<Record<string, string[]>>> = {
  operator: [{ operatorId: [], signatureTimestamp: [], signatureNonce: [], operatorSignature: [] }],
  provider: [{ providerId: [], signatureTimestamp: [], signatureNonce: [], providerSignature: [] }],
  admin: [{ adminBearer: [] }],
  public: [],
};

const paramRef = (name: keyof typeof parameters) => ({ $ref: `#/components/parameters/${name}` });

/** Said in each signed operation's description: the four headers are in its security requirement, not its parameters. */
const signedWith: Record<Audience, string> = {
  operator: '\n\n**Signed** with `X-Operator-Id`, `X-Timestamp`, `X-Nonce` and `X-Signature` (the four `operatorSignature` security schemes).',
  provider: '\n\n**Signed** with `X-Provider-Id`, `X-Timestamp`, `X-Nonce` and `X-Signature` (the four `providerSignature` security schemes).',
  admin: '',
  public: '',
};

function exampleFor(parameter: string, own: Record<string, unknown> = {}): unknown {
  const example = own[parameter] ?? parameterExamples[parameter];
  if (example === undefined) throw new Error(`parameter ${parameter} has no example: add one to parameterExamples (examples.ts)`);
  return example;
}

/** The example a media type shows: the response's own, or the first example of its named schema. */
function mediaExample(schema: z.ZodType, own: unknown): Record<string, unknown> {
  const example = own ?? schemaNames.get(schema)?.examples?.[0];
  return example === undefined ? {} : { example };
}

/** Every response of the service carries X-Request-Id (services/api/app.ts): the caller's, if usable, or a fresh UUID. */
const requestIdHeader = { 'X-Request-Id': { $ref: '#/components/headers/RequestId' } };

function paramsOf(where: 'path' | 'query', shape: z.ZodObject | undefined, descriptions: Record<string, string> = {}, examples: Record<string, unknown> = {}): unknown[] {
  if (!shape) return [];
  const schema = schemaFor(shape) as { properties?: Record<string, JsonSchema>; required?: string[] };
  return Object.entries(schema.properties ?? {}).map(([name, s]) => ({
    name,
    in: where,
    required: where === 'path' || (schema.required ?? []).includes(name),
    ...(descriptions[name] !== undefined ? { description: descriptions[name] } : {}),
    schema: s,
    example: exampleFor(name, examples),
  }));
}

function responseObject(spec: ResponseSpec, withRequestId = true): Record<string, unknown> {
  const headers = {
    ...(withRequestId ? requestIdHeader : {}),
    ...Object.fromEntries(
      Object.entries(spec.headers ?? {}).map(([name, h]) => [
        name,
        { description: h.description, required: h.required ?? false, schema: schemaFor(h.schema), ...(h.example !== undefined ? { example: h.example } : {}) },
      ]),
    ),
  };
  return {
    description: spec.description,
    ...(Object.keys(headers).length > 0 ? { headers } : {}),
    ...(spec.content
      ? {
          content: Object.fromEntries(
            Object.entries(spec.content).map(([media, schema]) => [
              media,
              { schema: schemaFor(schema, media === 'application/json'), ...mediaExample(schema, spec.examples?.[media as keyof typeof spec.content]) },
            ]),
          ),
        }
      : {}),
  };
}

const responseFor = (entry: ResponseEntry, withRequestId: boolean) =>
  isShared(entry) ? { $ref: `#/components/responses/${entry.shared}` } : responseObject(entry, withRequestId);

function operation(op: OperationSpec & { tag?: string }, auth: { security: unknown; headers: unknown[]; webhook?: boolean }): Record<string, unknown> {
  const responses = (Object.entries(op.responses) as Array<[string, ResponseEntry]>).sort(([a], [b]) =>
    a === 'default' ? 1 : b === 'default' ? -1 : Number(a) - Number(b),
  );
  const params = [
    ...auth.headers,
    ...paramsOf('path', op.pathParams, op.paramDescriptions, op.paramExamples),
    ...paramsOf('query', op.query, op.paramDescriptions, op.paramExamples),
  ];
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
              'application/json': {
                schema: schemaFor(op.body.schema, true),
                ...(op.body.examples !== undefined ? { examples: op.body.examples } : mediaExample(op.body.schema, op.body.example)),
              },
            },
          },
        }
      : {}),
    // Webhook responses are the partner's: no X-Request-Id is asked of them.
    responses: Object.fromEntries(responses.map(([status, entry]) => [status, responseFor(entry, auth.webhook !== true)])),
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
    item[r.method] = operation({ ...r, description: r.description + signedWith[r.audience] }, { security: security[r.audience], headers: [] });
  }
  const hooks: Record<string, Record<string, unknown>> = {};
  for (const w of webhooks) {
    hooks[w.name] = { [w.method]: operation(w, { security: [{ serviceSignature: [] }], headers: [paramRef('Timestamp'), paramRef('Nonce'), paramRef('Signature')], webhook: true }) };
  }
  return {
    openapi: '3.1.1',
    info: {
      title: TITLE,
      version: packageVersion(),
      description: DESCRIPTION,
      // package.json says UNLICENSED: proprietary, not an SPDX licence, hence a LicenseRef- identifier.
      license: { name: 'Proprietary (UNLICENSED): for the platform and its contracted partners', identifier: 'LicenseRef-Proprietary' },
      contact: { name: 'Platform team (the team that runs this service and issues your catalog credentials)' },
    },
    servers: [{ url: '/', description: 'This service' }],
    tags,
    paths,
    webhooks: hooks,
    components: {
      schemas: componentSchemas(),
      responses: Object.fromEntries(Object.entries(sharedResponses).map(([name, spec]) => [name, responseObject(spec)])),
      parameters,
      headers: {
        RequestId: {
          description:
            'On every response of the service: the request\'s X-Request-Id if it sent one matching `^[\\w.-]{1,64}$`, else a fresh UUID. The service\'s log lines for the request name it: quote it when you report a problem.',
          required: true,
          schema: { type: 'string', pattern: '^[\\w.-]{1,64}$' },
          example: '2b7c3e1a-9d4f-4e8b-a6c2-5f1d0e9b8a7c',
        },
      },
      securitySchemes,
    },
  };
}

let cached: OpenApiDocument | undefined;

/** Built once per process: it depends only on code. */
export function openApiDocument(): OpenApiDocument {
  return (cached ??= buildOpenApiDocument());
}
