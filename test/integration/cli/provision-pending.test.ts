import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keyIdOf } from '../../../src/protocol/device-sig.js';
import { exec, type CliRun } from '../../../scripts/lib/exec.js';
import { privateDaemonBundle, type Bundle } from '../../helpers/bundle.js';
import { json, startScriptedServer } from '../../helpers/scripted-server.js';

// `botlink provision --broker URL --vendor-id V` with no code (DESIGN §3.7) against a broker scripted to
// hold the key pending: it waits as Retry-After says until accepted (0) or rejected (65); --no-wait is 75.
let bundle: Bundle;
let dir: string;
let serial = 0;

beforeAll(async () => {
  bundle = await privateDaemonBundle('test-provision-pending-');
  dir = mkdtempSync(join(tmpdir(), 'botlink-provision-pending-'));
}, 60_000);

afterAll(() => {
  bundle?.dispose();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const botlink = (args: string[]): Promise<CliRun> =>
  exec(process.execPath, [bundle.file, ...args], { env: { ...process.env, CREDENTIALS_DIRECTORY: '', BOTLINK_CONFIG: '' } });

function device(): string {
  const root = join(dir, `d${++serial}`);
  mkdirSync(root);
  const config = join(root, 'config.json');
  writeFileSync(config, JSON.stringify({ baseUrl: 'http://127.0.0.1:9', stateDir: join(root, 'state'), logFile: join(root, 'log') }), {
    mode: 0o600,
  });
  return config;
}

type Step = (keyId: string) => { status: number; body: unknown; retryAfter?: string };
const pending: Step = (keyId) => ({ status: 202, body: { state: 'pending', keyId }, retryAfter: '1' });

/** A broker whose answers to /v1/enroll follow `steps`, the last one repeated. */
async function scripted(steps: Step[]) {
  let asked = 0;
  return startScriptedServer((_req, res, body) => {
    const { publicKey } = JSON.parse(body) as { publicKey: string };
    const step = steps[Math.min(asked++, steps.length - 1)] as Step;
    const answer = step(keyIdOf(Buffer.from(publicKey, 'base64url')));
    if (answer.retryAfter !== undefined) res.setHeader('retry-after', answer.retryAfter);
    json(res, answer.body, answer.status);
  });
}

const provision = (url: string, config: string, extra: string[] = []) =>
  botlink(['provision', '--broker', url, '--vendor-id', 'V1', '--device-id', 'SN-P', '--config', config, ...extra]);

describe('botlink provision --broker --vendor-id: enrollment with no code', () => {
  it('prints the keyId, waits while pending, and once accepted writes botId and brokerUrl (exit 0)', async () => {
    const server = await scripted([pending, pending, (keyId) => ({ status: 200, body: { botId: 'bot-acc', vendorId: 'V1', keyId } })]);
    try {
      const config = device();
      const r = await provision(server.url, config);
      expect(r.code, r.stderr).toBe(0);
      const keyId = /keyId ([0-9a-f]{32})/.exec(r.stdout)?.[1];
      expect(r.stdout).toContain(
        `pending: keyId ${keyId} waits for the vendor to accept it (\`botlink broker accept ${keyId} --device-id SN-P\`)`,
      );
      expect(r.stdout.trim().split('\n').at(-1)).toBe('botId: bot-acc');
      expect(JSON.parse(readFileSync(config, 'utf8'))).toMatchObject({ brokerUrl: server.url, botId: 'bot-acc' });
      expect(server.requests).toHaveLength(3);
      // Code-less: the vendor names the device, and no code is sent.
      const sent = JSON.parse(server.requests[0]!.body) as Record<string, unknown>;
      expect(sent).toMatchObject({ vendorId: 'V1', deviceId: 'SN-P' });
      expect(sent).not.toHaveProperty('code');
    } finally {
      await server.close();
    }
  });

  it('a rejection ends the wait: 65, with the fix that names asking the vendor; the config unchanged', async () => {
    const server = await scripted([pending, () => ({ status: 403, body: { code: 'rejected', msg: 'rejected by an operator' } })]);
    try {
      const config = device();
      const before = readFileSync(config, 'utf8');
      const r = await provision(server.url, config);
      expect(r.code, r.stderr).toBe(65);
      expect(r.stderr).toContain('rejected');
      expect(r.stderr).toContain('ask the vendor to enroll this device');
      expect(readFileSync(config, 'utf8')).toBe(before);
    } finally {
      await server.close();
    }
  });

  it('a broker failing now and then while pending does not end the wait', async () => {
    const server = await scripted([
      pending,
      () => ({ status: 503, body: { code: 'store-unavailable', msg: 'busy' }, retryAfter: '1' }),
      (keyId) => ({ status: 200, body: { botId: 'bot-later', vendorId: 'V1', keyId } }),
    ]);
    try {
      const r = await provision(server.url, device());
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain('store-unavailable');
      expect(r.stdout.trim().split('\n').at(-1)).toBe('botId: bot-later');
    } finally {
      await server.close();
    }
  });

  it('--no-wait exits 75 while pending, naming the keyId to read to the vendor', async () => {
    const server = await scripted([pending]);
    try {
      const r = await provision(server.url, device(), ['--no-wait']);
      expect(r.code, r.stderr).toBe(75);
      expect(r.stderr).toMatch(/keyId [0-9a-f]{32} pending/);
      expect(server.requests).toHaveLength(1);
    } finally {
      await server.close();
    }
  });

  it('429 and 5xx are 69; a refusal 65', async () => {
    for (const [status, code, exit] of [
      [429, 'rate-limited', 69],
      [503, 'cloud-unreachable', 69],
      [409, 'device-exists', 65],
      [403, 'bad-code', 65],
    ] as const) {
      const server = await scripted([() => ({ status, body: { code, msg: 'm' }, retryAfter: '30' })]);
      try {
        const r = await provision(server.url, device());
        expect(r.code, `${code}: ${r.stderr}`).toBe(exit);
      } finally {
        await server.close();
      }
    }
  });

  it('with a code after a rejection: the rejected key is kept aside as <file>.revoked-<keyId> and a new one enrolled', async () => {
    const server = await scripted([
      () => ({ status: 403, body: { code: 'rejected', msg: 'rejected by an operator' } }),
      (keyId) => ({ status: 200, body: { botId: 'bot-new-key', vendorId: 'V1', keyId } }),
    ]);
    try {
      const config = device();
      const r = await botlink(['provision', '--broker', server.url, '--code', 'ABCD-EFGH', '--device-id', 'SN-P', '--config', config]);
      expect(r.code, r.stderr).toBe(0);
      const keyIds = [...r.stdout.matchAll(/keyId ([0-9a-f]{32})/g)].map((m) => m[1]);
      const [oldKeyId, newKeyId] = [keyIds[0], keyIds.at(-1)];
      expect(newKeyId).not.toBe(oldKeyId);
      const keyFile = join(dirname(config), 'state', 'device-key.pem');
      expect(r.stdout).toContain(`keyId ${oldKeyId} was rejected; kept as ${keyFile}.revoked-${oldKeyId}`);
      expect(existsSync(`${keyFile}.revoked-${oldKeyId}`)).toBe(true);
      const sent = server.requests.map((q) => JSON.parse(q.body) as { publicKey: string; code: string });
      expect(sent.map((b) => b.code)).toEqual(['ABCD-EFGH', 'ABCD-EFGH']);
      expect(sent[0]!.publicKey).not.toBe(sent[1]!.publicKey);
      expect(r.stdout.trim().split('\n').at(-1)).toBe('botId: bot-new-key');
    } finally {
      await server.close();
    }
  });

  it('usage: --broker takes exactly one of --code and --vendor-id; --no-wait only without a code', async () => {
    const config = device();
    const base = ['provision', '--broker', 'http://127.0.0.1:9', '--device-id', 'SN-U', '--config', config];
    expect((await botlink(base)).code).toBe(64);
    expect((await botlink([...base, '--code', 'C', '--vendor-id', 'V1'])).code).toBe(64);
    expect((await botlink([...base, '--code', 'C', '--no-wait'])).code).toBe(64);
    expect((await botlink(['provision', '--vendor-id', 'V1', '--device-id', 'SN-U', '--no-wait', '--config', config])).code).toBe(64);
    expect((await botlink(['provision', '--code', 'C', '--device-id', 'SN-U', '--config', config])).code).toBe(64);
  });
});
