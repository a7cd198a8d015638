import { execFile } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../../services/service.ts';
import { OP1, testCatalog } from '../helpers/catalog.ts';
import { createTestEnv, startInProcess, type TestEnv } from '../helpers/service.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

describe('scripts/signed-curl.sh', () => {
  let env: TestEnv;
  let svc: RunningService & { url: string };
  beforeAll(async () => {
    env = await createTestEnv('signedcurl');
    svc = await startInProcess(env, { ROLES: 'api' });
    await svc.ctx.catalog.apply(testCatalog());
  });
  afterAll(async () => {
    await svc?.stop();
    await env?.cleanup();
  });

  // Asynchronous: the service answers from this very process.
  const curl = (...args: string[]) =>
    new Promise<{ status: number; stdout: string }>((resolve) => {
      execFile('bash', ['scripts/signed-curl.sh', ...args], { cwd: ROOT, timeout: 20_000, env: { ...process.env, SW_URL: svc.url, SW_ID: OP1.id, SW_SECRET: OP1.secret } }, (err, stdout) =>
        resolve({ status: err ? Number((err as { code?: unknown }).code ?? 1) : 0, stdout }),
      );
    });

  it('takes curl options after the path when there is no body (GET /path -i)', async () => {
    const r = await curl('GET', '/v1/operator/games', '-i');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^HTTP\/1\.1 200/);
  });

  it('signs a body, with curl options after it', async () => {
    const r = await curl('POST', '/v1/operator/players/kick', '{"playerRef":"curl-p"}', '-i');
    expect(r.stdout).toMatch(/^HTTP\/1\.1 200/);
    expect(r.stdout).toContain('"revokedCount":0');
  });
});
