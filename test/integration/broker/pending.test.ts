import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBroker, type RunningBroker } from '../../../src/broker/broker.js';
import { parseBrokerConfig } from '../../../src/broker/config.js';
import { parsePreauth, preauthorize, revoke } from '../../../src/broker/operator.js';
import { openStore } from '../../../src/broker/store/open.js';
import type { BrokerStore } from '../../../src/broker/store/types.js';
import {
  acceptPending,
  dropStalePending,
  listPending,
  PENDING_KEPT_MS,
  PendingActionError,
  rejectPending,
} from '../../../src/broker/pending-operator.js';
import { operatorRegistrar } from '../../../src/broker/registrar.js';
import { CloudClient } from '../../../src/cloud/client.js';
import { systemClock } from '../../../src/clock.js';
import { createTestService, type TestService } from '../../../src/service/testing.js';
import { type BrokerReply, TestDevice } from '../../helpers/broker-device.js';
import { brokerSettings } from '../../helpers/broker-files.js';
import { ManualClock } from '../../helpers/manual-clock.js';
import { startPostgres } from '../../helpers/postgres.js';

// DESIGN §3.7 "Enrollment with no code", on the wire: a real broker on SQLite and the reference cloud.

const SECRET = 'SK-broker-pending-secret';
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
let registrarCloud: CloudClient;
let dir: string;
let logFile: string;
let serial = 0;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'botlink-broker-pending-'));
  cloud = await createTestService({ seed, accessTtlS: 3600 });
  logFile = join(dir, 'broker.log');
  const settings = brokerSettings(dir, {
    cloudUrl: cloud.url,
    secret: SECRET,
    // A flood's limit small enough to reach; first asks per source and minute out of its way.
    extra: { pendingEnrollment: { V1: { devicePattern: 'SN-[0-9A-Za-z-]+' } }, pendingPerSource: 3, enrollPerMinute: 50 },
  });
  const config = parseBrokerConfig(settings, {});
  broker = await startBroker({ config, clock: systemClock, log: pino({ level: 'info' }, pino.destination({ dest: logFile, sync: true })) });
  registrarCloud = new CloudClient({ baseUrl: cloud.url, accessKeyId: 'AK', secretKey: { reveal: () => SECRET }, clock: systemClock });
});

afterAll(async () => {
  await broker?.close();
  await registrarCloud?.close();
  await cloud?.close();
  rmSync(dir, { recursive: true, force: true });
});

const url = (): string => broker.url;
const operator = () => ({ actor: 'cli:test', audit: broker.audit });
const nextSerial = (): string => `SN-${process.pid}-${++serial}`;
/** Each test asks from a loopback address of its own: pendingPerSource counts per source for the whole file. */
let lastSource = 10;
const nextSource = (): string => `127.0.0.${++lastSource}`;

/** `broker accept` as an operator's process runs it: a cloud client of its own, on `store` (the broker's by default). */
function accept(keyId: string, deviceId: string, store: BrokerStore = broker.store): Promise<{ botId: string; rejected: number }> {
  return acceptPending(
    { store, register: operatorRegistrar(registrarCloud, systemClock), now: () => Date.now() },
    keyId,
    deviceId,
    operator(),
  );
}

function expectPending(reply: BrokerReply, device: TestDevice): void {
  expect(reply.status, JSON.stringify(reply.json)).toBe(202);
  expect(reply.json).toEqual({ state: 'pending', keyId: device.keyId });
  expect(reply.headers.get('retry-after')).toBe('60');
}

function expectRefused(reply: BrokerReply, status: number, code: string): void {
  expect({ status: reply.status, code: reply.json['code'] }, JSON.stringify(reply.json)).toEqual({ status, code });
}

