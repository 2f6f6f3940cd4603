import { connect } from 'node:net';
import { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { WireError } from '../../../src/protocol/errors.js';
import { parseGetTokenResponse } from '../../../src/protocol/wire.js';
import { createTestService, type TestService } from '../../../src/service/testing.js';
import { getTokens, post, signedGetTokenBody } from '../../helpers/service-client.js';

let service: TestService;
beforeEach(async () => {
  service = await createTestService({ requestTimeoutMs: 400 });
});
afterEach(() => service.close());

const getToken = () => post(service.url, '/auth/getToken', signedGetTokenBody());

/** Sends raw bytes on a fresh TCP connection; resolves with what came back once the server closes it. */
function raw(bytes: string): Promise<{ response: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const socket = connect(service.port, '127.0.0.1', () => socket.write(bytes));
    let response = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (response += chunk));
    socket.on('close', () => resolve({ response, ms: Date.now() - started }));
    socket.on('error', reject);
  });
}

describe('HTTP hygiene', () => {
  it.each(['GET', 'PUT', 'DELETE', 'PATCH'])('%s on a route → 405 with Allow: POST', async (method) => {
    const res = await request(`${service.url}/auth/getToken`, { method });
    expect(res.statusCode).toBe(405);
    expect(res.headers['allow']).toBe('POST');
    expect(await res.body.json()).toEqual({ code: 405, msg: expect.any(String) });
  });

  it('an unknown route → 404 JSON', async () => {
    const reply = await post(service.url, '/auth/nothing', {});
    expect(reply.status).toBe(404);
    expect(reply.json).toEqual({ code: 404, msg: 'not found' });
  });

  it('the WebSocket path without an upgrade → 426', async () => {
    const res = await request(`${service.url}/soulmate/voiceChat/v1?botId=bot-1`);
    expect(res.statusCode).toBe(426);
    await res.body.dump();
  });

  it('a query string does not change the route', async () => {
    expect((await post(service.url, '/auth/getToken?x=1', signedGetTokenBody())).json?.['code']).toBe(0);
  });

  it('a body of exactly 16 KiB is read; one byte more → 413 with code 1001', async () => {
    const body = signedGetTokenBody();
    const base = JSON.stringify({ ...body, pad: '' });
    const exact = JSON.stringify({ ...body, pad: 'x'.repeat(16 * 1024 - base.length) });
    expect(Buffer.byteLength(exact)).toBe(16 * 1024);
    expect((await post(service.url, '/auth/getToken', exact)).json?.['code']).toBe(0);
    const over = JSON.stringify({ ...signedGetTokenBody(), pad: 'x'.repeat(16 * 1024 - base.length + 1) });
    const reply = await post(service.url, '/auth/getToken', over);
    expect(reply.status).toBe(413);
    expect(reply.json).toEqual({ code: 1001, msg: expect.stringContaining('16384') });
  });

  it('an oversized chunked body without Content-Length → 413', async () => {
    const chunk = 'x'.repeat(4096);
    const res = await request(`${service.url}/auth/getToken`, {
      method: 'POST',
      body: Readable.from(Array.from({ length: 5 }, () => chunk)),
    });
    expect(res.statusCode).toBe(413);
    expect(await res.body.json()).toMatchObject({ code: 1001 });
  });

  it('a client that never finishes its headers is cut off with a 408 carrying Date and JSON', async () => {
    const { response, ms } = await raw('POST /auth/getToken HTTP/1.1\r\nHost: x\r\n');
    expect(response).toMatch(/^HTTP\/1\.1 408/);
    expect(response).toMatch(/\r\nDate: .+ GMT\r\n/);
    expect(response).toMatch(/\r\n\r\n\{"code":408,"msg":"Request Timeout"\}$/);
    expect(ms).toBeLessThan(5000);
  });

  it('a client that never finishes its body is cut off', async () => {
    const { response, ms } = await raw('POST /auth/getToken HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"a":');
    expect(response).toMatch(/^HTTP\/1\.1 408/);
    expect(ms).toBeLessThan(5000);
  });

  it('a malformed request line gets a JSON 400, not a crash', async () => {
    const { response } = await raw('NOT HTTP AT ALL\r\n\r\n');
    expect(response).toMatch(/^HTTP\/1\.1 400/);
    expect(response).toMatch(/\{"code":400,"msg":"Bad Request"\}$/);
    expect((await getToken()).json?.['code']).toBe(0);
  });

  it('oversized headers get a 431', async () => {
    const { response } = await raw(`POST /auth/getToken HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(response).toMatch(/^HTTP\/1\.1 431/);
    expect((await getToken()).json?.['code']).toBe(0);
  });

  it('every kind of answer carries Date from the shifted service clock', async () => {
    service.faults.shiftClockMs(-3 * 86_400_000);
    const expected = Date.now() - 3 * 86_400_000;
    const answers = [
      await post(service.url, '/auth/getToken', signedGetTokenBody({ timestamp: String(expected) })),
      await post(service.url, '/auth/getToken', 'garbage'),
      await post(service.url, '/nowhere', {}),
      await post(service.url, '/auth/getToken', 'x'.repeat(20_000)),
    ];
    expect(answers[0]!.json?.['code']).toBe(0);
    for (const answer of answers) {
      expect(Math.abs(Date.parse(answer.headers['date'] as string) - expected)).toBeLessThan(5000);
    }
  });
});

describe('HEAD of the base URL: the agent samples server time with it', () => {
  it.each(['/', '/auth/getToken', '/soulmate/voiceChat/v1', '/anything'])(
    'HEAD %s → an answer with Date from the shifted service clock and no body',
    async (path) => {
      service.faults.shiftClockMs(-86_400_000);
      const res = await request(`${service.url}${path}`, { method: 'HEAD' });
      expect([404, 405, 426]).toContain(res.statusCode);
      expect(Math.abs(Date.parse(res.headers['date'] as string) - (Date.now() - 86_400_000))).toBeLessThan(5000);
      expect(await res.body.text()).toBe('');
    },
  );

  it('sends no body bytes on the wire, counts only the HEAD, and leaves queued broken answers for the routes', async () => {
    service.faults.nextResponses('http-500-html', 1);
    const before = JSON.parse(JSON.stringify(service.stats)) as typeof service.stats;
    const { response } = await raw('HEAD / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    expect(response).toMatch(/^HTTP\/1\.1 404 [^\r]*\r\n(?:[^\r]+\r\n)*Date: [^\r]+\r\n/);
    expect(response.endsWith('\r\n\r\n')).toBe(true);
    expect(JSON.parse(JSON.stringify(service.stats))).toEqual({ ...before, head: { total: before.head.total + 1 } });
    expect((await getToken()).status).toBe(500);
  });
});

describe('clock and latency knobs', () => {
  it('shiftClockMs moves the timestamp window', async () => {
    service.faults.shiftClockMs(4 * 60_000);
    expect((await getToken()).json?.['code']).toBe(0);
    service.faults.shiftClockMs(6 * 60_000);
    expect((await getToken()).json?.['code']).toBe(1003);
    service.faults.shiftClockMs(-6 * 60_000);
    expect((await getToken()).json?.['code']).toBe(1003);
    service.faults.reset();
    expect((await getToken()).json?.['code']).toBe(0);
  });

  it('setLatencyMs delays every answer', async () => {
    service.faults.setLatencyMs(300);
    const started = Date.now();
    await Promise.all([getToken(), post(service.url, '/nowhere', {})]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    service.faults.setLatencyMs(0);
  });
});

describe('nextResponses', () => {
  it.each([
    ['http-500-html', 500],
    ['http-503-html', 503],
  ] as const)('%s answers that status with an HTML body', async (kind, status) => {
    service.faults.nextResponses(kind, 1);
    const reply = await getToken();
    expect(reply.status).toBe(status);
    expect(reply.headers['content-type']).toMatch(/text\/html/);
    expect(reply.json).toBeUndefined();
    expect(reply.headers['date']).toBeDefined();
  });

  it('reset-mid-body cuts the connection inside the body', async () => {
    service.faults.nextResponses('reset-mid-body', 1);
    await expect(getToken()).rejects.toThrow();
    expect((await getToken()).json?.['code']).toBe(0);
  });

  it('never-finish sends headers and never the whole body', async () => {
    service.faults.nextResponses('never-finish', 1);
    const res = await request(`${service.url}/auth/getToken`, {
      method: 'POST',
      body: JSON.stringify(signedGetTokenBody()),
      bodyTimeout: 300,
    });
    expect(res.statusCode).toBe(200);
    await expect(res.body.text()).rejects.toThrow(/timeout/i);
  });

  it('malformed-json is a 200 whose body does not parse', async () => {
    service.faults.nextResponses('malformed-json', 1);
    const reply = await getToken();
    expect(reply.status).toBe(200);
    expect(reply.text.startsWith('{"code":0,')).toBe(true);
    expect(reply.json).toBeUndefined();
  });

  it('wrong-types is a 200 JSON the protocol parser rejects', async () => {
    service.faults.nextResponses('wrong-types', 1);
    const reply = await getToken();
    expect(reply.json?.['expireIn']).toBe('7200');
    expect(() => parseGetTokenResponse(reply.json)).toThrow(WireError);
  });

  it('oversize-body is a 200 with a body over 100 KiB', async () => {
    service.faults.nextResponses('oversize-body', 1);
    const reply = await getToken();
    expect(reply.status).toBe(200);
    expect(Buffer.byteLength(reply.text)).toBeGreaterThan(100 * 1024);
  });

  it('breaks exactly n answers, only on the given route, without processing the request', async () => {
    service.faults.nextResponses('http-503-html', 2, '/auth/refreshToken');
    const tokens = await getTokens(service.url);
    const okBefore = service.stats.getToken.ok;
    const body = { accessKeyId: 'AK', refreshToken: tokens.refreshToken, botId: 'bot-1' };
    expect((await post(service.url, '/auth/refreshToken', body)).status).toBe(503);
    expect((await post(service.url, '/auth/refreshToken', body)).status).toBe(503);
    expect((await post(service.url, '/auth/refreshToken', body)).json?.['code']).toBe(0);
    expect(service.stats.refreshToken).toEqual({ total: 3, ok: 1 });

    service.faults.nextResponses('http-500-html', 1, '/auth/getToken');
    const signed = signedGetTokenBody();
    expect((await post(service.url, '/auth/getToken', signed)).status).toBe(500);
    expect(service.stats.getToken.timestamps.at(-1)).toBe(signed['accessTimestamp']);
    expect(service.stats.getToken.ok).toBe(okBefore);
    // Not processed, so its nonce was not used.
    expect((await post(service.url, '/auth/getToken', signed)).json?.['code']).toBe(0);
  });

  it('queued faults are served in order and reset() drops them', async () => {
    service.faults.nextResponses('http-500-html', 1);
    service.faults.nextResponses('http-503-html', 1);
    expect((await getToken()).status).toBe(500);
    expect((await getToken()).status).toBe(503);
    service.faults.nextResponses('http-500-html', 5);
    service.faults.failNextGetToken(5);
    service.faults.setLatencyMs(10_000);
    service.faults.reset();
    expect((await getToken()).json?.['code']).toBe(0);
  });

  it('an unknown kind is refused', () => {
    expect(() => service.faults.nextResponses('nonsense' as never, 1)).toThrow(TypeError);
  });
});
