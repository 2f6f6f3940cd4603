import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuditTrail } from '../../../src/broker/audit/trail.js';
import { createTestService, type TestService } from '../../../src/service/testing.js';
import { revoke } from '../../../src/broker/operator.js';
import { openStore } from '../../../src/broker/store/open.js';
import { systemClock } from '../../../src/clock.js';
import { adminCall, sessionOf } from '../../helpers/admin-client.js';
import { TestDevice } from '../../helpers/broker-device.js';
import { type BrokerProc, type BrokerRig, brokerRig, vendorSeed } from '../../helpers/broker-rig.js';
import { privateDaemonBundle, type Bundle } from '../../helpers/bundle.js';
import { startPostgres, type PostgresServer } from '../../helpers/postgres.js';

// Two `botlink broker` processes on one PostgreSQL (DESIGN §3.7 "Scale"): every rule is decided by the
// database, so what one replica did is what the other sees.
const SECRET = 'SK-replicas-9c1e';
let bundle: Bundle;
let cloud: TestService;
let pg: PostgresServer;
let rig: BrokerRig;
let replicas: BrokerProc[] = [];
/** The one database both replicas use. */
let storeUrl: string;

beforeAll(async () => {
  pg = await startPostgres();
  storeUrl = await pg.freshDatabase();
  bundle = await privateDaemonBundle('test-broker-replicas-');
  cloud = await createTestService({ seed: vendorSeed(SECRET) });
  rig = brokerRig({
    bundle: bundle.file,
    cloudUrl: cloud.url,
    secret: SECRET,
    store: storeUrl,
    extra: { deviceTokensPerHour: 4, enrollPerMinute: 100, adminListen: '127.0.0.1:0' },
  });
  // Started together: the schema is made once, under the store's own lock.
  replicas = await Promise.all([rig.start(), rig.start()]);
}, 120_000);

afterAll(async () => {
  await rig?.close();
  await cloud?.close();
  await pg?.stop();
  bundle?.dispose();
});

const [a, b] = [() => replicas[0]!.url, () => replicas[1]!.url];

