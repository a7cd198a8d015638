#!/usr/bin/env node
// Verifies an operator's own history against the aggregator's signed checkpoints (contract section 10).
// Standalone on purpose: Node 18+ and its crypto only, none of the service's code, so an operator can read
// all of it before trusting it. Usage: node scripts/verify-history.mjs --help
import { createHash, createHmac, createPublicKey, randomBytes, verify } from 'node:crypto';
import { accessSync, constants, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';

const USAGE = `usage: node scripts/verify-history.mjs --url URL --operator-id ID --public-key FILE [--public-key FILE...]
                                       [--kept FILE] [--save FILE]
       (the operator's secret in the environment variable OPERATOR_SECRET)

Fetches your events (GET /v1/operator/history/events) and your signed checkpoints
(GET /v1/operator/history/checkpoints), recomputes your hash chain from the first event, and checks
every link the service sent, every checkpoint's link at its count, and every checkpoint's Ed25519
signature with the public key(s) you give (the PEM the aggregator published; one file per key after a
rotation).

  --url URL           the aggregator's base URL, e.g. https://aggregator.example
  --operator-id ID    your operator id (X-Operator-Id)
  --public-key FILE   a public key (PEM) the checkpoints may be signed with; repeat for former keys
  --kept FILE         checkpoints you kept from earlier runs (a JSON array, as --save writes it): each must
                      still be served as it was and match your recomputed chain. This is what catches a
                      history rewritten and signed again by whoever holds the key.
  --save FILE         after a run that holds, write every checkpoint checked (the kept ones and the new) to
                      FILE, to pass as --kept next time
  --help              this text

Exit status: 0 every link and checkpoint holds, 1 the history breaks (the first break is named) or a
checkpoint's signature is not valid, 2 nothing was verified: bad usage, the service could not be asked (or
answered what is not its history's pages), or there is no event and no checkpoint of yours yet.`;

function usage(message) {
  process.stderr.write(`verify-history: ${message}\n\n${USAGE}\n`);
  process.exit(2);
}

let opts;
try {
  opts = parseArgs({
    options: {
      url: { type: 'string' },
      'operator-id': { type: 'string' },
      'public-key': { type: 'string', multiple: true },
      kept: { type: 'string' },
      save: { type: 'string' },
      help: { type: 'boolean' },
    },
    allowPositionals: false,
  }).values;
} catch (err) {
  usage(err.message);
}
if (opts.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
if (!opts.url || !/^https?:\/\//.test(opts.url)) usage('--url must be an http(s) URL');
if (!opts['operator-id']) usage('--operator-id is needed');
if (!opts['public-key'] || opts['public-key'].length === 0) usage('--public-key is needed');
const secret = process.env.OPERATOR_SECRET;
if (!secret) usage('set OPERATOR_SECRET to your operator secret');
const keys = new Map();
for (const file of opts['public-key']) {
  let key;
  try {
    key = createPublicKey(readFileSync(file, 'utf8'));
  } catch (err) {
    usage(`--public-key ${file}: not a readable public key (${err.message})`);
  }
  if (key.asymmetricKeyType !== 'ed25519') usage(`--public-key ${file}: an Ed25519 key is needed, this is ${key.asymmetricKeyType}`);
  // The key id checkpoints name: the first 16 hex digits of the SHA-256 of the key's DER (SPKI).
  keys.set(createHash('sha256').update(key.export({ type: 'spki', format: 'der' })).digest('hex').slice(0, 16), key);
}

let kept = [];
if (opts.kept) {
  try {
    kept = JSON.parse(readFileSync(opts.kept, 'utf8'));
  } catch (err) {
    usage(`--kept ${opts.kept}: not a readable JSON file (${err.message})`);
  }
  if (!Array.isArray(kept) || kept.some((c) => typeof c?.count !== 'number' || typeof c?.link !== 'string')) usage(`--kept ${opts.kept}: expected a JSON array of checkpoints`);
}

// Where --save will write, checked before anything is fetched: a run that holds must not end in a crash.
if (opts.save) {
  const target = existsSync(opts.save) ? opts.save : dirname(opts.save);
  try {
    if (existsSync(opts.save) && !statSync(opts.save).isFile()) throw new Error('not a file');
    accessSync(target, constants.W_OK);
  } catch (err) {
    usage(`--save ${opts.save}: cannot be written (${err.code ?? err.message})`);
  }
}

function unusable(message) {
  process.stderr.write(`verify-history: ${message}\n`);
  process.exit(2);
}

/** GET a path of the service, signed as contract section 3 says (the target is the path, without the query). */
async function get(pathAndQuery) {
  const timestamp = String(Math.floor(Date.now() / 1000));
  const nonce = randomBytes(16).toString('hex');
  const target = pathAndQuery.split('?')[0];
  const bodyHash = createHash('sha256').update('').digest('hex');
  const signature = createHmac('sha256', secret).update([timestamp, nonce, 'GET', target, bodyHash].join('\n')).digest('hex');
  let res;
  try {
    res = await fetch(new URL(pathAndQuery, opts.url), {
      headers: { 'X-Operator-Id': opts['operator-id'], 'X-Timestamp': timestamp, 'X-Nonce': nonce, 'X-Signature': signature },
    });
  } catch (err) {
    unusable(`cannot reach ${opts.url}: ${err.message}`);
  }
  const text = await res.text();
  if (res.status !== 200) unusable(`GET ${pathAndQuery} answered ${res.status}: ${text.slice(0, 300)}`);
  try {
    return JSON.parse(text);
  } catch {
    unusable(`GET ${pathAndQuery} answered 200 with what is not JSON: ${text.slice(0, 300)}`);
  }
}

/** The array `field` of a page of the service's history (an answer of another shape is not its history). */
async function page(pathAndQuery, field) {
  const body = await get(pathAndQuery);
  if (body === null || typeof body !== 'object' || !Array.isArray(body[field])) unusable(`GET ${pathAndQuery} answered 200 without the list "${field}": is --url the aggregator?`);
  return body[field];
}

/** JSON with every object's keys in ascending UTF-16 order, no whitespace: the chain's canonical form. */
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).filter((k) => value[k] !== undefined).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** link(n) = SHA-256(link(n-1) as 32 bytes || canonical {stream, type, data, metadata, position, recordedAt}). */
function nextLink(previous, e) {
  const form = canonical({ stream: e.stream, type: e.type, data: e.data, metadata: e.metadata, position: e.position, recordedAt: e.recordedAt });
  return createHash('sha256').update(previous).update(form, 'utf8').digest();
}

function broken(message) {
  process.stdout.write(`history broken: ${message}\n`);
  process.exit(1);
}

const checkpoints = [];
for (let after = 0; ; ) {
  const served = await page(`/v1/operator/history/checkpoints?after=${after}&limit=1000`, 'checkpoints');
  checkpoints.push(...served);
  if (served.length < 1000) break;
  after = served.at(-1).count;
}
// Every checkpoint must be signed by a key you trust, over exactly {operatorId, position, link, count, signedAt}.
for (const c of checkpoints) {
  const key = keys.get(c.keyId);
  if (!key) broken(`the checkpoint at count ${c.count} is signed with key ${c.keyId}, which is none of the keys you gave`);
  const body = { operatorId: c.operatorId, position: c.position, link: c.link, count: c.count, signedAt: c.signedAt };
  if (c.operatorId !== opts['operator-id']) broken(`the checkpoint at count ${c.count} is operator ${c.operatorId}'s, not yours`);
  if (!verify(null, Buffer.from(canonical(body), 'utf8'), key, Buffer.from(c.signature, 'base64'))) {
    broken(`the signature of the checkpoint at count ${c.count} (signed ${c.signedAt}) is not valid`);
  }
}
// A checkpoint you kept must still be served exactly as it was: the service may add checkpoints, never change one.
const served = new Map(checkpoints.map((c) => [c.count, c]));
for (const k of kept) {
  const now = served.get(k.count);
  if (!now) broken(`the checkpoint you kept at count ${k.count} (signed ${k.signedAt}) is no longer served`);
  if (now.link !== k.link || now.position !== k.position || now.signedAt !== k.signedAt || now.signature !== k.signature) {
    broken(`the checkpoint you kept at count ${k.count} (signed ${k.signedAt}) is served differently now: the history was rewritten and signed again`);
  }
}
const byCount = new Map(checkpoints.map((c) => [c.count, c]));

let link = Buffer.alloc(32);
let count = 0;
let checked = 0;
for (;;) {
  const events = await page(`/v1/operator/history/events?after=${count}&limit=1000`, 'events');
  for (const e of events) {
    if (e.count !== count + 1) broken(`event #${count + 1} is missing (the service sent #${e.count} next)`);
    count = e.count;
    link = nextLink(link, e);
    if (link.toString('hex') !== e.link) broken(`event #${count} (position ${e.position}, stream ${e.stream}) does not make the link the service sent: the event or one before it is not what was linked`);
    const c = byCount.get(count);
    if (c) {
      if (c.link !== e.link || c.position !== e.position) broken(`event #${count} (position ${e.position}) does not make the link of the checkpoint signed ${c.signedAt}`);
      checked += 1;
    }
  }
  if (events.length < 1000) break;
}
const last = checkpoints.at(-1);
if (last && count < last.count) broken(`the service sent ${count} events, but a checkpoint signed ${last.signedAt} covers ${last.count}: events are missing at the end`);
// (With a checkpoint, no events broke the history above.)
if (count === 0) unusable('no events and no checkpoints of yours yet: nothing to verify');
if (opts.save) {
  writeFileSync(opts.save, `${JSON.stringify(checkpoints, null, 2)}\n`);
}
process.stdout.write(
  `history intact: ${count} events recomputed from the first; ${checked} of ${checkpoints.length} signed checkpoint(s) checked against them` +
    (last ? `, the latest at count ${last.count} (signed ${last.signedAt}, key ${last.keyId})` : ' (none signed yet)') +
    (kept.length > 0 ? `; the ${kept.length} you kept are unchanged` : '') +
    (opts.save ? `; saved to ${opts.save}` : '') +
    '\n',
);
