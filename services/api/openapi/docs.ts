import { createRequire } from 'node:module';
import path from 'node:path';
import express, { Router } from 'express';
import { openApiDocument, TITLE } from './document.ts';

const uiDir = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

/** The swagger-ui-dist files the page loads; nothing else of the package is served. */
const ASSETS = new Set(['/swagger-ui.css', '/swagger-ui-bundle.js', '/favicon-32x32.png', '/favicon-16x16.png']);

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
    window.ui = SwaggerUIBundle({
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
