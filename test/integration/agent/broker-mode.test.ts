import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { enrollDevice } from '../../../src/agent/broker/enroll.js';
import { createDeviceKey, type DeviceKey } from '../../../src/agent/config/device-key.js';
import { TokenStore } from '../../../src/agent/store/token-store.js';
import { systemClock } from '../../../src/clock.js';
import { BUNDLE } from '../../../scripts/build.mjs';
import { type BrokerRig, brokerRig, vendorSeed } from '../../helpers/broker-rig.js';
import { type DeviceDir, runCli } from '../../helpers/daemon-proc.js';
import { useHarness } from '../../helpers/harness.js';
import { listening, type ServeRun, startListener } from '../../helpers/serve-proc.js';
import { filesUnder } from '../../helpers/tree.js';
import { waitFor } from '../../helpers/wait-for.js';

/**
 * A device in broker mode end to end (DESIGN §3.7), every part a real process: `botlink serve` as the
 * cloud, `botlink broker` on SQLite, and `botlink run` holding only its own Ed25519 key, enrolled
 * through the broker's /v1/enroll with the agent's own client.
 */

const SECRET = 'SK-agent-broker-account-9d2e';
/**
 * Short tokens, so the device asks the broker again within seconds (a quarter of the lifetime left, ~4.5 s in):
 * the renewal and the revocation below are seen at that ask, not on a timer of the test's own.
 */
const ACCESS_TTL_S = 6;
const { cleanups, device, daemon, tempDir } = useHarness();

function started(argv: string[]): ServeRun {
  const run = startListener(BUNDLE, argv, { CREDENTIALS_DIRECTORY: '' });
  cleanups.push(async () => {
    if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGKILL');
    await run.exit;
  });
  return run;
}

interface Vendor {
  cloudUrl: string;
  brokerUrl: string;
  broker: BrokerRig;
}

/** The vendor's side: the cloud and its broker, which alone holds the account secret. */
async function vendorSide(): Promise<Vendor> {
  const seed = join(tempDir('botlink-agent-broker-vendor-'), 'seed.json');
  writeFileSync(seed, JSON.stringify(vendorSeed(SECRET)));
  const cloudUrl = await listening(started(['serve', '--seed', seed, '--access-ttl', String(ACCESS_TTL_S)]));
  // A device renewing 6 s tokens asks every ~4.5 s: more than the default 12 an hour.
  const broker = brokerRig({ bundle: BUNDLE, cloudUrl, secret: SECRET, extra: { deviceTokensPerHour: 1000 } });
  cleanups.push(() => broker.close());
  return { cloudUrl, brokerUrl: (await broker.start()).url, broker };
}

/** A device dir in broker mode: its key made and enrolled, its config naming brokerUrl and the botId, no secret file. */
async function enrolledDevice(v: Vendor, deviceId: string): Promise<{ d: DeviceDir; key: DeviceKey; botId: string }> {
  const d = device(v.cloudUrl, { botId: 'pending' });
  // DeviceDir writes a signing-mode secret file by default: a device in broker mode has none.
  rmSync(join(d.dir, 'secret-key'));
  const key = createDeviceKey(join(d.stateDir, 'device-key.pem'));
  const enrolled = await enrollDevice({
    brokerUrl: v.brokerUrl,
    ca: null,
    key,
    clock: systemClock,
    request: { code: await v.broker.code(), deviceId },
  });
  if (enrolled.state !== 'active') throw new Error('a code enrolls at once');
  expect(enrolled).toEqual({ state: 'active', botId: expect.stringMatching(/\S/), vendorId: 'V1', keyId: key.keyId });
  d.writeConfig({ baseUrl: v.cloudUrl, brokerUrl: v.brokerUrl, botId: enrolled.botId, accessKeyId: undefined, secretKeyFile: undefined });
  return { d, key, botId: enrolled.botId };
}

