import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestService, type TestService } from '../../../src/service/testing.js';
import { privateDaemonBundle, type Bundle } from '../../helpers/bundle.js';
import { type BrokerRig, brokerRig, vendorSeed } from '../../helpers/broker-rig.js';
import { exec, type CliRun } from '../../../scripts/lib/exec.js';
import { filesUnder } from '../../helpers/tree.js';

// `botlink provision --broker` (DESIGN §3.1, §3.7): the device's own key, enrolled with a code, and a
// config in broker mode — with no account secret anywhere on the device.
const SECRET = 'SK-provision-broker-4e2b';
let bundle: Bundle;
let dir: string;
let cloud: TestService;
let rig: BrokerRig;
let brokerUrl: string;

beforeAll(async () => {
  bundle = await privateDaemonBundle('test-provision-broker-');
  dir = mkdtempSync(join(tmpdir(), 'botlink-provision-broker-'));
  cloud = await createTestService({ seed: vendorSeed(SECRET) });
  rig = brokerRig({ bundle: bundle.file, cloudUrl: cloud.url, secret: SECRET });
  brokerUrl = (await rig.start()).url;
}, 60_000);

afterAll(async () => {
  await rig?.close();
  await cloud?.close();
  bundle?.dispose();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const botlink = (args: string[]): Promise<CliRun> =>
  exec(process.execPath, [bundle.file, ...args], { env: { ...process.env, CREDENTIALS_DIRECTORY: '', BOTLINK_CONFIG: '' } });

/** A device folder with a config file in it; `extra` are its further keys. */
function device(name: string, extra: Record<string, unknown> = {}): { root: string; config: string } {
  const root = join(dir, name);
  mkdirSync(root);
  const config = join(root, 'config.json');
  const base = { baseUrl: cloud.url, stateDir: join(root, 'state'), runtimeDir: join(root, 'run'), logFile: join(root, 'botlink.log') };
  writeFileSync(config, JSON.stringify({ ...base, ...extra }), { mode: 0o600 });
  return { root, config };
}

describe('botlink provision --broker', () => {
  it('makes the key (0600), enrolls it and writes brokerUrl and botId; status says broker mode; no secret on the device', async () => {
    const { root, config } = device('fresh');
    const code = await rig.code();
    const r = await botlink(['provision', '--broker', brokerUrl, '--code', code, '--device-id', 'SN-FRESH', '--config', config]);
    expect(r.code, r.stderr).toBe(0);
    const botId = /^botId: (\S+)$/m.exec(r.stdout)?.[1];
    expect(r.stdout.trim().split('\n').at(-1)).toBe(`botId: ${botId}`);
    const written = JSON.parse(readFileSync(config, 'utf8')) as Record<string, unknown>;
    // Named, so a daemon under the unit (which has a $CREDENTIALS_DIRECTORY) finds it where provisioning put it.
    expect(written).toMatchObject({ brokerUrl, botId, baseUrl: cloud.url, deviceKeyFile: join(root, 'state', 'device-key.pem') });
    expect(written).not.toHaveProperty('accessKeyId');
    expect(statSync(config).mode & 0o777).toBe(0o600);
    expect(statSync(join(root, 'state', 'device-key.pem')).mode & 0o777).toBe(0o600);
    const status = await botlink(['status', '--config', config, '--json']);
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ identity: { kind: 'bot', id: botId, mode: 'broker' } });
    for (const f of filesUnder(root)) expect(f.text, f.path).not.toContain(SECRET);
  });

  it('a signing device keeps its botId with an --adopt code, loses accessKeyId and secretKeyFile, and is told its secret can go', async () => {
    writeFileSync(join(dir, 'adopt-secret'), SECRET, { mode: 0o600 });
    const signing = device('signing', {
      accessKeyId: 'AK',
      secretKeyFile: join(dir, 'adopt-secret'),
      vendorId: 'V1',
      deviceId: 'SN-ADOPT',
    });
    const registered = await botlink(['provision', '--vendor-id', 'V1', '--device-id', 'SN-ADOPT', '--config', signing.config]);
    expect(registered.code, registered.stderr).toBe(0);
    const botId = /^botId: (\S+)$/m.exec(registered.stdout)?.[1] as string;
    const withBot = JSON.parse(readFileSync(signing.config, 'utf8')) as Record<string, unknown>;
    writeFileSync(signing.config, JSON.stringify({ ...withBot, botId }), { mode: 0o600 });

    const adopt = await rig.code(['--adopt', '--device-id', 'SN-ADOPT']);
    const r = await botlink(['provision', '--broker', brokerUrl, '--code', adopt, '--device-id', 'SN-ADOPT', '--config', signing.config]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n').at(-1)).toBe(`botId: ${botId}`);
    expect(r.stdout).toContain(`delete ${join(dir, 'adopt-secret')}`);
    const written = JSON.parse(readFileSync(signing.config, 'utf8')) as Record<string, unknown>;
    expect(written).toMatchObject({ brokerUrl, botId });
    expect(written).not.toHaveProperty('accessKeyId');
    expect(written).not.toHaveProperty('secretKeyFile');
  });

  it('a spent code fails with the fix and leaves the config as it was', async () => {
    const spent = await rig.code();
    const first = device('first');
    expect(
      (await botlink(['provision', '--broker', brokerUrl, '--code', spent, '--device-id', 'SN-SPENT-1', '--config', first.config])).code,
    ).toBe(0);
    const second = device('second');
    const before = readFileSync(second.config, 'utf8');
    const r = await botlink(['provision', '--broker', brokerUrl, '--code', spent, '--device-id', 'SN-SPENT-2', '--config', second.config]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/code/);
    expect(readFileSync(second.config, 'utf8')).toBe(before);
  });
});
