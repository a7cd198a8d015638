import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import express, { Router, type NextFunction, type Request, type Response } from 'express';

/**
 * The back-office console's files (issue #23): a single page under /console, its ES modules and style
 * sheet under /console/assets, and Chart.js's UMD build under /console/vendor, all from this package
 * (the machines it runs on may have no internet: no CDN, no web fonts). Unauthenticated: the page holds
 * no data; everything it shows comes from the bearer routes under /v1/admin and /v1/audit, and the admin
 * token stays in the tab's sessionStorage, sent as `Authorization: Bearer`, never in a URL.
 */

const PUBLIC_DIR = path.join(import.meta.dirname, 'public');
const INDEX = path.join(PUBLIC_DIR, 'index.html');

/** The asset files served, by extension; index.html is served at /console only. */
const ASSET_FILE = /^\/(?:[a-z0-9-]+\/)*[a-z0-9-]+\.(?:js|css|svg)$/;

/** The page loads nothing from elsewhere, runs no inline script or style, and is never framed. */
export const CONSOLE_CSP = "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'";

const VENDOR_FILES: Record<string, string> = { '/chart.umd.js': 'chart.umd.js', '/chart.umd.js.map': 'chart.umd.js.map' };

/**
 * Chart.js's dist folder. Its package exports only ".", "./auto" and "./helpers", so the UMD build is
 * found beside the entry point that `require` resolves (dist/chart.cjs). Looked up on first use: a
 * missing package leaves the rest of the service running and the vendor route answering why.
 */
let chartDir: string | null | undefined;
function chartJsDir(): string | null {
  if (chartDir !== undefined) return chartDir;
  try {
    const dir = path.dirname(createRequire(import.meta.url).resolve('chart.js'));
    chartDir = existsSync(path.join(dir, 'chart.umd.js')) ? dir : null;
  } catch {
    chartDir = null;
  }
  return chartDir;
}

function securityHeaders(_req: Request, res: Response, next: NextFunction): void {
  res.setHeader('Content-Security-Policy', CONSOLE_CSP);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'no-referrer');
  next();
}

/** GET /console (and /console/), /console/assets/*, /console/vendor/chart.umd.js. */
export function consoleStatic(): Router {
  const router = Router();
  const assets = express.static(PUBLIC_DIR, {
    index: false,
    redirect: false,
    fallthrough: true,
    dotfiles: 'deny',
    // Revalidated on every load (ETag/Last-Modified): a new release's modules are never mixed with old ones.
    setHeaders: (res) => res.setHeader('Cache-Control', 'no-cache'),
  });

  router.use('/console', securityHeaders);
  const sendIndex = (_req: Request, res: Response, next: NextFunction) => {
    res.setHeader('Cache-Control', 'no-store');
    res.type('html').sendFile(INDEX, (err) => {
      if (err) next(err);
    });
  };
  // Express's routing is not strict: '/console' also matches '/console/'.
  router.get('/console', sendIndex);
  router.use('/console/assets', (req, res, next) => ((req.method === 'GET' || req.method === 'HEAD') && ASSET_FILE.test(req.path) ? assets(req, res, next) : next()));
  router.get('/console/vendor/{*file}', (req, res, next) => {
    const file = VENDOR_FILES[req.path.slice('/console/vendor'.length)];
    if (file === undefined) return next();
    const dir = chartJsDir();
    if (dir === null) {
      res.status(500).type('text/plain').send('chart.js is not installed: run npm ci');
      return;
    }
    res.setHeader('Cache-Control', 'no-cache');
    res.type(file.endsWith('.map') ? 'application/json' : 'text/javascript').sendFile(path.join(dir, file), (err) => {
      if (err) next(err);
    });
  });
  return router;
}
