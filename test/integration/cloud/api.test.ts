import type { ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { CloudClient } from '../../../src/cloud/client.js';
import { CloudError } from '../../../src/cloud/errors.js';
import { systemClock } from '../../../src/clock.js';
import { signV2 } from '../../../src/protocol/sign.js';
import { useHarness } from '../../helpers/harness.js';
import { freePort } from '../../helpers/ports.js';
import { json, startScriptedServer, type Script } from '../../helpers/scripted-server.js';

const SECRET = 'api-test-secret-7f1c';
const NOW = 1_763_683_200_000;
const { cleanups } = useHarness();

async function clientFor(script: Script, opts: Partial<ConstructorParameters<typeof CloudClient>[0]> = {}) {
  const server = await startScriptedServer(script);
  const samples: (string | undefined)[] = [];
  const client = new CloudClient({
    baseUrl: server.url,
    accessKeyId: 'AK',
    secretKey: { reveal: () => SECRET },
    clock: systemClock,
    onDateSample: (date) => samples.push(date),
    ...opts,
  });
  cleanups.push(
    () => server.close(),
    () => client.close(),
  );
  return { server, client, samples };
}

async function failure(promise: Promise<unknown>): Promise<CloudError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(CloudError);
  expect(String((err as Error).message)).not.toContain(SECRET);
  return err as CloudError;
}

const tokenOk = { accessToken: 'at', expireIn: 7200, refreshToken: 'rt', refreshExpireIn: 604800, code: 0, msg: '' };

describe('CloudClient.close', () => {
  it('closes a client that never sent anything, and refuses requests after close with a network-class error', async () => {
    const { client, server } = await clientFor((_req, res) => json(res, tokenOk));
    await client.close();
    const err = await failure(client.getToken({ kind: 'bot', id: 'bot-1' }, NOW));
    expect(err).toMatchObject({ code: 'ERR_NETWORK', retry: 'retry-backoff' });
    expect(server.requests).toHaveLength(0);
  });

  it('ends requests in flight at once and then refuses new ones', async () => {
    let answered!: () => void;
    const arrived = new Promise<void>((resolve) => (answered = resolve));
    // The answer never comes: only close() can end the call.
    const { client, server } = await clientFor(() => answered());
    const inFlight = failure(client.getToken({ kind: 'bot', id: 'bot-1' }, NOW));
    await arrived;
    await client.close();
    expect(await inFlight).toMatchObject({ code: 'ERR_NETWORK', retry: 'retry-backoff' });
    expect((await failure(client.getToken({ kind: 'bot', id: 'bot-1' }, NOW))).code).toBe('ERR_NETWORK');
    expect(server.requests).toHaveLength(1);
  });
});

