import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
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

  it('a signing device that registered itself (vendorId, no botId in the config) keeps the botId from its store with an --adopt code', async () => {
    writeFileSync(join(dir, 'store-secret'), SECRET, { mode: 0o600 });
    const signing = device('store-adopt', { accessKeyId: 'AK', secretKeyFile: join(dir, 'store-secret'), vendorId: 'V1' });
    const registered = await botlink(['provision', '--vendor-id', 'V1', '--device-id', 'SN-STORE', '--config', signing.config]);
    expect(registered.code, registered.stderr).toBe(0);
    const botId = /^botId: (\S+)$/m.exec(registered.stdout)?.[1] as string;
    expect(JSON.parse(readFileSync(signing.config, 'utf8'))).not.toHaveProperty('botId');

    const adopt = await rig.code(['--adopt', '--device-id', 'SN-STORE']);
    const r = await botlink(['provision', '--broker', brokerUrl, '--code', adopt, '--device-id', 'SN-STORE', '--config', signing.config]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`to keep botId ${botId}`);
    expect(JSON.parse(readFileSync(signing.config, 'utf8'))).toMatchObject({ brokerUrl, botId });
  });

  it('after a revoke: a plain code meets device-exists (65, naming the --replace code); a --replace code enrolls a new key, the old kept aside', async () => {
    const { root, config } = device('revoked');
    const first = await botlink([
      'provision',
      '--broker',
      brokerUrl,
      '--code',
      await rig.code(),
      '--device-id',
      'SN-REVOKED',
      '--config',
      config,
    ]);
    expect(first.code, first.stderr).toBe(0);
    const botId = /^botId: (\S+)$/m.exec(first.stdout)?.[1] as string;
    const keyFile = join(root, 'state', 'device-key.pem');
    const oldKeyId = /keyId ([0-9a-f]{32})/.exec(first.stdout)?.[1] as string;
    const revoked = await rig.cli(['revoke', '--config', rig.configFile, botId]);
    expect(revoked.code, revoked.stderr).toBe(0);

    const plain = await botlink([
      'provision',
      '--broker',
      brokerUrl,
      '--code',
      await rig.code(),
      '--device-id',
      'SN-REVOKED',
      '--config',
      config,
    ]);
    expect(plain.code, plain.stderr).toBe(65);
    expect(plain.stdout).toContain(`keyId ${oldKeyId} was revoked; kept as ${keyFile}.revoked-${oldKeyId}`);
    expect(plain.stderr).toContain('device-exists');
    expect(plain.stderr).toContain('ask the vendor for a --replace code for deviceId SN-REVOKED');

    const replace = await rig.code(['--replace', '--device-id', 'SN-REVOKED']);
    const r = await botlink(['provision', '--broker', brokerUrl, '--code', replace, '--device-id', 'SN-REVOKED', '--config', config]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n').at(-1)).toBe(`botId: ${botId}`);
    const newKeyId = /using \S+ \(keyId ([0-9a-f]{32})\)/.exec(r.stdout)?.[1];
    expect(newKeyId).toMatch(/^[0-9a-f]{32}$/);
    expect(newKeyId).not.toBe(oldKeyId);
    expect(existsSync(`${keyFile}.revoked-${oldKeyId}`)).toBe(true);
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
  });

  it('exit codes by cause: no baseUrl is 78 naming baseUrl and the config, never its checking copy; an unreachable broker is 69', async () => {
    const { config } = device('no-base-url');
    writeFileSync(config, JSON.stringify({ stateDir: join(dir, 'no-base-url', 'state') }), { mode: 0o600 });
    const r = await botlink(['provision', '--broker', brokerUrl, '--code', 'AAAA-BBBB', '--device-id', 'SN-NOBASE', '--config', config]);
    expect(r.code, r.stderr).toBe(78);
    expect(r.stderr).toContain('baseUrl is required');
    expect(r.stderr).toContain(`in ${config}`);
    expect(r.stderr).not.toMatch(/\.check/);

    const gone = device('unreachable');
    const down = await botlink([
      'provision',
      '--broker',
      'http://127.0.0.1:9',
      '--code',
      'AAAA-BBBB',
      '--device-id',
      'SN-DOWN',
      '--config',
      gone.config,
    ]);
    expect(down.code, down.stderr).toBe(69);
  });

  it('a code-less enrollment of a key the broker neither pre-authorised nor holds pending is refused: 65', async () => {
    const { config } = device('unlisted');
    const before = readFileSync(config, 'utf8');
    const r = await botlink(['provision', '--broker', brokerUrl, '--vendor-id', 'V1', '--device-id', 'SN-UNLISTED', '--config', config]);
    expect(r.code, r.stderr).toBe(65);
    expect(r.stderr).toContain('bad-code');
    expect(readFileSync(config, 'utf8')).toBe(before);
  });

  it('botlink key prints the line broker preauth takes; that key then enrolls with no code', async () => {
    const { root, config } = device('factory', { brokerUrl, vendorId: 'V1' });
    const line = await botlink(['key', '--config', config, '--device-id', 'SN-FACTORY']);
    expect(line.code, line.stderr).toBe(0);
    const keyFile = join(root, 'state', 'device-key.pem');
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(line.stdout).toMatch(/^SN-FACTORY,[A-Za-z0-9_-]{43}\n$/);
    const json = await botlink(['key', '--config', config, '--device-id', 'SN-FACTORY', '--json']);
    const shown = JSON.parse(json.stdout) as { deviceId: string; publicKey: string; keyId: string };
    // The same key, not a new one.
    expect(`${shown.deviceId},${shown.publicKey}\n`).toBe(line.stdout);
    expect(shown.keyId).toMatch(/^[0-9a-f]{32}$/);

    const lines = join(root, 'preauth.csv');
    writeFileSync(lines, line.stdout);
    const pre = await rig.cli(['preauth', '--config', rig.configFile, '--vendor-id', 'V1', lines]);
    expect(pre.code, pre.stderr).toBe(0);
    const r = await botlink(['provision', '--broker', brokerUrl, '--vendor-id', 'V1', '--device-id', 'SN-FACTORY', '--config', config]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`(keyId ${shown.keyId})`);
    const botId = /^botId: (\S+)$/m.exec(r.stdout)?.[1];
    expect(JSON.parse(readFileSync(config, 'utf8'))).toMatchObject({ brokerUrl, botId, vendorId: 'V1' });
  });

  it('botlink key: the config deviceId stands in for the flag; a signing config has no device key (78)', async () => {
    const { config } = device('key-config', { brokerUrl, vendorId: 'V1', deviceId: 'SN-CFG' });
    const r = await botlink(['key', '--config', config]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^SN-CFG,/);
    writeFileSync(join(dir, 'key-secret'), SECRET, { mode: 0o600 });
    const signing = device('key-signing', { accessKeyId: 'AK', secretKeyFile: join(dir, 'key-secret'), vendorId: 'V1' });
    const refused = await botlink(['key', '--config', signing.config, '--device-id', 'SN-X']);
    expect(refused.code).toBe(78);
    expect(refused.stderr).toContain('brokerUrl');
  });
});
