import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import { signV2, type SignedParams } from '../protocol/sign.js';

const TOKEN_BYTES = 32;
// One CSPRNG call per 256 tokens: a call per token was a tenth of getToken's CPU time.
const POOL_BYTES = TOKEN_BYTES * 256;
let pool = Buffer.alloc(0);
let offset = 0;

/** A new bearer or refresh token: 256 random bits, base64url. */
export function newToken(): string {
  if (offset + TOKEN_BYTES > pool.length) {
    pool = randomBytes(POOL_BYTES);
    offset = 0;
  }
  offset += TOKEN_BYTES;
  return pool.toString('base64url', offset - TOKEN_BYTES, offset);
}

/** How a token is stored and looked up: SHA-256, hex. */
export function tokenHash(token: string): string {
  // One-shot: a third of createHash's cost, and a getToken hashes two tokens.
  return hash('sha256', token, 'hex');
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
