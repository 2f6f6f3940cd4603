import { existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenStore } from '../../src/agent/store/token-store.js';
import { BUNDLE } from '../../scripts/build.mjs';
import { type BrokerRig, brokerRig, vendorSeed } from '../helpers/broker-rig.js';
import { type DeviceDir, runCli } from '../helpers/daemon-proc.js';
import { useHarness } from '../helpers/harness.js';
import { type PostgresServer, startPostgres } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait-for.js';

/**
 * Issue 35's flows as a fleet's operator runs them from the README, every part a real process but the
 * cloud: `botlink broker` on SQLite and on PostgreSQL, `botlink run` daemons, and the operator's and the
 * technician's commands — zero-touch (accepted, and rejected), the factory's pre-authorisation, revoke then
 * back in service with a --replace code, adopting a device that registered itself, and a doctor that costs
 * the device no token. Each ends where the README says, with no file edited by hand.
 */

const SECRET = 'SK-fleet-flows-7c1e';
/** A pending device asks again 48–72 s after its last ask (Retry-After 60, ±20 %). */
const NEXT_ASK_MS = 100_000;
const { cleanups, service, device, daemon, tempDir } = useHarness();
let pg: PostgresServer;

beforeAll(async () => {
  pg = await startPostgres();
}, 120_000);
afterAll(async () => {
  await pg?.stop();
});

interface Vendor {
  cloudUrl: string;
  brokerUrl: string;
  broker: BrokerRig;
  /** `botlink broker …args --config <the broker's>`, expecting `code` (0 unless told). */
  op(args: string[], code?: number): Promise<string>;
}

async function vendorSide(store: 'sqlite' | 'postgres'): Promise<Vendor> {
  const cloud = await service(vendorSeed(SECRET));
  const broker = brokerRig({
    bundle: BUNDLE,
    cloudUrl: cloud.url,
    secret: SECRET,
    ...(store === 'postgres' && { store: await pg.freshDatabase() }),
    // The image's serials may wait for an operator; the README's default limits otherwise.
    extra: { pendingEnrollment: { V1: { devicePattern: 'SN-FLEET-[0-9]+' } } },
  });
  cleanups.push(() => broker.close());
  const brokerUrl = (await broker.start()).url;
  const op = async (args: string[], code = 0): Promise<string> => {
    const [sub, ...rest] = args;
    const r = await broker.cli([sub!, '--config', broker.configFile, ...rest]);
    expect(r.code, `broker ${args.join(' ')}: ${r.stderr}`).toBe(code);
    return r.stdout;
  };
  return { cloudUrl: cloud.url, brokerUrl, broker, op };
}

/** A board with the fleet's one image: baseUrl, brokerUrl and vendorId; no code, no botId, no secret. */
function imageBoard(v: Vendor, deviceId: string): DeviceDir {
  const d = device(v.cloudUrl, {
    brokerUrl: v.brokerUrl,
    vendorId: 'V1',
    deviceId,
    botId: undefined,
    accessKeyId: undefined,
    secretKeyFile: undefined,
  });
  rmSync(join(d.dir, 'secret-key'));
  return d;
}

const botlink = async (args: string[], code = 0): Promise<{ stdout: string; stderr: string }> => {
  const r = await runCli(args, { timeoutMs: 30_000 });
  expect(r.code, `botlink ${args.join(' ')}: ${r.stderr}`).toBe(code);
  return r;
};

const lastBotId = (out: string): string => /^botId: (\S+)$/m.exec(out)?.[1] ?? '';

