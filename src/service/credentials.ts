import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { signV2, type SignedParams } from '../protocol/sign.js';

/** A new bearer or refresh token: 256 random bits, base64url. */
export function newToken(): string {
  return randomBytes(32).toString('base64url');
}

/** How a token is stored and looked up: SHA-256, hex. */
export function tokenHash(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

// An unknown accessKeyId is checked against this secret, so it costs and answers like a bad signature.
const DECOY_SECRET = randomBytes(32).toString('hex');

/** Constant-time V2 signature check; secret undefined means the accessKeyId is unknown. */
export function signatureValid(params: SignedParams, given: string, secret: string | undefined): boolean {
  const expected = Buffer.from(signV2(params, secret ?? DECOY_SECRET), 'utf8');
  const actual = Buffer.from(given, 'utf8');
  // timingSafeEqual needs equal lengths; comparing expected with itself keeps the time the same.
  const same = timingSafeEqual(expected, actual.length === expected.length ? actual : expected);
  return same && actual.length === expected.length && secret !== undefined;
}
