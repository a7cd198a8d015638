import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sign, signingString } from '../../shared/http/signature.ts';
import { OP1, testCatalog } from '../helpers/catalog.ts';
import { createTestEnv, startInProcess, type TestEnv } from '../helpers/service.ts';

const run = promisify(execFile);
const DOC = path.resolve(import.meta.dirname, '../../docs/signing.md');

/** The fenced block of `lang` whose first line is the marker comment `signing-snippet: <name>`. */
function snippet(markdown: string, lang: string, name: string): string {
  const blocks = [...markdown.matchAll(/^```(\w+)\n([\s\S]*?)^```$/gm)];
  const found = blocks.filter(([, l, code]) => l === lang && code!.split('\n')[0]!.includes(`signing-snippet: ${name}`));
  if (found.length !== 1) throw new Error(`docs/signing.md: expected one \`\`\`${lang} block marked "signing-snippet: ${name}", found ${found.length}`);
  return found[0]![2]!;
}

const python = ['/usr/bin/python3', 'python3'].find((p) => p === 'python3' || existsSync(p))!;

describe('docs/signing.md', () => {
  let env: TestEnv;
  let svc: Awaited<ReturnType<typeof startInProcess>>;
  let doc: string;
  let dir: string;

  beforeAll(async () => {
    doc = await readFile(DOC, 'utf8');
    dir = await mkdtemp(path.join(tmpdir(), 'signing-snippets-'));
    env = await createTestEnv('signing_snippets');
    svc = await startInProcess(env, { ROLES: 'api' });
    await svc.ctx.catalog.apply(testCatalog());
  });
  afterAll(async () => {
    await svc?.stop();
    await env?.cleanup();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const partner = () => ({ ...process.env, SW_URL: svc.url, SW_ID: OP1.id, SW_SECRET: OP1.secret });

  /** Each snippet prints "<status> <body>" for GET /v1/operator/games, then for a launch. */
  function expectAccepted(stdout: string): void {
    const lines = stdout.trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^200 \[/);
    expect(JSON.parse(lines[0]!.slice(4))).toEqual(expect.arrayContaining([expect.objectContaining({ gameId: 'fruit-1' })]));
    expect(lines[1]).toMatch(/^200 \{/);
    expect(JSON.parse(lines[1]!.slice(4))).toEqual({ launchUrl: expect.stringContaining('token='), sessionToken: expect.any(String) });
  }

  it('the Node snippet signs requests the service accepts', async () => {
    const file = path.join(dir, 'snippet.mjs');
    await writeFile(file, snippet(doc, 'js', 'node'));
    const { stdout } = await run(process.execPath, [file], { env: partner(), timeout: 20_000 });
    expectAccepted(stdout);
  });

  it('the Python snippet signs requests the service accepts', async () => {
    const file = path.join(dir, 'snippet.py');
    await writeFile(file, snippet(doc, 'python', 'python'));
    const { stdout } = await run(python, [file], { env: partner(), timeout: 20_000 });
    expectAccepted(stdout);
  });

  it('the worked examples are what the service computes', () => {
    const kick = { timestamp: '1795000000', nonce: 'n-0001', method: 'POST', target: '/v1/operator/players/kick', body: '{"playerRef":"p1"}' };
    const games = { timestamp: '1795000000', nonce: 'n-0002', method: 'GET', target: '/v1/operator/games', body: '' };
    const balance = { timestamp: '1795000000', nonce: '9f2c4e1ab0d34c5e8f7a6b5c4d3e2f10', method: 'GET', target: '/v1/wallet/balance?playerRef=p1', body: '' };
    for (const input of [kick, games, balance]) {
      const shown = '```\n' + signingString(input).split('\n').join('\\n\n') + '\n```';
      expect(doc).toContain(shown);
      expect(doc).toContain(sign('operator-secret', input));
    }
    expect(doc).toContain(`That is ${Buffer.byteLength(signingString(kick))} bytes`);
  });
});