describe('enroll with no code (DESIGN §3.7)', () => {
  it('waits: 202 with Retry-After, at most twice a minute; token and rotate are 403 pending; the ask is pinned to its device', async () => {
    const device = new TestDevice();
    const deviceId = nextSerial();
    const from = nextSource();
    const body = { vendorId: 'V1', deviceId, name: 'hall robot' };
    expectPending(await device.enroll(url(), body, { from }), device);
    expectPending(await device.enroll(url(), body, { from }), device);
    expectRefused(await device.enroll(url(), body, { from }), 429, 'rate-limited');
    expectRefused(await device.token(url(), {}, { from }), 403, 'pending');
    expectRefused(await device.rotate(url(), new TestDevice(), { from }), 403, 'pending');
    // Another serial or another vendor for the same key: 409, whatever its rate.
    expectRefused(await device.enroll(url(), { ...body, deviceId: nextSerial() }, { from }), 409, 'device-exists');
    expectRefused(await device.enroll(url(), { ...body, vendorId: 'V2' }, { from }), 409, 'device-exists');
    const [item] = await listPending(broker.store, { vendorId: 'V1', source: `${from}/32` });
    expect(item).toEqual({
      keyId: device.keyId,
      deviceId,
      vendorId: 'V1',
      name: 'hall robot',
      source: from,
      firstAsked: expect.any(Number),
      lastAsked: expect.any(Number),
      duplicates: 0,
    });
    expect(item?.lastAsked).toBeGreaterThanOrEqual(item?.firstAsked ?? Infinity);
  });

  it('/v1/check answers a waiting key 202 pending (its asks shared with enroll), and once accepted 200 active', async () => {
    const device = new TestDevice();
    const deviceId = nextSerial();
    const from = nextSource();
    expectPending(await device.enroll(url(), { vendorId: 'V1', deviceId }, { from }), device);
    expectPending(await device.send(url(), '/v1/check', {}, { from }), device);
    expectRefused(await device.send(url(), '/v1/check', {}, { from }), 429, 'rate-limited');
    const { botId } = await accept(device.keyId, deviceId);
    const checked = await device.send(url(), '/v1/check', {}, { from });
    expect(checked.status, JSON.stringify(checked.json)).toBe(200);
    expect(checked.json).toEqual({ botId, keyId: device.keyId, state: 'active' });
  });

  it('refuses an unlisted vendor or serial (403 bad-code) and a device the broker holds (409), writing nothing', async () => {
    const from = nextSource();
    const device = new TestDevice();
    expectRefused(await device.enroll(url(), { vendorId: 'V2', deviceId: nextSerial() }, { from }), 403, 'bad-code');
    expectRefused(await device.enroll(url(), { vendorId: 'V1', deviceId: 'XX-not-a-listed-serial' }, { from }), 403, 'bad-code');
    expectRefused(await device.enroll(url(), { deviceId: nextSerial() }, { from }), 403, 'bad-code');
    // A device enrolled, then its key revoked: held in a state other than pending.
    const held = nextSerial();
    const first = new TestDevice();
    expectPending(await first.enroll(url(), { vendorId: 'V1', deviceId: held }, { from }), first);
    const { botId } = await accept(first.keyId, held);
    await revoke(broker.store, botId, Date.now(), operator());
    expectRefused(await device.enroll(url(), { vendorId: 'V1', deviceId: held }, { from }), 409, 'device-exists');
    expect(await broker.store.findKey(device.keyId)).toBeUndefined();
  });

  it('a pre-authorised key enrolls at once, under the vendor it names and only that one', async () => {
    const device = new TestDevice();
    const deviceId = nextSerial();
    await preauthorize(broker.store, parsePreauth(`${deviceId},${device.publicKey}\n`, 'V1', Date.now()), operator());
    expectRefused(await device.enroll(url(), { vendorId: 'V2', deviceId }), 403, 'bad-code');
    const reply = await device.enroll(url(), { vendorId: 'V1', deviceId });
    expect(reply.status, JSON.stringify(reply.json)).toBe(200);
    expect(reply.json).toEqual({ botId: expect.any(String), vendorId: 'V1', keyId: device.keyId });
  });

  it('accept enrolls the key: its next enroll is 200 as a retry, its token flows; the other key that waited is rejected everywhere', async () => {
    const deviceId = nextSerial();
    const chosen = new TestDevice();
    const impostor = new TestDevice();
    const body = { vendorId: 'V1', deviceId };
    expectPending(await chosen.enroll(url(), body, { from: nextSource() }), chosen);
    expectPending(await impostor.enroll(url(), body, { from: nextSource() }), impostor);
    expect((await listPending(broker.store, { vendorId: 'V1' })).filter((p) => p.deviceId === deviceId).map((p) => p.duplicates)).toEqual([
      1, 1,
    ]);
    // The serial the operator expects must be the key's.
    await expect(accept(chosen.keyId, nextSerial())).rejects.toMatchObject({ status: 409 });
    await expect(accept('0'.repeat(32), deviceId)).rejects.toMatchObject({ status: 404 });
    const { botId, rejected } = await accept(chosen.keyId, deviceId);
    expect(rejected).toBe(1);
    const again = await chosen.enroll(url(), body);
    expect(again.status, JSON.stringify(again.json)).toBe(200);
    expect(again.json).toEqual({ botId, vendorId: 'V1', keyId: chosen.keyId });
    const token = await chosen.token(url());
    expect(token.status, JSON.stringify(token.json)).toBe(200);
    expect(token.json['botId']).toBe(botId);
    for (const reply of [await impostor.enroll(url(), body), await impostor.token(url()), await impostor.rotate(url(), new TestDevice())])
      expectRefused(reply, 403, 'rejected');
    // Accepted twice: the key no longer waits.
    await expect(accept(chosen.keyId, deviceId)).rejects.toBeInstanceOf(PendingActionError);
    const log = readFileSync(logFile, 'utf8');
    expect(log).toContain('"audit":"accept"');
    expect(log).toContain('"outcome":"another-accepted"');
  });

  it('a rejected key answers 403 rejected on every route, with a code too, and never waits again', async () => {
    const device = new TestDevice();
    const deviceId = nextSerial();
    const from = nextSource();
    expectPending(await device.enroll(url(), { vendorId: 'V1', deviceId }, { from }), device);
    expect(await rejectPending(broker.store, { keyId: device.keyId }, Date.now(), operator())).toBe(1);
    expectRefused(await device.enroll(url(), { vendorId: 'V1', deviceId }, { from }), 403, 'rejected');
    expectRefused(await device.enroll(url(), { code: 'AAAAA-AAAAA-AAAAA-AAAAA-AAAAA', deviceId }, { from }), 403, 'rejected');
    expectRefused(await device.token(url(), {}, { from }), 403, 'rejected');
    expectRefused(await device.rotate(url(), new TestDevice(), { from }), 403, 'rejected');
    await expect(rejectPending(broker.store, { keyId: device.keyId }, Date.now(), operator())).rejects.toMatchObject({ status: 404 });
    // A new key of the same serial may wait: the rejected one is final, not the device.
    const next = new TestDevice();
    expectPending(await next.enroll(url(), { vendorId: 'V1', deviceId }, { from }), next);
  });

  it('a flood of first asks from one source stops at pendingPerSource (429) writing nothing; another source still waits; a bulk reject clears it', async () => {
    const from = nextSource();
    const flood = Array.from({ length: 8 }, () => new TestDevice());
    const replies = await Promise.all(flood.map((d) => d.enroll(url(), { vendorId: 'V1', deviceId: nextSerial() }, { from })));
    expect(replies.filter((r) => r.status === 202)).toHaveLength(3);
    const refused = replies.filter((r) => r.status === 429);
    expect(refused).toHaveLength(5);
    for (const r of refused) expect(r.headers.get('retry-after')).toBe('60');
    const waiting = await listPending(broker.store, { source: from });
    expect(waiting).toHaveLength(3);
    const elsewhere = new TestDevice();
    expectPending(await elsewhere.enroll(url(), { vendorId: 'V1', deviceId: nextSerial() }, { from: nextSource() }), elsewhere);
    expect(await rejectPending(broker.store, { vendorId: 'V1', source: `${from}/32` }, Date.now(), operator())).toBe(3);
    expect(await listPending(broker.store, { source: from })).toEqual([]);
    expect(await broker.store.findPending(elsewhere.keyId)).toMatchObject({ keyId: elsewhere.keyId });
  });
});

