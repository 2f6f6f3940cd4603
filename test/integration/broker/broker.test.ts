import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseBrokerConfig } from '../../../src/broker/config.js';
import { startBroker, type RunningBroker } from '../../../src/broker/broker.js';
import { brokerKeys, readTokenKey } from '../../../src/broker/keys.js';
import { createCode, parsePreauth, preauthorize, revoke } from '../../../src/broker/operator.js';
import type { CodeKind } from '../../../src/broker/store/types.js';
import { systemClock } from '../../../src/clock.js';
import { createTestService, type TestService } from '../../../src/service/testing.js';
import { TestDevice } from '../../helpers/broker-device.js';
import { signRequest } from '../../../src/protocol/device-sig.js';
import { brokerSettings } from '../../helpers/broker-files.js';

const SECRET = 'SK-broker-test-secret';
const seed = {
  accounts: [
    {
      accessKeyId: 'AK',
      secretKey: SECRET,
      vendors: [
        { vendorId: 'V1', bots: [] },
        { vendorId: 'V2', bots: [] },
      ],
    },
  ],
};

let cloud: TestService;
let broker: RunningBroker;
let logFile: string;
let keys: ReturnType<typeof brokerKeys>;
let serial = 0;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'botlink-broker-'));
  cloud = await createTestService({ seed, accessTtlS: 3600 });
  logFile = join(dir, 'broker.log');
  // A secret with its trailing newline and the token key as hex: both forms a file may take.
  const settings = brokerSettings(dir, {
    cloudUrl: cloud.url,
    secret: `${SECRET}\n`,
    tokenKey: Buffer.alloc(32, 7).toString('hex'),
    extra: { deviceTokensPerHour: 6 },
  });
  const config = parseBrokerConfig(settings, {});
  keys = brokerKeys(readTokenKey(config.tokenKeyFile));
  broker = await startBroker({ config, clock: systemClock, log: pino({ level: 'info' }, pino.destination({ dest: logFile, sync: true })) });
});

afterAll(async () => {
  await broker?.close();
  await cloud?.close();
  rmSync(dir, { recursive: true, force: true });
});

const url = (): string => broker.url;
/** The operator's actions, as an in-process `broker code | revoke | preauth` would audit them: into the broker's own trail. */
const operator = () => ({ actor: 'cli:test', audit: broker.audit });
const nextSerial = (): string => `SN-${process.pid}-${++serial}`;

async function code(opts: { vendorId?: string; deviceId?: string; uses?: number; ttlS?: number; kind?: CodeKind } = {}): Promise<string> {
  const issued = await createCode(
    broker.store,
    keys,
    {
      vendorId: opts.vendorId ?? 'V1',
      binding: opts.deviceId === undefined ? 'any-device' : { deviceId: opts.deviceId },
      uses: opts.uses ?? 1,
      ttlS: opts.ttlS ?? 3600,
      kind: opts.kind ?? 'plain',
    },
    Date.now(),
    operator(),
  );
  return issued.code;
}

/** A device enrolled with a fresh code: its key and botId. */
async function enrolled(): Promise<{ device: TestDevice; botId: string; deviceId: string }> {
  const device = new TestDevice();
  const deviceId = nextSerial();
  return { device, botId: await device.mustEnroll(url(), { code: await code(), deviceId }), deviceId };
}

