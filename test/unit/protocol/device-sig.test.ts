import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  bodySha256,
  keyIdOf,
  parseDeviceAuthorization,
  privateKeyFromSeed,
  publicKeyFromWire,
  rawPublicKeyOf,
  requestMessage,
  rotateProofMessage,
  signRequest,
  signRotateProof,
  verifyRequest,
  verifyRotateProof,
} from '../../../src/protocol/device-sig.js';

interface Vector {
  what: string;
  privateKeySeedHex: string;
  publicKey: string;
  keyId: string;
  method: string;
  path: string;
  ts: string;
  nonce: string;
  body: string;
  bodySha256: string;
  message: string;
  sig: string;
  authorization: string;
  proofMessage?: string;
  newPrivateKeySeedHex?: string;
  newKeyId?: string;
}

// The project's copy of DESIGN §3.7's known-answer vectors, computed with OpenSSL outside the project.
const vectorsPath = fileURLToPath(new URL('../../fixtures/broker-sign.json', import.meta.url));
const { vectors } = JSON.parse(readFileSync(vectorsPath, 'utf8')) as { vectors: Vector[] };

describe('device-request signature (DESIGN §3.7) known-answer vectors', () => {
  it('has a vector for enroll, token and rotate', () => {
    expect(new Set(vectors.map((v) => v.path))).toEqual(new Set(['/v1/enroll', '/v1/token', '/v1/rotate']));
  });

  it.each(vectors)('$what $nonce: key, message, signature and header', (v) => {
    const key = privateKeyFromSeed(Buffer.from(v.privateKeySeedHex, 'hex'));
    const raw = rawPublicKeyOf(key);
    expect(raw.toString('base64url')).toBe(v.publicKey);
    expect(keyIdOf(raw)).toBe(v.keyId);
    expect(publicKeyFromWire(v.publicKey).keyId).toBe(v.keyId);
    const parts = { method: v.method, path: v.path, keyId: v.keyId, ts: v.ts, nonce: v.nonce, body: v.body };
    expect(bodySha256(v.body)).toBe(v.bodySha256);
    expect(requestMessage(parts)).toBe(v.message);
    expect(signRequest(key, parts)).toBe(v.authorization);
    const auth = parseDeviceAuthorization(v.authorization);
    expect(auth).toMatchObject({ keyId: v.keyId, ts: v.ts, nonce: v.nonce, tsMs: Number(v.ts) });
    expect(verifyRequest(publicKeyFromWire(v.publicKey).key, auth, v.method, v.path, Buffer.from(v.body))).toBe(true);
  });

  it('a signature holds for its exact method, path and body bytes only', () => {
    const v = vectors[1] as Vector;
    const { key } = publicKeyFromWire(v.publicKey);
    const auth = parseDeviceAuthorization(v.authorization);
    expect(verifyRequest(key, auth, 'POST', v.path, Buffer.from(`${v.body} `))).toBe(false);
    expect(verifyRequest(key, auth, 'PUT', v.path, Buffer.from(v.body))).toBe(false);
    expect(verifyRequest(key, auth, 'POST', '/v1/rotate', Buffer.from(v.body))).toBe(false);
    expect(verifyRequest(key, { ...auth, nonce: `${auth.nonce}x` }, 'POST', v.path, Buffer.from(v.body))).toBe(false);
  });

  it("rotate: the new key's proof over the current keyId and the request's ts", () => {
    const v = vectors.find((x) => x.path === '/v1/rotate') as Vector;
    expect(rotateProofMessage(v.keyId, v.ts)).toBe(v.proofMessage);
    const newKey = privateKeyFromSeed(Buffer.from(v.newPrivateKeySeedHex as string, 'hex'));
    const body = JSON.parse(v.body) as { publicKey: string; proof: string };
    expect(rawPublicKeyOf(newKey).toString('base64url')).toBe(body.publicKey);
    expect(keyIdOf(rawPublicKeyOf(newKey))).toBe(v.newKeyId);
    expect(signRotateProof(newKey, v.keyId, v.ts)).toBe(body.proof);
    const { key } = publicKeyFromWire(body.publicKey);
    expect(verifyRotateProof(key, body.proof, v.keyId, v.ts)).toBe(true);
    expect(verifyRotateProof(key, body.proof, v.keyId, String(Number(v.ts) + 1))).toBe(false);
    expect(verifyRotateProof(key, `${body.proof}=`, v.keyId, v.ts)).toBe(false);
  });
});

describe('public keys the broker refuses', () => {
  const p = 2n ** 255n - 19n;
  const le = (y: bigint, sign = false): string => {
    const b = Buffer.from(y.toString(16).padStart(64, '0'), 'hex').reverse();
    if (sign) b[31] = (b[31] ?? 0) | 0x80;
    return b.toString('base64url');
  };
  const order8 = '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05';
  it.each([
    ['identity (y = 1)', le(1n)],
    ['order 2 (y = p − 1)', le(p - 1n)],
    ['order 4 (y = 0)', le(0n)],
    ['order 4 with the sign bit', le(0n, true)],
    ['order 8', Buffer.from(order8, 'hex').toString('base64url')],
    ['order 8, the other y', le(p - BigInt(`0x${Buffer.from(order8, 'hex').reverse().toString('hex')}`))],
    ['y = p (a non-canonical 0)', le(p)],
    ['y = p + 1 (a non-canonical 1)', le(p + 1n)],
    ['31 bytes', Buffer.alloc(31, 7).toString('base64url')],
    ['33 bytes', Buffer.alloc(33, 7).toString('base64url')],
    ['padding', `${vectors[0]?.publicKey}=`],
    ['standard base64', (vectors[0]?.publicKey ?? '').replace('_', '/')],
  ])('%s', (_name, text) => {
    expect(() => publicKeyFromWire(text)).toThrow(/publicKey/);
  });
});

describe('Authorization headers that are not the exact form', () => {
  const good = (vectors[0] as Vector).authorization;
  it.each([
    ['missing', undefined],
    ['another scheme', good.replace('BOTLINK-ED25519', 'Bearer')],
    ['lower-case scheme', good.replace('BOTLINK-ED25519', 'botlink-ed25519')],
    ['upper-case keyId', good.replace(/keyId=([0-9a-f]+)/, (_m, k: string) => `keyId=${k.toUpperCase()}`)],
    ['12-digit ts', good.replace(/ts=\d/, 'ts=')],
    ['short nonce', good.replace(/nonce=[^,]+/, 'nonce=abc')],
    ['nonce of 65', good.replace(/nonce=[^,]+/, `nonce=${'a'.repeat(65)}`)],
    ['nonce with a dot', good.replace(/nonce=[^,]+/, 'nonce=aaaaaaaaaaaaaaaa.')],
    ['fields reordered', good.replace(/keyId=([^,]+),ts=([^,]+)/, 'ts=$2,keyId=$1')],
    ['a space after a comma', good.replace(',ts=', ', ts=')],
    ['a trailing field', `${good},x=1`],
    ['truncated sig', good.slice(0, -2)],
  ])('%s', (_name, header) => {
    expect(() => parseDeviceAuthorization(header)).toThrow();
  });
});
