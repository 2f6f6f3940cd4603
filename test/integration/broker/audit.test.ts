import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BrokerConfig, loadBrokerConfig, parseBrokerConfig } from '../../../src/broker/config.js';
import { type RunningBroker, startBroker } from '../../../src/broker/broker.js';
import { brokerKeys, readTokenKey } from '../../../src/broker/keys.js';
import { createCode, parsePreauth, preauthorize, revoke } from '../../../src/broker/operator.js';
import type { AuditRow, CodeKind } from '../../../src/broker/store/types.js';
import { type Clock, systemClock } from '../../../src/clock.js';
import { openDatabase } from '../../../src/native.js';
import { createTestService, type TestService } from '../../../src/service/testing.js';
import { TestDevice } from '../../helpers/broker-device.js';
import { brokerSettings } from '../../helpers/broker-files.js';
import { AUDIT_ROWS_SQL, auditRow } from '../../helpers/broker-store.js';
import { useHarness } from '../../helpers/harness.js';
import { ManualClock } from '../../helpers/manual-clock.js';

// The broker's audit (DESIGN §3.7) through a real broker on SQLite: every event one row in the store and
// one log line, refusals folded, devices counted in /metrics, rows pruned past their retention.

const SECRET = 'SK-audit-test-secret';
const DAY = 86_400_000;
const { cleanups, tempDir } = useHarness();
let cloud: TestService;

beforeAll(async () => {
  cloud = await createTestService({
    seed: { accounts: [{ accessKeyId: 'AK', secretKey: SECRET, vendors: [{ vendorId: 'V1', bots: [] }] }] },
  });
});
afterAll(() => cloud?.close());

interface AuditedBroker {
  broker: RunningBroker;
  config: BrokerConfig;
  url: string;
  logFile: string;
  /** The store's audit rows, oldest first, once what waits is written. */
  rows(): Promise<AuditRow[]>;
  /** The log's lines. */
  lines(): Record<string, unknown>[];
  /** A new code from the operator `cli:test`. */
  code(kind?: CodeKind, deviceId?: string): Promise<string>;
  operator: { actor: string; audit: RunningBroker['audit'] };
}

