import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRegisterDeviceResponse } from '../../../src/protocol/wire.js';
import type { IssuedTokens } from '../../../src/service/context.js';
import { tokenHash } from '../../../src/service/credentials.js';
import { createTestService, type TestService } from '../../../src/service/testing.js';
import type { Seed } from '../../../src/service/seed.js';
import { connectWs, getTokens, post, signedGetTokenBody, type Reply } from '../../helpers/service-client.js';

const seed: Seed = {
  accounts: [
    {
      accessKeyId: 'AK',
      secretKey: 'SK',
      vendors: [
        { vendorId: 'V1', bots: ['bot-1'] },
        { vendorId: 'V3', bots: [] },
      ],
    },
    { accessKeyId: 'AK2', secretKey: 'SK2', vendors: [{ vendorId: 'V2', bots: ['bot-2'] }] },
  ],
};

let service: TestService;
beforeAll(async () => {
  service = await createTestService({ seed });
});
afterAll(() => service.close());

const refresh = (body: unknown): Promise<Reply> => post(service.url, '/auth/refreshToken', body);
const register = (body: unknown, token?: string): Promise<Reply> =>
  post(service.url, '/device/register', body, token === undefined ? {} : { authorization: `Bearer ${token}` });

async function wsWorks(botId: string, token: string): Promise<boolean> {
  const attempt = await connectWs(service.wsUrl, botId, token);
  if (attempt.ok) attempt.ws.terminate();
  return attempt.ok;
}

const INVALID = { code: 1007, msg: 'invalid refresh token' };

