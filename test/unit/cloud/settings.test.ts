import { describe, expect, it } from 'vitest';
import { DEFAULT_TIMEOUT_MS, resolveCloudSettings } from '../../../src/cloud/client.js';

describe('resolveCloudSettings', () => {
  const T = DEFAULT_TIMEOUT_MS;
  it.each([
    { given: {}, want: { connectTimeoutMs: T, headersTimeoutMs: T, bodyTimeoutMs: T, deadlineMs: T, maxResponseBytes: 65536 } },
    { given: { headersTimeoutMs: 25_000 }, want: { headersTimeoutMs: 25_000, deadlineMs: 25_000 } },
    { given: { connectTimeoutMs: 1000, headersTimeoutMs: 2000, bodyTimeoutMs: 3000 }, want: { deadlineMs: 3000 } },
    { given: { connectTimeoutMs: 1000, deadlineMs: 500 }, want: { connectTimeoutMs: 1000, deadlineMs: 500 } },
    { given: { maxResponseBytes: 10 }, want: { maxResponseBytes: 10, deadlineMs: T } },
  ])('$given → $want (the deadline defaults to the longest timeout)', ({ given, want }) => {
    expect(resolveCloudSettings(given)).toMatchObject(want);
  });
});