describe('CloudClient.getToken', () => {
  it('sends a V2-signed body the service can verify, with a fresh 32-hex nonce', async () => {
    const { client, server, samples } = await clientFor((_req, res) => json(res, tokenOk));
    await expect(client.getToken({ kind: 'bot', id: 'bot-1' }, NOW)).resolves.toEqual({
      accessToken: 'at',
      expireIn: 7200,
      refreshToken: 'rt',
      refreshExpireIn: 604800,
    });
    await client.getToken({ kind: 'vendor', id: 'V1' }, NOW + 0.4);
    const [first, second] = server.requests.map((r) => JSON.parse(r.body) as Record<string, string>);
    expect(server.requests[0]!.url).toBe('/auth/getToken');
    expect(server.requests[0]!.headers['content-type']).toBe('application/json');
    expect(first).toMatchObject({ accessKeyId: 'AK', accessTimestamp: String(NOW), accessVersion: 'V2', botId: 'bot-1' });
    expect(first!['vendorId']).toBeUndefined();
    expect(second).toMatchObject({ vendorId: 'V1', accessTimestamp: String(NOW) });
    for (const body of [first!, second!]) {
      expect(body['accessNonce']).toMatch(/^[0-9a-f]{32}$/);
      const { accessKeyId, accessNonce, accessTimestamp, accessVersion } = body as Record<string, string>;
      expect(body['accessSign']).toBe(
        signV2(
          { accessKeyId: accessKeyId!, accessNonce: accessNonce!, accessTimestamp: accessTimestamp!, accessVersion: accessVersion! },
          SECRET,
        ),
      );
    }
    expect(first!['accessNonce']).not.toBe(second!['accessNonce']);
    expect(samples).toHaveLength(2);
    expect(Date.parse(samples[0]!)).toBeGreaterThan(0);
  });

  it('keeps a base path in baseUrl', async () => {
    const server = await startScriptedServer((_req, res) => json(res, tokenOk));
    const client = new CloudClient({
      baseUrl: `${server.url}/api/`,
      accessKeyId: 'AK',
      secretKey: { reveal: () => SECRET },
      clock: systemClock,
    });
    cleanups.push(
      () => server.close(),
      () => client.close(),
    );
    await client.getToken({ kind: 'bot', id: 'b' }, NOW);
    expect(server.requests[0]!.url).toBe('/api/auth/getToken');
  });

  it.each([0, 5_000, 999_999_999_999, 10_000_000_000_000, Number.NaN])(
    'refuses to sign with timestamp %d and sends nothing',
    async (ts) => {
      const { client, server } = await clientFor((_req, res) => json(res, tokenOk));
      const err = await failure(client.getToken({ kind: 'bot', id: 'b' }, ts));
      expect(err.retry).toBe('needs-clock');
      expect(server.requests).toHaveLength(0);
    },
  );

  it.each([
    [1001, 'fatal'],
    [1002, 'fatal'],
    [1003, 'needs-clock'],
    [1004, 'needs-provisioning'],
    [1005, 'needs-config'],
    [1006, 'retry-backoff'],
    [4242, 'retry-backoff'],
  ] as const)('maps code %d to %s', async (code, retry) => {
    const { client } = await clientFor((_req, res) => json(res, { code, msg: 'nope' }));
    const err = await failure(client.getToken({ kind: 'bot', id: 'b' }, NOW));
    expect(err.code).toBe(`ERR_CLOUD_${code}`);
    expect(err.serviceCode).toBe(code);
    expect(err.retry).toBe(retry);
  });
});

describe('CloudClient failures are typed', () => {
  const cases: [string, Script, string, string][] = [
    ['malformed JSON', (_q, res) => res.end('{"code":0,'), 'ERR_BAD_RESPONSE', 'retry-backoff'],
    ['wrong types', (_q, res) => json(res, { ...tokenOk, expireIn: '7200' }), 'ERR_BAD_RESPONSE', 'retry-backoff'],
    ['a JSON array', (_q, res) => json(res, [1, 2]), 'ERR_BAD_RESPONSE', 'retry-backoff'],
    [
      'HTTP 500 with HTML',
      (_q, res) => {
        res.writeHead(500, { 'content-type': 'text/html' });
        res.end('<h1>oops</h1>');
      },
      'ERR_HTTP_STATUS',
      'retry-backoff',
    ],
    [
      'HTTP 503 with HTML',
      (_q, res) => {
        res.writeHead(503, { 'content-type': 'text/html' });
        res.end('<h1>busy</h1>');
      },
      'ERR_HTTP_STATUS',
      'retry-backoff',
    ],
    [
      'HTTP 404',
      (_q, res) => {
        res.writeHead(404);
        res.end();
      },
      'ERR_HTTP_STATUS',
      'needs-config',
    ],
    [
      'a redirect',
      (_q, res) => {
        res.writeHead(302, { location: 'http://127.0.0.1:1/' });
        res.end();
      },
      'ERR_HTTP_REDIRECT',
      'needs-config',
    ],
    ['a body over 64 KiB', (_q, res) => json(res, { ...tokenOk, pad: 'x'.repeat(70_000) }), 'ERR_RESPONSE_TOO_LARGE', 'retry-backoff'],
    [
      'a reset mid-body',
      (_q, res) => {
        res.writeHead(200, { 'content-length': '500' });
        res.write('{"code":0,"access');
        setTimeout(() => res.socket?.destroy(), 20);
      },
      'ERR_NETWORK',
      'retry-backoff',
    ],
    [
      'a body that never finishes',
      (_q, res) => {
        res.writeHead(200, { 'content-length': '500' });
        res.write('{"code":0');
      },
      'ERR_TIMEOUT',
      'retry-backoff',
    ],
    ['headers that never come', () => undefined, 'ERR_TIMEOUT', 'retry-backoff'],
  ];
  it.each(cases)('%s', async (_name, script, code, retry) => {
    const { client } = await clientFor(script, { headersTimeoutMs: 300, bodyTimeoutMs: 300 });
    const err = await failure(client.getToken({ kind: 'bot', id: 'b' }, NOW));
    expect(err.code).toBe(code);
    expect(err.retry).toBe(retry);
  });

  it('connection refused', async () => {
    const client = new CloudClient({
      baseUrl: `http://127.0.0.1:${await freePort()}`,
      accessKeyId: 'AK',
      secretKey: { reveal: () => SECRET },
      clock: systemClock,
    });
    cleanups.push(() => client.close());
    const err = await failure(client.getToken({ kind: 'bot', id: 'b' }, NOW));
    expect(err.code).toBe('ERR_NETWORK');
    expect(err.message).toContain('ECONNREFUSED');
  });
});

