import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestService, type TestService } from '../../../src/service/testing.js';
import type { Seed } from '../../../src/service/seed.js';
import { connectWs, post, signedGetTokenBody, type Reply } from '../../helpers/service-client.js';

const T = Date.parse('2026-11-21T12:00:00.000Z');
const WINDOW = 300_000;
const seed: Seed = {
  accounts: [
    { accessKeyId: 'AK', secretKey: 'SK', vendors: [{ vendorId: 'V1', bots: ['bot-1'] }] },
    { accessKeyId: 'AK2', secretKey: 'SK2', vendors: [{ vendorId: 'V2', bots: ['bot-2'] }] },
  ],
};

let dir: string;
let service: TestService;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'botlink-gettoken-'));
  service = await createTestService({ seed, dbFile: join(dir, 'service.db'), now: () => T });
});
afterEach(() => service.faults.reset());
afterAll(async () => {
  await service.close();
  rmSync(dir, { recursive: true, force: true });
});

const stamp = (offsetMs = 0): string => String(T + offsetMs);
const call = (body: unknown): Promise<Reply> => post(service.url, '/auth/getToken', body);

/** Every failure of getToken is HTTP 200 with only {code, msg}. */
function expectFailure(reply: Reply, code: number): void {
  expect(reply.status).toBe(200);
  expect(reply.json).toEqual({ code, msg: expect.any(String) });
}

describe('getToken success', () => {
  it('answers the tokens and lifetimes with code 0 and an empty msg', async () => {
    const reply = await call(signedGetTokenBody({ timestamp: stamp() }));
    expect(reply.status).toBe(200);
    expect(Object.keys(reply.json!)).toEqual(['accessToken', 'expireIn', 'refreshToken', 'refreshExpireIn', 'code', 'msg']);
    expect(reply.json).toMatchObject({ expireIn: 7200, refreshExpireIn: 604800, code: 0, msg: '' });
    for (const key of ['accessToken', 'refreshToken']) {
      const token = reply.json![key] as string;
      expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(Buffer.from(token, 'base64url')).toHaveLength(32);
    }
    expect(reply.json!['accessToken']).not.toBe(reply.json!['refreshToken']);
  });

  it('stores tokens only as SHA-256 hex, never in plain', async () => {
    const reply = await call(signedGetTokenBody({ timestamp: stamp() }));
    const access = reply.json!['accessToken'] as string;
    const refresh = reply.json!['refreshToken'] as string;
    const db = new Database(join(dir, 'service.db'), { readonly: true });
    try {
      const rows = db.prepare('SELECT * FROM tokens').all() as Record<string, unknown>[];
      const hashes = rows.map((r) => r['hash']);
      for (const token of [access, refresh]) {
        expect(hashes).toContain(createHash('sha256').update(token).digest('hex'));
        expect(JSON.stringify(rows)).not.toContain(token);
      }
    } finally {
      db.close();
    }
  });

  it('issues a vendor token for vendorId alone', async () => {
    const reply = await call(signedGetTokenBody({ timestamp: stamp(), vendorId: 'V1' }));
    expect(reply.json?.['code']).toBe(0);
  });

  it('carries a Date header from the service clock', async () => {
    const reply = await call(signedGetTokenBody({ timestamp: stamp() }));
    expect(reply.headers['date']).toBe(new Date(T).toUTCString());
  });
});

describe('getToken 1001 illegal parameters', () => {
  it.each([
    ['not JSON', '{"accessKeyId":'],
    ['empty body', ''],
    ['a JSON array', '[]'],
    ['a JSON string', '"AK"'],
    ['JSON null', 'null'],
  ])('%s', async (_name, raw) => {
    expectFailure(await call(raw), 1001);
  });

  it.each(['accessKeyId', 'accessTimestamp', 'accessNonce', 'accessVersion', 'accessSign'])('missing %s', async (field) => {
    const body: Record<string, unknown> = signedGetTokenBody({ timestamp: stamp() });
    delete body[field];
    expectFailure(await call(body), 1001);
  });

  it.each([
    ['both absent', {}],
    ['both empty', { botId: '', vendorId: '' }],
    ['both null', { botId: null, vendorId: null }],
  ])('botId and vendorId %s', async (_name, ids) => {
    const body: Record<string, unknown> = signedGetTokenBody({ timestamp: stamp() });
    delete body['botId'];
    expectFailure(await call({ ...body, ...ids }), 1001);
  });

  it('a field of the wrong type', async () => {
    expectFailure(await call({ ...signedGetTokenBody({ timestamp: stamp() }), accessNonce: 42 }), 1001);
  });
});

