import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { DISPLACE_AFTER_EXPIRY_MS } from '../../../src/broker/displacements.js';
import { openSqliteStore } from '../../../src/broker/store/sqlite.js';
import { formatTime } from '../../../src/cli/format.js';
import { openDatabase } from '../../../src/native.js';
import { DISPLACED_CLOSE_CODE } from '../../../src/service/ws.js';
import { createTestService, type TestService } from '../../../src/service/testing.js';
import { privateDaemonBundle, type Bundle } from '../../helpers/bundle.js';
import { TestDevice } from '../../helpers/broker-device.js';
import { AUDIT_ROWS_SQL, byCode, codeRow } from '../../helpers/broker-store.js';
import { type BrokerRig, brokerRig, vendorSeed } from '../../helpers/broker-rig.js';
import { exec } from '../../../scripts/lib/exec.js';
import { terminalHazards } from '../../helpers/terminal.js';
import { freePort } from '../../helpers/ports.js';
import { requireTool } from '../../../scripts/lib/tools.js';

const CLIENT = fileURLToPath(new URL('../../clients/broker_client.py', import.meta.url));
const CODE = /^[0-9A-Z]{5}(-[0-9A-Z]{5}){4}$/;

const SECRET = 'SK-broker-cli-secret-7f3a';
let bundle: Bundle;
let cloud: TestService;
let rig: BrokerRig;

beforeAll(async () => {
  bundle = await privateDaemonBundle('test-broker-cli-');
  cloud = await createTestService({ seed: vendorSeed(SECRET) });
  rig = brokerRig({ bundle: bundle.file, cloudUrl: cloud.url, secret: SECRET });
});
afterAll(async () => {
  await rig?.close();
  await cloud?.close();
  bundle?.dispose();
});

