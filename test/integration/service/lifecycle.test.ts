import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SeedError } from '../../../src/service/seed.js';
import { createReferenceService } from '../../../src/service/server.js';
import { createTestService } from '../../../src/service/testing.js';
import { connectWs, getTokens, post, signedGetTokenBody, type WsAttempt } from '../../helpers/service-client.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'botlink-lifecycle-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function settle(attempt: WsAttempt): string {
  if (attempt.ok) {
    attempt.ws.terminate();
    return 'open';
  }
  return attempt.body;
}

describe('the state table of the specification', () => {
  it('no token → both valid → access expired → refreshed → refresh expired → signed flow again', async () => {
    const ACCESS_S = 60;
    const REFRESH_S = 600;
    const t0 = Date.parse('2026-11-21T08:00:00.000Z');
    let t = t0;
    const service = await createTestService({ accessTtlS: ACCESS_S, refreshTtlS: REFRESH_S, now: () => t });
    try {
      const ws = async (token: string | undefined): Promise<string> => settle(await connectWs(service.wsUrl, 'bot-1', token));
      const refresh = (refreshToken: string) =>
        post(service.url, '/auth/refreshToken', { accessKeyId: 'AK', refreshToken, botId: 'bot-1' });

      // No token.
      expect(await ws(undefined)).toBe('{"code":400,"msg":"Unauthorized"}');

      // Both valid.
      const first = await getTokens(service.url, { timestamp: String(t) });
      expect(first).toMatchObject({ expireIn: ACCESS_S, refreshExpireIn: REFRESH_S });
      expect(await ws(first.accessToken)).toBe('open');

      // One millisecond before expiry the access token still works; at expiry it does not.
      t = t0 + ACCESS_S * 1000 - 1;
      expect(await ws(first.accessToken)).toBe('open');
      t = t0 + ACCESS_S * 1000;
      expect(await ws(first.accessToken)).toBe('{"code":400,"msg":"Unauthorized"}');

      // Access expired → refresh gives a working token, with the full access lifetime from now.
      const refreshed = await refresh(first.refreshToken);
      expect(refreshed.json).toMatchObject({ code: 0, expireIn: ACCESS_S });
      const second = refreshed.json!['accessToken'] as string;
      expect(await ws(second)).toBe('open');
      t = t0 + 2 * ACCESS_S * 1000 - 1;
      expect(await ws(second)).toBe('open');

      // Refresh expired → 1007, and the signed flow works again.
      t = t0 + REFRESH_S * 1000;
      expect((await refresh(first.refreshToken)).json).toEqual({ code: 1007, msg: 'invalid refresh token' });
      const third = await getTokens(service.url, { timestamp: String(t) });
      expect(await ws(third.accessToken)).toBe('open');
      expect((await refresh(third.refreshToken)).json?.['code']).toBe(0);
    } finally {
      await service.close();
    }
  });
});

describe('restart', () => {
  it('a service restarted on the same port with the same dbFile keeps tokens, registrations and used nonces', async () => {
    const dbFile = join(dir, 'restart.db');
    const first = await createReferenceService({ dbFile });
    const port = first.port;
    const tokens = await getTokens(first.url);
    const vendor = await getTokens(first.url, { vendorId: 'V1' });
    const device = { vendorId: 'V1', deviceId: 'SN-restart', type: 'PHYSICAL_ROBOT' };
    const registered = await post(first.url, '/device/register', device, { authorization: `Bearer ${vendor.accessToken}` });
    const replayBody = signedGetTokenBody();
    expect((await post(first.url, '/auth/getToken', replayBody)).json?.['code']).toBe(0);
    const open = await connectWs(first.wsUrl, 'bot-1', tokens.accessToken);
    expect(open.ok).toBe(true);
    await first.close();

    const second = await createReferenceService({ dbFile, port });
    try {
      expect(second.port).toBe(port);
      expect(settle(await connectWs(second.wsUrl, 'bot-1', tokens.accessToken))).toBe('open');
      const refreshed = await post(second.url, '/auth/refreshToken', {
        accessKeyId: 'AK',
        refreshToken: tokens.refreshToken,
        botId: 'bot-1',
      });
      expect(refreshed.json?.['code']).toBe(0);
      const again = await post(second.url, '/device/register', device, { authorization: `Bearer ${vendor.accessToken}` });
      expect(again.json?.['data']).toBe(registered.json?.['data']);
      expect((await post(second.url, '/auth/getToken', replayBody)).json).toEqual({ code: 1001, msg: 'nonce already used' });
    } finally {
      await second.close();
    }
  });

  it('close() frees the port at once, with sockets and unfinished answers open', async () => {
    const first = await createTestService();
    const tokens = await getTokens(first.url);
    const open = await connectWs(first.wsUrl, 'bot-1', tokens.accessToken);
    expect(open.ok).toBe(true);
    first.faults.nextResponses('never-finish', 1);
    const received = once(first.events, 'http-request');
    const hanging = post(first.url, '/auth/getToken', signedGetTokenBody()).catch((err: unknown) => err);
    await received;
    await first.close();
    expect(await hanging).toBeInstanceOf(Error);
    const second = await createReferenceService({ port: first.port });
    await second.close();
  });

  it('close() does not wait for a handshake held by the latency fault', async () => {
    const service = await createTestService();
    const tokens = await getTokens(service.url);
    service.faults.setLatencyMs(60_000);
    const upgrade = once(service.events, 'ws-upgrade');
    const held = connectWs(service.wsUrl, 'bot-1', tokens.accessToken).catch((err: unknown) => err);
    await upgrade;
    await service.close();
    expect(await held).toBeInstanceOf(Error);
  });

  it('a malformed programmatic seed is refused before listening', async () => {
    const seed = { accounts: [{ accessKeyId: 'A', secretKey: 'S', vendors: [{ vendorId: 'V', bots: ['b', 'b'] }] }] };
    await expect(createReferenceService({ seed })).rejects.toThrow(SeedError);
  });

  it('close() can be called twice, and once closed nothing answers', async () => {
    const service = await createReferenceService();
    await expect(Promise.all([service.close(), service.close()])).resolves.toEqual([undefined, undefined]);
    await expect(service.close()).resolves.toBeUndefined();
    await expect(getTokens(service.url)).rejects.toThrow();
  });
});