describe('getToken 1002 wrong version', () => {
  it.each(['V1', 'v2', 'V3'])('accessVersion %s', async (version) => {
    expectFailure(await call(signedGetTokenBody({ timestamp: stamp(), version })), 1002);
  });
});

describe('getToken 1003 wrong timestamp', () => {
  it.each([
    ['exactly 5 min behind', -WINDOW, 0],
    ['exactly 5 min ahead', WINDOW, 0],
    ['5 min + 1 ms behind', -WINDOW - 1, 1003],
    ['5 min + 1 ms ahead', WINDOW + 1, 1003],
    ['5 min + 1 s behind', -WINDOW - 1000, 1003],
    ['5 min + 1 s ahead', WINDOW + 1000, 1003],
  ])('%s', async (_name, offset, code) => {
    const reply = await call(signedGetTokenBody({ timestamp: stamp(offset) }));
    expect(reply.json?.['code']).toBe(code);
    if (code !== 0) expectFailure(reply, code);
  });

  it.each([
    ['12 digits', String(T).slice(0, 12)],
    ['14 digits', `${T}0`],
    ['seconds', String(Math.floor(T / 1000))],
    ['a sign', `+${String(T).slice(1)}`],
    ['a letter', `${String(T).slice(0, 12)}x`],
    ['a decimal point', `${String(T).slice(0, 11)}.0`],
    ['spaces', ` ${String(T).slice(1)}`],
    ['non-ASCII digits', '١٧٦٣٦٨٣٢٠٠٠٠٠'],
  ])('%s', async (_name, timestamp) => {
    expectFailure(await call(signedGetTokenBody({ timestamp })), 1003);
  });
});

describe('getToken 1004 unknown identity', () => {
  it.each([
    ['an unknown botId', { botId: 'nobody' }],
    ['an unknown vendorId', { vendorId: 'V404' }],
    ['a botId of another account', { botId: 'bot-2' }],
    ['a vendorId of another account', { vendorId: 'V2' }],
  ])('%s', async (_name, ids) => {
    expectFailure(await call(signedGetTokenBody({ timestamp: stamp(), ...ids })), 1004);
  });

  it('botId wins over vendorId: an unknown botId fails even with a valid vendorId', async () => {
    expectFailure(await call(signedGetTokenBody({ timestamp: stamp(), botId: 'nobody', vendorId: 'V1' })), 1004);
  });

  it('botId wins over vendorId: a valid botId with an unknown vendorId gets a bot token', async () => {
    const reply = await call(signedGetTokenBody({ timestamp: stamp(), botId: 'bot-1', vendorId: 'V404' }));
    expect(reply.json?.['code']).toBe(0);
    const attempt = await connectWs(service.wsUrl, 'bot-1', reply.json!['accessToken'] as string);
    expect(attempt.ok).toBe(true);
    if (attempt.ok) attempt.ws.terminate();
  });
});

describe('getToken 1005 invalid signature', () => {
  it('a signature made with another secret', async () => {
    expectFailure(await call(signedGetTokenBody({ timestamp: stamp(), secretKey: 'wrong' })), 1005);
  });

  it('a signature of a different length', async () => {
    expectFailure(await call({ ...signedGetTokenBody({ timestamp: stamp() }), accessSign: 'abc' }), 1005);
  });

  it('the right digest in upper case (the protocol says lower-case hex)', async () => {
    const body = signedGetTokenBody({ timestamp: stamp() });
    expectFailure(await call({ ...body, accessSign: body['accessSign']!.toUpperCase() }), 1005);
  });

  it('a signed field changed after signing', async () => {
    const body = signedGetTokenBody({ timestamp: stamp() });
    expectFailure(await call({ ...body, accessNonce: 'f'.repeat(32) }), 1005);
  });

  it('an unknown accessKeyId answers exactly like a bad signature', async () => {
    const unknownKey = await call(signedGetTokenBody({ timestamp: stamp(), accessKeyId: 'AK-nobody', secretKey: 'SK' }));
    const badSign = await call(signedGetTokenBody({ timestamp: stamp(), secretKey: 'wrong' }));
    expect(unknownKey.status).toBe(badSign.status);
    expect(unknownKey.json).toEqual(badSign.json);
    expect(unknownKey.json?.['code']).toBe(1005);
  });

  it('a bad signature is checked before the identity, so identities cannot be probed', async () => {
    expectFailure(await call(signedGetTokenBody({ timestamp: stamp(), secretKey: 'wrong', botId: 'nobody' })), 1005);
  });
});