describe('enroll (DESIGN §3.7)', () => {
  it('binds a new key to the botId the cloud registers, and a retry with the same key spends nothing', async () => {
    const device = new TestDevice();
    const deviceId = nextSerial();
    const c = await code();
    const first = await device.enroll(url(), { code: c, deviceId });
    expect(first.status).toBe(200);
    expect(first.json).toEqual({ botId: expect.any(String), vendorId: 'V1', keyId: device.keyId });
    expect(first.headers.get('date')).toBeTruthy();
    const again = await device.enroll(url(), { code: c, deviceId });
    expect(again.status).toBe(200);
    expect(again.json['botId']).toBe(first.json['botId']);
    const other = await new TestDevice().enroll(url(), { code: c, deviceId: nextSerial() });
    expect(other.status).toBe(403);
    expect(other.json['code']).toBe('bad-code');
  });

  it('refuses unknown, expired and bound-elsewhere codes with bad-code, spending nothing', async () => {
    const device = new TestDevice();
    expect((await device.enroll(url(), { code: 'AAAAA-AAAAA-AAAAA-AAAAA-AAAAA', deviceId: nextSerial() })).json['code']).toBe('bad-code');
    expect((await device.enroll(url(), { code: 'not a code', deviceId: nextSerial() })).json['code']).toBe('bad-code');
    const expired = await code({ ttlS: -1 });
    expect((await device.enroll(url(), { code: expired, deviceId: nextSerial() })).json['code']).toBe('bad-code');
    const bound = await code({ deviceId: 'SN-bound' });
    expect((await device.enroll(url(), { code: bound, deviceId: nextSerial() })).json['code']).toBe('bad-code');
    await device.mustEnroll(url(), { code: bound, deviceId: 'SN-bound' });
  });

  it('a refused code takes no nonce: the same request again is refused for its code, not as a replay', async () => {
    const device = new TestDevice();
    const nonce = 'nonce-of-a-refused-code-1';
    const fields = { code: 'AAAAA-AAAAA-AAAAA-AAAAA-AAAAB', deviceId: nextSerial() };
    for (let i = 0; i < 2; i++) expect((await device.enroll(url(), fields, { nonce })).json['code']).toBe('bad-code');
    expect(await broker.store.spend({ keyId: device.keyId, nonce, keepUntil: Date.now() + 60_000 })).toMatchObject({ replayed: false });
  });

  it('refuses a plain code for a deviceId the broker knows (409), and spends nothing doing so', async () => {
    const { deviceId } = await enrolled();
    const c = await code();
    const reply = await new TestDevice().enroll(url(), { code: c, deviceId });
    expect(reply.status).toBe(409);
    expect(reply.json['code']).toBe('device-exists');
    await new TestDevice().mustEnroll(url(), { code: c, deviceId: nextSerial() });
  });

  it('a replace code moves the botId to a new key and revokes the old one', async () => {
    const { device, botId, deviceId } = await enrolled();
    const replacement = new TestDevice();
    expect(await replacement.mustEnroll(url(), { code: await code({ kind: 'replace', deviceId }), deviceId })).toBe(botId);
    expect((await device.token(url())).json['code']).toBe('revoked');
    expect((await replacement.token(url())).status).toBe(200);
  });

  it('an adopt code keeps the botId a signing device already has, and only that one', async () => {
    const deviceId = nextSerial();
    const registered = await new TestDevice().enroll(url(), { code: await code(), deviceId });
    const botId = registered.json['botId'] as string;
    await revoke(broker.store, botId, Date.now(), operator());
    const otherSerial = nextSerial();
    const wrong = await new TestDevice().enroll(url(), {
      code: await code({ kind: 'adopt', deviceId: otherSerial }),
      deviceId: otherSerial,
      botId,
    });
    expect(wrong.status).toBe(409);
    const adoptDevice = nextSerial();
    const plain = await new TestDevice().enroll(url(), {
      code: await code({ kind: 'adopt', deviceId: adoptDevice }),
      deviceId: adoptDevice,
    });
    expect(plain.json['code']).toBe('bad-code');
  });

  it('a pre-authorised key enrolls without a code, once', async () => {
    const device = new TestDevice();
    const deviceId = nextSerial();
    await preauthorize(broker.store, parsePreauth(`# factory batch\n${deviceId},${device.publicKey}\n`, 'V2', Date.now()), operator());
    const stranger = await new TestDevice().enroll(url(), { deviceId });
    expect(stranger.json['code']).toBe('bad-code');
    const reply = await device.enroll(url(), { deviceId });
    expect(reply.status, JSON.stringify(reply.json)).toBe(200);
    expect(reply.json['vendorId']).toBe('V2');
  });
});