describe('botlink broker (the process)', () => {
  it('refuses a config without tokenKeyFile (78, naming the key and how to make one), and an unknown key', async () => {
    const noKey = rig.writeConfig('no-key.json', { tokenKeyFile: join(rig.dir, 'absent') });
    const r = await rig.cli(['--config', noKey]);
    expect(r.code).toBe(78);
    expect(r.stderr).toContain('tokenKeyFile');
    expect(r.stderr).toContain('/dev/urandom');
    const unknown = rig.writeConfig('unknown.json', { secretKey: 'inline' });
    const u = await rig.cli(['--config', unknown]);
    expect(u.code).toBe(78);
    expect(u.stderr).toContain('secretKey');
    const env = await rig.cli(['--config', rig.configFile], { BOTLINK_BROKER_NO_SUCH: '1' });
    expect(env.code).toBe(78);
    expect(env.stderr).toContain('BOTLINK_BROKER_NO_SUCH');
  });

  it('usage mistakes exit 64; a preauth file with a bad line exits 65 and stores nothing', async () => {
    expect((await rig.cli(['code', '--config', rig.configFile])).code).toBe(64);
    expect(
      (await rig.cli(['code', '--config', rig.configFile, '--vendor-id', 'V1', '--adopt', '--replace', '--device-id', 'x'])).code,
    ).toBe(64);
    expect((await rig.cli(['frobnicate'])).code).toBe(64);
    expect((await rig.cli(['code', '--config', rig.configFile, '--vendor-id', 'V1', '--adopt', '--any-device'])).code).toBe(65);
    const file = join(rig.dir, 'preauth.txt');
    writeFileSync(file, `SN-P1,${new TestDevice().publicKey}\nSN-P2,not-a-key\n`);
    const r = await rig.cli(['preauth', '--config', rig.configFile, '--vendor-id', 'V1', file]);
    expect(r.code).toBe(65);
    expect(r.stderr).toContain('line 2');
    const devices = JSON.parse((await rig.cli(['devices', '--config', rig.configFile, '--json'])).stdout) as { deviceId: string }[];
    expect(devices.map((d) => d.deviceId)).not.toContain('SN-P1');
  });

  it('a code from the command enrolls a device; devices lists it; revoke holds from the next request; no secret in the log', async () => {
    const json = await rig.cli(['code', '--config', rig.configFile, '--vendor-id', 'V1', '--device-id', 'SN-CLI-1', '--json']);
    expect(json.code, json.stderr).toBe(0);
    const issued = JSON.parse(json.stdout) as { id: string; code: string };
    expect(issued).toEqual({
      id: expect.stringMatching(/^[0-9a-f]{20}$/),
      code: expect.stringMatching(CODE),
      expiresAt: expect.any(Number),
      uses: 1,
    });
    const code = issued.code;
    const printed = await rig.cli(['code', '--config', rig.configFile, '--vendor-id', 'V1', '--any-device']);
    expect(printed.stdout.trim().split('\n').at(-1)).toMatch(CODE);
    const broker = await rig.start();
    try {
      const device = new TestDevice();
      const botId = await device.mustEnroll(broker.url, { code, deviceId: 'SN-CLI-1' });
      const token = await device.token(broker.url);
      expect(token.status).toBe(200);
      const list = await rig.cli(['devices', '--config', rig.configFile, '--json']);
      expect(JSON.parse(list.stdout)).toContainEqual({
        botId,
        deviceId: 'SN-CLI-1',
        vendorId: 'V1',
        keyId: device.keyId,
        state: 'active',
        lastSeenAt: expect.any(Number),
        agentVersion: null,
      });
      const revoked = await rig.cli(['revoke', '--config', rig.configFile, botId]);
      expect(revoked.code, revoked.stderr).toBe(0);
      expect(revoked.stdout).toMatch(new RegExp(`^revoked 1 key\\(s\\) of ${botId};`));
      expect((await device.token(broker.url)).json['code']).toBe('revoked');
      // Nothing left to revoke is no success: exit 65 saying so, for a revoked botId as for an unknown one.
      const again = await rig.cli(['revoke', '--config', rig.configFile, botId]);
      expect([again.code, again.stdout]).toEqual([65, '']);
      expect(again.stderr).toContain(`botId ${botId} has no active key: nothing was revoked`);
      expect((await rig.cli(['revoke', '--config', rig.configFile, 'no-such-bot'])).code).toBe(65);
      const log = readFileSync(rig.logFile, 'utf8');
      const audits = log
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      // The operator's commands audit as who ran them, in the log and in the store beside the broker's own events.
      const actor = `cli:${userInfo().username}`;
      expect(audits).toContainEqual(
        expect.objectContaining({ audit: 'revoke', actor, botId, keyId: device.keyId, source: null, outcome: 'revoked' }),
      );
      const stored = (): unknown[][] => {
        const db = openDatabase(join(rig.dir, 'state', 'broker.db'), { readonly: true });
        try {
          const rows = db.prepare(AUDIT_ROWS_SQL).all() as Record<string, unknown>[];
          const mine = rows.filter((r) => r['deviceId'] === 'SN-CLI-1');
          return mine.map((r) => [r['action'], r['actor'], r['deviceId'], r['keyId'], r['codeId'], r['outcome']]).sort();
        } finally {
          db.close();
        }
      };
      // The broker writes its rows within a second (after the commands', which wrote theirs before they exited).
      await expect.poll(stored, { timeout: 10_000 }).toEqual(
        [
          ['code', actor, 'SN-CLI-1', null, issued.id, 'made plain uses=1 device'],
          ['code', 'device', 'SN-CLI-1', device.keyId, issued.id, 'spent'],
          ['enroll', 'device', 'SN-CLI-1', device.keyId, issued.id, 'enrolled'],
          ['token', 'device', 'SN-CLI-1', device.keyId, null, 'sign'],
          ['revoke', actor, 'SN-CLI-1', device.keyId, null, 'revoked'],
          ['revoke', actor, 'SN-CLI-1', null, null, 'none-active'],
          // The token request after the revoke, refused.
          ['refusal', 'device', 'SN-CLI-1', device.keyId, null, 'revoked'],
        ].sort(),
      );
      for (const secret of [SECRET, code, token.json['accessToken'] as string]) expect(log).not.toContain(secret);
    } finally {
      expect((await broker.stop()).code).toBe(0);
    }
  });

  it('a token request’s agent version reaches broker devices; reset-limits lifts the hourly limit of one botId; both audited', async () => {
    const limited = brokerRig({ bundle: bundle.file, cloudUrl: cloud.url, secret: SECRET, extra: { deviceTokensPerHour: 2 } });
    const broker = await limited.start();
    try {
      const device = new TestDevice();
      const botId = await device.mustEnroll(broker.url, { code: await limited.code(), deviceId: 'SN-CLI-AGENT' });
      const other = new TestDevice();
      const otherBot = await other.mustEnroll(broker.url, { code: await limited.code(), deviceId: 'SN-CLI-OTHER' });
      // A version out of §3.7's form is refused, and a refusal writes nothing.
      for (const agent of [{ version: 'v 1' }, { version: 'x'.repeat(33) }, { version: 7 }, 'botlink/1', null]) {
        const refused = await device.token(broker.url, { agent });
        expect([refused.status, refused.json['code']], JSON.stringify(agent)).toEqual([400, 'bad-request']);
      }
      expect((await device.token(broker.url, { agent: { version: '0.2.0+b7' } })).status).toBe(200);
      expect((await device.token(broker.url, { minValidityS: 60, agent: { version: '0.2.1' } })).status).toBe(200);
      const limitedOut = await device.token(broker.url, { agent: { version: '0.2.2' } });
      expect([limitedOut.status, limitedOut.json['code']]).toEqual([429, 'rate-limited']);
      for (let i = 0; i < 2; i++) expect((await other.token(broker.url)).status).toBe(200);

      const listed = await limited.cli(['devices', '--config', limited.configFile, '--json', '--state', 'active', '--vendor-id', 'V1']);
      expect(listed.code, listed.stderr).toBe(0);
      expect(JSON.parse(listed.stdout)).toEqual([
        expect.objectContaining({ botId, deviceId: 'SN-CLI-AGENT', keyId: device.keyId, agentVersion: '0.2.1' }),
        expect.objectContaining({ botId: otherBot, deviceId: 'SN-CLI-OTHER', agentVersion: null }),
      ]);
      const words = await limited.cli(['devices', '--config', limited.configFile, '--vendor-id', 'V1']);
      expect(words.stdout).toMatch(
        new RegExp(`^${botId}\\tSN-CLI-AGENT\\tV1\\t${device.keyId}\\tactive\\t\\d{4}-[^\\t]+\\t0\\.2\\.1$`, 'm'),
      );
      expect((await limited.cli(['devices', '--config', limited.configFile, '--json', '--vendor-id', 'V2'])).stdout).toBe('[]\n');
      expect((await limited.cli(['devices', '--config', limited.configFile, '--json', '--state', 'revoked'])).stdout).toBe('[]\n');

      const reset = await limited.cli(['reset-limits', '--config', limited.configFile, botId]);
      expect(reset.code, reset.stderr).toBe(0);
      expect(reset.stdout).toBe(`reset the hourly limits of ${botId} (1 count window(s) cleared); rotatePerDay is kept\n`);
      expect((await device.token(broker.url, { agent: { version: '0.2.2' } })).status).toBe(200);
      // Only that botId's: the other is still past its limit.
      expect((await other.token(broker.url)).status).toBe(429);
      const audits = readFileSync(limited.logFile, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(audits).toContainEqual(
        expect.objectContaining({
          audit: 'reset-limits',
          actor: `cli:${userInfo().username}`,
          botId,
          deviceId: 'SN-CLI-AGENT',
          outcome: 'cleared 1',
        }),
      );
    } finally {
      expect((await broker.stop()).code).toBe(0);
      await limited.close();
    }
  });

  it('revoke --displace closes the device’s socket at once and queues the next displacement at its token’s expiry; the cloud away, it says so and the revoke stands', async () => {
    const broker = await rig.start();
    try {
      const device = new TestDevice();
      const botId = await device.mustEnroll(broker.url, { code: await rig.code(), deviceId: 'SN-CLI-DISPLACE' });
      const token = await device.token(broker.url);
      const { accessToken, expiresAt } = token.json as { accessToken: string; expiresAt: number };
      // The device's own socket to the cloud, open with the token the broker handed it.
      const socket = new WebSocket(`${cloud.wsUrl}?botId=${botId}`, { headers: { Authorization: `Bearer ${accessToken}` } });
      const frames: string[] = [];
      socket.on('message', (data) => frames.push(data.toString()));
      const closed = new Promise<number>((resolve) => socket.on('close', (code) => resolve(code)));
      await once(socket, 'open');
      const r = await rig.cli(['revoke', '--config', rig.configFile, '--displace', botId]);
      expect(r.code, r.stderr).toBe(0);
      const dueAt = expiresAt + DISPLACE_AFTER_EXPIRY_MS;
      expect(r.stdout).toBe(
        `revoked 1 key(s) of ${botId}; a token it already holds lives until it expires (2–8 h)\n` +
          `displaced ${botId}: the cloud closed any socket it held\n` +
          `the broker displaces it again at ${formatTime(dueAt)}, once its last token has expired\n`,
      );
      expect(await closed).toBe(DISPLACED_CLOSE_CODE);
      expect(frames.map((f) => (JSON.parse(f) as { content?: { eventType?: string } }).content?.eventType)).toContain(
        'REPEAT_CLIENT_SESSION',
      );
      const db = openDatabase(join(rig.dir, 'state', 'broker.db'));
      try {
        expect(db.prepare('SELECT due_at AS dueAt FROM displacements WHERE bot_id = ?').get(botId)).toEqual({ dueAt });
      } finally {
        db.close();
      }
      // Nothing left to revoke: 65, and no displacement is tried.
      const again = await rig.cli(['revoke', '--config', rig.configFile, '--displace', botId]);
      expect([again.code, again.stdout]).toEqual([65, '']);

      // The cloud away: the revoke stands (exit 0), the displacement is told as failed.
      const away = rig.writeConfig('cloud-away.json', { baseUrl: `http://127.0.0.1:${await freePort()}` });
      const second = new TestDevice();
      const secondBot = await second.mustEnroll(broker.url, { code: await rig.code(), deviceId: 'SN-CLI-DISPLACE-2' });
      const failed = await rig.cli(['revoke', '--config', away, '--displace', secondBot]);
      expect(failed.code, failed.stderr).toBe(0);
      expect(failed.stdout).toBe(
        `revoked 1 key(s) of ${secondBot}; a token it already holds lives until it expires (2–8 h)\n` +
          'no token of it was cached: no later displacement is due\n',
      );
      expect(failed.stderr).toMatch(new RegExp(`^could not displace ${secondBot} now: .*ECONNREFUSED.*; the revoke stands\n$`));
      expect((await second.token(broker.url)).json['code']).toBe('revoked');

      const log = readFileSync(rig.logFile, 'utf8');
      const audits = log
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter((a) => a['audit'] === 'displace');
      expect(audits).toEqual([
        expect.objectContaining({ botId, actor: `cli:${userInfo().username}`, outcome: 'displaced' }),
        expect.objectContaining({ botId: secondBot, actor: `cli:${userInfo().username}`, outcome: 'failed' }),
      ]);
      // The rows too: the operator's command writes its audit into the store before it exits.
      const rows = openDatabase(join(rig.dir, 'state', 'broker.db'), { readonly: true });
      try {
        expect(rows.prepare("SELECT bot_id AS botId, outcome FROM audit WHERE action = 'displace' ORDER BY id").all()).toEqual([
          { botId, outcome: 'displaced' },
          { botId: secondBot, outcome: 'failed' },
        ]);
      } finally {
        rows.close();
      }
      for (const out of [r.stdout, r.stderr, failed.stdout, failed.stderr, log]) {
        expect(out).not.toContain(accessToken);
        expect(out).not.toContain(SECRET);
      }
    } finally {
      expect((await broker.stop()).code).toBe(0);
    }
  });

  it('refuses a deviceId holding C1, bidi or format controls; devices escapes one a store holds anyway', async () => {
    const hostile = 'SN\u009b2J\u009b0;PWNED\u202e9\u2066';
    const code = await rig.code();
    const broker = await rig.start();
    try {
      const refused = await new TestDevice().enroll(broker.url, { code, deviceId: hostile });
      expect(refused.status, JSON.stringify(refused.json)).toBe(400);
      expect(refused.json).toMatchObject({ code: 'bad-request', msg: expect.stringContaining('deviceId') });
    } finally {
      expect((await broker.stop()).code).toBe(0);
    }
    // As a broker before this rule could have stored it: the operator's terminal still sees it escaped.
    const store = openSqliteStore(join(rig.dir, 'state', 'broker.db'), { wallNow: () => Date.now() });
    try {
      const code = codeRow();
      await store.addCode(code);
      expect((await store.enroll(byCode(code, { deviceId: hostile }))).outcome).toBe('ok');
    } finally {
      await store.close();
    }
    const words = await rig.cli(['devices', '--config', rig.configFile]);
    expect(words.code, words.stderr).toBe(0);
    expect(words.stdout).toContain('\tSN\\x9b2J\\x9b0;PWNED\\u202e9\\u2066\t');
    const json = await rig.cli(['devices', '--config', rig.configFile, '--json']);
    expect(json.code, json.stderr).toBe(0);
    expect((JSON.parse(json.stdout) as { deviceId: string }[]).map((d) => d.deviceId)).toContain(hostile);
    for (const r of [words, json]) expect(terminalHazards(r.stdout + r.stderr)).toEqual([]);
  });

  it('kill -9 during an enrollment spends no use of the code and leaves no device half-enrolled', async () => {
    const code = await rig.code();
    const first = await rig.start();
    const device = new TestDevice();
    cloud.faults.setLatencyMs(3000);
    try {
      const seen = new Promise<void>((resolve) => cloud.events.once('http-request', () => resolve()));
      const attempt = device.enroll(first.url, { code, deviceId: 'SN-KILL-1' }).catch((err: unknown) => err);
      await seen;
      first.child.kill('SIGKILL');
      expect((await first.exit).signal).toBe('SIGKILL');
      expect(await attempt).toBeInstanceOf(Error);
    } finally {
      cloud.faults.setLatencyMs(0);
    }
    const devices = JSON.parse((await rig.cli(['devices', '--config', rig.configFile, '--json'])).stdout) as { deviceId: string }[];
    expect(devices.map((d) => d.deviceId)).not.toContain('SN-KILL-1');
    const second = await rig.start();
    try {
      await device.mustEnroll(second.url, { code, deviceId: 'SN-KILL-1' });
      expect((await new TestDevice().enroll(second.url, { code, deviceId: 'SN-KILL-2' })).json['code']).toBe('bad-code');
    } finally {
      await second.stop();
    }
  });
});

describe('a second client, in Python with the cryptography package (test/clients/broker_client.py)', () => {
  it('enrolls with a code from the command and gets a token, signing from DESIGN §3.7 alone', async () => {
    const packages = dirname(dirname(requireTool('cryptography')));
    const code = await rig.code();
    const broker = await rig.start();
    try {
      const r = await exec(requireTool('python3'), [CLIENT, broker.url, code, 'SN-PY-1'], {
        env: { ...process.env, PYTHONPATH: packages },
      });
      expect(r.code, r.stderr).toBe(0);
      const seen = JSON.parse(r.stdout) as { keyId: string; botId: string; token: { accessToken: string } };
      expect(seen.keyId).toMatch(/^[0-9a-f]{32}$/);
      const devices = JSON.parse((await rig.cli(['devices', '--config', rig.configFile, '--json'])).stdout) as {
        keyId: string;
        deviceId: string;
      }[];
      expect(devices).toContainEqual(expect.objectContaining({ keyId: seen.keyId, deviceId: 'SN-PY-1', state: 'active' }));
    } finally {
      await broker.stop();
    }
  });
});
