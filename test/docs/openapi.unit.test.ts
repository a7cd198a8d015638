import { createHash, createPublicKey, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { namedSchemas } from '../../services/api/openapi/components.ts';
import { CHAIN_KEY_ID, CHAIN_PUBLIC_KEY, chainExamples } from '../../services/api/openapi/examples.ts';
import { buildOpenApiDocument, documentedResponse } from '../../services/api/openapi/document.ts';
import { schemaNames } from '../../services/api/openapi/json-schema.ts';
import { routes } from '../../services/api/openapi/routes.ts';
import { webhooks } from '../../services/api/openapi/webhooks.ts';
import { launchBody } from '../../services/sessions/schemas.ts';
import { transactionBody, walletTransactionRequest } from '../../services/rounds/schemas.ts';
import { catalogSchema } from '../../shared/catalog/schema.ts';
import { satisfies } from '../helpers/json-rules.ts';

type Json = Record<string, unknown>;

const doc = buildOpenApiDocument();
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** Every operation of paths and webhooks, with where it sits. */
function operations(): Array<{ where: string; path: string; isWebhook: boolean; op: Json }> {
  const out: Array<{ where: string; path: string; isWebhook: boolean; op: Json }> = [];
  for (const [section, isWebhook] of [['paths', false], ['webhooks', true]] as const) {
    for (const [path, item] of Object.entries(doc[section] as Record<string, Json>)) {
      for (const m of METHODS) if (item[m]) out.push({ where: `${section} ${m.toUpperCase()} ${path}`, path, isWebhook, op: item[m] as Json });
    }
  }
  return out;
}

/** Resolves a local JSON pointer (#/a/b~1c) in the document, or undefined. */
function resolvePointer(ref: string): unknown {
  if (!ref.startsWith('#/')) return undefined;
  let node: unknown = doc;
  for (const raw of ref.slice(2).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (node === null || typeof node !== 'object' || !(key in node)) return undefined;
    node = (node as Json)[key];
  }
  return node;
}

function allRefs(node: unknown, at = '#'): Array<{ at: string; ref: string }> {
  if (Array.isArray(node)) return node.flatMap((n, i) => allRefs(n, `${at}/${i}`));
  if (node === null || typeof node !== 'object') return [];
  return Object.entries(node as Json).flatMap(([k, v]) => (k === '$ref' && typeof v === 'string' ? [{ at, ref: v }] : allRefs(v, `${at}/${k}`)));
}

const deref = <T>(node: unknown): T => {
  const ref = (node as { $ref?: string }).$ref;
  return (ref ? resolvePointer(ref) : node) as T;
};

describe('the OpenAPI document is structurally valid 3.1', () => {
  it('declares OpenAPI 3.1.x and the package version', () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(doc.info).toMatchObject({ title: 'Seamless-wallet ledger API', version: pkg.version });
  });

  it('is plain JSON (what /openapi.json serves is the same document)', () => {
    expect(JSON.parse(JSON.stringify(doc))).toEqual(doc);
  });

  it('resolves every $ref inside the document', () => {
    const refs = allRefs(doc);
    expect(refs.length).toBeGreaterThan(50);
    const broken = refs.filter((r) => resolvePointer(r.ref) === undefined);
    expect(broken).toEqual([]);
  });

  it('gives every operation a unique operationId and at least one response, each with a description', () => {
    const ops = operations();
    expect(ops.length).toBe(routes.length + webhooks.length);
    const ids = ops.map((o) => o.op.operationId);
    expect(ids.every((id) => typeof id === 'string' && id.length > 0)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    for (const { where, op } of ops) {
      const responses = op.responses as Record<string, unknown>;
      expect(Object.keys(responses).length, where).toBeGreaterThan(0);
      for (const [status, r] of Object.entries(responses)) {
        expect(status, where).toMatch(/^(default|[1-5]XX|[1-5]\d\d)$/);
        expect(typeof deref<Json>(r).description, `${where} ${status}`).toBe('string');
      }
    }
  });

  it('declares each path template parameter exactly once, as a required path parameter', () => {
    for (const { where, path, isWebhook, op } of operations()) {
      const params = ((op.parameters as unknown[]) ?? []).map((p) => deref<{ name: string; in: string; required?: boolean }>(p));
      const inPath = params.filter((p) => p.in === 'path');
      if (isWebhook) {
        expect(inPath, where).toEqual([]);
        continue;
      }
      const template = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      expect(inPath.map((p) => p.name).sort(), where).toEqual([...template].sort());
      expect(inPath.every((p) => p.required === true), where).toBe(true);
      const keys = params.map((p) => `${p.in}:${p.name.toLowerCase()}`);
      expect(new Set(keys).size, where).toBe(keys.length);
    }
  });

  it('uses only defined security schemes and tags', () => {
    const schemes = Object.keys((doc.components as Json).securitySchemes as Json);
    const tags = (doc.tags as Array<{ name: string }>).map((t) => t.name);
    for (const { where, op } of operations()) {
      expect(Array.isArray(op.security), where).toBe(true);
      for (const req of op.security as Array<Record<string, unknown>>) for (const name of Object.keys(req)) expect(schemes, where).toContain(name);
      for (const t of (op.tags as string[] | undefined) ?? []) expect(tags, where).toContain(t);
    }
  });
});

describe('the OpenAPI document says what the contract says', () => {
  const pathOp = (method: string, path: string) => (doc.paths as Record<string, Json>)[path]?.[method] as Json;
  const securityOf = (op: Json) => (op.security as Array<Record<string, unknown>>).flatMap((r) => Object.keys(r));

  it('authenticates each audience with its scheme and documents its signature refusals', () => {
    for (const r of routes) {
      const op = pathOp(r.method, r.path);
      const responses = op.responses as Record<string, Json>;
      if (r.path.startsWith('/v1/operator/')) {
        expect(securityOf(op), r.path).toEqual(['operatorId', 'signatureTimestamp', 'signatureNonce', 'operatorSignature']);
        expect(Object.keys(deref<Json>(responses['401']!).content as Json).sort(), r.path).toEqual(['application/json', 'text/plain']);
        expect(deref<Json>(responses['400']!).description, r.path).toContain('invalid nonce');
        expect(deref<{ headers: Json }>(responses['429']!).headers['Retry-After'], r.path).toBeDefined();
      } else if (r.path.startsWith('/v1/wallet/')) {
        expect(securityOf(op), r.path).toEqual(['providerId', 'signatureTimestamp', 'signatureNonce', 'providerSignature']);
        expect(Object.keys(deref<Json>(responses['401']!).content as Json).sort(), r.path).toEqual(['application/json', 'text/plain']);
        expect(deref<Json>(responses['400']!).description, r.path).toContain('invalid nonce');
        expect(responses['429'], r.path).toBeUndefined(); // providers are not rate limited
      } else if (/^\/(v1\/admin|v1\/audit|metrics)/.test(r.path)) {
        expect(securityOf(op), r.path).toEqual(['adminBearer']);
        expect(responses['401'], r.path).toBeDefined();
      } else {
        expect(securityOf(op), r.path).toEqual([]);
      }
    }
    const schemes = (doc.components as Json).securitySchemes as Record<string, { description: string }>;
    for (const name of ['operatorSignature', 'providerSignature']) {
      const d = schemes[name]!.description;
      expect(d).toContain('timestamp + "\\n" + nonce + "\\n" + METHOD + "\\n" + target + "\\n" + lowercase hex of SHA-256(raw body bytes)');
      expect(d).toContain('**path only**');
      // The order of checks: nonce (400), signature (401 text), replay (401 JSON).
      expect(d.indexOf('invalid nonce')).toBeLessThan(d.indexOf('`invalid signature`'));
      expect(d.indexOf('`invalid signature`')).toBeLessThan(d.indexOf('replayed request'));
    }
    expect(schemes.serviceSignature!.description).toContain('path plus the query string exactly as sent');
  });

  it('lists what partners implement as webhooks', () => {
    const summaries = Object.values(doc.webhooks as Record<string, Json>).flatMap((item) =>
      Object.entries(item).map(([m, op]) => `${m.toUpperCase()} ${(op as Json).summary as string}`),
    );
    expect(summaries.sort()).toEqual([
      'GET {walletUrl}/v1/wallet/balance?playerRef=...',
      'POST {apiBaseUrl}/v1/free-spins/grants',
      'POST {apiBaseUrl}/v1/free-spins/grants/{externalRef}/cancel',
      'POST {apiBaseUrl}/v1/sessions/revoke',
      'POST {walletUrl}/v1/wallet/transaction',
    ]);
  });

  it('generates request bodies from the schemas the routers validate with', () => {
    const schemas = (doc.components as Json).schemas as Record<string, { properties: Json; required?: string[] }>;
    const bodyRef = (method: string, path: string) =>
      (((pathOp(method, path).requestBody as Json).content as Json)['application/json'] as { schema: { $ref: string } }).schema.$ref;
    expect(bodyRef('post', '/v1/operator/games/launch')).toBe('#/components/schemas/LaunchGameRequest');
    expect(Object.keys(schemas.LaunchGameRequest!.properties)).toEqual(Object.keys(launchBody.shape));
    expect(schemas.LaunchGameRequest!.required).toEqual(['playerRef', 'gameId', 'currency', 'mode']);
    expect(bodyRef('post', '/v1/wallet/transaction')).toBe('#/components/schemas/ProviderTransactionRequest');
    expect(Object.keys(schemas.ProviderTransactionRequest!.properties)).toEqual(Object.keys(transactionBody.shape));
    // Catalog defaults make those fields optional in what a caller may send.
    expect(bodyRef('put', '/v1/admin/catalog')).toBe('#/components/schemas/Catalog');
    expect(Object.keys(schemas.Catalog!.properties)).toEqual(Object.keys(catalogSchema.shape));
    expect(schemas.CatalogOperator!.required).toEqual(['id', 'name', 'secret', 'walletUrl']);
  });

  it('gives examples that the routes’ own schemas accept', () => {
    const withExamples = routes.filter((r) => r.body?.example !== undefined);
    expect(withExamples.length).toBeGreaterThanOrEqual(6);
    for (const r of withExamples) {
      const parsed = r.body!.schema.safeParse(r.body!.example);
      expect(parsed.success, `${r.method} ${r.path}: ${parsed.error?.message ?? ''}`).toBe(true);
    }
  });
});

describe('the OpenAPI document shows realistic examples and the rules only prose had (issue #24 part 5)', () => {
  const components = doc.components as { schemas: Record<string, Json>; headers?: Record<string, Json> };
  const contentObjects = (): Array<{ where: string; media: string; node: Json }> => {
    const out: Array<{ where: string; media: string; node: Json }> = [];
    const visit = (node: unknown, at: string) => {
      if (Array.isArray(node)) return node.forEach((n, i) => visit(n, `${at}/${i}`));
      if (node === null || typeof node !== 'object') return;
      for (const [k, v] of Object.entries(node as Json)) {
        if (k === 'content' && v !== null && typeof v === 'object' && !('type' in (v as Json))) {
          for (const [media, m] of Object.entries(v as Json)) out.push({ where: `${at}/content/${media}`, media, node: m as Json });
        } else if (k !== 'schemas' && k !== 'examples' && k !== 'example') visit(v, `${at}/${k}`);
      }
    };
    visit(doc.paths, '#/paths');
    visit(doc.webhooks, '#/webhooks');
    visit((doc.components as Json).responses, '#/components/responses');
    return out;
  };

  it('gives every component schema examples, each accepted by the zod schema it was generated from', () => {
    for (const [id, schema] of Object.entries(components.schemas)) {
      const examples = schema.examples as unknown[] | undefined;
      expect(examples?.length ?? 0, `${id} has no examples`).toBeGreaterThan(0);
      const zodSchema = namedSchemas.get(id)!;
      for (const e of examples!) {
        const parsed = zodSchema.safeParse(e);
        expect(parsed.success, `${id} example ${JSON.stringify(e).slice(0, 200)}: ${parsed.error?.message ?? ''}`).toBe(true);
      }
    }
  });

  it('gives every request and response body an example, and response examples parse with the documented schema', () => {
    const bare = contentObjects().filter(({ node }) => node.example === undefined && node.examples === undefined);
    expect(bare.map((b) => b.where)).toEqual([]);
    for (const r of [...routes, ...webhooks]) {
      for (const status of Object.keys(r.responses)) {
        const spec = documentedResponse(r, status === 'default' ? 'default' : Number(status))!;
        const own = (spec.examples ?? {}) as Record<string, unknown>;
        for (const [media, schema] of Object.entries(spec.content ?? {})) {
          const example = own[media] ?? schemaNames.get(schema)?.examples?.[0];
          const parsed = schema.safeParse(example);
          expect(parsed.success, `${r.operationId} ${status} ${media}: ${JSON.stringify(example)}`).toBe(true);
        }
      }
    }
  });

  it('shows error examples with the real message, never "string"', () => {
    const text = JSON.stringify(doc);
    expect(text).not.toContain('"error":"string"');
    const launch = ((doc.paths as Record<string, Json>)['/v1/operator/games/launch']!.post as Json).responses as Record<string, Json>;
    expect((launch['404']!.content as Record<string, Json>)['application/json']!.example).toEqual({ error: 'game not found' });
  });

  it('shows a BET as a BET: the transaction examples parse with the request schemas, per type', () => {
    const bodyOf = (section: 'paths' | 'webhooks', key: string, method: string) =>
      ((((doc[section] as Record<string, Json>)[key]![method] as Json).requestBody as Json).content as Record<string, Json>)['application/json']!;
    const provider = bodyOf('paths', '/v1/wallet/transaction', 'post').examples as Record<string, { value: Json }>;
    expect(Object.keys(provider)).toEqual(expect.arrayContaining(['bet', 'win', 'rollback']));
    for (const { value } of Object.values(provider)) expect(transactionBody.safeParse(value).success, JSON.stringify(value)).toBe(true);
    const bet = provider.bet!.value;
    expect(bet.type).toBe('BET');
    expect(bet).toHaveProperty('roundComplete');
    expect(bet).not.toHaveProperty('originalTransactionId');
    expect(bet).not.toHaveProperty('direction');
    expect(bet.currency).toMatch(/^(EUR|USD|GBP)$/);
    expect(bet.amount).toBeLessThan(1_000_000);
    const wallet = bodyOf('webhooks', 'operatorWalletTransaction', 'post').examples as Record<string, { value: Json }>;
    expect(new Set(Object.values(wallet).map((e) => e.value.type))).toEqual(new Set(['BET', 'WIN', 'ROLLBACK', 'ADJUSTMENT']));
    for (const { value } of Object.values(wallet)) expect(walletTransactionRequest.safeParse(value).success, JSON.stringify(value)).toBe(true);
  });

  it('gives every parameter an example, which the route accepts', () => {
    for (const { where, op } of operations()) {
      for (const p of ((op.parameters as unknown[]) ?? []).map((x) => deref<Json>(x))) {
        expect(p.example, `${where} ${p.in} ${p.name as string}`).toBeDefined();
      }
    }
    for (const r of routes) {
      for (const [where, shape] of [['path', r.pathParams], ['query', r.query]] as const) {
        if (!shape) continue;
        const params = (pathOpOf(r.method, r.path).parameters as Json[]).filter((p) => p.in === where);
        const value = Object.fromEntries(params.map((p) => [p.name, p.example]));
        expect(shape.safeParse(value).success, `${r.path} ${where} ${JSON.stringify(value)}`).toBe(true);
      }
    }
  });

  it('marks every timestamp as date-time', () => {
    const missing: string[] = [];
    const visit = (node: unknown, at: string) => {
      if (Array.isArray(node)) return node.forEach((n, i) => visit(n, `${at}/${i}`));
      if (node === null || typeof node !== 'object') return;
      for (const [k, v] of Object.entries(node as Json)) {
        if (k === 'properties' && v && typeof v === 'object') {
          for (const [name, s] of Object.entries(v as Record<string, Json>)) {
            if (/(At|_at|^since|^validFrom|^validUntil)$/.test(name) && s.type === 'string' && s.format !== 'date-time') missing.push(`${at}/${name}`);
            if (/(At|_at)$/.test(name) && Array.isArray(s.anyOf) && !(s.anyOf as Json[]).some((a) => a.format === 'date-time')) missing.push(`${at}/${name}`);
          }
        }
        if (k !== 'examples' && k !== 'example') visit(v, `${at}/${k}`);
      }
    };
    visit(components.schemas, '#/components/schemas');
    expect(missing).toEqual([]);
  });

  it('names a license and a contact', () => {
    const info = doc.info as Json & { license?: Json; contact?: Json };
    expect(info.license?.name).toBeTruthy();
    expect(info.license?.identifier ?? info.license?.url).toBeTruthy();
    expect(info.contact?.name).toBeTruthy();
  });

  it('describes every field of the catalog', () => {
    for (const id of ['Catalog', 'CatalogProvider', 'CatalogGame', 'CatalogOperator', 'CatalogCampaign']) {
      const schema = components.schemas[id]!;
      expect(schema.description, id).toBeTruthy();
      for (const [name, p] of Object.entries(schema.properties as Record<string, Json>)) expect(p.description, `${id}.${name}`).toBeTruthy();
    }
  });

  it('documents X-Request-Id on every response of the service', () => {
    expect(components.headers?.RequestId).toBeDefined();
    for (const [path, item] of Object.entries(doc.paths as Record<string, Json>)) {
      for (const m of METHODS) {
        const op = item[m] as Json | undefined;
        if (!op) continue;
        for (const [status, r] of Object.entries(op.responses as Record<string, Json>)) {
          const headers = deref<Json>(r).headers as Record<string, Json> | undefined;
          expect(headers?.['X-Request-Id'], `${m} ${path} ${status}`).toEqual({ $ref: '#/components/headers/RequestId' });
        }
      }
    }
  });

  it('speaks in its own words: no citations of documents an integrator does not have', () => {
    const text = JSON.stringify(doc);
    expect(text).not.toMatch(/contract section|API document \d/i);
  });

  it('says what prose alone said: integer audit amounts, metadata.jackpot, SESSION_REVOKED, reserved grant statuses', () => {
    expect(components.schemas.AuditTransactions!.description).not.toMatch(/decimal string/);
    expect(components.schemas.TransactionMetadata!.description).toContain('jackpot');
    expect(pathOpOf('post', '/v1/operator/players/kick').description).toContain('SESSION_REVOKED');
    expect(components.schemas.GrantStatus!.description).toMatch(/`expired`.*`completed`.*reserved/);
  });
});

const pathOpOf = (method: string, path: string) => (doc.paths as Record<string, Json>)[path]![method] as Json;

describe('the per-type rules of the transaction bodies are in the schema (if/then), exactly as the server applies them', () => {
  const schemas = (doc.components as { schemas: Record<string, Json> }).schemas;
  const rules = (id: string) => ({ allOf: schemas[id]!.allOf as unknown[] });
  const bet = { transactionId: 'tx-1', sessionToken: 'tok', type: 'BET', roundId: 'r-1', playerRef: 'p1', amount: 100, currency: 'EUR', gameId: 'fruit-1' };
  /** Every type with every combination of the three per-type fields present or absent. */
  const variants = ['BET', 'WIN', 'ROLLBACK', 'ADJUSTMENT'].flatMap((type) =>
    [0, 1, 2, 3, 4, 5, 6, 7].map((bits) => ({
      ...bet,
      type,
      ...(bits & 1 ? { roundComplete: true } : {}),
      ...(bits & 2 ? { originalTransactionId: 'tx-0' } : {}),
      ...(bits & 4 ? { direction: 'CREDIT' } : {}),
    })),
  );

  it('ProviderTransactionRequest refuses what the server refuses and accepts what it accepts', () => {
    expect(schemas.ProviderTransactionRequest!.allOf).toBeDefined();
    for (const body of variants) {
      // The schema's superRefine, then the route's refusal of ADJUSTMENT from providers.
      const server = transactionBody.safeParse(body).success && body.type !== 'ADJUSTMENT';
      expect(satisfies(rules('ProviderTransactionRequest'), body), JSON.stringify(body)).toBe(server);
    }
  });

  it('WalletTransactionRequest says which fields each type carries towards the wallet', () => {
    const ok = (body: Json) => satisfies(rules('WalletTransactionRequest'), body);
    const base = { ...bet, roundComplete: false };
    expect(ok(base)).toBe(true);
    expect(ok({ ...base, originalTransactionId: 'tx-0' })).toBe(false);
    expect(ok({ ...base, direction: 'DEBIT' })).toBe(false);
    expect(ok({ ...base, type: 'ROLLBACK' })).toBe(false);
    expect(ok({ ...base, type: 'ROLLBACK', originalTransactionId: 'tx-0' })).toBe(true);
    expect(ok({ ...base, type: 'ADJUSTMENT' })).toBe(false);
    expect(ok({ ...base, type: 'ADJUSTMENT', direction: 'CREDIT' })).toBe(true);
    for (const e of schemas.WalletTransactionRequest!.examples as Json[]) expect(ok(e), JSON.stringify(e)).toBe(true);
    for (const e of schemas.ProviderTransactionRequest!.examples as Json[]) expect(satisfies(rules('ProviderTransactionRequest'), e)).toBe(true);
  });
});

describe('a signing middleware is enough for a generated client; webhooks and the balance passthrough say what they carry', () => {
  const schemes = (doc.components as { securitySchemes: Record<string, Json> }).securitySchemes;
  const SIGNING = ['x-operator-id', 'x-provider-id', 'x-timestamp', 'x-nonce', 'x-signature'];

  it('puts all four signature headers in one security requirement and none in the operations\' parameters', () => {
    for (const r of routes.filter((x) => x.audience === 'operator' || x.audience === 'provider')) {
      const op = pathOpOf(r.method, r.path);
      const params = ((op.parameters as unknown[]) ?? []).map((p) => deref<Json>(p));
      expect(params.filter((p) => p.in === 'header' && SIGNING.includes(String(p.name).toLowerCase())), r.path).toEqual([]);
      const requirement = op.security as Array<Record<string, unknown>>;
      expect(requirement.length, r.path).toBe(1); // one requirement: its schemes apply together
      const headers = Object.keys(requirement[0]!).map((name) => schemes[name]!);
      for (const h of headers) expect(h).toMatchObject({ type: 'apiKey', in: 'header' });
      const idHeader = r.audience === 'operator' ? 'X-Operator-Id' : 'X-Provider-Id';
      expect(headers.map((h) => h.name).sort(), r.path).toEqual([idHeader, 'X-Nonce', 'X-Signature', 'X-Timestamp'].sort());
      expect(op.description, r.path).toContain(idHeader); // also said where Swagger UI shows the operation
    }
  });

  it('gives every webhook its signature headers as typed parameters', () => {
    for (const { where, isWebhook, op } of operations()) {
      if (!isWebhook) continue;
      const params = ((op.parameters as unknown[]) ?? []).map((p) => deref<Json & { schema: Json }>(p)).filter((p) => p.in === 'header');
      expect(params.map((p) => p.name).sort(), where).toEqual(['X-Nonce', 'X-Signature', 'X-Timestamp']);
      for (const p of params) {
        expect(p.required, where).toBe(true);
        expect(p.schema.type, where).toBe('string');
        expect(new RegExp(p.schema.pattern as string ?? '.').test(p.example as string), `${where} ${p.name as string}`).toBe(true);
      }
    }
  });

  it("documents the balance route's other statuses as possibly the wallet's, told apart by X-Wallet-Passthrough", () => {
    const responses = pathOpOf('post', '/v1/wallet/balance').responses as Record<string, Json>;
    for (const [status, r] of Object.entries(responses)) {
      const resolved = deref<{ description: string; headers?: Record<string, Json>; content?: Record<string, { schema: Json }> }>(r);
      expect(resolved.headers?.['X-Wallet-Passthrough'], status).toBeDefined();
      if (status === '200' || status === 'default') {
        expect(resolved.headers!['X-Wallet-Passthrough']!.required, status).toBe(true);
        continue;
      }
      expect(resolved.description, status).toContain(`wallet's own ${status}`);
      expect(resolved.content!['application/json']!.schema, status).toEqual({ $ref: '#/components/schemas/ErrorOrWalletBody' });
    }
  });
});

describe('what redocly.yaml leaves to this file', () => {
  it('documents a 4xx on every operation that takes input (operation-4xx-response is off only for those that take none)', () => {
    const NO_INPUT = ['GET /healthz', 'GET /readyz', 'GET /openapi.json', 'GET /docs', 'GET /console'];
    for (const r of routes) {
      const has4xx = Object.keys(r.responses).some((s) => /^4\d\d$/.test(s));
      expect(has4xx, `${r.method.toUpperCase()} ${r.path}`).toBe(!NO_INPUT.includes(`${r.method.toUpperCase()} ${r.path}`));
    }
  });
});

describe('the hash chain examples are real', () => {
  /** The canonical form as the document and docs/auditors.md state it, written again from the prose. */
  const canonical = (v: unknown): string => {
    if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
    if (v !== null && typeof v === 'object') {
      const keys = Object.keys(v).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical((v as Json)[k])}`).join(',')}}`;
    }
    return JSON.stringify(v);
  };

  it("links each example event of op-1's history as the formula says, from 32 zero bytes", () => {
    let link = Buffer.alloc(32);
    for (const [i, e] of chainExamples.history.entries()) {
      expect(e.count).toBe(i + 1);
      const form = canonical({ stream: e.stream, type: e.type, data: e.data, metadata: e.metadata, position: e.position, recordedAt: e.recordedAt });
      link = createHash('sha256').update(Buffer.concat([link, Buffer.from(form, 'utf8')])).digest();
      expect(e.link, `#${e.count}`).toBe(link.toString('hex'));
    }
    expect(chainExamples.operatorCheckpoint).toMatchObject({ count: 5, link: chainExamples.history[4]!.link, position: chainExamples.history[4]!.position });
  });

  it('signs the example checkpoints with the example public key, whose id is their keyId', () => {
    const key = createPublicKey(CHAIN_PUBLIC_KEY);
    expect(key.asymmetricKeyType).toBe('ed25519');
    expect(createHash('sha256').update(key.export({ type: 'spki', format: 'der' })).digest('hex').slice(0, 16)).toBe(CHAIN_KEY_ID);
    for (const c of [chainExamples.operatorCheckpoint, chainExamples.globalCheckpoint]) {
      const { keyId, signature, ...body } = c;
      expect(keyId).toBe(CHAIN_KEY_ID);
      expect(verify(null, Buffer.from(canonical(body), 'utf8'), key, Buffer.from(signature, 'base64')), JSON.stringify(body)).toBe(true);
    }
  });
});
