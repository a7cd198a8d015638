import { describe, expect, it } from 'vitest';
import { SIGN_REQUEST_JS } from '../../services/api/openapi/docs.ts';
import { signatureMatches } from '../../shared/http/signature.ts';

type Req = { url: string; method: string; headers: Record<string, string>; body?: unknown };

/** The page's interceptor, run as the browser would run it (Node has the same WebCrypto). */
const signRequest = new Function(`${SIGN_REQUEST_JS}; return signRequest;`)() as (req: Req) => Promise<Req>;

describe('the /docs page signs "Try it out" requests from the Authorize dialog', () => {
  it('replaces the secret typed in X-Signature by the signature, with a fresh timestamp and nonce', async () => {
    const body = JSON.stringify({ playerRef: 'p1', gameId: 'fruit-1', currency: 'EUR', mode: 'REAL' });
    const req = await signRequest({
      url: 'http://localhost:8080/v1/operator/games/launch?ignored=1',
      method: 'post',
      headers: { 'X-Operator-Id': 'op-1', 'X-Timestamp': 'auto', 'X-Nonce': 'auto', 'X-Signature': 'operator-secret', 'Content-Type': 'application/json' },
      body,
    });
    const h = req.headers;
    expect(h['X-Operator-Id']).toBe('op-1');
    expect(h['X-Timestamp']).toMatch(/^\d{10}$/);
    expect(Math.abs(Number(h['X-Timestamp']) - Date.now() / 1000)).toBeLessThan(5);
    expect(h['X-Nonce']).toMatch(/^[0-9a-f]{32}$/);
    expect(h['X-Signature']).toMatch(/^[0-9a-f]{64}$/);
    expect(JSON.stringify(req)).not.toContain('operator-secret');
    const input = { timestamp: h['X-Timestamp']!, nonce: h['X-Nonce']!, method: 'POST', target: '/v1/operator/games/launch', body };
    expect(signatureMatches('operator-secret', input, h['X-Signature']!)).toBe(true);
  });

  it('signs a request without a body over the empty string, and a body object as the JSON it sends', async () => {
    const get = await signRequest({ url: 'http://localhost/v1/operator/games', method: 'GET', headers: { 'x-operator-id': 'op-1', 'x-signature': 's3cret' } });
    expect(signatureMatches('s3cret', { timestamp: get.headers['X-Timestamp']!, nonce: get.headers['X-Nonce']!, method: 'GET', target: '/v1/operator/games', body: '' }, get.headers['X-Signature']!)).toBe(true);
    const post = await signRequest({ url: 'http://localhost/v1/wallet/balance', method: 'POST', headers: { 'X-Signature': 'provider-secret' }, body: { sessionToken: 't' } });
    expect(post.body).toBe('{"sessionToken":"t"}');
    const input = { timestamp: post.headers['X-Timestamp']!, nonce: post.headers['X-Nonce']!, method: 'POST', target: '/v1/wallet/balance', body: post.body as string };
    expect(signatureMatches('provider-secret', input, post.headers['X-Signature']!)).toBe(true);
  });

  it('leaves unsigned requests alone, and never sends the secret when it cannot sign', async () => {
    const plain = { url: 'http://localhost/openapi.json', method: 'GET', headers: { Accept: 'application/json' } };
    expect(await signRequest({ ...plain, headers: { ...plain.headers } })).toEqual(plain);
    const subtle = Object.getOwnPropertyDescriptor(globalThis.crypto, 'subtle');
    Object.defineProperty(globalThis.crypto, 'subtle', { value: undefined, configurable: true });
    try {
      const req = await signRequest({ url: 'http://localhost/v1/operator/games', method: 'GET', headers: { 'X-Signature': 'operator-secret' } });
      expect(req.headers['X-Signature']).toBe('unsigned');
      expect(JSON.stringify(req)).not.toContain('operator-secret');
    } finally {
      if (subtle) Object.defineProperty(globalThis.crypto, 'subtle', subtle);
      else delete (globalThis.crypto as { subtle?: unknown }).subtle;
    }
  });
});
