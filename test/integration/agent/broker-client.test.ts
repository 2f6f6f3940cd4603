import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { VERSION } from '../../../src/version.js';
import { describe, expect, it } from 'vitest';
import { BrokerClient, type BrokerClientOptions } from '../../../src/agent/broker/client.js';
import { enrollDevice } from '../../../src/agent/broker/enroll.js';
import type { BrokerError } from '../../../src/agent/broker/errors.js';
import { createDeviceKey, type DeviceKey } from '../../../src/agent/config/device-key.js';
import { systemClock } from '../../../src/clock.js';
import { parseDeviceAuthorization, publicKeyFromWire, verifyRequest } from '../../../src/protocol/device-sig.js';
import { useHarness } from '../../helpers/harness.js';
import { json, type Script, startScriptedServer } from '../../helpers/scripted-server.js';
import { requireTool } from '../../../scripts/lib/tools.js';

/**
 * The broker client against real HTTP servers on 127.0.0.1 that play the broker's side of DESIGN §3.7:
 * each request's signature is verified with the public key, as the broker does.
 */

const { cleanups, tempDir } = useHarness();
const TS = 1_800_000_000_000;
const ISSUED = { botId: 'bot-1', accessToken: 'at-1', expireIn: 7200, expiresAt: TS + 7_200_000 };

function deviceKey(): DeviceKey {
  return createDeviceKey(join(tempDir('botlink-broker-client-'), 'device-key.pem'));
}

async function broker(script: Script) {
  const server = await startScriptedServer(script);
  cleanups.push(() => server.close());
  return server;
}

function client(url: string, key: DeviceKey, more: Partial<BrokerClientOptions> = {}): BrokerClient {
  const c = new BrokerClient({ brokerUrl: url, ca: null, key, clock: systemClock, ...more });
  cleanups.push(() => c.close());
  return c;
}

async function failure(p: Promise<unknown>): Promise<BrokerError> {
  try {
    await p;
  } catch (err) {
    return err as BrokerError;
  }
  throw new Error('expected a failure');
}

