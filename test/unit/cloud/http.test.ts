import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { undiciParts } from '../../../src/cloud/http.js';

const require = createRequire(import.meta.url);

describe('the undici parts the cloud client loads directly', () => {
  // If an undici upgrade moves or replaces these modules, this fails here rather than on a device.
  it('are the Pool class and the request API that undici itself exports', async () => {
    const parts = await undiciParts();
    const undici = require('undici') as typeof import('undici');
    expect(parts.Pool).toBe(undici.Pool);
    expect(parts.request).toBe(undici.Pool.prototype.request);
    expect(parts.request).not.toBe(undefined);
  });

  it('are loaded once, however many clients ask at the same time', async () => {
    const [a, b] = await Promise.all([undiciParts(), undiciParts()]);
    expect(a).toBe(b);
  });
});