describe('signed requests: the order of checks and every failure code', () => {
  it('clock-skew carries serverTime, and a retry at that time passes', async () => {
    const { device } = await enrolled();
    const skewed = await device.token(url(), {}, { ts: Date.now() - 400_000 });
    expect(skewed.status).toBe(401);
    expect(skewed.json).toMatchObject({ code: 'clock-skew', serverTime: expect.any(Number) });
    expect((await device.token(url(), {}, { ts: skewed.json['serverTime'] as number })).status).toBe(200);
  });

  it('a nonce is accepted once', async () => {
    const { device } = await enrolled();
    const nonce = 'nonce-used-once-0001';
    expect((await device.token(url(), {}, { nonce })).status).toBe(200);
    const replay = await device.token(url(), {}, { nonce });
    expect(replay.status).toBe(401);
    expect(replay.json['code']).toBe('replayed');
  });

  it('bad-signature, unknown-key, bad-request and too-large', async () => {
    const { device } = await enrolled();
    expect((await device.token(url(), {}, { signedPath: '/v1/rotate' })).json['code']).toBe('bad-signature');
    // Once the key has asked, the broker verifies with it before reading the store: the same answers.
    expect((await device.token(url())).status).toBe(200);
    expect((await device.token(url(), {}, { signedPath: '/v1/rotate' })).json['code']).toBe('bad-signature');
    expect((await new TestDevice().token(url())).json['code']).toBe('unknown-key');
    expect((await device.token(url(), {}, { authorization: 'Bearer x' })).json['code']).toBe('bad-request');
    expect((await device.token(url(), {}, { contentType: 'text/plain' })).json['code']).toBe('bad-request');
    expect((await device.token(url(), {}, { query: '?botId=other' })).json['code']).toBe('bad-request');
    expect((await device.token(url(), {}, { raw: '[1]' })).json['code']).toBe('bad-request');
    expect((await device.token(url(), { minValidityS: -1 })).json['code']).toBe('bad-request');
    const big = await device.token(url(), {}, { raw: JSON.stringify({ pad: 'x'.repeat(17 * 1024) }) });
    expect(big.status).toBe(413);
    expect(big.json['code']).toBe('too-large');
  });

  it('a source past unsignedPerMinute is refused 429 without the store for keys this replica does not hold; devices it knows go on', {
    timeout: 40_000,
  }, async () => {
    const { device } = await enrolled();
    const from = '127.0.0.77';
    // The count is per minute of the broker's clock: start early in one, so the whole flood falls inside it.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 45_000) await new Promise((resolve) => setTimeout(resolve, 60_000 - intoMinute));
    expect((await device.token(url(), {}, { from })).status).toBe(200);
    // 121 requests whose signature does not verify, from one source, in one minute: each answered as it is, then past 120 none is.
    for (let i = 0; i < 121; i++) expect((await new TestDevice().token(url(), {}, { from })).json['code']).toBe('unknown-key');
    const held = await new TestDevice().token(url(), {}, { from });
    expect([held.status, held.json['code']]).toEqual([429, 'rate-limited']);
    expect(Number(held.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    // The device that asked before from that source is not shut out by its neighbours, nor is any other source.
    expect((await device.token(url(), {}, { from })).status).toBe(200);
    expect((await new TestDevice().token(url(), {}, { from: '127.0.0.78' })).json['code']).toBe('unknown-key');
  });

  it.each([
    ['a deviceId outside its form', { deviceId: 'SN 1' }, 'deviceId must be 1 to 64 of A-Z a-z 0-9 . _ : -'],
    ['a deviceId of 65 characters', { deviceId: 'S'.repeat(65) }, 'deviceId must be 1 to 64 of A-Z a-z 0-9 . _ : -'],
    ['an appId with a dot', { appId: 'app.1' }, 'appId must be 1 to 64 of A-Z a-z 0-9 _ -'],
    ['a name with a bidi override', { name: 'evil\u202eexe' }, 'name must be 1 to 64 characters, none a control or format character'],
  ])('an enrollment with %s is 400 bad-request naming the field, and spends nothing', async (_, fields, msg) => {
    const enrolling = await code();
    const reply = await new TestDevice().enroll(url(), { code: enrolling, deviceId: nextSerial(), ...fields });
    expect([reply.status, reply.json['code'], reply.json['msg']]).toEqual([400, 'bad-request', msg]);
    expect((await new TestDevice().enroll(url(), { code: enrolling, deviceId: nextSerial() })).status).toBe(200);
  });
});

describe('token (DESIGN §3.7)', () => {
  it("answers the cached access token for the key's own botId, never a refresh token", async () => {
    const { device, botId } = await enrolled();
    const first = await device.token(url());
    expect(first.status).toBe(200);
    expect(Object.keys(first.json).sort()).toEqual(['accessToken', 'botId', 'expireIn', 'expiresAt']);
    expect(first.json['botId']).toBe(botId);
    const second = await device.token(url(), { minValidityS: 60 });
    expect(second.json['accessToken']).toBe(first.json['accessToken']);
  });

  it('minValidityS is capped at half the lifetime, so a short-lived token never loops', async () => {
    const { device } = await enrolled();
    const first = await device.token(url());
    const second = await device.token(url(), { minValidityS: 86_400 });
    expect(second.json['accessToken']).toBe(first.json['accessToken']);
  });

  it('is rate-limited per botId with Retry-After: a rotation does not start a fresh hour', async () => {
    const { device } = await enrolled();
    for (let i = 0; i < 5; i++) expect((await device.token(url())).status).toBe(200);
    const next = new TestDevice();
    expect((await device.rotate(url(), next)).status).toBe(200);
    expect((await next.token(url())).status).toBe(200);
    const limited = await next.token(url());
    expect(limited.status).toBe(429);
    expect(limited.json['code']).toBe('rate-limited');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('parks at most 4 requests of one device behind the one at the cloud: the rest are 429 at once', async () => {
    const { device } = await enrolled();
    cloud.faults.setLatencyMs(300);
    try {
      const replies = await Promise.all(Array.from({ length: 6 }, () => device.token(url())));
      const statuses = replies.map((r) => r.status).sort();
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
      const refused = replies.find((r) => r.status === 429)!;
      expect(refused.json['msg']).toBe('4 requests of this device already wait for its token');
      expect(refused.headers.get('retry-after')).toBe('5');
    } finally {
      cloud.faults.setLatencyMs(0);
    }
  });

  it('revocation holds from the next request on, on every route', async () => {
    const { device, botId, deviceId } = await enrolled();
    expect((await device.token(url())).status).toBe(200);
    expect(await revoke(broker.store, botId, Date.now(), operator())).toEqual({ revoked: 1, displaceAt: null });
    expect((await device.token(url())).json['code']).toBe('revoked');
    // The key's state is told only to a request it signed (§3.7), also for a key the broker verified with lately.
    expect((await device.token(url(), {}, { signedPath: '/v1/rotate' })).json['code']).toBe('bad-signature');
    expect((await device.rotate(url(), new TestDevice())).json['code']).toBe('revoked');
    expect((await device.enroll(url(), { code: await code(), deviceId })).json['code']).toBe('revoked');
  });

  it('a token request waiting on the cloud when a revoke commits is answered 403 revoked, and its token is not kept', async () => {
    const { device, botId } = await enrolled();
    cloud.faults.setLatencyMs(400);
    try {
      const asked = once(cloud.events, 'http-request');
      const pending = device.token(url());
      await asked;
      expect(await revoke(broker.store, botId, Date.now(), operator())).toEqual({ revoked: 1, displaceAt: null });
      const reply = await pending;
      expect([reply.status, reply.json['code']]).toEqual([403, 'revoked']);
      expect(reply.json['accessToken']).toBeUndefined();
      expect(await broker.store.readToken(botId)).toBeUndefined();
    } finally {
      cloud.faults.setLatencyMs(0);
    }
  });
});

describe('rotate (DESIGN §3.7)', () => {
  it('moves the device to the new key; the old one answers revoked; no key enrolls twice', async () => {
    const { device, botId } = await enrolled();
    const next = new TestDevice();
    const reply = await device.rotate(url(), next);
    expect(reply.status, JSON.stringify(reply.json)).toBe(200);
    expect(reply.json).toEqual({ keyId: next.keyId });
    expect((await device.token(url())).json['code']).toBe('revoked');
    expect((await next.token(url())).json['botId']).toBe(botId);
    const { device: other } = await enrolled();
    expect((await other.rotate(url(), next)).status).toBe(409);
  });

  it('rotates at most rotatePerDay times a botId in 24 h, then 429 with Retry-After, writing no key', async () => {
    const { device, botId } = await enrolled();
    let current = device;
    for (let i = 0; i < 4; i++) {
      const next = new TestDevice();
      expect((await current.rotate(url(), next)).status).toBe(200);
      current = next;
    }
    const fifth = new TestDevice();
    const limited = await current.rotate(url(), fifth);
    expect([limited.status, limited.json['code']]).toEqual([429, 'rate-limited']);
    // The day's window ends at the next multiple of 24 h since 1970 (midnight UTC).
    const untilWindowEnds = Math.ceil((86_400_000 - (Date.now() % 86_400_000)) / 1000);
    expect(Math.abs(Number(limited.headers.get('retry-after')) - untilWindowEnds)).toBeLessThanOrEqual(2);
    expect(await broker.store.findKey(fifth.keyId)).toBeUndefined();
    expect((await current.token(url())).json['botId']).toBe(botId);
  });

  it('a key entombed past the 16 retired a botId keeps still answers revoked, signed or not, cached or not', async () => {
    const { device, botId } = await enrolled();
    // The device asked lately: this replica holds its public key.
    expect((await device.token(url())).json['botId']).toBe(botId);
    let current = device.keyId;
    for (let i = 0; i < 17; i++) {
      const next = new TestDevice();
      expect(await broker.store.rotate(current, { keyId: next.keyId, publicKey: next.publicKey }, Date.now())).toBe('ok');
      current = next.keyId;
    }
    expect(await broker.store.findKey(device.keyId)).toMatchObject({ state: 'revoked', entombedAt: expect.any(Number) });
    for (let round = 0; round < 2; round++) {
      // Once with the cached key, then read from its tombstone.
      const token = await device.token(url());
      expect([token.status, token.json['code']]).toEqual([403, 'revoked']);
    }
    const again = await device.send(url(), '/v1/enroll', { deviceId: 'SN-tomb', publicKey: device.publicKey, vendorId: 'V1' });
    expect([again.status, again.json['code']]).toEqual([403, 'revoked']);
    // Nothing about it is told to a request its key did not sign.
    const thief = new TestDevice();
    const ts = String(Date.now());
    const authorization = signRequest(thief.key, {
      method: 'POST',
      path: '/v1/token',
      keyId: device.keyId,
      ts,
      nonce: 'n'.repeat(20),
      body: '{}',
    });
    const forged = await thief.send(url(), '/v1/token', {}, { authorization, raw: '{}' });
    expect([forged.status, forged.json['code']]).toEqual([401, 'bad-signature']);
  });

  it('refuses a proof not made by the new key', async () => {
    const { device } = await enrolled();
    const next = new TestDevice();
    const proof = 'A'.repeat(86);
    const reply = await device.send(url(), '/v1/rotate', { publicKey: next.publicKey, proof });
    expect(reply.json['code']).toBe('bad-signature');
  });
});

describe('health, metrics and the log', () => {
  it('health names the store; metrics are botlink_broker_* and hold no botId, key, code, token or secret', async () => {
    const { device, botId } = await enrolled();
    const token = (await device.token(url())).json['accessToken'] as string;
    const health = await fetch(`${url()}/v1/health`);
    expect(await health.json()).toEqual({ ok: true, store: 'sqlite' });
    const text = await (await fetch(`${url()}/metrics`)).text();
    for (const line of text.split('\n').filter((l) => l !== '' && !l.startsWith('#'))) expect(line).toMatch(/^botlink_broker_/);
    for (const secret of [botId, device.keyId, device.publicKey, token, SECRET]) expect(text).not.toContain(secret);
  });

  it('audits enrollments and tokens without a token, a code, a key or the secret', async () => {
    const c = await code();
    const device = new TestDevice();
    const deviceId = nextSerial();
    const botId = (await device.enroll(url(), { code: c, deviceId })).json['botId'] as string;
    const token = (await device.token(url())).json['accessToken'] as string;
    const log = readFileSync(logFile, 'utf8');
    const lines = log
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines).toContainEqual(
      expect.objectContaining({ audit: 'enroll', botId, keyId: device.keyId, source: '127.0.0.1', outcome: 'enrolled' }),
    );
    expect(lines).toContainEqual(expect.objectContaining({ audit: 'token', botId, keyId: device.keyId, outcome: 'sign' }));
    for (const secret of [token, c, c.replaceAll('-', ''), device.publicKey, SECRET]) expect(log).not.toContain(secret);
  });
});