describe('pendingRetryAfterS (an extension of §3.7): the broker says how soon a waiting key asks again', () => {
  it('answers Retry-After 5 and holds the key to two asks per 5 s: a device that waits as told is never refused', async () => {
    const own = mkdtempSync(join(tmpdir(), 'botlink-broker-pending-pace-'));
    // At a window's start, so the asks below fall in the windows the test names; only the wall moves.
    const clock = new ManualClock({ wall: Math.ceil(Date.now() / 5000) * 5000 });
    const settings = brokerSettings(own, {
      cloudUrl: cloud.url,
      secret: SECRET,
      extra: { pendingEnrollment: { V1: { devicePattern: 'SN-[0-9A-Za-z-]+' } }, pendingRetryAfterS: 5 },
    });
    const paced = await startBroker({ config: parseBrokerConfig(settings, {}), clock, log: pino({ level: 'silent' }) });
    try {
      const device = new TestDevice();
      const body = { vendorId: 'V1', deviceId: nextSerial() };
      const ask = () => device.enroll(paced.url, body, { ts: clock.wallNow() });
      const pending = async (): Promise<void> => {
        const reply = await ask();
        expect({ status: reply.status, retryAfter: reply.headers.get('retry-after') }, JSON.stringify(reply.json)).toEqual({
          status: 202,
          retryAfter: '5',
        });
      };
      await pending();
      await pending();
      clock.stepWall(4_900);
      const third = await ask();
      expectRefused(third, 429, 'rate-limited');
      expect(third.headers.get('retry-after')).toBe('1');
      // The next window, and then one ask per Retry-After, as the device is told: never refused.
      clock.stepWall(100);
      for (let i = 0; i < 4; i++) {
        await pending();
        clock.stepWall(5_000);
      }
    } finally {
      await paced.close();
      rmSync(own, { recursive: true, force: true });
    }
  });
});

