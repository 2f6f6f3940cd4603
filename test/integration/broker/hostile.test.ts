import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestService, type TestService } from '../../../src/service/testing.js';
import { TestDevice } from '../../helpers/broker-device.js';
import { type BrokerProc, type BrokerRig, brokerRig, vendorSeed } from '../../helpers/broker-rig.js';
import { privateDaemonBundle, type Bundle } from '../../helpers/bundle.js';
import { CONTENT_TYPES, chance, fuzzSeed, int, pick, prng, type Rng } from '../../helpers/fuzz.js';
import { rssKiB } from '../../../scripts/lib/procfs.js';

// A hostile network in front of the broker (issue 25): whatever arrives, the broker answers a 4xx with
// {code, msg}, stays up, keeps its memory, and causes no cloud call.
const SECRET = 'SK-hostile-51d0';
let bundle: Bundle;
let cloud: TestService;
let rig: BrokerRig;
let broker: BrokerProc;
let url: string;
let device: TestDevice;
let cloudCalls = 0;

beforeAll(async () => {
  bundle = await privateDaemonBundle('test-broker-hostile-');
  cloud = await createTestService({ seed: vendorSeed(SECRET) });
  rig = brokerRig({ bundle: bundle.file, cloudUrl: cloud.url, secret: SECRET });
  const code = await rig.code();
  broker = await rig.start();
  url = broker.url;
  device = new TestDevice();
  await device.mustEnroll(url, { code, deviceId: 'SN-HOSTILE' });
  expect((await device.token(url)).status).toBe(200);
  cloud.events.on('http-request', () => cloudCalls++);
}, 60_000);

afterAll(async () => {
  await rig?.close();
  await cloud?.close();
  bundle?.dispose();
});

interface Raw {
  status: number;
  body: string;
}

/** One request with exactly these method, path, headers and body bytes. */
function raw(method: string, path: string, headers: Record<string, string>, body: Buffer): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const PATHS = ['/v1/enroll', '/v1/token', '/v1/rotate', '/v1/token?x=1', '/v1/../v1/token', '/v2/token', '/', '/metrics/../v1/token'];
const METHODS = ['POST', 'POST', 'POST', 'PUT', 'GET', 'DELETE', 'PATCH'];

function fuzzAuthorization(rng: Rng): string {
  const good = `BOTLINK-ED25519 keyId=${device.keyId},ts=${Date.now()},nonce=${'n'.repeat(16 + int(rng, 40))},sig=${'A'.repeat(86)}`;
  const variants = [
    () => good,
    () => good.slice(0, int(rng, good.length)),
    () => good.replace(/[a-z]/, 'Z'),
    () => `BOTLINK-ED25519 ${'keyId='.repeat(int(rng, 50))}`,
    () => Buffer.from(Array.from({ length: int(rng, 200) }, () => 0x20 + int(rng, 95))).toString('latin1'),
    () => `Bearer ${'x'.repeat(int(rng, 500))}`,
    () => good.replace(/ts=\d+/, `ts=${'9'.repeat(13)}`),
    () => good.replace(/nonce=[^,]+/, `nonce=${'x'.repeat(64)}`),
  ];
  return pick(rng, variants)();
}

function fuzzBody(rng: Rng): Buffer {
  const bodies = [
    () => Buffer.from('{}'),
    () => Buffer.from(JSON.stringify({ code: 'x'.repeat(int(rng, 200)), deviceId: 'd', publicKey: device.publicKey })),
    () => Buffer.from(JSON.stringify({ minValidityS: pick(rng, [-1, 1e308, 'x', null, 3.5, 86_401]) })),
    () => Buffer.from('['.repeat(int(rng, 5000))),
    () => Buffer.from(Array.from({ length: int(rng, 2000) }, () => int(rng, 256))),
    () => Buffer.from(JSON.stringify({ publicKey: 'A'.repeat(43), proof: 'B'.repeat(86) })),
    () => Buffer.from(`{"deviceId":"\u0000\u001b]0;x\u0007","publicKey":1}`),
    () => Buffer.from('{"a":'.repeat(1000)),
  ];
  return pick(rng, bodies)();
}

describe('botlink broker under hostile input', () => {
  it('fuzzed headers and bodies: a 4xx with {code, msg} every time, and no cloud call', async () => {
    const seed = fuzzSeed(25);
    const rng = prng(seed);
    const before = cloudCalls;
    for (let i = 0; i < 400; i++) {
      const headers: Record<string, string> = {};
      if (!chance(rng, 0.1)) headers['content-type'] = pick(rng, CONTENT_TYPES);
      if (!chance(rng, 0.1)) headers['authorization'] = fuzzAuthorization(rng);
      const reply = await raw(pick(rng, METHODS), pick(rng, PATHS), headers, fuzzBody(rng));
      expect(reply.status, `seed ${seed} request ${i}: ${reply.body}`).toBeGreaterThanOrEqual(400);
      expect(reply.status, `seed ${seed} request ${i}: ${reply.body}`).toBeLessThan(500);
      expect(reply.body, `seed ${seed} request ${i}: ${reply.status}`).not.toBe('');
      expect(JSON.parse(reply.body)).toEqual({ code: expect.any(String), msg: expect.any(String) });
    }
    expect(cloudCalls - before).toBe(0);
  });

  it('an oversize body is refused with 413, declared or streamed', async () => {
    const big = Buffer.alloc(1024 * 1024, 0x61);
    const declared = await raw('POST', '/v1/token', { 'content-type': 'application/json', 'content-length': String(big.length) }, big);
    expect(declared.status).toBe(413);
    const streamed = await raw('POST', '/v1/enroll', { 'content-type': 'application/json', 'transfer-encoding': 'chunked' }, big);
    expect(streamed.status).toBe(413);
    expect(JSON.parse(streamed.body)['code']).toBe('too-large');
  });

  it('10,000 bad signatures: all refused, the broker up, its memory bounded, no cloud call', async () => {
    const pid = broker.child.pid as number;
    const before = cloudCalls;
    const rssBefore = rssKiB(pid);
    const body = '{}';
    let refused = 0;
    const worker = async (n: number): Promise<void> => {
      for (let i = 0; i < n; i++) {
        const auth = `BOTLINK-ED25519 keyId=${device.keyId},ts=${Date.now()},nonce=bad-signature-${process.pid}-${n}-${i}-${Math.random().toString(36).slice(2)},sig=${'A'.repeat(86)}`;
        const reply = await raw('POST', '/v1/token', { 'content-type': 'application/json', authorization: auth }, Buffer.from(body));
        if (reply.status === 401 && reply.body.includes('bad-signature')) refused++;
      }
    };
    await Promise.all(Array.from({ length: 20 }, () => worker(500)));
    expect(refused).toBe(10_000);
    expect(cloudCalls - before).toBe(0);
    expect(broker.child.exitCode).toBeNull();
    expect(rssKiB(pid) - rssBefore).toBeLessThan(32 * 1024);
    expect((await device.token(url)).status).toBe(200);
  }, 120_000);
});