describe('CloudClient.sampleServerTime', () => {
  it('takes the Date from a HEAD of the base URL, whatever its status, and posts nothing', async () => {
    const server = await startScriptedServer((_req, res) => {
      res.writeHead(404);
      res.end();
    });
    const dates: (string | undefined)[] = [];
    const client = new CloudClient({
      baseUrl: `${server.url}/api/`,
      accessKeyId: 'AK',
      secretKey: { reveal: () => SECRET },
      clock: systemClock,
      onDateSample: (date) => dates.push(date),
    });
    cleanups.push(
      () => server.close(),
      () => client.close(),
    );
    await client.sampleServerTime();
    expect(server.requests.map((r) => [r.method, r.url, r.body])).toEqual([['HEAD', '/api/', '']]);
    expect(server.requests[0]!.headers['authorization']).toBeUndefined();
    expect(dates).toHaveLength(1);
    expect(Math.abs(Date.parse(dates[0]!) - Date.now())).toBeLessThan(60_000);
  });

  it.each([
    ['no Date header', (res: ServerResponse) => res.removeHeader('date')],
    ['a Date no one can read', (res: ServerResponse) => res.setHeader('date', 'yesterday')],
  ])('fails on an answer with %s: it gives no server time', async (_name, mangle) => {
    const { client } = await clientFor((_req, res) => {
      res.sendDate = false;
      mangle(res);
      res.writeHead(200);
      res.end();
    });
    const err = await failure(client.sampleServerTime());
    expect(err).toMatchObject({ code: 'ERR_BAD_RESPONSE', retry: 'retry-backoff' });
    expect(err.message).toContain('HEAD /: the answer carried no valid Date header');
  });
});

describe('CloudClient.refreshToken and registerDevice', () => {
  it('refreshes without signature or timestamp, and reports a refusal as "sign again"', async () => {
    let answer: unknown = { accessToken: 'at2', expireIn: 60, code: 0, msg: '' };
    const { client, server } = await clientFor((_q, res) => json(res, answer));
    await expect(client.refreshToken({ kind: 'bot', id: 'b' }, 'rt')).resolves.toEqual({ accessToken: 'at2', expireIn: 60 });
    expect(JSON.parse(server.requests[0]!.body)).toEqual({ accessKeyId: 'AK', refreshToken: 'rt', botId: 'b' });
    answer = { code: 1007, msg: 'invalid refresh token' };
    const err = await failure(client.refreshToken({ kind: 'vendor', id: 'V' }, 'rt'));
    expect(err.code).toBe('ERR_REFRESH_REFUSED');
    expect(err.serviceCode).toBe(1007);
  });

  it('registers with the vendor token as Bearer', async () => {
    let answer: unknown = { state: 'SUCCESS', code: '0000', data: 'bot-77' };
    const { client, server } = await clientFor((_q, res) => json(res, answer));
    const req = { vendorId: 'V1', appId: '', deviceId: 'SN', type: 'PHYSICAL_ROBOT' as const, name: 'SN' };
    await expect(client.registerDevice('vtok', req)).resolves.toBe('bot-77');
    expect(server.requests[0]!.headers['authorization']).toBe('Bearer vtok');
    expect(server.requests[0]!.url).toBe('/device/register');
    answer = { state: 'FAILURE', code: '403', msg: 'vendor mismatch' };
    const err = await failure(client.registerDevice('vtok', req));
    expect(err.code).toBe('ERR_REGISTER_REFUSED');
    expect(err.message).toContain('vendor mismatch');
  });
});