describe('two broker replicas on one PostgreSQL', () => {
  it('health says postgres on both', async () => {
    for (const url of [a(), b()]) expect(await (await fetch(`${url}/v1/health`)).json()).toEqual({ ok: true, store: 'postgres' });
  });

  it('a code of one use raced from both replicas enrolls exactly one device', async () => {
    const code = await rig.code();
    const devices = Array.from({ length: 10 }, () => new TestDevice());
    const replies = await Promise.all(devices.map((d, i) => d.enroll(i % 2 ? a() : b(), { code, deviceId: `SN-RACE-${i}` })));
    const ok = replies.filter((r) => r.status === 200);
    expect(ok).toHaveLength(1);
    for (const r of replies.filter((x) => x.status !== 200)) expect(r.json['code']).toBe('bad-code');
  });

  it('a request replayed to the other replica is refused', async () => {
    const device = new TestDevice();
    await device.mustEnroll(a(), { code: await rig.code(), deviceId: 'SN-REPLAY' });
    const nonce = 'replayed-across-replicas';
    const ts = Date.now();
    expect((await device.token(a(), {}, { nonce, ts })).status).toBe(200);
    const replay = await device.token(b(), {}, { nonce, ts });
    expect(replay.status).toBe(401);
    expect(replay.json['code']).toBe('replayed');
  });

  it('revocation through one store holds on both replicas, and rate limits count across them', async () => {
    const device = new TestDevice();
    const botId = await device.mustEnroll(b(), { code: await rig.code(), deviceId: 'SN-LIMIT' });
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await device.token(i % 2 ? a() : b())).status);
    expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
    const revoked = await rig.cli(['revoke', '--config', rig.configFile, botId]);
    expect(revoked.code, revoked.stderr).toBe(0);
    for (const url of [a(), b()]) expect((await device.token(url)).json['code']).toBe('revoked');
  });

  it('the first tokens of many devices at once: one cloud getToken per botId across both replicas', async () => {
    const code = await rig.code(['--uses', '20']);
    const devices = Array.from({ length: 20 }, () => new TestDevice());
    for (const [i, d] of devices.entries()) await d.mustEnroll(a(), { code, deviceId: `SN-FLIGHT-${i}` });
    let getTokens = 0;
    const count = (e: { path: string }): void => {
      if (e.path === '/auth/getToken') getTokens++;
    };
    cloud.events.on('http-request', count);
    try {
      // Each device asks both replicas at once: the second ask waits on the first's cloud call.
      const replies = await Promise.all(devices.flatMap((d) => [d.token(a()), d.token(b())]));
      for (const r of replies) expect(r.status, JSON.stringify(r.json)).toBe(200);
    } finally {
      cloud.events.off('http-request', count);
    }
    expect(getTokens).toBe(20);
  });

  it('revocation is final: 30 trials of a device rotating on one replica as the operator revokes it, 0 keys left active', async () => {
    // The operator's revoke, as `broker revoke` runs it: on the store, from a third process's connection.
    const operator = await openStore(storeUrl, { clock: systemClock });
    const by = { actor: 'cli:test', audit: new AuditTrail({ store: operator, log: pino({ level: 'silent' }), clock: systemClock }) };
    const trials = 30;
    const survivors: string[] = [];
    let rotated = 0;
    // One code for every trial's enrollment, made by one `broker code` process rather than one per trial: the
    // enrollment only sets the race up (about half of this test's time went to those processes).
    const code = await rig.code(['--uses', String(trials)]);
    try {
      for (let trial = 0; trial < trials; trial++) {
        const device = new TestDevice();
        const botId = await device.mustEnroll(a(), { code, deviceId: `SN-REVOKE-RACE-${trial}` });
        const next = new TestDevice();
        // The rotation and the revoke land together: without the botId's lock, a revoke that waited on the old
        // key's row never sees the key the rotation inserted (READ COMMITTED), and that key stays active.
        const [rotation] = await Promise.all([
          device.rotate(trial % 2 ? a() : b(), next),
          new Promise((resolve) => setTimeout(resolve, trial % 3)).then(() => revoke(operator, botId, Date.now(), by)),
        ]);
        if (rotation.status === 200) rotated++;
        if ((await operator.findDeviceByBotId(botId))?.keyId) survivors.push(botId);
        // Whichever key the device holds now is refused on both replicas: revoked, or never enrolled (the revoke came first).
        for (const url of [a(), b()]) {
          expect((await device.token(url)).status).toBe(403);
          expect((await next.token(url)).status).toBe(rotation.status === 200 ? 403 : 401);
        }
      }
    } finally {
      await by.audit.close();
      await operator.close();
    }
    console.log(`revoke during rotation: ${trials} trials, ${rotated} rotated first, ${survivors.length} active keys left`);
    expect(survivors).toEqual([]);
  }, 120_000);

  // Last: it kills the first replica.
  it('an admin token and its console sessions revoked on the store are refused at once by both replicas', async () => {
    const made = await rig.cli(['admin-token', 'create', '--config', rig.configFile, '--name', 'replica-ops', '--role', 'operator']);
    expect(made.code, made.stderr).toBe(0);
    const token = made.stdout.trim().split('\n').at(-1) ?? '';
    const [adminA, adminB] = await Promise.all(replicas.map((r) => r.adminUrl()));
    if (adminA === undefined || adminB === undefined) throw new Error('no admin listener');
    // A session opened on one replica is known to the other: the store keeps it.
    const session = sessionOf(await adminCall(adminA, '/admin/session', { method: 'POST', body: { token }, headers: { origin: adminA } }));
    expect((await adminCall(adminB, '/admin/v1/me', { cookie: session, headers: { origin: adminB } })).status).toBe(200);
    expect((await adminCall(adminB, '/admin/v1/me', { token })).status).toBe(200);
    const revoked = await rig.cli(['admin-token', 'revoke', '--config', rig.configFile, 'replica-ops']);
    expect(revoked.stdout).toContain('1 session(s) ended');
    for (const base of [adminA, adminB]) {
      expect((await adminCall(base, '/admin/v1/me', { token })).status).toBe(401);
      expect((await adminCall(base, '/admin/v1/me', { cookie: session })).status).toBe(401);
    }
  });

  it('kill -9 of a replica during a renewal: the other replica renews at once (the lock dies with its connection)', async () => {
    const device = new TestDevice();
    await device.mustEnroll(b(), { code: await rig.code(), deviceId: 'SN-KILL-RENEW' });
    cloud.faults.setLatencyMs(3000);
    const first = replicas[0]!;
    try {
      const asked = new Promise<void>((resolve) => cloud.events.once('http-request', () => resolve()));
      const pending = device.token(a()).catch((err: unknown) => err);
      await asked;
      first.child.kill('SIGKILL');
      expect((await first.exit).signal).toBe('SIGKILL');
      expect(await pending).toBeInstanceOf(Error);
      // A lock still held would hold this request until the test's timeout.
      const reply = await device.token(b());
      expect(reply.status, JSON.stringify(reply.json)).toBe(200);
    } finally {
      cloud.faults.setLatencyMs(0);
    }
  });
});
