import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningBroker, startBroker } from '../../../src/broker/broker.js';
import { parseBrokerConfig } from '../../../src/broker/config.js';
import { brokerKeys, readTokenKey } from '../../../src/broker/keys.js';
import { createCode } from '../../../src/broker/operator.js';
import { type Clock, systemClock, withWallClock } from '../../../src/clock.js';
import { createTestService, type TestService } from '../../../src/service/testing.js';
import { TestDevice } from '../../helpers/broker-device.js';
import { brokerSettings } from '../../helpers/broker-files.js';
import { vendorSeed } from '../../helpers/broker-rig.js';
import { type PostgresServer, startPostgres } from '../../helpers/postgres.js';

// An honest store (issue 33): health says 503 when PostgreSQL does not answer or this replica's clock is
// more than 30 s from the store's, and requests are then 503 store-unavailable with Retry-After — never a
// bare 500 — until the store is back.
const SECRET = 'SK-store-health-6d1a';
let pg: PostgresServer;
let cloud: TestService;
let dir: string;
const running: RunningBroker[] = [];

beforeAll(async () => {
  pg = await startPostgres();
  cloud = await createTestService({ seed: vendorSeed(SECRET) });
  dir = mkdtempSync(join(tmpdir(), 'botlink-store-health-'));
}, 120_000);

afterAll(async () => {
  for (const b of running) await b.close();
  await cloud?.close();
  await pg?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** A broker in this process on a fresh database, its clock `clock`, and a device (enrolled on it unless told not to). */
async function brokerOn(
  clock: Clock,
  enroll = true,
): Promise<{ broker: RunningBroker; url: string; database: string; device: TestDevice }> {
  const database = await pg.freshDatabase();
  const settings = brokerSettings(mkdtempSync(join(dir, 'vendor-')), { cloudUrl: cloud.url, secret: SECRET, store: database });
  const config = parseBrokerConfig(settings, {});
  const broker = await startBroker({ config, clock, log: pino({ level: 'silent' }) });
  running.push(broker);
  const device = new TestDevice();
  if (!enroll) return { broker, url: broker.url, database, device };
  const issued = await createCode(
    broker.store,
    brokerKeys(readTokenKey(config.tokenKeyFile)),
    { vendorId: 'V1', binding: 'any-device', uses: 1, ttlS: 600, kind: 'plain' },
    Date.now(),
    { actor: 'cli:test', audit: broker.audit },
  );
  await device.mustEnroll(broker.url, { code: issued.code, deviceId: `SN-${running.length}` });
  return { broker, url: broker.url, database, device };
}

async function health(url: string): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${url}/v1/health`);
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

describe('the broker on a store that stops answering', () => {
  it('health is 503 store-unreachable and requests 503 store-unavailable with Retry-After, until the store is back', async () => {
    const { url, database, device } = await brokerOn(systemClock);
    expect(await health(url)).toEqual({ status: 200, json: { ok: true, store: 'postgres' } });
    const name = new URL(database).pathname.slice(1);
    const admin = database.replace(/\/[^/]+$/, '/postgres');
    await pg.query(admin, `ALTER DATABASE "${name}" ALLOW_CONNECTIONS false`);
    await pg.query(admin, 'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [name]);
    try {
      expect(await health(url)).toMatchObject({ status: 503, json: { ok: false, store: 'postgres', error: 'store-unreachable' } });
      const refused = await device.token(url);
      expect([refused.status, refused.json['code']]).toEqual([503, 'store-unavailable']);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    } finally {
      await pg.query(admin, `ALTER DATABASE "${name}" ALLOW_CONNECTIONS true`);
    }
    expect(await health(url)).toEqual({ status: 200, json: { ok: true, store: 'postgres' } });
    expect((await device.token(url)).status).toBe(200);
  }, 60_000);

  it('a replica whose clock is 60 s from the store’s serves nothing: health 503 clock-skew, requests 503 store-unavailable', async () => {
    const { url, device } = await brokerOn(
      withWallClock(() => Date.now() + 60_000),
      false,
    );
    expect(await health(url)).toMatchObject({ status: 503, json: { ok: false, store: 'postgres', error: 'clock-skew' } });
    // Signed with the broker's time (its Date), as a device whose clock follows the broker's would: refused before any key is read.
    const refused = await device.token(url, {}, { ts: Date.now() + 60_000 });
    expect([refused.status, refused.json['code']]).toEqual([503, 'store-unavailable']);
    expect(String(refused.json['msg'])).toMatch(/clock is 60 s from the store's/);
  }, 60_000);
});
