import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/native.js';
import { createTestService, type TestService } from '../../src/service/testing.js';
import { rssKiB } from '../../scripts/lib/procfs.js';
import { TestDevice } from '../helpers/broker-device.js';
import { type BrokerProc, type BrokerRig, brokerRig, vendorSeed } from '../helpers/broker-rig.js';
import { privateDaemonBundle, type Bundle } from '../helpers/bundle.js';

// Issue 33's attacks, run again against a `botlink broker` process on SQLite: a stolen key rotating
// back to back, tokens across rotations, a stolen key parking requests behind a hanging cloud, code
// guesses, and slow senders. Each prints its figure; the "before" figures are in test/README.md.
// Revoke races run in test/integration/broker/replicas.test.ts, the idle flood in connections.test.ts.
const SECRET = 'SK-attacks-7c1e';
/** What a flood may add to the broker's RSS over its idle (issue 33 item 9). */
const RSS_BOUND_KIB = 32 * 1024;
let bundle: Bundle;
let cloud: TestService;
let rig: BrokerRig;
let broker: BrokerProc;
let serial = 0;

beforeAll(async () => {
  bundle = await privateDaemonBundle('test-broker-attacks-');
  cloud = await createTestService({ seed: vendorSeed(SECRET), accessTtlS: 3600 });
  rig = brokerRig({ bundle: bundle.file, cloudUrl: cloud.url, secret: SECRET, asUnit: true });
  broker = await rig.start();
}, 60_000);

afterAll(async () => {
  await rig?.close();
  await cloud?.close();
  bundle?.dispose();
});

async function enrolled(b: BrokerProc, r: BrokerRig): Promise<{ device: TestDevice; botId: string }> {
  const device = new TestDevice();
  const botId = await device.mustEnroll(b.url, { code: await r.code(), deviceId: `SN-attack-${++serial}` });
  return { device, botId };
}

/** Rows of the rig's SQLite store matching `sql` (read-only, beside the running broker: WAL lets it). */
function count(r: BrokerRig, sql: string, ...params: unknown[]): number {
  const db = openDatabase(join(r.dir, 'state', 'broker.db'), { readonly: true });
  try {
    return (db.prepare(sql).get(...params) as { n: number }).n;
  } finally {
    db.close();
  }
}

/** Rows in the tables a request can write. */
function rows(r: BrokerRig): number {
  return count(
    r,
    'SELECT (SELECT count(*) FROM keys) + (SELECT count(*) FROM nonces) + (SELECT count(*) FROM rate_windows) + (SELECT count(*) FROM tombstones) AS n',
  );
}

function tally(statuses: number[]): string {
  const by = new Map<number, number>();
  for (const s of statuses) by.set(s, (by.get(s) ?? 0) + 1);
  return [...by].map(([s, n]) => `${n}×${s}`).join(' ');
}

describe('a stolen key', () => {
  it('rotating back to back for 20 s: rotatePerDay rotations, and the store keeps nothing of the refused attempts', async () => {
    const { device, botId } = await enrolled(broker, rig);
    const rowsBefore = rows(rig);
    const idleRss = rssKiB(broker.child.pid!);
    let peakRss = idleRss;
    const statuses: number[] = [];
    let current = device;
    const end = performance.now() + 20_000;
    while (performance.now() < end) {
      const next = new TestDevice();
      const reply = await current.rotate(broker.url, next);
      statuses.push(reply.status);
      if (reply.status === 200) current = next;
      if (statuses.length % 200 === 0) peakRss = Math.max(peakRss, rssKiB(broker.child.pid!));
    }
    const keyRows = count(rig, 'SELECT count(*) AS n FROM keys WHERE bot_id = ?', botId);
    const added = rows(rig) - rowsBefore;
    console.log(
      `rotate flood: ${statuses.length} rotations asked in 20 s (${tally(statuses)}); ${keyRows} key rows for the botId; ` +
        `${added} rows added to keys, nonces, rate windows and tombstones; RSS +${((peakRss - idleRss) / 1024).toFixed(1)} MiB`,
    );
    expect(statuses.filter((s) => s === 200)).toHaveLength(4);
    expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);
    expect(keyRows).toBe(5);
    // The 4 new keys, their 4 nonces and the rotations' window (and the token hour's, if the minute turned).
    expect(added).toBeLessThanOrEqual(10);
    expect(peakRss - idleRss).toBeLessThanOrEqual(RSS_BOUND_KIB);
  }, 60_000);

  it('takes deviceTokensPerHour tokens in the hour however often it rotates', async () => {
    const { device } = await enrolled(broker, rig);
    let current = device;
    let tokens = 0;
    const statuses: number[] = [];
    for (let rotation = 0; rotation <= 3; rotation++) {
      for (let i = 0; i < 12; i++) {
        const reply = await current.token(broker.url);
        statuses.push(reply.status);
        if (reply.status === 200) tokens++;
      }
      if (rotation < 3) {
        const next = new TestDevice();
        expect((await current.rotate(broker.url, next)).status).toBe(200);
        current = next;
      }
    }
    console.log(`tokens across 3 rotations: ${tokens} of 48 asked in the hour (${tally(statuses)})`);
    expect(tokens).toBe(12);
  }, 60_000);

  it('parks at most 4 requests behind a hanging cloud, however many it sends, and memory stays', async () => {
    const { device } = await enrolled(broker, rig);
    const idleRss = rssKiB(broker.child.pid!);
    let peakRss = idleRss;
    cloud.faults.setLatencyMs(60_000);
    const statuses: number[] = [];
    let slow = 0;
    const end = performance.now() + 40_000;
    const caller = async (): Promise<void> => {
      while (performance.now() < end) {
        const asked = performance.now();
        // From an address of its own, its connections within connectionsPerSource.
        const reply = await device.token(broker.url, {}, { from: '127.0.4.1' });
        statuses.push(reply.status);
        if (performance.now() - asked > 1_000) slow++;
      }
    };
    const sampler = setInterval(() => (peakRss = Math.max(peakRss, rssKiB(broker.child.pid!))), 500);
    try {
      await Promise.all(Array.from({ length: 24 }, caller));
    } finally {
      clearInterval(sampler);
      cloud.faults.setLatencyMs(0);
    }
    console.log(
      `hang queue: ${statuses.length} token requests in 40 s from 24 callers (${tally(statuses)}); ${slow} waited > 1 s; ` +
        `RSS +${((peakRss - idleRss) / 1024).toFixed(1)} MiB at its peak`,
    );
    // One at the cloud and 4 behind it, each answered 503 once the cloud call is abandoned (10 s, 15 s in all).
    expect(statuses.filter((s) => s !== 429 && s !== 503)).toEqual([]);
    expect(slow).toBeLessThanOrEqual(5);
    expect(peakRss - idleRss).toBeLessThanOrEqual(RSS_BOUND_KIB);
  }, 120_000);
});

