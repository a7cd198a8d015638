import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import { AppError, badRequest } from '../errors.ts';
import { repeatedName } from './json-keys.ts';

export const BODY_LIMIT = '64kb';
/** PUT /v1/admin/catalog's bound: a catalog of 100,000 blocked players is about 3 MB. */
export const CATALOG_BODY_LIMIT = '8mb';

/** Keeps the exact bytes (the signature covers them); 413 past 64 KiB. */
export const rawBody: RequestHandler[] = [
  express.raw({ type: () => true, limit: BODY_LIMIT }),
  (req: Request, _res: Response, next: NextFunction) => {
    req.rawBody = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    req.body = undefined;
    next();
  },
];

/** How deep a body's objects and arrays may nest (the body itself is the first level). */
export const MAX_JSON_DEPTH = 64;

/**
 * Parses the already-verified raw bytes as JSON; an empty body stays undefined. Bytes that are not
 * UTF-8 are refused, not read with U+FFFD in their place: two transactionIds differing only in such
 * bytes would read as one, the second answered as the first's resubmission.
 */
export function jsonFromRaw(req: Request, res: Response, next: NextFunction): void {
  const raw = req.rawBody;
  if (raw && raw.length > 0) {
    refuseNonUtf8(req, res, raw);
    const text = raw.toString('utf8');
    try {
      req.body = parseJson(text);
    } catch (err) {
      if (err instanceof AppError) throw err;
      throw badRequest('request body is not valid JSON');
    }
    // Deeper than the limit needs more brackets than that: most bodies are never walked.
    if (brackets(text) > MAX_JSON_DEPTH && deeperThan(req.body, MAX_JSON_DEPTH)) throw tooDeep();
    refuseRepeatedNames(text);
    // Such text can only come as a raw NUL or a \u escape: most bodies are never walked.
    if ((text.includes('\\u') || text.includes('\0')) && holdsUnstorableText(req.body)) throw unstorable();
  }
  next();
}

/** express.json's `verify` (the admin routes): the same refusal of bytes that are not UTF-8 as jsonFromRaw's. */
export function refuseNonUtf8(_req: unknown, _res: unknown, raw: Buffer): void {
  if (!isUtf8(raw)) throw badRequest('request body is not valid UTF-8');
}

/** express.json's verify (the admin routes): refuses what is not UTF-8, and keeps the text for refuseUnstorableText. */
export function refuseNonUtf8AndKeep(req: IncomingMessage, res: unknown, raw: Buffer): void {
  refuseNonUtf8(req, res, raw);
  // The same object express hands on as the route's Request.
  (req as Request).rawBody = raw;
}

/**
 * A parsed body's text that gives a name twice in one object, at any depth: read with the last value, it may
 * mean another thing to its sender (`"amount":100,…,"amount":5`). Only for text already parsed as JSON.
 */
function refuseRepeatedNames(text: string): void {
  const repeated = repeatedName(text);
  if (repeated !== undefined) throw badRequest(`body: the name "${repeated.slice(0, 40)}" is given twice in one object; give each once`);
}

/** After express.json (the admin routes): the same refusals, on the parsed body. */
export function refuseUnstorableText(req: Request, _res: Response, next: NextFunction): void {
  if (deeperThan(req.body, MAX_JSON_DEPTH)) throw tooDeep();
  if (holdsUnstorableText(req.body)) throw unstorable();
  if (req.rawBody !== undefined && req.rawBody.length > 0) refuseRepeatedNames(req.rawBody.toString('utf8'));
  next();
}

/**
 * Refused before anything walks the body recursively (the metadata's size check, the text check, the
 * record's JSON): nested thousands deep, each would throw RangeError, an internal error.
 */
const tooDeep = () => badRequest(`body: nested deeper than ${MAX_JSON_DEPTH} levels`);

function brackets(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x7b || c === 0x5b) n++; // { [
  }
  return n;
}

/** Whether objects and arrays nest deeper than `max` levels in `value`, walked without recursion. */
function deeperThan(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 1]];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const [v, depth] = top;
    if (v === null || typeof v !== 'object') continue;
    if (depth > max) return true;
    for (const child of Object.values(v)) stack.push([child, depth + 1]);
  }
  return false;
}

const unstorable = () => badRequest('body: text holds U+0000 or a lone surrogate, which cannot be stored');