describe.each(['sqlite', 'postgres'] as const)('a fleet on a broker on %s, run from the README', (store) => {
  it('zero-touch: one image, two boards pending with their keyIds; one accepted connects, the other rejected stops asking', async () => {
    const v = await vendorSide(store);
    const accepted = imageBoard(v, 'SN-FLEET-1');
    const refused = imageBoard(v, 'SN-FLEET-2');
    daemon(accepted);
    daemon(refused);
    for (const d of [accepted, refused])
      await waitFor(() => d.status()?.identity.state === 'pending', 20_000, `${d.dir}: identity.state pending`);
    const keyOf = (d: DeviceDir): string => d.status()!.identity.keyId!;
    // The operator's view: both keys waiting, each with the serial it asked for.
    const listed = JSON.parse(await v.op(['pending', '--vendor-id', 'V1', '--json'])) as { keyId: string; deviceId: string }[];
    expect(listed.map((p) => [p.deviceId, p.keyId]).sort()).toEqual([
      ['SN-FLEET-1', keyOf(accepted)],
      ['SN-FLEET-2', keyOf(refused)],
    ]);
    // Accept takes the whole keyId read off the board and the serial expected; another serial is refused.
    await v.op(['accept', keyOf(accepted), '--device-id', 'SN-FLEET-2'], 65);
    const botId = lastBotId(await v.op(['accept', keyOf(accepted), '--device-id', 'SN-FLEET-1']));
    expect(botId).toMatch(/\S/);
    expect(await v.op(['reject', keyOf(refused)])).toMatch(/1/);

    const status = await accepted.waitForLink('connected', NEXT_ASK_MS);
    expect(status.identity).toMatchObject({ kind: 'bot', id: botId, mode: 'broker', state: 'active' });
    await waitFor(() => refused.status()?.identity.state === 'rejected', NEXT_ASK_MS, 'the rejected board says so');
    expect(refused.status()?.token.fix ?? '').toMatch(/vendor/);
    const devices = JSON.parse(await v.op(['devices', '--vendor-id', 'V1', '--json'])) as { deviceId: string; state: string }[];
    expect(devices.map((d) => [d.deviceId, d.state]).sort()).toEqual([
      ['SN-FLEET-1', 'active'],
      ['SN-FLEET-2', 'rejected'],
    ]);
  }, 240_000);

  it("the factory's way: botlink key's line loaded with broker preauth, then provision with no code enrolls at once", async () => {
    const v = await vendorSide(store);
    const d = imageBoard(v, 'SN-FACTORY-7');
    const line = (await botlink(['key', '--config', d.configFile, '--device-id', 'SN-FACTORY-7'])).stdout;
    expect(line).toMatch(/^SN-FACTORY-7,[A-Za-z0-9_-]{43}\n$/);
    const file = join(tempDir('botlink-fleet-preauth-'), 'lines.csv');
    writeFileSync(file, line);
    await v.op(['preauth', '--vendor-id', 'V1', file]);
    const out = (
      await botlink(['provision', '--broker', v.brokerUrl, '--vendor-id', 'V1', '--device-id', 'SN-FACTORY-7', '--config', d.configFile])
    ).stdout;
    const botId = lastBotId(out);
    expect(JSON.parse(readFileSync(d.configFile, 'utf8'))).toMatchObject({ botId, brokerUrl: v.brokerUrl });
    daemon(d);
    expect((await d.waitForLink('connected', 30_000)).identity).toMatchObject({ id: botId, state: 'active' });
  }, 120_000);

  it('revoked, then back in service: a plain code is refused naming --replace; a --replace code enrolls a new key, the old one kept aside', async () => {
    const v = await vendorSide(store);
    const d = imageBoard(v, 'SN-REVOKE-3');
    const provision = (code: string, exit = 0) =>
      botlink(['provision', '--broker', v.brokerUrl, '--code', code, '--device-id', 'SN-REVOKE-3', '--config', d.configFile], exit);
    const first = await v.op(['code', '--vendor-id', 'V1', '--device-id', 'SN-REVOKE-3']);
    const botId = lastBotId((await provision(first.trim().split('\n').at(-1)!)).stdout);
    const keyFile = join(d.stateDir, 'device-key.pem');
    const oldKeyId = (JSON.parse((await botlink(['key', '--config', d.configFile, '--json'])).stdout) as { keyId: string }).keyId;
    expect(await v.op(['revoke', botId])).toMatch(/1/);

    const plain = (await v.op(['code', '--vendor-id', 'V1', '--device-id', 'SN-REVOKE-3'])).trim().split('\n').at(-1)!;
    const refused = await provision(plain, 65);
    expect(refused.stderr).toContain('--replace');
    const replace = (await v.op(['code', '--vendor-id', 'V1', '--device-id', 'SN-REVOKE-3', '--replace'])).trim().split('\n').at(-1)!;
    expect(lastBotId((await provision(replace)).stdout)).toBe(botId);
    expect(existsSync(`${keyFile}.revoked-${oldKeyId}`)).toBe(true);
    const newKeyId = (JSON.parse((await botlink(['key', '--config', d.configFile, '--json'])).stdout) as { keyId: string }).keyId;
    expect(newKeyId).not.toBe(oldKeyId);
    daemon(d);
    expect((await d.waitForLink('connected', 30_000)).identity).toMatchObject({ id: botId, keyId: newKeyId, state: 'active' });
  }, 120_000);

  it('--adopt moves a device that registered itself with vendorId: it keeps the botId its store holds', async () => {
    const v = await vendorSide(store);
    const d = device(v.cloudUrl, { vendorId: 'V1', deviceId: 'SN-ADOPT-4', botId: undefined }, SECRET);
    const registered = lastBotId(
      (await botlink(['provision', '--vendor-id', 'V1', '--device-id', 'SN-ADOPT-4', '--config', d.configFile])).stdout,
    );
    expect(registered).toMatch(/\S/);
    const store_ = TokenStore.open(d.stateDir, { readOnly: true });
    expect(store_.getProvisionedBotId({ baseUrl: v.cloudUrl, accessKeyId: 'AK', vendorId: 'V1', deviceId: 'SN-ADOPT-4' })).toBe(registered);
    store_.close();
    const adopt = (await v.op(['code', '--vendor-id', 'V1', '--device-id', 'SN-ADOPT-4', '--adopt'])).trim().split('\n').at(-1)!;
    const out = await botlink([
      'provision',
      '--broker',
      v.brokerUrl,
      '--code',
      adopt,
      '--device-id',
      'SN-ADOPT-4',
      '--config',
      d.configFile,
    ]);
    expect(lastBotId(out.stdout)).toBe(registered);
    const config = JSON.parse(readFileSync(d.configFile, 'utf8')) as Record<string, unknown>;
    expect(config).toMatchObject({ botId: registered, brokerUrl: v.brokerUrl });
    expect(config).not.toHaveProperty('accessKeyId');
  }, 120_000);

  it('doctor checks the broker with /v1/check: thirteen runs leave the device every token of its hour', async () => {
    const v = await vendorSide(store);
    const d = imageBoard(v, 'SN-DOCTOR-5');
    const code = (await v.op(['code', '--vendor-id', 'V1', '--device-id', 'SN-DOCTOR-5'])).trim().split('\n').at(-1)!;
    const botId = lastBotId(
      (await botlink(['provision', '--broker', v.brokerUrl, '--code', code, '--device-id', 'SN-DOCTOR-5', '--config', d.configFile]))
        .stdout,
    );
    for (let i = 0; i < 13; i++) {
      const r = await runCli(['doctor', '--config', d.configFile], { timeoutMs: 30_000 });
      expect(r.stdout).toMatch(/keyId/);
      expect(r.stdout).not.toMatch(/rate-limited/);
    }
    // Twelve tokens an hour (deviceTokensPerHour's default) are all still there, and each reached the broker:
    // the device's token cache emptied before each, and a thirteenth is refused.
    const askToken = () => {
      for (const f of readdirSync(d.stateDir).filter((f) => f.startsWith('botlink.db'))) rmSync(join(d.stateDir, f));
      return runCli(['token', '--config', d.configFile, '--json'], { timeoutMs: 30_000 });
    };
    for (let i = 0; i < 12; i++) {
      const token = await askToken();
      expect(token.code, `token ${i + 1}: ${token.stderr}`).toBe(0);
    }
    const thirteenth = await askToken();
    expect(thirteenth.code).not.toBe(0);
    expect(thirteenth.stderr).toMatch(/rate-limited/);
    expect(JSON.parse(await v.op(['devices', '--json']))).toEqual([expect.objectContaining({ botId, state: 'active' })]);
  }, 180_000);
});