async function audited(clock: Clock = systemClock, extra: Record<string, unknown> = {}): Promise<AuditedBroker> {
  const dir = tempDir('botlink-broker-audit-');
  const config = parseBrokerConfig(brokerSettings(dir, { cloudUrl: cloud.url, secret: SECRET, extra }), {});
  const logFile = join(dir, 'broker.log');
  const broker = await startBroker({ config, clock, log: pino({ level: 'info' }, pino.destination({ dest: logFile, sync: true })) });
  cleanups.push(() => broker.close());
  const operator = { actor: 'cli:test', audit: broker.audit };
  const keys = brokerKeys(readTokenKey(config.tokenKeyFile));
  return {
    broker,
    config,
    url: broker.url,
    logFile,
    operator,
    async rows() {
      await broker.audit.flush();
      const db = openDatabase(config.store.slice('sqlite:'.length), { readonly: true });
      try {
        return (db.prepare(AUDIT_ROWS_SQL).all() as AuditRow[]).map((r) => ({ ...r }));
      } finally {
        db.close();
      }
    },
    lines: () =>
      readFileSync(logFile, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    async code(kind = 'plain', deviceId = 'SN-1') {
      const req = { vendorId: 'V1', binding: { deviceId }, uses: 1, ttlS: 600, kind };
      return (await createCode(broker.store, keys, req, clock.wallNow(), operator)).code;
    },
  };
}

/** Prometheus text's sample value, by its name and labels as written. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

describe('the audit through a real broker (DESIGN §3.7)', () => {
  it('writes one row per event of a device’s life, one revocation per key, each also a log line, none holding a secret', async () => {
    const b = await audited();
    const first = new TestDevice();
    const code = await b.code();
    const botId = await first.mustEnroll(b.url, { code, deviceId: 'SN-1' });
    await first.mustEnroll(b.url, { code, deviceId: 'SN-1' });
    const token = (await first.token(b.url)).json['accessToken'] as string;
    const rotated = new TestDevice();
    expect((await first.rotate(b.url, rotated)).status).toBe(200);
    const replaceCode = await b.code('replace');
    const third = new TestDevice();
    expect(await third.mustEnroll(b.url, { code: replaceCode, deviceId: 'SN-1' })).toBe(botId);
    expect(await revoke(b.broker.store, botId, Date.now(), b.operator)).toMatchObject({ revoked: 1 });
    const spare = [new TestDevice(), new TestDevice()];
    const lines = `SN-P1,${spare[0]!.publicKey}\nSN-P2,${spare[1]!.publicKey}\n`;
    expect(await preauthorize(b.broker.store, parsePreauth(lines, 'V1', Date.now()), b.operator)).toBe(2);

    const all = await b.rows();
    const device = { vendorId: 'V1', deviceId: 'SN-1', codeId: null, count: 1, fold: null };
    const fromDevice = { ...device, actor: 'device', botId, source: '127.0.0.1' };
    const byOperator = { ...device, actor: 'cli:test', source: null };
    // A token's row folds with its key's others of the minute (so it is written with the folds, after the rest).
    expect(all.filter((r) => r.action === 'token')).toEqual([
      {
        ...fromDevice,
        at: expect.any(Number),
        action: 'token',
        keyId: first.keyId,
        outcome: 'sign',
        fold: expect.stringContaining(first.keyId),
      },
    ]);
    const rows = all.filter((r) => r.action !== 'token');
    // Each code by its id, never the code: made by the operator, spent by the enrollment it admitted.
    const [plainId, replaceId] = rows.filter((r) => r.outcome.startsWith('made')).map((r) => r.codeId);
    expect([plainId, replaceId]).toEqual([expect.stringMatching(/^[0-9a-f]{20}$/), expect.stringMatching(/^[0-9a-f]{20}$/)]);
    expect(plainId).not.toBe(replaceId);
    expect(rows).toEqual([
      {
        ...byOperator,
        at: expect.any(Number),
        action: 'code',
        botId: null,
        keyId: null,
        codeId: plainId,
        outcome: 'made plain uses=1 device',
      },
      { ...fromDevice, at: expect.any(Number), action: 'code', keyId: first.keyId, codeId: plainId, outcome: 'spent' },
      { ...fromDevice, at: expect.any(Number), action: 'enroll', keyId: first.keyId, codeId: plainId, outcome: 'enrolled' },
      { ...fromDevice, at: expect.any(Number), action: 'enroll', keyId: first.keyId, outcome: 'again' },
      { ...fromDevice, at: expect.any(Number), action: 'rotate', keyId: first.keyId, outcome: `rotated to ${rotated.keyId}` },
      {
        ...byOperator,
        at: expect.any(Number),
        action: 'code',
        botId: null,
        keyId: null,
        codeId: replaceId,
        outcome: 'made replace uses=1 device',
      },
      // The replace revoked the rotated key: one revocation for it, then the new key's enrollment.
      { ...fromDevice, at: expect.any(Number), action: 'revoke', keyId: rotated.keyId, outcome: 'replaced' },
      { ...fromDevice, at: expect.any(Number), action: 'code', keyId: third.keyId, codeId: replaceId, outcome: 'spent' },
      { ...fromDevice, at: expect.any(Number), action: 'enroll', keyId: third.keyId, codeId: replaceId, outcome: 'enrolled' },
      { ...byOperator, at: expect.any(Number), action: 'revoke', botId, keyId: third.keyId, outcome: 'revoked' },
      {
        ...byOperator,
        at: expect.any(Number),
        action: 'preauth',
        botId: null,
        deviceId: 'SN-P1',
        keyId: spare[0]!.keyId,
        outcome: 'added',
      },
      {
        ...byOperator,
        at: expect.any(Number),
        action: 'preauth',
        botId: null,
        deviceId: 'SN-P2',
        keyId: spare[1]!.keyId,
        outcome: 'added',
      },
    ]);
    const times = rows.map((r) => r.at);
    expect(times).toEqual([...times].sort((x, y) => x - y));

    // Each row is also a log line with the same fields, `audit` naming the action.
    const logged = b.lines().filter((l) => l['audit'] !== undefined && l['audit'] !== 'token');
    expect(logged).toHaveLength(rows.length);
    for (const [i, { action, at, actor, vendorId, deviceId, botId, keyId, codeId, source, outcome }] of rows.entries()) {
      expect(logged[i]).toMatchObject({ audit: action, at, actor, vendorId, deviceId, botId, keyId, codeId, source, outcome });
    }
    expect(b.lines().filter((l) => l['audit'] === 'token')).toEqual([expect.objectContaining({ keyId: first.keyId, outcome: 'sign' })]);
    const written = `${JSON.stringify(all)}\n${readFileSync(b.logFile, 'utf8')}`;
    for (const secret of [
      token,
      code,
      replaceCode,
      code.replaceAll('-', ''),
      SECRET,
      first.publicKey,
      rotated.publicKey,
      third.publicKey,
    ]) {
      expect(written).not.toContain(secret);
    }
    for (const d of spare) expect(written).not.toContain(d.publicKey);
  });

  it('folds a flood of refusals of one key in one minute into one row with its count; unsigned ones write no row, one line per source and code', async () => {
    // Replays are counted against the hourly limit first: a limit high enough that every one is a replay.
    const b = await audited(systemClock, { deviceTokensPerHour: 1000 });
    const device = new TestDevice();
    const botId = await device.mustEnroll(b.url, { code: await b.code(), deviceId: 'SN-1' });
    // One minute of the broker's clock for the whole flood: start early in one.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 45_000) await new Promise((resolve) => setTimeout(resolve, 60_000 - intoMinute));
    const nonce = 'nonce-flooded-000001';
    expect((await device.token(b.url, {}, { nonce })).status).toBe(200);
    for (let i = 0; i < 30; i++) expect((await device.token(b.url, {}, { nonce })).json['code']).toBe('replayed');
    const strangers = Array.from({ length: 20 }, () => new TestDevice());
    for (const s of strangers) expect((await s.token(b.url)).json['code']).toBe('unknown-key');
    // Refused before any route read a signature, as unsigned as the rest.
    expect((await fetch(`${b.url}/v1/nothing`, { method: 'POST' })).status).toBe(404);

    const refusals = (await b.rows()).filter((r) => r.action === 'refusal');
    expect(refusals).toEqual([
      {
        at: expect.any(Number),
        action: 'refusal',
        actor: 'device',
        vendorId: 'V1',
        deviceId: 'SN-1',
        botId,
        keyId: device.keyId,
        codeId: null,
        source: '127.0.0.1',
        outcome: 'replayed',
        count: 30,
        fold: expect.stringContaining(device.keyId),
      },
    ]);
    const metrics = await (await fetch(`${b.url}/metrics`)).text();
    expect(sample(metrics, 'botlink_broker_refusals_total{code="replayed"}')).toBe(30);
    expect(sample(metrics, 'botlink_broker_refusals_total{code="unknown-key"}')).toBe(20);
    expect(sample(metrics, 'botlink_broker_audit_rows_dropped_total')).toBe(0);

    // The minute's lines, told once the minute is over (here: the broker stops first).
    await b.broker.close();
    const lines = b.lines().filter((l) => l['audit'] === 'refusal');
    expect(lines).toEqual([
      expect.objectContaining({ keyId: device.keyId, outcome: 'replayed', count: 30, signed: true }),
      expect.objectContaining({ keyId: null, source: '127.0.0.1', outcome: 'unknown-key', count: 20, signed: false }),
      expect.objectContaining({ keyId: null, source: '127.0.0.1', outcome: 'not-found', count: 1, signed: false }),
    ]);
    for (const s of strangers) expect(readFileSync(b.logFile, 'utf8')).not.toContain(s.keyId);
  });

  it('folds the tokens one key is issued in a minute into one row per outcome with its count; each still a log line', async () => {
    // The broker's clock stands still: every request falls in one minute of it.
    const clock = new ManualClock({ wall: Date.now() });
    const b = await audited(clock, { deviceTokensPerHour: 1000 });
    const device = new TestDevice();
    const botId = await device.mustEnroll(b.url, { code: await b.code(), deviceId: 'SN-1' });
    for (let i = 0; i < 25; i++) expect((await device.token(b.url)).status).toBe(200);
    const tokens = (await b.rows()).filter((r) => r.action === 'token');
    // Folds are written in their own order (never crosswise between replicas), not in the order they came.
    expect(tokens).toHaveLength(2);
    expect(tokens).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ botId, keyId: device.keyId, outcome: 'sign', count: 1 }),
        expect.objectContaining({ botId, keyId: device.keyId, outcome: 'cache', count: 24 }),
      ]),
    );
    expect(b.lines().filter((l) => l['audit'] === 'token')).toHaveLength(25);
    // The next minute starts another row.
    await clock.advance(60_000);
    expect((await device.token(b.url, {}, { ts: clock.wallNow() })).status).toBe(200);
    const minutes = (await b.rows()).filter((r) => r.action === 'token').map((r) => `${r.outcome} ${r.count}`);
    expect(minutes.sort()).toEqual(['cache 1', 'cache 24', 'sign 1']);
  });

  it('/metrics counts the devices by state from the store, and names no device', async () => {
    const b = await audited();
    const kept = new TestDevice();
    await kept.mustEnroll(b.url, { code: await b.code('plain', 'SN-1'), deviceId: 'SN-1' });
    const gone = new TestDevice();
    const goneBot = await gone.mustEnroll(b.url, { code: await b.code('plain', 'SN-2'), deviceId: 'SN-2' });
    await revoke(b.broker.store, goneBot, Date.now(), b.operator);
    const waiting = new TestDevice();
    await preauthorize(b.broker.store, parsePreauth(`SN-3,${waiting.publicKey}`, 'V1', Date.now()), b.operator);
    const text = await (await fetch(`${b.url}/metrics`)).text();
    expect(sample(text, 'botlink_broker_devices{state="active"}')).toBe(1);
    expect(sample(text, 'botlink_broker_devices{state="revoked"}')).toBe(1);
    expect(sample(text, 'botlink_broker_devices{state="preauthorized"}')).toBe(1);
    for (const named of [goneBot, kept.keyId, waiting.keyId, 'SN-1']) expect(text).not.toContain(named);
  });

  it('prunes what passed auditRetentionDays (token events past 30 days) a minute after start, then daily', async () => {
    const clock = new ManualClock({ wall: Date.now() });
    const b = await audited(clock, { auditRetentionDays: 90 });
    const now = clock.wallNow();
    await b.broker.store.writeAudit([
      auditRow({ at: now - 91 * DAY, action: 'enroll' }),
      auditRow({ at: now - 31 * DAY, action: 'token' }),
      auditRow({ at: now - 31 * DAY, action: 'rotate' }),
      auditRow({ at: now - 29 * DAY, action: 'token' }),
    ]);
    await clock.advance(59_000);
    expect(await b.rows()).toHaveLength(4);
    await clock.advance(1_000);
    await expect
      .poll(async () => (await b.rows()).map((r) => [r.action, Math.round((now - r.at) / DAY)]))
      .toEqual([
        ['rotate', 31],
        ['token', 29],
      ]);
  });
});

describe('auditRetentionDays in the config file', () => {
  it('is read from the file and overridden by BOTLINK_BROKER_AUDIT_RETENTION_DAYS', () => {
    const dir = tempDir('botlink-broker-audit-config-');
    const file = join(dir, 'config.json');
    writeFileSync(file, JSON.stringify({ ...brokerSettings(dir, { cloudUrl: cloud.url, secret: SECRET }), auditRetentionDays: 60 }));
    expect(loadBrokerConfig(file, {}).auditRetentionDays).toBe(60);
    expect(loadBrokerConfig(file, { BOTLINK_BROKER_AUDIT_RETENTION_DAYS: '7' }).auditRetentionDays).toBe(7);
    expect(() => loadBrokerConfig(file, { BOTLINK_BROKER_AUDIT_RETENTION_DAYS: 'forever' })).toThrow(
      expect.objectContaining({ key: 'auditRetentionDays' }),
    );
  });
});