describe('refreshToken', () => {
  it('answers a new access token with code 0, no new refresh token; both access tokens work', async () => {
    const first = await getTokens(service.url);
    const reply = await refresh({ accessKeyId: 'AK', refreshToken: first.refreshToken, botId: 'bot-1' });
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({ accessToken: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/), expireIn: 7200, code: 0, msg: '' });
    const fresh = reply.json!['accessToken'] as string;
    expect(fresh).not.toBe(first.accessToken);
    expect(await wsWorks('bot-1', fresh)).toBe(true);
    expect(await wsWorks('bot-1', first.accessToken)).toBe(true);
  });

  it("'tokens-issued' names each access token as it is issued, with its pair's refresh token, by hash only", async () => {
    const seen: IssuedTokens[] = [];
    const listener = (e: IssuedTokens): number => seen.push(e);
    service.events.on('tokens-issued', listener);
    try {
      const first = await getTokens(service.url);
      const reply = await refresh({ accessKeyId: 'AK', refreshToken: first.refreshToken, botId: 'bot-1' });
      expect((await refresh({ accessKeyId: 'AK', refreshToken: 'not-issued', botId: 'bot-1' })).json).toMatchObject(INVALID);
      const bot = { kind: 'bot', id: 'bot-1' };
      expect(seen).toEqual([
        { identity: bot, accessHash: tokenHash(first.accessToken), refreshHash: tokenHash(first.refreshToken) },
        { identity: bot, accessHash: tokenHash(reply.json!['accessToken'] as string), refreshHash: tokenHash(first.refreshToken) },
      ]);
    } finally {
      service.events.off('tokens-issued', listener);
    }
  });

  it('a refresh replaces the access token it issued two refreshes ago; the getToken one stays until it expires', async () => {
    const first = await getTokens(service.url);
    const refreshed: string[] = [];
    for (let i = 0; i < 3; i++) {
      const reply = await refresh({ accessKeyId: 'AK', refreshToken: first.refreshToken, botId: 'bot-1' });
      refreshed.push(reply.json!['accessToken'] as string);
    }
    expect(await wsWorks('bot-1', first.accessToken)).toBe(true);
    expect(await wsWorks('bot-1', refreshed[0]!)).toBe(false);
    expect(await wsWorks('bot-1', refreshed[1]!)).toBe(true);
    expect(await wsWorks('bot-1', refreshed[2]!)).toBe(true);
  });

  it('1,000 refreshes of one refresh token leave the database no bigger than two', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'botlink-refresh-'));
    const svc = await createTestService({ seed, dbFile: join(dir, 'service.db') });
    const reader = new Database(join(dir, 'service.db'), { readonly: true });
    try {
      const rows = (): number => (reader.prepare('SELECT count(*) AS n FROM tokens').get() as { n: number }).n;
      const { refreshToken } = await getTokens(svc.url);
      const body = { accessKeyId: 'AK', refreshToken, botId: 'bot-1' };
      for (let i = 0; i < 2; i++) expect((await post(svc.url, '/auth/refreshToken', body)).json?.['code']).toBe(0);
      const afterTwo = rows();
      for (let batch = 0; batch < 20; batch++) {
        const replies = await Promise.all(Array.from({ length: 50 }, () => post(svc.url, '/auth/refreshToken', body)));
        expect(replies.every((r) => r.json?.['code'] === 0)).toBe(true);
      }
      expect(svc.stats.refreshToken.ok).toBe(1002);
      expect(rows()).toBe(afterTwo);
    } finally {
      reader.close();
      await svc.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('can be used more than once', async () => {
    const { refreshToken } = await getTokens(service.url);
    for (let i = 0; i < 3; i++) {
      expect((await refresh({ accessKeyId: 'AK', refreshToken, botId: 'bot-1' })).json?.['code']).toBe(0);
    }
  });

  it.each([
    ['not JSON', '{'],
    ['an array', '[1]'],
    ['no accessKeyId', { refreshToken: 'x', botId: 'bot-1' }],
    ['no refreshToken', { accessKeyId: 'AK', botId: 'bot-1' }],
    ['no identity', { accessKeyId: 'AK', refreshToken: 'x' }],
    ['empty identities', { accessKeyId: 'AK', refreshToken: 'x', botId: '', vendorId: '' }],
    ['a number for refreshToken', { accessKeyId: 'AK', refreshToken: 7, botId: 'bot-1' }],
  ])('%s → 1001', async (_name, body) => {
    const reply = await refresh(body);
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({ code: 1001, msg: expect.any(String) });
  });

  it('an unknown refresh token → 1007', async () => {
    expect((await refresh({ accessKeyId: 'AK', refreshToken: 'nope', botId: 'bot-1' })).json).toEqual(INVALID);
  });

  it('an access token used as a refresh token → 1007', async () => {
    const { accessToken } = await getTokens(service.url);
    expect((await refresh({ accessKeyId: 'AK', refreshToken: accessToken, botId: 'bot-1' })).json).toEqual(INVALID);
  });

  it('another accessKeyId → 1007', async () => {
    const { refreshToken } = await getTokens(service.url);
    expect((await refresh({ accessKeyId: 'AK2', refreshToken, botId: 'bot-1' })).json).toEqual(INVALID);
  });

  it('a bot token refreshed as its vendor → 1007', async () => {
    const { refreshToken } = await getTokens(service.url, { botId: 'bot-1' });
    expect((await refresh({ accessKeyId: 'AK', refreshToken, vendorId: 'V1' })).json).toEqual(INVALID);
  });

  it('a vendor token refreshed as a bot → 1007', async () => {
    const { refreshToken } = await getTokens(service.url, { vendorId: 'V1' });
    expect((await refresh({ accessKeyId: 'AK', refreshToken, botId: 'bot-1' })).json).toEqual(INVALID);
  });

  it('a token of one bot refreshed as another → 1007', async () => {
    const { refreshToken } = await getTokens(service.url, { botId: 'bot-1' });
    expect((await refresh({ accessKeyId: 'AK', refreshToken, botId: 'bot-2' })).json).toEqual(INVALID);
  });

  it('botId wins on both sides: issued for bot-1 (with a vendorId), refreshed with bot-1 and another vendorId', async () => {
    const { refreshToken } = await getTokens(service.url, { botId: 'bot-1', vendorId: 'V1' });
    expect((await refresh({ accessKeyId: 'AK', refreshToken, botId: 'bot-1', vendorId: 'V3' })).json?.['code']).toBe(0);
    expect((await refresh({ accessKeyId: 'AK', refreshToken, vendorId: 'V1' })).json).toEqual(INVALID);
  });

  it('needs no clock: refresh works with the service clock an hour off', async () => {
    const { refreshToken } = await getTokens(service.url);
    service.faults.shiftClockMs(3_600_000);
    try {
      expect((await refresh({ accessKeyId: 'AK', refreshToken, botId: 'bot-1' })).json?.['code']).toBe(0);
    } finally {
      service.faults.reset();
    }
  });

  it('counts calls', async () => {
    const before = { ...service.stats.refreshToken };
    const { refreshToken } = await getTokens(service.url);
    await refresh({ accessKeyId: 'AK', refreshToken, botId: 'bot-1' });
    await refresh({ accessKeyId: 'AK', refreshToken: 'nope', botId: 'bot-1' });
    expect(service.stats.refreshToken).toEqual({ total: before.total + 2, ok: before.ok + 1 });
  });
});

