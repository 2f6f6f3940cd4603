import { describe, expect, it } from 'vitest';
import { statusDoc } from '../../../src/agent/daemon/status.js';
import type { TokenSnapshot } from '../../../src/agent/token/manager-types.js';

const relay = { attached: false, framesUp: 0, framesDown: 0, dropped: 0, observers: 0 };

describe('statusDoc: DESIGN §3.4 from the parts’ snapshots', () => {
  it('before any part exists: not started, nothing trusted, nothing persisted lost', () => {
    const doc = statusDoc({
      identity: { kind: 'vendor', id: 'V1' },
      mode: 'sign',
      now: undefined,
      tokens: undefined,
      link: undefined,
      relay,
    });
    expect(doc).toMatchObject({
      pid: process.pid,
      updatedAt: 0,
      identity: { kind: 'vendor', id: 'V1', mode: 'sign' },
      clock: { trusted: false, source: 'none', offsetMs: null, verdict: 'pending' },
      token: { accessExpiresAt: null, refreshExpiresAt: null, lastError: null },
      store: { persisted: true, lastError: null },
      link: { state: 'connecting', since: 0, reconnects: 0, reconnectsByCause: {}, lastError: null },
      relay,
    });
    expect(doc.token).not.toHaveProperty('fix');
  });

  it("takes the token manager's snapshot: expiries, the last error and its fix apart, the store", () => {
    const tokens: TokenSnapshot = {
      accessExpiresAt: 2000,
      refreshExpiresAt: 9000,
      clock: { trusted: true, source: 'timesyncd', offsetMs: 12, verdict: 'synced' },
      lastError: { code: 'ERR_CLOUD_1005', retry: 'needs-config', message: 'invalid signature', fix: 'check the secret' },
      renewals: { signed: 1, refreshed: 0 },
      failures: { ERR_CLOUD_1005: 1 },
      store: { persisted: false, lastError: 'disk full' },
    } as TokenSnapshot;
    const link = { state: 'connected' as const, since: 5, reconnects: 2, reconnectsByCause: { drop: 2 }, lastError: null };
    const doc = statusDoc({ identity: { kind: 'bot', id: 'bot-1' }, mode: 'broker', now: 1234, tokens, link, relay });
    expect(doc).toMatchObject({
      updatedAt: 1234,
      identity: { kind: 'bot', id: 'bot-1', mode: 'broker' },
      clock: { trusted: true, source: 'timesyncd', offsetMs: 12, verdict: 'synced' },
      token: { accessExpiresAt: 2000, refreshExpiresAt: 9000, lastError: 'invalid signature', fix: 'check the secret' },
      store: { persisted: false, lastError: 'disk full' },
      link,
    });
    expect(JSON.stringify(doc)).not.toMatch(/accessToken|refreshToken/);
  });
});
