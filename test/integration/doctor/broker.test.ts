import { chmodSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createDeviceKey, type DeviceKey } from '../../../src/agent/config/device-key.js';
import { Secret } from '../../../src/agent/config/secret.js';
import { CloudClient } from '../../../src/cloud/client.js';
import { systemClock } from '../../../src/clock.js';
import { storeIdentity, TokenStore } from '../../../src/agent/store/token-store.js';
import { type CheckResult, runDoctor } from '../../../src/doctor/doctor.js';
import { parseDeviceAuthorization, publicKeyFromWire, verifyRequest } from '../../../src/protocol/device-sig.js';
import type { ReferenceService } from '../../../src/service/server.js';
import { cleanEnv } from '../../../scripts/lib/env.js';
import { useHarness } from '../../helpers/harness.js';
import { json, startScriptedServer } from '../../helpers/scripted-server.js';

/**
 * `botlink doctor` in broker mode (DESIGN §3.7): a reference service as the cloud, and a broker played by
 * a real HTTP server that verifies each signature and hands out real tokens of that service.
 */

const SEED = { accounts: [{ accessKeyId: 'AK', secretKey: 'SK', vendors: [{ vendorId: 'V1', bots: ['bot-1'] }] }] };
const ENROLL = 'botlink provision --broker URL --code CODE --device-id SN';
const { cleanups, service, device } = useHarness();

type Refusal = { status: number; code: string; headers?: Record<string, string> } | undefined;

/** A broker that knows `key` and answers /v1/check for bot-1 (/v1/token with a real token of `svc`), or with `refusal`. */
async function broker(svc: ReferenceService, key: DeviceKey, refusal?: Refusal) {
  const api = new CloudClient({ baseUrl: svc.url, accessKeyId: 'AK', secretKey: new Secret('SK'), clock: systemClock });
  cleanups.push(() => api.close());
  const wire = publicKeyFromWire(key.publicKey);
  const server = await startScriptedServer((req, res, body) => {
    if (req.url === '/v1/health') return json(res, { ok: true, store: 'sqlite' });
    const auth = parseDeviceAuthorization(req.headers.authorization);
    if (!verifyRequest(wire.key, auth, 'POST', req.url ?? '', Buffer.from(body))) return json(res, { code: 'bad-signature', msg: '' }, 401);
    if (refusal) {
      res.writeHead(refusal.status, { 'content-type': 'application/json', ...refusal.headers });
      return res.end(JSON.stringify({ code: refusal.code, msg: refusal.code }));
    }
    if (req.url === '/v1/check') return json(res, { botId: 'bot-1', keyId: key.keyId, state: 'active' });
    void api
      .getToken({ kind: 'bot', id: 'bot-1' }, Date.now())
      .then((t) =>
        json(res, { botId: 'bot-1', accessToken: t.accessToken, expireIn: t.expireIn, expiresAt: Date.now() + t.expireIn * 1000 }),
      );
  });
  cleanups.push(() => server.close());
  return server;
}

/** A device in broker mode: its own key, brokerUrl, and no account key or secret file named. */
function brokerDevice(svc: ReferenceService, brokerUrl: string) {
  const d = device(svc, { botId: 'bot-1', brokerUrl, accessKeyId: undefined, secretKeyFile: undefined });
  const key = createDeviceKey(join(d.stateDir, 'device-key.pem'));
  return { d, key };
}

async function doctor(configFile: string): Promise<{ by: Record<string, CheckResult>; configUsable: boolean }> {
  const report = await runDoctor({ configFile, env: cleanEnv() });
  return { by: Object.fromEntries(report.results.map((r) => [r.name, r])), configUsable: report.configUsable };
}

/** The broker's URL is known only once it listens, and it must know the key the device makes: set both up in turn. */
async function brokerRig(refusal?: Refusal) {
  const svc = await service(SEED);
  const { d, key } = brokerDevice(svc, 'http://127.0.0.1:9');
  const b = await broker(svc, key, refusal);
  d.writeConfig({ baseUrl: svc.url, botId: 'bot-1', brokerUrl: b.url, accessKeyId: undefined, secretKeyFile: undefined });
  return { svc, d, key, b };
}

