import { describe, expect, it } from 'vitest';
import { sign, signatureMatches, signingString } from '../../shared/http/signature.ts';

describe('signing string (contract section 3)', () => {
  // The worked example of docs/signing.md; a partner can check its own code against it.
  const example = {
    timestamp: '1795000000',
    nonce: 'n-0001',
    method: 'post',
    target: '/v1/operator/players/kick',
    body: '{"playerRef":"p1"}',
  };

  it('joins timestamp, nonce, upper-case method, target and the body hash with newlines', () => {
    expect(signingString(example)).toBe(
      ['1795000000', 'n-0001', 'POST', '/v1/operator/players/kick', '8aa1d1fa26f54d25911cafe6bf2d180c526fc4e48aeb7663da6c4c0dc0e151d0'].join('\n'),
    );
  });

  it('hashes the empty string when there is no body', () => {
    expect(signingString({ ...example, body: '' }).split('\n')[4]).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  });

  it('produces the docs/signing.md example signature', () => {
    expect(sign('operator-secret', example)).toBe(README_SIGNATURE);
  });

  it('matches only the exact signature', () => {
    const s = sign('operator-secret', example);
    expect(signatureMatches('operator-secret', example, s)).toBe(true);
    expect(signatureMatches('operator-secret', { ...example, nonce: 'n-0002' }, s)).toBe(false);
    expect(signatureMatches('other', example, s)).toBe(false);
    expect(signatureMatches('operator-secret', example, s.slice(0, 63))).toBe(false);
  });
});

const README_SIGNATURE = 'eca71aee2bd00f7b4d8e807f96b603c3df00dca8d406f9f35a6fcae34c8f29aa';
