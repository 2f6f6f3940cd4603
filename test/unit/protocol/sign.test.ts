import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { canonicalStringV2, signV2 } from '../../../src/protocol/sign.js';

interface Vector {
  accessKeyId: string;
  secretKey: string;
  accessTimestamp: string;
  accessNonce: string;
  accessVersion: string;
  canonical: string;
  accessSign: string;
}

// The project's own copy of DESIGN's known-answer vectors (shared/vectors/sign-v2.json), so a lone clone can check them.
const vectorsPath = fileURLToPath(new URL('../../fixtures/sign-v2.json', import.meta.url));
const { vectors } = JSON.parse(readFileSync(vectorsPath, 'utf8')) as { vectors: Vector[] };

describe('signature V2 known-answer vectors', () => {
  it('has vectors to check', () => {
    expect(vectors.length).toBeGreaterThanOrEqual(3);
  });

  it.each(vectors)('canonical string and signature for $accessKeyId', (v) => {
    const params = {
      accessKeyId: v.accessKeyId,
      accessNonce: v.accessNonce,
      accessTimestamp: v.accessTimestamp,
      accessVersion: v.accessVersion,
    };
    expect(canonicalStringV2(params)).toBe(v.canonical);
    expect(signV2(params, v.secretKey)).toBe(v.accessSign);
  });

  it('sorts by lower-cased name whatever order the fields come in', () => {
    const v = vectors[0]!;
    const shuffled = {
      accessVersion: v.accessVersion,
      accessTimestamp: v.accessTimestamp,
      accessKeyId: v.accessKeyId,
      accessNonce: v.accessNonce,
    };
    expect(canonicalStringV2(shuffled)).toBe(v.canonical);
  });

  it('changes with every signed field and with the key', () => {
    const v = vectors[0]!;
    const base = {
      accessKeyId: v.accessKeyId,
      accessNonce: v.accessNonce,
      accessTimestamp: v.accessTimestamp,
      accessVersion: v.accessVersion,
    };
    const sign = signV2(base, v.secretKey);
    for (const key of Object.keys(base) as (keyof typeof base)[]) {
      expect(signV2({ ...base, [key]: `${base[key]}x` }, v.secretKey)).not.toBe(sign);
    }
    expect(signV2(base, `${v.secretKey}x`)).not.toBe(sign);
    expect(sign).toMatch(/^[0-9a-f]{32}$/);
  });
});