describe('botlink run in broker mode, against botlink serve and botlink broker', () => {
  it('reaches connected with a token from the broker, keeps no refresh token, and no file of the device holds the account secret', async () => {
    const v = await vendorSide();
    const { d, key, botId } = await enrolledDevice(v, 'SN-BROKER-1');
    const proc = daemon(d);
    const status = await d.waitForLink('connected', 20_000);
    expect(status.identity).toEqual({ kind: 'bot', id: botId, mode: 'broker', keyId: key.keyId, state: 'active' });
    expect(status.token).toMatchObject({ accessExpiresAt: expect.any(Number), refreshExpiresAt: null, lastError: null });
    expect(d.log()).toContain('"msg":"token issued by the broker"');

    // The device renews through the broker, as signing mode would refresh: by the same policy.
    await waitFor(() => (d.log().match(/token issued by the broker/g) ?? []).length >= 2, 20_000, 'a renewal through the broker');
    expect(d.status()?.link.state).toBe('connected');

    const store = TokenStore.open(d.stateDir, { readOnly: true });
    const cached = store.peekPair();
    store.close();
    expect(cached).toMatchObject({ identity: { kind: 'bot', id: botId, accessKeyId: '' }, pair: { refreshToken: '' } });

    await proc.stop();
    const files = filesUnder(d.dir);
    expect(files.map((f) => f.path)).toContain(join(d.stateDir, 'device-key.pem'));
    for (const f of files) expect(f.text, f.path).not.toContain(SECRET);
    expect(files.some((f) => f.path.endsWith('secret-key'))).toBe(false);
    // The broker's audit names this key, never a token or the secret.
    const audit = readFileSync(v.broker.logFile, 'utf8');
    expect(audit).toContain(key.keyId);
    expect(audit).not.toContain(SECRET);
    expect(audit).not.toContain(cached!.pair.accessToken);

    // status and token find the broker's pair under the key the daemon saved it with (accessKeyId '').
    const saved = TokenStore.open(d.stateDir, { readOnly: true });
    const stopped = saved.peekPair()!.pair;
    saved.close();
    const st = await runCli(['status', '--config', d.configFile, '--json']);
    expect(st.code, st.stderr).toBe(0);
    expect(JSON.parse(st.stdout)).toMatchObject({
      source: 'database',
      token: { accessExpiresAt: stopped.accessExpiresAt, refreshExpiresAt: null },
    });
    const tk = await runCli(['token', '--config', d.configFile, '--json']);
    expect(tk.code, tk.stderr).toBe(0);
    const after = TokenStore.open(d.stateDir, { readOnly: true });
    expect(JSON.parse(tk.stdout)).toMatchObject({ accessToken: after.peekPair()!.pair.accessToken });
    after.close();
  });

  it('a revoke on the broker turns into the fix that names re-enrollment; the link keeps its socket meanwhile', async () => {
    const v = await vendorSide();
    const { d, botId } = await enrolledDevice(v, 'SN-BROKER-2');
    daemon(d);
    await d.waitForLink('connected', 20_000);
    const r = await v.broker.cli(['revoke', '--config', v.broker.configFile, botId]);
    expect(r.code, r.stderr).toBe(0);
    await waitFor(() => d.status()?.token.lastError?.includes('revoked') === true, 20_000, 'the revocation in status.json');
    const status = d.status()!;
    expect(status.token.fix).toBe(
      'this device key was revoked or replaced: re-enroll with `botlink provision --broker URL --code CODE --device-id SN` and a new code from the vendor',
    );
    expect(status.link.state).toBe('connected');
    expect(status.identity.state).toBe('revoked');
    expect(d.log()).toContain('"code":"ERR_BROKER_REVOKED"');
  });

  it('botlink doctor passes every check against the real broker, and says there is no account secret here', async () => {
    const v = await vendorSide();
    const { d, key } = await enrolledDevice(v, 'SN-BROKER-3');
    const r = await runCli(['doctor', '--config', d.configFile]);
    expect(r.code, r.stdout).toBe(0);
    expect(r.stdout).toMatch(
      new RegExp(`^ok {4}secret file: no account secret on this device \\(broker mode\\); device key .*keyId ${key.keyId}\\)$`, 'm'),
    );
    expect(r.stdout).toMatch(new RegExp(`^ok {4}broker: ${v.brokerUrl} answers \\(store sqlite\\) and holds this device key active`, 'm'));
    expect(r.stdout).toMatch(/^ok {4}getToken: bot \S+: the broker holds its key active; doctor asks for no token/m);
    expect(r.stdout).toMatch(/^ok {4}websocket: not tested/m);
    // Diagnosing a device spends none of its tokens: the broker audited no token issued.
    expect(readFileSync(v.broker.logFile, 'utf8')).not.toContain('token issued');
  });

  it('zero-touch with a pre-authorised key: the daemon makes its key, enrolls it with no code, keeps the botId and connects', async () => {
    const v = await vendorSide();
    const d = device(v.cloudUrl, {
      brokerUrl: v.brokerUrl,
      vendorId: 'V1',
      botId: undefined,
      accessKeyId: undefined,
      secretKeyFile: undefined,
    });
    rmSync(join(d.dir, 'secret-key'));
    // The factory's step: the key made on the board, its line collected for the broker.
    const line = await runCli(['key', '--config', d.configFile, '--device-id', 'SN-ZERO-TOUCH']);
    expect(line.code, line.stderr).toBe(0);
    const lines = join(d.dir, 'preauth.csv');
    writeFileSync(lines, line.stdout);
    const pre = await v.broker.cli(['preauth', '--config', v.broker.configFile, '--vendor-id', 'V1', lines]);
    expect(pre.code, pre.stderr).toBe(0);

    d.writeConfig({
      baseUrl: v.cloudUrl,
      brokerUrl: v.brokerUrl,
      vendorId: 'V1',
      deviceId: 'SN-ZERO-TOUCH',
      accessKeyId: undefined,
      secretKeyFile: undefined,
    });
    daemon(d);
    const status = await d.waitForLink('connected', 20_000);
    expect(status.identity).toMatchObject({ kind: 'bot', mode: 'broker', state: 'active', keyId: expect.stringMatching(/^[0-9a-f]{32}$/) });
    const store = TokenStore.open(d.stateDir, { readOnly: true });
    const kept = store.getProvisionedBotId({ baseUrl: v.cloudUrl, accessKeyId: '', vendorId: 'V1', deviceId: 'SN-ZERO-TOUCH' });
    store.close();
    expect(kept).toBe(status.identity.id);
  });

  it('refuses a config that names the account key beside brokerUrl: exit 78, naming both', async () => {
    const v = await vendorSide();
    const { d } = await enrolledDevice(v, 'SN-BROKER-4');
    const config = JSON.parse(readFileSync(d.configFile, 'utf8')) as Record<string, unknown>;
    writeFileSync(d.configFile, JSON.stringify({ ...config, accessKeyId: 'AK' }));
    const r = await runCli(['run', '--config', d.configFile]);
    expect(r.code).toBe(78);
    expect(r.stderr).toMatch(/"accessKeyId" in .* conflicts with brokerUrl/);
  });
});