describe('BrokerClient: signed requests the broker can verify', () => {
  it('POST /v1/token under the base path, signed over the path, ts, a fresh nonce and the exact body', async () => {
    const key = deviceKey();
    const server = await broker((_req, res) => json(res, ISSUED));
    const dates: string[] = [];
    const c = client(`${server.url}/vendor/broker/`, key, { onDateSample: (date) => date && dates.push(date) });
    expect(await c.token(TS, 1800.2)).toEqual(ISSUED);
    expect(await c.token(TS + 1)).toEqual(ISSUED);
    const wire = publicKeyFromWire(key.publicKey);
    const [first, second] = server.requests;
    expect([first!.method, first!.url, first!.body, second!.body]).toEqual([
      'POST',
      '/vendor/broker/v1/token',
      `{"minValidityS":1801,"agent":{"version":"${VERSION}"}}`,
      `{"agent":{"version":"${VERSION}"}}`,
    ]);
    expect(first!.headers['content-type']).toBe('application/json');
    const auths = server.requests.map((r) => parseDeviceAuthorization(r.headers.authorization));
    for (const [i, r] of server.requests.entries()) {
      expect(verifyRequest(wire.key, auths[i]!, 'POST', '/vendor/broker/v1/token', Buffer.from(r.body))).toBe(true);
    }
    expect(auths.map((a) => [a.keyId, a.ts])).toEqual([
      [key.keyId, String(TS)],
      [key.keyId, String(TS + 1)],
    ]);
    expect(auths[0]!.nonce).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(auths[0]!.nonce).not.toBe(auths[1]!.nonce);
    // Every answer's Date is a server time sample.
    expect(dates).toHaveLength(2);
    expect(Number.isFinite(Date.parse(dates[0]!))).toBe(true);
  });

  it('POST /v1/enroll carries the public key it is signed with (proof of possession)', async () => {
    const key = deviceKey();
    const server = await broker((_req, res) => json(res, { botId: 'bot-9', vendorId: 'V1', keyId: key.keyId }));
    const enrolled = await enrollDevice({
      brokerUrl: server.url,
      ca: null,
      key,
      clock: systemClock,
      request: { code: 'ABCDE-FGHJK', deviceId: 'SN-1' },
    });
    expect(enrolled).toEqual({ state: 'active', botId: 'bot-9', vendorId: 'V1', keyId: key.keyId });
    const body = JSON.parse(server.requests[0]!.body) as Record<string, unknown>;
    expect(body).toEqual({ code: 'ABCDE-FGHJK', deviceId: 'SN-1', publicKey: key.publicKey });
    const auth = parseDeviceAuthorization(server.requests[0]!.headers.authorization);
    expect(
      verifyRequest(publicKeyFromWire(String(body.publicKey)).key, auth, 'POST', '/v1/enroll', Buffer.from(server.requests[0]!.body)),
    ).toBe(true);
  });

  it('POST /v1/check and a code-less /v1/enroll read 202 pending with its Retry-After, and 200 as active', async () => {
    const key = deviceKey();
    let n = 0;
    const server = await broker((req, res) => {
      n++;
      if (n <= 2) {
        res.setHeader('retry-after', '45');
        return json(res, { state: 'pending', keyId: key.keyId }, 202);
      }
      if (req.url === '/v1/check') return json(res, { botId: 'bot-9', keyId: key.keyId, state: 'active' });
      json(res, { botId: 'bot-9', vendorId: 'V1', keyId: key.keyId });
    });
    const c = client(server.url, key);
    expect(await c.check(TS)).toEqual({ state: 'pending', keyId: key.keyId, retryAfterMs: 45_000 });
    expect(await c.enroll({ vendorId: 'V1', deviceId: 'SN-1' }, TS)).toEqual({ state: 'pending', keyId: key.keyId, retryAfterMs: 45_000 });
    expect(await c.check(TS)).toEqual({ botId: 'bot-9', keyId: key.keyId, state: 'active' });
    expect(await c.enroll({ vendorId: 'V1', deviceId: 'SN-1' }, TS)).toEqual({
      state: 'active',
      botId: 'bot-9',
      vendorId: 'V1',
      keyId: key.keyId,
    });
    expect(server.requests.map((r) => [r.url, r.body])).toEqual([
      ['/v1/check', '{}'],
      ['/v1/enroll', `{"vendorId":"V1","deviceId":"SN-1","publicKey":"${key.publicKey}"}`],
      ['/v1/check', '{}'],
      ['/v1/enroll', `{"vendorId":"V1","deviceId":"SN-1","publicKey":"${key.publicKey}"}`],
    ]);
  });

  it('enrolls a board whose clock says 1970: refused for clock-skew, then once more with the broker time', async () => {
    const key = deviceKey();
    const server = await broker((req, res) => {
      const ts = Number(parseDeviceAuthorization(req.headers.authorization).ts);
      if (Math.abs(ts - Date.now()) > 300_000)
        return json(res, { code: 'clock-skew', msg: 'ts out of window', serverTime: Date.now() }, 401);
      json(res, { botId: 'bot-9', vendorId: 'V1', keyId: key.keyId });
    });
    const clock1970 = { ...systemClock, wallNow: () => 1_000_000_000_000 };
    const enrolled = await enrollDevice({ brokerUrl: server.url, ca: null, key, clock: clock1970, request: { deviceId: 'SN-1' } });
    expect(enrolled).toMatchObject({ state: 'active', botId: 'bot-9' });
    const stamps = server.requests.map((r) => Number(parseDeviceAuthorization(r.headers.authorization).ts));
    expect(stamps).toHaveLength(2);
    expect(stamps[0]).toBe(1_000_000_000_000);
    expect(Math.abs(stamps[1]! - Date.now())).toBeLessThan(5_000);
  });

  it('refuses an enrollment answer for another key', async () => {
    const key = deviceKey();
    const server = await broker((_req, res) => json(res, { botId: 'bot-9', vendorId: 'V1', keyId: 'f'.repeat(32) }));
    const err = await failure(enrollDevice({ brokerUrl: server.url, ca: null, key, clock: systemClock, request: { deviceId: 'SN-1' } }));
    expect(err.message).toBe(`the broker answered for keyId ${'f'.repeat(32)}, not this key's ${key.keyId}`);
  });

  it('signs nothing with a timestamp that is not 13 digits', async () => {
    const server = await broker((_req, res) => json(res, ISSUED));
    const err = await failure(client(server.url, deviceKey()).token(0));
    expect([err.code, err.retry]).toEqual(['ERR_CLOCK_UNTRUSTED', 'needs-clock']);
    expect(server.requests).toHaveLength(0);
  });
});

