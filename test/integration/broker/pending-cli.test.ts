import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestService, type TestService } from '../../../src/service/testing.js';
import { TestDevice } from '../../helpers/broker-device.js';
import { type BrokerProc, type BrokerRig, brokerRig, vendorSeed } from '../../helpers/broker-rig.js';
import { privateDaemonBundle, type Bundle } from '../../helpers/bundle.js';

// `botlink broker pending | accept | reject` (DESIGN §3.1, §3.7) as the operator runs them, against a
// running `botlink broker` on the same store and the reference cloud.

const SECRET = 'SK-broker-pending-cli-secret';
let bundle: Bundle;
let cloud: TestService;
let rig: BrokerRig;
let broker: BrokerProc;
let serial = 0;

beforeAll(async () => {
  bundle = await privateDaemonBundle('test-broker-pending-cli-');
  cloud = await createTestService({ seed: vendorSeed(SECRET) });
  rig = brokerRig({
    bundle: bundle.file,
    cloudUrl: cloud.url,
    secret: SECRET,
    // First asks per source and minute out of the way: every device here asks from 127.0.0.1.
    extra: { pendingEnrollment: { V1: { devicePattern: 'SN-[0-9]+' } }, enrollPerMinute: 50 },
  });
  broker = await rig.start();
});
afterAll(async () => {
  await rig?.close();
  await cloud?.close();
  bundle?.dispose();
});

const nextSerial = (): string => `SN-${process.pid}${++serial}`;
const config = (): string[] => ['--config', rig.configFile];

/** A new key that asked to wait for `deviceId`: 202. */
async function waiting(deviceId: string): Promise<TestDevice> {
  const device = new TestDevice();
  const reply = await device.enroll(broker.url, { vendorId: 'V1', deviceId, name: 'dock 4' });
  expect(reply.status, JSON.stringify(reply.json)).toBe(202);
  return device;
}

describe('botlink broker pending | accept | reject', () => {
  it('pending lists the waiting keys (--json: one array of pending items); accept enrolls one and prints its botId last', async () => {
    const deviceId = nextSerial();
    const chosen = await waiting(deviceId);
    const other = await waiting(deviceId);
    const listed = await rig.cli(['pending', ...config(), '--vendor-id', 'V1', '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    const items = (JSON.parse(listed.stdout) as Record<string, unknown>[]).filter((i) => i['deviceId'] === deviceId);
    expect(items).toHaveLength(2);
    for (const item of items)
      expect(Object.keys(item).sort()).toEqual([
        'deviceId',
        'duplicates',
        'firstAsked',
        'keyId',
        'lastAsked',
        'name',
        'source',
        'vendorId',
      ]);
    expect(items.map((i) => i['duplicates'])).toEqual([1, 1]);
    const text = await rig.cli(['pending', ...config(), '--source', '127.0.0.0/8']);
    expect(text.stdout.split('\n')[0]).toBe('keyId\tvendorId\tdeviceId\tname\tsource\tfirstAsked\tlastAsked\tduplicates');
    expect(text.stdout).toContain(`${chosen.keyId}\tV1\t${deviceId}\tdock 4\t127.0.0.1\t`);
    expect((await rig.cli(['pending', ...config(), '--source', '10.0.0.0/8', '--json'])).stdout.trim()).toBe('[]');

    // Another serial than the key's, a keyId not whole, a key that does not wait: 65, nothing bound.
    expect((await rig.cli(['accept', ...config(), chosen.keyId, '--device-id', nextSerial()])).code).toBe(65);
    expect((await rig.cli(['accept', ...config(), chosen.keyId.slice(0, 8), '--device-id', deviceId])).code).toBe(65);
    expect((await rig.cli(['accept', ...config(), 'f'.repeat(32), '--device-id', deviceId])).code).toBe(65);
    const accepted = await rig.cli(['accept', ...config(), chosen.keyId, '--device-id', deviceId]);
    expect(accepted.code, accepted.stderr).toBe(0);
    const botId = /^botId: (\S+)$/.exec(accepted.stdout.trim().split('\n').at(-1) ?? '')?.[1];
    expect(botId).toMatch(/^bot-/);
    expect(accepted.stderr).toContain('1 other waiting key(s) rejected');
    const enrolled = await chosen.enroll(broker.url, { vendorId: 'V1', deviceId });
    expect(enrolled.status).toBe(200);
    expect(enrolled.json).toEqual({ botId, vendorId: 'V1', keyId: chosen.keyId });
    const refused = await other.token(broker.url);
    expect([refused.status, refused.json['code']]).toEqual([403, 'rejected']);
    const devices = JSON.parse((await rig.cli(['devices', ...config(), '--json'])).stdout) as { keyId: string; state: string }[];
    expect(devices.find((d) => d.keyId === chosen.keyId)?.state).toBe('active');
    expect(devices.find((d) => d.keyId === other.keyId)?.state).toBe('rejected');
    // Accepted already: it no longer waits.
    expect((await rig.cli(['accept', ...config(), chosen.keyId, '--device-id', deviceId])).code).toBe(65);
  });

  it('reject refuses one key for good, or a vendor’s flood in one go; its usage mistakes are 64', async () => {
    const one = await waiting(nextSerial());
    const r = await rig.cli(['reject', ...config(), one.keyId]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('rejected 1 key(s)\n');
    expect((await rig.cli(['reject', ...config(), one.keyId])).code).toBe(65);
    const reply = await one.enroll(broker.url, { vendorId: 'V1', deviceId: nextSerial() });
    expect([reply.status, reply.json['code']]).toEqual([403, 'rejected']);

    const flood = await Promise.all([nextSerial(), nextSerial(), nextSerial()].map(waiting));
    // None first asked a day ago: nothing to reject.
    expect((await rig.cli(['reject', ...config(), '--vendor-id', 'V1', '--first-asked-before', '1d'])).stdout).toBe('rejected 0 key(s)\n');
    const bulk = await rig.cli(['reject', ...config(), '--vendor-id', 'V1', '--source', '127.0.0.1']);
    expect(bulk.code, bulk.stderr).toBe(0);
    expect(bulk.stdout).toBe('rejected 3 key(s)\n');
    for (const device of flood) expect((await device.token(broker.url)).json['code']).toBe('rejected');
    const devices = JSON.parse((await rig.cli(['devices', ...config(), '--json'])).stdout) as { keyId: string; state: string }[];
    expect(devices.filter((d) => flood.some((f) => f.keyId === d.keyId)).map((d) => d.state)).toEqual(['rejected', 'rejected', 'rejected']);

    expect((await rig.cli(['reject', ...config()])).code).toBe(64);
    expect((await rig.cli(['reject', ...config(), one.keyId, '--vendor-id', 'V1'])).code).toBe(64);
    expect((await rig.cli(['reject', ...config(), '--source', '127.0.0.1'])).code).toBe(64);
    expect((await rig.cli(['reject', ...config(), '--vendor-id', 'V1', '--first-asked-before', 'soon'])).code).toBe(64);
    expect((await rig.cli(['reject', ...config(), '--vendor-id', 'V1', '--source', 'not-a-block'])).code).toBe(65);
  });
});
