import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/** Contract section 3: the headers every signed request carries. */
export const HEADER = {
  operatorId: 'x-operator-id',
  providerId: 'x-provider-id',
  timestamp: 'x-timestamp',
  nonce: 'x-nonce',
  signature: 'x-signature',
} as const;

export const MAX_NONCE_LENGTH = 64;

export interface SigningInput {
  timestamp: string;
  nonce: string;
  method: string;
  /** Path only for calls made to the service; path plus query for calls made by it. */
  target: string;
  body: Buffer | string;
}

export function signingString(input: SigningInput): string {
  const bodyHash = createHash('sha256').update(input.body).digest('hex');
  return [input.timestamp, input.nonce, input.method.toUpperCase(), input.target, bodyHash].join('\n');
}

export function sign(secret: string, input: SigningInput): string {
  return createHmac('sha256', secret).update(signingString(input)).digest('hex');
}

/** Constant-time comparison of a presented signature with the expected one. */
export function signatureMatches(secret: string, input: SigningInput, presented: string): boolean {
  const expected = Buffer.from(sign(secret, input), 'utf8');
  const given = Buffer.from(presented, 'utf8');
  if (given.length !== expected.length) return false;
  return timingSafeEqual(expected, given);
}