describe('getToken replay', () => {
  it('refuses a reused nonce inside the window with 1001 nonce already used, issuing nothing', async () => {
    const body = signedGetTokenBody({ timestamp: stamp() });
    expect((await call(body)).json?.['code']).toBe(0);
    const okBefore = service.stats.getToken.ok;
    const replay = await call(body);
    expect(replay.json).toEqual({ code: 1001, msg: 'nonce already used' });
    expect(service.stats.getToken.ok).toBe(okBefore);
  });

  it('a nonce is recorded only once the signature verified', async () => {
    const nonce = 'a'.repeat(32);
    expectFailure(await call(signedGetTokenBody({ timestamp: stamp(), nonce, secretKey: 'wrong' })), 1005);
    expect((await call(signedGetTokenBody({ timestamp: stamp(), nonce }))).json?.['code']).toBe(0);
  });

  it('the same nonce with a new timestamp is still refused', async () => {
    const nonce = 'b'.repeat(32);
    expect((await call(signedGetTokenBody({ timestamp: stamp(), nonce }))).json?.['code']).toBe(0);
    expect((await call(signedGetTokenBody({ timestamp: stamp(1), nonce }))).json).toEqual({ code: 1001, msg: 'nonce already used' });
  });
});

describe('getToken 1006 system error (fault knob)', () => {
  it('the next n valid calls answer 1006, invalid calls keep their own code and do not use one up', async () => {
    service.faults.failNextGetToken(2);
    expectFailure(await call(signedGetTokenBody({ timestamp: stamp(), secretKey: 'wrong' })), 1005);
    expectFailure(await call(signedGetTokenBody({ timestamp: stamp() })), 1006);
    expectFailure(await call(signedGetTokenBody({ timestamp: stamp() })), 1006);
    expect((await call(signedGetTokenBody({ timestamp: stamp() }))).json?.['code']).toBe(0);
  });
});

describe('getToken stats', () => {
  it('counts calls by code and records every accessTimestamp received', async () => {
    const before = structuredClone({ ...service.stats.getToken });
    await call(signedGetTokenBody({ timestamp: stamp(-7) }));
    await call(signedGetTokenBody({ timestamp: stamp(-8), version: 'V1' }));
    await call('not json');
    const now = service.stats.getToken;
    expect(now.total).toBe(before.total + 3);
    expect(now.ok).toBe(before.ok + 1);
    expect(now.byCode[1002]).toBe((before.byCode[1002] ?? 0) + 1);
    expect(now.timestamps.slice(-2)).toEqual([stamp(-7), stamp(-8)]);
  });
});

describe('getToken stats under an unauthenticated flood', () => {
  it('counts 16 KB accessTimestamps but keeps none of them: only 13-digit ones are held', async () => {
    const before = structuredClone({ ...service.stats.getToken });
    const junk = 'x'.repeat(16_000);
    const replies = await Promise.all(
      Array.from({ length: 200 }, () => call({ ...signedGetTokenBody({ timestamp: stamp() }), accessTimestamp: junk })),
    );
    expect(replies.every((r) => r.json?.['code'] === 1003)).toBe(true);
    const now = service.stats.getToken;
    expect(now.total).toBe(before.total + 200);
    expect(now.timestamps).toEqual(before.timestamps);
    expect(now.timestamps.every((ts) => /^\d{13}$/.test(ts))).toBe(true);
  });
});
