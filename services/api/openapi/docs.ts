import { createRequire } from 'node:module';
import path from 'node:path';
import express, { Router } from 'express';
import { openApiDocument, TITLE } from './document.ts';

const uiDir = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

/** The swagger-ui-dist files the page loads; nothing else of the package is served. */
const ASSETS = new Set(['/swagger-ui.css', '/swagger-ui-bundle.js', '/favicon-32x32.png', '/favicon-16x16.png']);

/**
 * Swagger UI's request interceptor: it turns the Authorize dialog into a signer. Authorize with your id
 * (X-Operator-Id or X-Provider-Id) and your secret in the X-Signature box; X-Timestamp and X-Nonce may
 * hold anything. Each "Try it out" request then gets a fresh timestamp and nonce and the HMAC computed in
 * the browser (WebCrypto), and the secret itself is never sent: if the page cannot sign (WebCrypto needs
 * https or localhost) X-Signature is "unsigned" and the service answers 401. Plain browser JavaScript;
 * test/docs/docs-signing.unit.test.ts runs it in Node against shared/http/signature.ts.
 */
export const SIGN_REQUEST_JS = `async function signRequest(req) {
  const headers = req.headers || (req.headers = {});
  const keyOf = (name) => Object.keys(headers).find((k) => k.toLowerCase() === name);
  const signatureKey = keyOf('x-signature');
  if (signatureKey === undefined) return req;
  const secret = String(headers[signatureKey]);
  for (const name of ['x-signature', 'x-timestamp', 'x-nonce']) {
    const k = keyOf(name);
    if (k !== undefined) delete headers[k];
  }
  const hex = (buf) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');
  try {
    const subtle = globalThis.crypto && globalThis.crypto.subtle;
    if (!subtle) throw new Error('WebCrypto is unavailable: open this page over https or on localhost');
    if (req.body !== undefined && req.body !== null && typeof req.body !== 'string') req.body = JSON.stringify(req.body);
    const body = typeof req.body === 'string' ? req.body : '';
    const url = new URL(req.url, globalThis.location ? globalThis.location.href : undefined);
    const enc = new TextEncoder();
    const timestamp = String(Math.floor(Date.now() / 1000));
    const nonce = hex(globalThis.crypto.getRandomValues(new Uint8Array(16)));
    const bodyHash = hex(await subtle.digest('SHA-256', enc.encode(body)));
    const toSign = [timestamp, nonce, String(req.method || 'GET').toUpperCase(), url.pathname, bodyHash].join('\\n');
    const key = await subtle.importKey('raw', enc.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
    headers['X-Timestamp'] = timestamp;
    headers['X-Nonce'] = nonce;
    headers['X-Signature'] = hex(await subtle.sign('HMAC', key, enc.encode(toSign)));
  } catch (err) {
    headers['X-Signature'] = 'unsigned';
    console.warn('The docs page could not sign this request: ' + (err && err.message));
  }
  return req;
}`;

const page = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>${TITLE}</title>
  <link rel="stylesheet" href="/docs/swagger-ui.css">
  <link rel="icon" type="image/png" href="/docs/favicon-32x32.png" sizes="32x32">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/swagger-ui-bundle.js"></script>
  <script>
    ${SIGN_REQUEST_JS}
    window.ui = SwaggerUIBundle({
      requestInterceptor: signRequest,
      url: '/openapi.json',
      dom_id: '#swagger-ui',
      deepLinking: true,
      validatorUrl: null,
      defaultModelsExpandDepth: 0,
      presets: [SwaggerUIBundle.presets.apis],
      layout: 'BaseLayout',
    });
  </script>
</body>
</html>
`;

/**
 * GET /openapi.json and GET /docs (Swagger UI from node_modules: the machines it runs on may have no
 * internet, so nothing comes from a CDN). Unauthenticated: the document holds no secrets.
 */
export function docsRoutes(): Router {
  const router = Router();
  const assets = express.static(uiDir, { index: false, redirect: false, fallthrough: true });
  router.get('/openapi.json', (_req, res) => {
    res.json(openApiDocument());
  });
  router.get('/docs', (_req, res) => {
    res.type('html').send(page);
  });
  router.use('/docs', (req, res, next) => (ASSETS.has(req.path) ? assets(req, res, next) : next()));
  return router;
}