describe('botlink doctor in broker mode', () => {
  it('passes: no account secret here, the broker answers and holds the key active — asked with /v1/check, never for a token', async () => {
    const { svc, d, key, b } = await brokerRig();
    const { by } = await doctor(d.configFile);
    for (const r of Object.values(by)) expect(`${r.name}: ${r.status} ${r.detail}`).toMatch(/: ok /);
    expect(by['secret file']!.detail).toBe(
      `no account secret on this device (broker mode); device key ${join(d.stateDir, 'device-key.pem')} ` +
        `(mode 0600, owner uid ${statSync(join(d.stateDir, 'device-key.pem')).uid}, keyId ${key.keyId})`,
    );
    expect(by.broker!.detail).toBe(`${b.url} answers (store sqlite) and holds this device key active (keyId ${key.keyId})`);
    expect(by['server time']!.detail).toMatch(
      /^the broker clock is .* the local clock .*; the broker takes requests within ±300 s of its clock/,
    );
    expect(by.getToken!.detail).toMatch(/^bot bot-1: the broker holds its key active; doctor asks for no token/);
    expect(by.websocket!.detail).toMatch(/^not tested: no valid token cached here, and doctor asks the broker for none/);
    expect(b.requests.map((r) => r.url).filter((u) => u !== '/v1/health')).toEqual(['/v1/check']);
    expect(svc.stats.getToken.ok).toBe(0);
  });

  it('tests the WebSocket with the token the daemon keeps, still asking the broker for none', async () => {
    const { svc, d, b } = await brokerRig();
    const api = new CloudClient({ baseUrl: svc.url, accessKeyId: 'AK', secretKey: new Secret('SK'), clock: systemClock });
    cleanups.push(() => api.close());
    const t = await api.getToken({ kind: 'bot', id: 'bot-1' }, Date.now());
    const store = TokenStore.open(d.stateDir);
    const expiresAt = Date.now() + t.expireIn * 1000;
    store.savePair(storeIdentity({ baseUrl: svc.url, accessKeyId: '' }, { kind: 'bot', id: 'bot-1' }), {
      accessToken: t.accessToken,
      accessExpiresAt: expiresAt,
      refreshToken: '',
      refreshExpiresAt: expiresAt,
      issuedAt: Date.now(),
    });
    store.close();
    const { by } = await doctor(d.configFile);
    expect(by.getToken!.detail).toContain('the token the daemon keeps is tested below');
    expect(by.websocket!.detail).toMatch(/accepted bot bot-1/);
    expect(b.requests.some((r) => r.url === '/v1/token')).toBe(false);
  });

  it('a key still pending fails the broker check, naming its keyId to read to the vendor', async () => {
    const svc = await service(SEED);
    const { d, key } = brokerDevice(svc, 'http://127.0.0.1:9');
    const b = await startScriptedServer((req, res) => {
      if (req.url === '/v1/health') return json(res, { ok: true, store: 'sqlite' });
      json(res, { state: 'pending', keyId: key.keyId }, 202);
    });
    cleanups.push(() => b.close());
    d.writeConfig({ baseUrl: svc.url, botId: 'bot-1', brokerUrl: b.url, accessKeyId: undefined, secretKeyFile: undefined });
    const { by } = await doctor(d.configFile);
    expect(by.broker).toMatchObject({
      status: 'fail',
      detail: expect.stringContaining(`keyId ${key.keyId}) waits for the vendor to accept it`),
    });
    expect(by.getToken!.status).toBe('fail');
  });

  it.each([
    [{ status: 401, code: 'unknown-key' }, /enroll it with `botlink provision --broker URL/],
    [{ status: 403, code: 'revoked' }, new RegExp(`re-enroll with \`${ENROLL}\` and a new code from the vendor`)],
  ])('fails the broker check for %j with the fix, and the token check after it', async (refusal, fix) => {
    const { d } = await brokerRig(refusal);
    const { by } = await doctor(d.configFile);
    expect(by.broker).toMatchObject({
      status: 'fail',
      detail: expect.stringContaining(`the broker refused: ${refusal.code}`),
      fix: expect.stringMatching(fix),
    });
    expect(by.getToken).toMatchObject({ status: 'fail', detail: expect.stringContaining(refusal.code) });
    expect(by.websocket!.status).toBe('skip');
  });

  it('a rate limit proves the key known: the broker check passes and the token check says why there is no token', async () => {
    const { d } = await brokerRig({ status: 429, code: 'rate-limited', headers: { 'retry-after': '60' } });
    const { by } = await doctor(d.configFile);
    expect(by.broker!.status).toBe('ok');
    expect(by.getToken).toMatchObject({ status: 'fail', detail: expect.stringContaining('the broker refused: rate-limited') });
  });

  it('a broker that cannot be reached fails its check; the checks that need it are skipped', async () => {
    const svc = await service(SEED);
    const gone = await startScriptedServer(() => undefined);
    await gone.close();
    const { d } = brokerDevice(svc, gone.url);
    const { by } = await doctor(d.configFile);
    expect(by.broker).toMatchObject({ status: 'fail', detail: expect.stringMatching(/ECONNREFUSED/) });
    for (const name of ['server time', 'getToken'])
      expect(by[name]).toMatchObject({ status: 'skip', detail: 'the broker cannot be reached (see above)' });
  });

  it('a device key open to others: the settings pass, the key fails with its fix, the configuration is unusable', async () => {
    const svc = await service(SEED);
    const { d } = brokerDevice(svc, 'http://127.0.0.1:9');
    chmodSync(join(d.stateDir, 'device-key.pem'), 0o644);
    const { by, configUsable } = await doctor(d.configFile);
    expect(by.config!.detail).toBe('settings valid; the device key file is not (see next line)');
    expect(by['secret file']).toMatchObject({
      status: 'fail',
      detail: expect.stringContaining('has mode 0644'),
      fix: expect.stringMatching(/chmod 600.*revoke/),
    });
    expect(configUsable).toBe(false);
  });
});

describe('botlink doctor in signing mode', () => {
  it('warns that the account secret is on this device, and says there is no broker', async () => {
    const svc = await service(SEED);
    const d = device(svc, { botId: 'bot-1' }, 'SK');
    const { by } = await doctor(d.configFile);
    expect(by['secret file']).toMatchObject({
      status: 'ok',
      detail: expect.stringMatching(/; WARNING: this is the vendor's account secret, the same on every device/),
    });
    expect(by['secret file']!.detail).toContain(ENROLL);
    expect(by.broker).toMatchObject({
      status: 'ok',
      detail: 'none: signing mode, this device signs with the account secret (see secret file)',
    });
    expect(by.getToken!.status).toBe('ok');
  });
});
