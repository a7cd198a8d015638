import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningService } from '../../services/service.ts';
import { OP1, OP2, PROV_A, testCatalog } from '../helpers/catalog.ts';
import { ADMIN_TOKEN, createTestEnv, startInProcess, type TestEnv } from '../helpers/service.ts';
import { freshNonce, signedRequest, signRequest, toTestResponse } from '../helpers/signing.ts';

/** Contract section 3, rule by rule, through HTTP against a running service. */
describe('signed requests (contract section 3)', () => {
  let env: TestEnv;
  let svc: RunningService & { url: string };
  // An operator route that exists for nobody yet answers 404 once the request is authenticated.
  const PATH = '/v1/operator/probe';

  beforeAll(async () => {
    env = await createTestEnv('sig');
    svc = await startInProcess(env, { ROLES: 'api' });
    const res = await fetch(`${svc.url}/v1/admin/catalog`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(testCatalog()),
    });
    expect(res.status).toBe(200);
  });
  afterAll(async () => {
    await svc?.stop();
    await env?.cleanup();
  });

  const send = async (opts: Parameters<typeof signRequest>[0]) => {
    const { headers, body, method } = signRequest(opts);
    return toTestResponse(await fetch(svc.url + opts.path, { method, headers, ...(body ? { body } : {}) }));
  };

  it('passes a correctly signed request through to routing', async () => {
    const res = await signedRequest(svc.url, { path: PATH, as: OP1 });
    expect(res.status).toBe(404);
    expect(res.json).toEqual({ error: 'not found' });
  });

  it.each([
    ['missing', undefined],
    ['empty', ''],
    ['65 characters', 'n'.repeat(65)],
  ])('refuses a %s nonce with 400 invalid nonce (JSON)', async (_label, nonce) => {
    const res = await send({ path: PATH, as: OP1, headers: { 'x-nonce': nonce } });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.json).toEqual({ error: 'invalid nonce' });
  });

  it('accepts a 64-character nonce', async () => {
    const res = await signedRequest(svc.url, { path: PATH, as: OP1, nonce: 'a'.repeat(64) });
    expect(res.status).toBe(404);
  });

  const now = () => Math.floor(Date.now() / 1000);
  const invalidSignatureCases: Array<[string, () => Parameters<typeof signRequest>[0]]> = [
    ['no signature', () => ({ path: PATH, as: OP1, headers: { 'x-signature': undefined } })],
    ['a wrong signature', () => ({ path: PATH, as: OP1, headers: { 'x-signature': 'ab'.repeat(32) } })],
    ['no operator id', () => ({ path: PATH, as: OP1, headers: { 'x-operator-id': undefined } })],
    ['an unknown operator', () => ({ path: PATH, as: { ...OP1, id: 'op-unknown' } })],
    ["another operator's secret", () => ({ path: PATH, as: { ...OP1, secret: OP2.secret } })],
    ['no timestamp', () => ({ path: PATH, as: OP1, headers: { 'x-timestamp': undefined } })],
    ['a timestamp that is not a number', () => ({ path: PATH, as: OP1, headers: { 'x-timestamp': 'yesterday' } })],
    ['a timestamp 301 s old', () => ({ path: PATH, as: OP1, timestamp: now() - 301 })],
    ['a timestamp 301 s ahead', () => ({ path: PATH, as: OP1, timestamp: now() + 301 })],
    ['a provider signing an operator route', () => ({ path: PATH, as: PROV_A })],
  ];

  const expectInvalidSignature = (res: { status: number; headers: Headers; text: string }) => {
    expect(res.status).toBe(401);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(res.text).toBe('invalid signature');
  };

  it.each(invalidSignatureCases)('refuses %s with 401 plain-text "invalid signature"', async (_label, opts) => {
    expectInvalidSignature(await send(opts()));
  });

  it('refuses a signature in upper-case hex (the contract says lowercase)', async () => {
    const { headers } = signRequest({ path: PATH, as: OP1 });
    const res = await fetch(svc.url + PATH, { headers: { ...headers, 'x-signature': headers['x-signature']!.toUpperCase() } });
    expectInvalidSignature(await toTestResponse(res));
  });

  it('refuses a request whose method changed after signing', async () => {
    const { headers, body } = signRequest({ path: PATH, as: OP1, method: 'POST', body: {} });
    expectInvalidSignature(await toTestResponse(await fetch(svc.url + PATH, { method: 'PUT', headers, body: body! })));
  });

  it('accepts a timestamp inside the window on either side', async () => {
    const now = Math.floor(Date.now() / 1000);
    expect((await signedRequest(svc.url, { path: PATH, as: OP1, timestamp: now - 290 })).status).toBe(404);
    expect((await signedRequest(svc.url, { path: PATH, as: OP1, timestamp: now + 290 })).status).toBe(404);
  });

  it('refuses a tampered body and a tampered path', async () => {
    const signed = signRequest({ path: PATH, as: OP1, body: { playerRef: 'p1' } });
    const body = await toTestResponse(
      await fetch(svc.url + PATH, { method: 'POST', headers: signed.headers, body: JSON.stringify({ playerRef: 'p2' }) }),
    );
    expectInvalidSignature(body);
    const moved = signRequest({ path: PATH, as: OP1 });
    const path = await toTestResponse(await fetch(`${svc.url}/v1/operator/other`, { headers: moved.headers }));
    expectInvalidSignature(path);
  });

  it('signs the path only: the query string of a call to the service is not part of it', async () => {
    const res = await signedRequest(svc.url, { path: `${PATH}?playerRef=p1`, as: OP1 });
    expect(res.status).toBe(404);
  });

  it('refuses a replayed nonce with 401 JSON "replayed request"', async () => {
    const nonce = freshNonce();
    expect((await signedRequest(svc.url, { path: PATH, as: OP1, nonce })).status).toBe(404);
    const replay = await signedRequest(svc.url, { path: PATH, as: OP1, nonce });
    expect(replay.status).toBe(401);
    expect(replay.headers.get('content-type')).toMatch(/^application\/json/);
    expect(replay.json).toEqual({ error: 'replayed request' });
  });

  it("keeps each caller's nonces apart even when an id holds a colon (op-1:x's nonce n cannot burn op-1's nonce x:n)", async () => {
    const op1 = testCatalog().operators.find((o) => o.id === OP1.id)!;
    const colon = { ...op1, id: `${OP1.id}:x`, secret: 'colon-operator-secret' };
    const put = await fetch(`${svc.url}/v1/admin/catalog`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ operators: [colon] }),
    });
    expect(put.status, await put.text()).toBe(200);
    const nonce = freshNonce();
    const asColon = { kind: 'operator' as const, id: colon.id, secret: colon.secret };
    expect((await signedRequest(svc.url, { path: PATH, as: asColon, nonce })).status).toBe(404);
    expect((await signedRequest(svc.url, { path: PATH, as: OP1, nonce: `x:${nonce}` })).status).toBe(404);
    // A nonce such an id used before the key was encoded (kept under the key as it was) is still a replay.
    const earlier = freshNonce();
    await svc.ctx.redis.set(`nonce:operator:${colon.id}:${earlier}`, '1', 'PX', 60_000);
    const replay = await signedRequest(svc.url, { path: PATH, as: asColon, nonce: earlier });
    expect(replay.status).toBe(401);
    expect(replay.json).toEqual({ error: 'replayed request' });
  });

  it('does not let a forged request burn a nonce', async () => {
    const nonce = freshNonce();
    const forged = await send({ path: PATH, as: { ...OP1, secret: 'guessed' }, nonce });
    expect(forged.status).toBe(401);
    expect(forged.text).toBe('invalid signature');
    const genuine = await signedRequest(svc.url, { path: PATH, as: OP1, nonce });
    expect(genuine.status).toBe(404);
  });

  it('keeps nonces per caller: two operators may pick the same one', async () => {
    const nonce = freshNonce();
    expect((await signedRequest(svc.url, { path: PATH, as: OP1, nonce })).status).toBe(404);
    expect((await signedRequest(svc.url, { path: PATH, as: OP2, nonce })).status).toBe(404);
  });

  it('verifies providers with X-Provider-Id and the provider secret on the provider API', async () => {
    const ok = await signedRequest(svc.url, { path: '/v1/wallet/probe', as: PROV_A });
    expect(ok.status).toBe(404);
    const wrong = await signedRequest(svc.url, { path: '/v1/wallet/probe', as: { ...PROV_A, secret: OP1.secret } });
    expect(wrong.status).toBe(401);
    const asOperator = await signedRequest(svc.url, { path: '/v1/wallet/probe', as: OP1 });
    expect(asOperator.status).toBe(401);
  });

  it('answers a signed body that is not JSON with 400, and one over 64 KiB with 413', async () => {
    const notJson = await signedRequest(svc.url, { path: PATH, as: OP1, rawBody: '{"playerRef": ' });
    expect(notJson.status).toBe(400);
    expect(notJson.json).toEqual({ error: 'request body is not valid JSON' });
    const big = await signedRequest(svc.url, { path: PATH, as: OP1, body: { pad: 'x'.repeat(70 * 1024) } });
    expect(big.status).toBe(413);
    expect(big.json).toEqual({ error: 'request body too large' });
  });

  it('answers an unknown route outside the signed areas with 404 JSON', async () => {
    const res = await toTestResponse(await fetch(`${svc.url}/nope`));
    expect(res.status).toBe(404);
    expect(res.json).toEqual({ error: 'not found' });
  });

  it('tags every response with a request id', async () => {
    const res = await fetch(`${svc.url}/healthz`);
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe('signed requests when Redis is down', () => {
  let env: TestEnv;
  let svc: RunningService & { url: string };

  beforeAll(async () => {
    env = await createTestEnv('sigredis');
    // Port 1 has no Redis: the nonce cannot be recorded.
    svc = await startInProcess(env, { ROLES: 'api', REDIS_URL: 'redis://127.0.0.1:1/0' });
    await svc.ctx.catalog.apply(testCatalog());
  });
  afterAll(async () => {
    await svc?.stop();
    await env?.cleanup();
  });

  it('refuses a valid request with 503 instead of letting it through unchecked', async () => {
    const res = await signedRequest(svc.url, { path: '/v1/operator/probe', as: OP1 });
    expect(res.status).toBe(503);
    expect(res.json).toEqual({ error: 'service unavailable' });
  });

  it('still refuses a bad signature with 401 (checked before Redis is needed)', async () => {
    const res = await signedRequest(svc.url, { path: '/v1/operator/probe', as: { ...OP1, secret: 'bad' } });
    expect(res.status).toBe(401);
  });

  it('reports not ready, naming Redis', async () => {
    const res = await toTestResponse<{ down: string[] }>(await fetch(`${svc.url}/readyz`));
    expect(res.status).toBe(503);
    expect(res.json.down).toEqual(['redis']);
    expect((await fetch(`${svc.url}/healthz`)).status).toBe(200);
  });
});

describe('nonces outlive their timestamps (contract section 8, rule 9)', () => {
  let env: TestEnv;
  let svc: RunningService & { url: string };
  const W = 1;

  beforeAll(async () => {
    env = await createTestEnv('signonce');
    svc = await startInProcess(env, { ROLES: 'api', SIGNATURE_WINDOW_SECONDS: String(W) });
    await svc.ctx.catalog.apply(testCatalog());
  });
  afterAll(async () => {
    await svc?.stop();
    await env?.cleanup();
  });

  it('refuses the replay of a request stamped a window ahead for as long as its timestamp is accepted', async () => {
    // Start just after a second begins, so the timestamp's last accepted second is as long as it gets.
    await new Promise((r) => setTimeout(r, 1020 - (Date.now() % 1000)));
    const second = Math.floor(Date.now() / 1000);
    // The sender's clock runs W seconds ahead: accepted until this receiver's clock reads second + 2W.
    const signed = signRequest({ path: '/v1/operator/probe', as: OP1, timestamp: second + W });
    const send = async () => toTestResponse(await fetch(svc.url + '/v1/operator/probe', { method: 'GET', headers: signed.headers }));
    expect((await send()).status).toBe(404);
    // 2W after first use (the old memory) but still inside the timestamp's window.
    await new Promise((r) => setTimeout(r, (second + 2 * W) * 1000 + 500 - Date.now()));
    expect(Math.floor(Date.now() / 1000)).toBe(second + 2 * W);
    const replay = await send();
    expect(replay.status).toBe(401);
    expect(replay.json).toEqual({ error: 'replayed request' });
    // Once the timestamp has left the window, the request is refused for its timestamp.
    await new Promise((r) => setTimeout(r, (second + 2 * W + 1) * 1000 + 50 - Date.now()));
    const late = await send();
    expect(late.status).toBe(401);
    expect(late.text).toBe('invalid signature');
  });
});