describe('a stranger', () => {
  it('guessing codes for 20 s: refused, then limited, and no nonce or key written', async () => {
    const noncesBefore = count(rig, 'SELECT count(*) AS n FROM nonces');
    const keysBefore = count(rig, 'SELECT count(*) AS n FROM keys');
    const guesser = new TestDevice();
    const statuses: number[] = [];
    const end = performance.now() + 20_000;
    const caller = async (): Promise<void> => {
      while (performance.now() < end) {
        const guess = Array.from({ length: 5 }, () => Math.random().toString(36).slice(2, 7).toUpperCase().padEnd(5, 'A')).join('-');
        const reply = await guesser.enroll(broker.url, { code: guess, deviceId: `SN-guess-${statuses.length}` }, { from: '127.0.2.1' });
        statuses.push(reply.status);
      }
    };
    await Promise.all(Array.from({ length: 8 }, caller));
    const nonces = count(rig, 'SELECT count(*) AS n FROM nonces') - noncesBefore;
    console.log(`code guesses: ${statuses.length} in 20 s from one source (${tally(statuses)}); ${nonces} nonce rows written`);
    expect(statuses.filter((s) => s !== 403 && s !== 429)).toEqual([]);
    // The per-source limit for codes that do not exist: 30 a minute (20 s may straddle two minutes).
    expect(statuses.filter((s) => s === 403).length).toBeLessThanOrEqual(60);
    expect(nonces).toBe(0);
    expect(count(rig, 'SELECT count(*) AS n FROM keys')).toBe(keysBefore);
  }, 60_000);

  it('200 slow senders, a byte a second: each answered 408 within 10 s of accept, health answering meanwhile, and memory stays', async () => {
    const port = Number(new URL(broker.url).port);
    const idleRss = rssKiB(broker.child.pid!);
    const slowHeader = Buffer.from(`X-Slow: ${'a'.repeat(64)}`);
    const started = performance.now();
    const conns = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        // 20 sources of 10: each within connectionsPerSource.
        const socket: Socket = connect({ host: '127.0.0.1', port, localAddress: `127.0.3.${1 + Math.floor(i / 10)}` });
        socket.on('error', () => undefined);
        let received = '';
        socket.setEncoding('utf8').on('data', (c: string) => (received += c));
        const closed = once(socket, 'close').then(() => performance.now());
        await once(socket, 'connect');
        socket.write('POST /v1/token HTTP/1.1\r\nHost: broker\r\n');
        let sent = 0;
        const drip = setInterval(() => {
          if (!socket.destroyed) socket.write(slowHeader.subarray(sent, ++sent));
        }, 1_000);
        return { closed, drip, received: () => received };
      }),
    );
    let peakRss = idleRss;
    const healthy: number[] = [];
    const probe = setInterval(() => {
      peakRss = Math.max(peakRss, rssKiB(broker.child.pid!));
      void fetch(`${broker.url}/v1/health`).then((r) => healthy.push(r.status));
    }, 1_000);
    const closedAt = await Promise.all(conns.map((c) => c.closed));
    clearInterval(probe);
    for (const c of conns) clearInterval(c.drip);
    const lastMs = Math.max(...closedAt) - started;
    const answered408 = conns.filter((c) => /^HTTP\/1\.1 408 /.test(c.received())).length;
    console.log(
      `slowloris: 200 slow senders all closed by ${(lastMs / 1000).toFixed(1)} s, ${answered408} answered 408; ` +
        `health ${tally(healthy)} meanwhile; RSS +${((peakRss - idleRss) / 1024).toFixed(1)} MiB`,
    );
    expect(answered408).toBe(200);
    expect(lastMs).toBeLessThanOrEqual(12_000);
    expect(healthy.length).toBeGreaterThan(0);
    expect(healthy.every((s) => s === 200)).toBe(true);
    expect(peakRss - idleRss).toBeLessThanOrEqual(RSS_BOUND_KIB);
  }, 60_000);
});