/**
 * A path or query holding U+0000 (written %00; a request line cannot hold it raw): Postgres cannot take
 * such text as a parameter, and the lookup would be an internal error. Refused after the caller's
 * credentials are checked, on every route. (A lone surrogate cannot come out of a URL: its UTF-8 bytes
 * do not decode, and stay as written.)
 */
export function refuseUnstorableUrl(req: Request, _res: Response, next: NextFunction): void {
  if (req.originalUrl.includes('%00')) throw badRequest('url: text holds U+0000, which cannot be stored');
  next();
}

/**
 * A number token (after `:`, `,` or `[`) of 16 characters or more of digits and its point, or with an
 * exponent: the only ones that may change (any decimal of 15 significant digits or fewer round-trips
 * through a double). A string never matches (its text follows a quote); a false match only costs the
 * checked parse.
 */
const MAYBE_INEXACT = /[:,[]\s*-?(?:[\d.]{16}|[\d.]+[eE])/;

/** JSON.parse, refusing a number a double would change (exactNumbers); most bodies are parsed without the check, which only a long number or one with an exponent needs. */
export function parseJson(text: string): unknown {
  return MAYBE_INEXACT.test(text) ? JSON.parse(text, exactNumbers) : JSON.parse(text);
}

/**
 * JSON.parse's reviver (and express.json's) refusing a number that would be passed on as another decimal
 * number: read as a double and written in its shortest form, 12345678901234567891 becomes
 * 12345678901234567000, 100.0000000000000001 becomes 100, 1e-400 becomes 0, 0.10000000000000001 becomes
 * 0.1, where amounts must be exact integers and a transaction's metadata is passed on unchanged. The same
 * value written otherwise (1.50, 1e2) passes, as 1.5 and 100. Needs the parse's source text (Node.js 22
 * and later); without it, nothing is checked. (Thrown inside express.json, the error loses its own
 * fields to body-parser, which sets 400 again: errors.ts answers it as this AppError.)
 */
export function exactNumbers(key: string, value: unknown, context?: { source?: string }): unknown {
  if (typeof value === 'number' && context?.source !== undefined && !sameDecimal(context.source, String(value))) {
    const passed = Number.isFinite(value) ? String(value) : 'null';
    throw badRequest(
      `body: the number ${context.source.slice(0, 40)}${key !== '' && !/^\d+$/.test(key) ? ` (at "${key.slice(0, 40)}")` : ''} cannot be passed on unchanged: it would reach the wallet as ${passed} (numbers are read as doubles and written in their shortest form); send such an id as a string`,
    );
  }
  return value;
}

/** Whether two number texts (JSON's, or JavaScript's String(number)) have the same decimal value. */
export function sameDecimal(a: string, b: string): boolean {
  const x = decimalOf(a);
  const y = decimalOf(b);
  return x !== undefined && y !== undefined && x.negative === y.negative && x.digits === y.digits && x.exponent === y.exponent;
}

/** A number text as sign, significant digits (no leading or trailing zero) and the power of ten of the last; zero is positive, with no digits. */
function decimalOf(text: string): { negative: boolean; digits: string; exponent: number } | undefined {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (!m) return undefined;
  const fraction = m[3] ?? '';
  let digits = (m[2]! + fraction).replace(/^0+/, '');
  let exponent = Number(m[4] ?? 0) - fraction.length;
  const trailing = /0*$/.exec(digits)![0].length;
  digits = digits.slice(0, digits.length - trailing);
  exponent += trailing;
  return digits === '' ? { negative: false, digits: '', exponent: 0 } : { negative: m[1] === '-', digits, exponent };
}

/** U+0000, or a surrogate that is not half of a pair: Postgres text and jsonb refuse both (contract 8, rule 6). */
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Whether Postgres can hold `text` (no U+0000, no lone surrogate): for text that reaches a query by another way than a body. */
export const isStorableText = (text: string): boolean => !UNSTORABLE.test(text);

function holdsUnstorableText(value: unknown): boolean {
  if (typeof value === 'string') return UNSTORABLE.test(value);
  if (Array.isArray(value)) return value.some(holdsUnstorableText);
  if (value !== null && typeof value === 'object') {
    return Object.entries(value).some(([k, v]) => UNSTORABLE.test(k) || holdsUnstorableText(v));
  }
  return false;
}