describe('the 7-day drop', () => {
  it('drops a key first asked 7 days ago, audited by the broker; the key is unknown from then on', async () => {
    const device = new TestDevice();
    const deviceId = nextSerial();
    expectPending(await device.enroll(url(), { vendorId: 'V1', deviceId }, { from: nextSource() }), device);
    const firstAsked = (await broker.store.findPending(device.keyId))?.firstAsked ?? 0;
    // Keys the tests before asked earlier go first; this one, at exactly 7 days, still waits.
    await dropStalePending(broker.store, broker.audit, firstAsked + PENDING_KEPT_MS);
    expect(await broker.store.findPending(device.keyId)).toBeDefined();
    expect(await dropStalePending(broker.store, broker.audit, firstAsked + PENDING_KEPT_MS + 1)).toBeGreaterThanOrEqual(1);
    expect(await broker.store.findKey(device.keyId)).toBeUndefined();
    const dropped = readFileSync(logFile, 'utf8')
      .split('\n')
      .filter((l) => l.includes(device.keyId) && l.includes('"outcome":"dropped"'));
    expect(dropped.map((l) => JSON.parse(l) as Record<string, unknown>)).toEqual([
      expect.objectContaining({ audit: 'pending', actor: 'broker', deviceId, msg: 'pending key dropped' }),
    ]);
    expectRefused(await device.token(url()), 401, 'unknown-key');
  });
});

describe('accept on replicas (PostgreSQL)', () => {
  it('two operators accepting the keys of one device at once, on two replicas: one key bound, the other rejected', async () => {
    const server = await startPostgres();
    try {
      const spec = await server.freshDatabase();
      const [a, b] = [await openStore(spec, { clock: systemClock }), await openStore(spec, { clock: systemClock })];
      try {
        const deviceId = nextSerial();
        const keys = [new TestDevice(), new TestDevice()];
        for (const [i, key] of keys.entries()) {
          const row = {
            keyId: key.keyId,
            publicKey: key.publicKey,
            vendorId: 'V1',
            deviceId,
            appId: '',
            name: deviceId,
            source: `192.0.2.${i}`,
          };
          const created = await a.askPending({
            row: { ...row, type: 'PHYSICAL_ROBOT', firstAsked: Date.now(), lastAsked: Date.now() },
            sourceBucket: row.source,
            perSource: 50,
            perVendor: 10_000,
            window: { bucket: `ask:${key.keyId}/60000`, start: 0 },
          });
          expect(created).toBe('created');
        }
        // Both registered with the cloud (the same serial, the same botId); the store binds one.
        const outcomes = await Promise.allSettled([accept(keys[0]?.keyId ?? '', deviceId, a), accept(keys[1]?.keyId ?? '', deviceId, b)]);
        const won = outcomes.filter((o) => o.status === 'fulfilled');
        expect(won).toHaveLength(1);
        // The loser finds the key rejected (404) or loses the binding transaction to the winner (409), as it came.
        const lost = outcomes.flatMap((o) => (o.status === 'rejected' ? [(o.reason as PendingActionError).status] : []));
        expect(lost).toHaveLength(1);
        expect([404, 409]).toContain(lost[0]);
        const states = await Promise.all(keys.map(async (k) => (await b.findKey(k.keyId))?.state));
        expect(states.sort()).toEqual(['active', 'rejected']);
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    } finally {
      await server.stop();
    }
  }, 120_000);
});
