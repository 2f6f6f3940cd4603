import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { signV2 } from '../../../src/protocol/sign.js';
import { newToken, signatureValid, tokenHash } from '../../../src/service/credentials.js';

const params = { accessKeyId: 'AK', accessNonce: '0'.repeat(32), accessTimestamp: '1763683200000', accessVersion: 'V2' };

describe('tokens', () => {
  it('are 256 random bits in base64url, all different', () => {
    const tokens = new Set(Array.from({ length: 200 }, newToken));
    expect(tokens.size).toBe(200);
    for (const token of tokens) {
      expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(Buffer.from(token, 'base64url')).toHaveLength(32);
    }
  });

  it('are stored as SHA-256 hex', () => {
    expect(tokenHash('abc')).toBe(createHash('sha256').update('abc').digest('hex'));
    expect(tokenHash('abc')).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('signatureValid', () => {
  const good = signV2(params, 'SK');

  it('accepts the V2 signature made with the secret', () => {
    expect(signatureValid(params, good, 'SK')).toBe(true);
  });

  it('refuses another secret, another length, upper case, and an empty signature', () => {
    expect(signatureValid(params, signV2(params, 'other'), 'SK')).toBe(false);
    expect(signatureValid(params, good.slice(1), 'SK')).toBe(false);
    expect(signatureValid(params, `${good}0`, 'SK')).toBe(false);
    expect(signatureValid(params, good.toUpperCase(), 'SK')).toBe(false);
    expect(signatureValid(params, '', 'SK')).toBe(false);
  });

  it('refuses everything for an unknown account, whatever the signature', () => {
    expect(signatureValid(params, good, undefined)).toBe(false);
    expect(signatureValid(params, 'x', undefined)).toBe(false);
  });
});