describe('device/register', () => {
  const device = { vendorId: 'V1', appId: 'app', deviceId: 'SN-0001', type: 'PHYSICAL_ROBOT', name: 'kitchen' };
  const unauthorized = { state: 'FAILURE', code: '401', msg: 'Unauthorized' };

  it('registers a device for a vendor token, idempotently, and the new bot can get tokens and connect', async () => {
    const vendor = await getTokens(service.url, { vendorId: 'V1' });
    const first = await register(device, vendor.accessToken);
    expect(first.status).toBe(200);
    expect(first.json).toEqual({ state: 'SUCCESS', code: '0000', data: expect.any(String) });
    const botId = first.json!['data'] as string;
    expect(parseRegisterDeviceResponse(first.json)).toEqual({ ok: true, botId });
    expect((await register({ ...device, name: 'renamed' }, vendor.accessToken)).json?.['data']).toBe(botId);
    const other = await register({ ...device, deviceId: 'SN-0002' }, vendor.accessToken);
    expect(other.json?.['data']).not.toBe(botId);

    const bot = await getTokens(service.url, { botId });
    expect(await wsWorks(botId, bot.accessToken)).toBe(true);
  });

  it('the same deviceId under another vendor is another bot, under that vendor', async () => {
    const v1 = await getTokens(service.url, { vendorId: 'V1' });
    const v3 = await getTokens(service.url, { vendorId: 'V3' });
    const a = (await register({ ...device, deviceId: 'SN-shared' }, v1.accessToken)).json?.['data'];
    const b = (await register({ ...device, vendorId: 'V3', deviceId: 'SN-shared' }, v3.accessToken)).json?.['data'];
    expect(typeof a).toBe('string');
    expect(typeof b).toBe('string');
    expect(a).not.toBe(b);
  });

  it('a bot registered under AK is unknown to another account', async () => {
    const vendor = await getTokens(service.url, { vendorId: 'V1' });
    const botId = (await register({ ...device, deviceId: 'SN-AK' }, vendor.accessToken)).json!['data'] as string;
    const reply = await post(service.url, '/auth/getToken', signedGetTokenBody({ accessKeyId: 'AK2', secretKey: 'SK2', botId }));
    expect(reply.json?.['code']).toBe(1004);
  });

  it('without a token → 401', async () => {
    expect((await register(device)).json).toEqual(unauthorized);
  });

  it('an unknown token → 401', async () => {
    expect((await register(device, 'not-a-token')).json).toEqual(unauthorized);
  });

  it('a non-Bearer Authorization → 401', async () => {
    const vendor = await getTokens(service.url, { vendorId: 'V1' });
    const reply = await post(service.url, '/device/register', device, { authorization: `Basic ${vendor.accessToken}` });
    expect(reply.json).toEqual(unauthorized);
  });

  it('a bot token → 401', async () => {
    const bot = await getTokens(service.url, { botId: 'bot-1' });
    expect((await register(device, bot.accessToken)).json).toEqual(unauthorized);
  });

  it('a vendor refresh token → 401', async () => {
    const vendor = await getTokens(service.url, { vendorId: 'V1' });
    expect((await register(device, vendor.refreshToken)).json).toEqual(unauthorized);
  });

  it('an expired vendor token → 401', async () => {
    const vendor = await getTokens(service.url, { vendorId: 'V1' });
    service.faults.shiftClockMs(7200 * 1000);
    try {
      expect((await register(device, vendor.accessToken)).json).toEqual(unauthorized);
    } finally {
      service.faults.reset();
    }
  });

  it('authentication comes before the body: garbage with no token → 401', async () => {
    expect((await register('garbage')).json).toEqual(unauthorized);
  });

  it('another vendor’s vendorId → 403', async () => {
    const vendor = await getTokens(service.url, { vendorId: 'V1' });
    expect((await register({ ...device, vendorId: 'V3' }, vendor.accessToken)).json).toEqual({
      state: 'FAILURE',
      code: '403',
      msg: expect.any(String),
    });
  });

  it.each([
    ['not JSON', '{', /JSON/],
    ['an array', [], /object/],
    ['no deviceId', { ...device, deviceId: undefined }, /deviceId/],
    ['no vendorId', { ...device, vendorId: undefined }, /vendorId/],
    ['no type', { ...device, type: undefined }, /type/],
    ['an unknown type', { ...device, type: 'TOASTER' }, /type/],
    ['a numeric deviceId', { ...device, deviceId: 12 }, /deviceId/],
    ['a name over 128 characters', { ...device, name: 'n'.repeat(129) }, /name/],
    ['an appId over 128 characters', { ...device, appId: 'a'.repeat(129) }, /appId/],
  ])('%s → 400 naming the problem', async (_name, body, msg) => {
    const vendor = await getTokens(service.url, { vendorId: 'V1' });
    const reply = await register(body, vendor.accessToken);
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({ state: 'FAILURE', code: '400', msg: expect.stringMatching(msg) });
  });

  it('appId and name are optional', async () => {
    const vendor = await getTokens(service.url, { vendorId: 'V1' });
    const reply = await register({ vendorId: 'V1', deviceId: 'SN-min', type: 'APP_ROBOT' }, vendor.accessToken);
    expect(reply.json?.['state']).toBe('SUCCESS');
  });

  it('counts calls', async () => {
    const before = { ...service.stats.register };
    const vendor = await getTokens(service.url, { vendorId: 'V1' });
    await register({ ...device, deviceId: 'SN-count' }, vendor.accessToken);
    await register(device);
    expect(service.stats.register).toEqual({ total: before.total + 2, ok: before.ok + 1 });
  });
});
