import type { z } from 'zod';

/** The shapes the route table is written in; document.ts turns them into OpenAPI 3.1 objects. */

export type Media = 'application/json' | 'text/plain' | 'text/html' | 'text/csv' | 'text/javascript' | 'application/x-pem-file';

export interface HeaderSpec {
  description: string;
  schema: z.ZodType;
  required?: boolean;
  example?: unknown;
}

export interface ResponseSpec {
  description: string;
  /** Body schema per media type: the same zod schemas the tests check real responses with. */
  content?: Partial<Record<Media, z.ZodType>>;
  headers?: Record<string, HeaderSpec>;
  /** An example body per media type; a JSON body without one shows its schema's first example. */
  examples?: Partial<Record<Media, unknown>>;
}

/** A response defined once under components.responses (see components.ts). */
export interface SharedResponseRef {
  shared: string;
}

export type ResponseEntry = ResponseSpec | SharedResponseRef;

export type StatusKey = number | 'default';

export type Responses = { [status: number]: ResponseEntry; default?: ResponseEntry };

/** Who calls a route, which decides its authentication (security scheme and signing headers). */
export type Audience = 'operator' | 'provider' | 'admin' | 'public';

export interface RequestBodySpec {
  /** The zod schema the router validates the body with (never a copy of it). */
  schema: z.ZodType;
  description?: string;
  example?: unknown;
  /** Several named examples (e.g. one per transaction type), instead of `example`. */
  examples?: Record<string, { summary: string; value: unknown }>;
}

export interface OperationSpec {
  operationId: string;
  summary: string;
  description: string;
  /** Path parameters: the router's own schema where it validates them. */
  pathParams?: z.ZodObject;
  /** Query parameters: the router's own query schema. */
  query?: z.ZodObject;
  paramDescriptions?: Record<string, string>;
  /** An example value for each path and query parameter. */
  paramExamples?: Record<string, unknown>;
  body?: RequestBodySpec;
  responses: Responses;
}

export interface RouteSpec extends OperationSpec {
  tag: string;
  method: 'get' | 'post' | 'put';
  /** OpenAPI path template, e.g. /v1/operator/free-spins/grants/{id}. */
  path: string;
  audience: Audience;
}

/** Something a partner implements and the service calls (OpenAPI 3.1 `webhooks`). */
export interface WebhookSpec extends OperationSpec {
  name: string;
  method: 'get' | 'post';
  /** Which secret the service signs the call with. */
  partner: 'operator' | 'provider';
}

export const isShared = (r: ResponseEntry): r is SharedResponseRef => 'shared' in r;