describe('BrokerClient: failures', () => {
  it('a refusal becomes its error, with Retry-After and the clock-skew time', async () => {
    const answers: [number, unknown, Record<string, string>][] = [
      [429, { code: 'rate-limited', msg: 'slow down' }, { 'retry-after': '7' }],
      [401, { code: 'clock-skew', msg: 'ts out of window', serverTime: TS }, {}],
      [403, { code: 'revoked', msg: 'revoked' }, {}],
    ];
    const server = await broker((_req, res) => {
      const [status, body, headers] = answers.shift()!;
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify(body));
    });
    const c = client(server.url, deviceKey());
    const limited = await failure(c.token(TS));
    expect([limited.code, limited.retryAfterMs, limited.status]).toEqual(['ERR_BROKER_RATE_LIMITED', 7_000, 429]);
    const before = systemClock.monoNow();
    const skew = await failure(c.token(TS));
    expect(skew.serverTime?.ms).toBe(TS);
    expect(skew.serverTime?.atMono).toBeGreaterThanOrEqual(before);
    expect(await failure(c.token(TS))).toMatchObject({ code: 'ERR_BROKER_REVOKED', retry: 'needs-provisioning' });
  });

  it.each([
    ['malformed JSON', (res: Parameters<Script>[1]) => res.end('{"botId":'), 'ERR_BAD_RESPONSE'],
    ['a shape that is not a token', (res: Parameters<Script>[1]) => json(res, { ...ISSUED, accessToken: 'a b' }), 'ERR_BAD_RESPONSE'],
    [
      'an HTML error page',
      (res: Parameters<Script>[1]) => res.writeHead(502, { 'content-type': 'text/html' }).end('<html>'),
      'ERR_HTTP_STATUS',
    ],
  ])('%s → %s', async (_, answer, code) => {
    const server = await broker((_req, res) => answer(res));
    expect((await failure(client(server.url, deviceKey()).token(TS))).code).toBe(code);
  });

  it('ends a call the broker never answers at the deadline', async () => {
    const server = await broker(() => undefined);
    const started = performance.now();
    const err = await failure(client(server.url, deviceKey(), { deadlineMs: 300 }).token(TS));
    expect([err.code, err.retry]).toEqual(['ERR_TIMEOUT', 'retry-backoff']);
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it('a broker that is not there is a network failure that names the broker', async () => {
    const server = await broker(() => undefined);
    await server.close();
    const err = await failure(client(server.url, deviceKey()).token(TS));
    expect(err.code).toBe('ERR_NETWORK');
    expect(err.message).toMatch(/^broker POST \/v1\/token: cannot reach the service \(ECONNREFUSED\)/);
  });

  it('health answers with the store, and its Date is a server time sample', async () => {
    const server = await broker((req, res) => (req.url === '/v1/health' ? json(res, { ok: true, store: 'sqlite' }) : json(res, {}, 404)));
    let sampled = 0;
    const c = client(server.url, deviceKey(), { onDateSample: () => sampled++ });
    expect(await c.health()).toEqual({ ok: true, store: 'sqlite' });
    await c.sampleServerTime();
    expect(sampled).toBe(2);
  });

  it('a health answer without Date gives no server time', async () => {
    const server = await broker((_req, res) => {
      res.sendDate = false;
      json(res, { ok: true, store: 'sqlite' });
    });
    expect((await failure(client(server.url, deviceKey()).sampleServerTime())).code).toBe('ERR_BAD_RESPONSE');
  });
});

describe('BrokerClient over TLS', () => {
  it("trusts the broker's private CA named by brokerCaFile, and without it says to name one", async () => {
    const dir = tempDir('botlink-broker-tls-');
    const args = ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2'];
    const names = ['-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'];
    execFileSync(requireTool('openssl'), [...args, ...names, '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], {
      stdio: 'ignore',
    });
    const cert = readFileSync(join(dir, 'cert.pem'), 'utf8');
    const server = createHttpsServer({ key: readFileSync(join(dir, 'key.pem')), cert }, (_req, res) => json(res, ISSUED));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const key = deviceKey();
    expect(await client(url, key, { ca: cert }).token(TS)).toEqual(ISSUED);
    const untrusted = await failure(client(url, key).token(TS));
    expect(untrusted.code).toBe('ERR_NETWORK');
    expect(untrusted.fix).toBe("the broker's certificate is not trusted: name the CA that signed it with brokerCaFile");
  });
});
