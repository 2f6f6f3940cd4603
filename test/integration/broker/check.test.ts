import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseBrokerConfig } from '../../../src/broker/config.js';
import { startBroker, type RunningBroker } from '../../../src/broker/broker.js';
import { brokerKeys, readTokenKey } from '../../../src/broker/keys.js';
import { createCode, revoke } from '../../../src/broker/operator.js';
import { CHECKS_PER_HOUR } from '../../../src/broker/routes/check.js';
import { systemClock } from '../../../src/clock.js';
import { createTestService, type TestService } from '../../../src/service/testing.js';
import { TestDevice } from '../../helpers/broker-device.js';
import { brokerSettings } from '../../helpers/broker-files.js';

// POST /v1/check (DESIGN §3.7): every check a token request makes, then nothing but the nonce — no
// token, no cloud call, its own limit of 60 an hour per botId, apart from deviceTokensPerHour.
const SECRET = 'SK-broker-check-secret';
const TOKENS_PER_HOUR = 3;
let cloud: TestService;
let broker: RunningBroker;
let keys: ReturnType<typeof brokerKeys>;
let dir: string;
let serial = 0;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'botlink-broker-check-'));
  cloud = await createTestService({
    seed: { accounts: [{ accessKeyId: 'AK', secretKey: SECRET, vendors: [{ vendorId: 'V1', bots: [] }] }] },
  });
  const settings = brokerSettings(dir, {
    cloudUrl: cloud.url,
    secret: SECRET,
    tokenKey: Buffer.alloc(32, 9).toString('hex'),
    extra: { deviceTokensPerHour: TOKENS_PER_HOUR },
  });
  const config = parseBrokerConfig(settings, {});
  keys = brokerKeys(readTokenKey(config.tokenKeyFile));
  broker = await startBroker({ config, clock: systemClock, log: pino({ level: 'silent' }) });
});

afterAll(async () => {
  await broker?.close();
  await cloud?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const url = (): string => broker.url;
const operator = () => ({ actor: 'cli:test', audit: broker.audit });

async function enrolled(): Promise<{ device: TestDevice; botId: string }> {
  const { code } = await createCode(
    broker.store,
    keys,
    { vendorId: 'V1', binding: 'any-device', uses: 1, ttlS: 3600, kind: 'plain' },
    Date.now(),
    operator(),
  );
  const device = new TestDevice();
  return { device, botId: await device.mustEnroll(url(), { code, deviceId: `SN-CHECK-${process.pid}-${++serial}` }) };
}

const check = (device: TestDevice, body: Record<string, unknown> = {}) => device.send(url(), '/v1/check', body);

describe('POST /v1/check', () => {
  it('answers an active key its botId, keyId and state, without a call to the cloud', async () => {
    const { device, botId } = await enrolled();
    // The cloud answers nothing: a token (none is cached yet) cannot be had, a check still can.
    cloud.faults.nextResponses('http-500-html', 1000);
    try {
      const checked = await check(device);
      expect(checked.status).toBe(200);
      expect(checked.json).toEqual({ botId, keyId: device.keyId, state: 'active' });
      expect((await device.token(url())).status).not.toBe(200);
    } finally {
      cloud.faults.reset();
    }
  });

  it('is not counted in deviceTokensPerHour, nor refused by it', async () => {
    const { device } = await enrolled();
    for (let i = 0; i < TOKENS_PER_HOUR + 2; i++) expect((await check(device)).status).toBe(200);
    for (let i = 0; i < TOKENS_PER_HOUR; i++) expect((await device.token(url())).status).toBe(200);
    expect((await device.token(url())).json['code']).toBe('rate-limited');
    // The token hour is spent; checks go on.
    expect((await check(device)).status).toBe(200);
  });

  it(`has its own limit, ${CHECKS_PER_HOUR} an hour per botId, answered 429 with Retry-After`, async () => {
    const { device } = await enrolled();
    for (let i = 0; i < CHECKS_PER_HOUR; i++) expect((await check(device)).status).toBe(200);
    const limited = await check(device);
    expect(limited.status).toBe(429);
    expect(limited.json['code']).toBe('rate-limited');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    // Its checks spent none of its tokens.
    expect((await device.token(url())).status).toBe(200);
  });

  it('takes every check a token request takes: a revoked key, an unknown key, a replay, a body that is not {}', async () => {
    const { device, botId } = await enrolled();
    const nonce = 'check-nonce-0123456789';
    expect((await device.send(url(), '/v1/check', {}, { nonce })).status).toBe(200);
    expect((await device.send(url(), '/v1/check', {}, { nonce })).json['code']).toBe('replayed');
    expect((await check(device, { minValidityS: 60 })).json['code']).toBe('bad-request');
    expect((await check(new TestDevice())).json['code']).toBe('unknown-key');
    await revoke(broker.store, botId, Date.now(), operator());
    const refused = await check(device);
    expect([refused.status, refused.json['code']]).toEqual([403, 'revoked']);
  });

  it("a token request carrying the agent's version is answered as before", async () => {
    const { device, botId } = await enrolled();
    const issued = await device.token(url(), { minValidityS: 60, agent: { version: '0.2.0' } });
    expect([issued.status, issued.json['botId']]).toEqual([200, botId]);
  });
});
