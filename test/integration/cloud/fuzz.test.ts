import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { CloudClient } from '../../../src/cloud/client.js';
import { CloudError } from '../../../src/cloud/errors.js';
import { systemClock } from '../../../src/clock.js';
import { ServerTime } from '../../../src/agent/time/servertime.js';
import { describeCode } from '../../../src/protocol/codes.js';
import type { RetryClass } from '../../../src/protocol/errors.js';
import {
  chance,
  CONTENT_TYPES,
  deepNesting,
  fuzzSeed,
  int,
  INVALID_UTF8,
  isObject,
  NUMBERISH_STRINGS,
  ODD_NUMBERS,
  pick,
  prng,
  randomBytes,
  randomJson,
  randomString,
  type Rng,
} from '../../helpers/fuzz.js';
import { collectUnexpected, useHarness } from '../../helpers/harness.js';
import { startScriptedServer } from '../../helpers/scripted-server.js';

/**
 * Suite 4 of issue 6, the agent's half, HTTP: generated answers to the cloud client. FUZZ_SEED=n
 * reproduces a run; every failure message names the seed and the case. The link's half is fuzz-link.test.ts.
 */

const SEED = fuzzSeed(20261122);
const HTTP_CASES = 2400;

const RETRY_CLASSES: ReadonlySet<RetryClass> = new Set([
  'retry-soon',
  'retry-backoff',
  'needs-clock',
  'needs-config',
  'needs-provisioning',
  'fatal',
]);
const MAX_RESPONSE_BYTES = 64 * 1024;

const unexpected = collectUnexpected();
const { cleanups } = useHarness(() => {
  expect(unexpected.map(String), `unhandled errors (seed ${SEED})`).toEqual([]);
});

type Method = 'getToken' | 'refreshToken' | 'registerDevice' | 'sampleServerTime';
const METHODS: readonly Method[] = ['getToken', 'refreshToken', 'registerDevice', 'sampleServerTime'];
const ROUTE: Record<Method, string> = {
  getToken: '/auth/getToken',
  refreshToken: '/auth/refreshToken',
  registerDevice: '/device/register',
  sampleServerTime: '/',
};

/** How the bytes reach the client: only `whole` and `chunked` deliver an intact answer. */
type Transport = 'whole' | 'chunked' | 'reset-before-headers' | 'reset-mid-body' | 'stall-headers' | 'stall-body' | 'raw';

interface HttpCase {
  index: number;
  method: Method;
  status: number;
  headers: Record<string, string | string[]>;
  body: Buffer;
  transport: Transport;
  raw: Buffer;
  shape: string;
}

const STATUSES = [
  200, 201, 202, 204, 206, 299, 301, 302, 304, 307, 308, 400, 401, 403, 404, 405, 408, 413, 418, 429, 451, 500, 502, 503, 504, 599, 999,
];
const GARBAGE_DATES = [
  'yesterday',
  '',
  'Thu, 01 Jan 1970 00:00:00 GMT',
  'Fri, 31 Dec 9999 23:59:59 GMT',
  '0',
  '-1',
  'NaN',
  ' ',
  'Mon, 32 Foo 2025 25:61:61 GMT',
  '2025-11-21T00:00:00Z',
  '1763683200000',
];
/** Answers no HTTP parser may accept. */
const RAW_ANSWERS = [
  'HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n{}',
  'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}',
  'HTTP/1.1 2000 OK\r\n\r\n',
  'NOT HTTP AT ALL\r\n\r\n',
  'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n',
  'HTTP/1.1 200 OK\r\nX-Bad: a\u0000b\r\nContent-Length: 2\r\n\r\n{}',
  'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n',
  'HTTP/9.9 200 OK\r\nContent-Length: 2\r\n\r\n{}',
  'HTTP/1.1 200 OK\nContent-Length 2\n\n{}',
];

function token(rng: Rng): string {
  return chance(rng, 0.7) ? randomString(rng, 60) || 'x' : 'tok'.repeat(1 + int(rng, 20));
}

function successBody(rng: Rng, method: Method): Record<string, unknown> {
  switch (method) {
    case 'getToken':
      return {
        accessToken: token(rng),
        expireIn: 1 + int(rng, 1e6),
        refreshToken: token(rng),
        refreshExpireIn: 1 + int(rng, 1e7),
        code: 0,
        msg: '',
      };
    case 'refreshToken':
    case 'sampleServerTime':
      return { accessToken: token(rng), expireIn: 1 + int(rng, 1e6), code: 0, msg: pick(rng, ['', 'ok', 'success']) };
    case 'registerDevice':
      return { state: 'SUCCESS', code: '0000', data: token(rng) };
  }
}

function oddValue(rng: Rng): unknown {
  return pick(rng, [null, true, [], {}, '', -1, 0, 1.5, 2 ** 53 + 2, 1e300, -1e300, pick(rng, NUMBERISH_STRINGS), randomJson(rng, 2)]);
}

/** A generated body and a short name for its shape (for failure messages). */
function httpBody(rng: Rng, method: Method): { body: Buffer; shape: string } {
  const success = successBody(rng, method);
  const keys = Object.keys(success);
  const text = (value: unknown): Buffer => Buffer.from(JSON.stringify(value));
  switch (int(rng, 14)) {
    case 0:
    case 1:
      return { body: text(success), shape: 'success' };
    case 2: {
      success[pick(rng, keys)] = oddValue(rng);
      return { body: text(success), shape: 'wrong-type' };
    }
    case 3: {
      delete success[pick(rng, keys)];
      return { body: text(success), shape: 'missing-field' };
    }
    case 4: {
      // Number literals no JSON.stringify would produce: huge, fractional, NaN-like.
      const literal = pick(rng, [...ODD_NUMBERS, 'NaN', 'Infinity', '-Infinity', '0x10', '+1', '01']);
      const field = pick(rng, ['code', 'expireIn', 'refreshExpireIn']);
      return {
        body: Buffer.from(JSON.stringify({ ...success, [field]: '@n@' }).replace('"@n@"', literal)),
        shape: `literal ${field}=${literal}`,
      };
    }
    case 5: {
      const code = pick(rng, [1001, 1002, 1003, 1004, 1005, 1006, 1007, 42, -1, 2 ** 31, 4.5, '1006', 1e21, null]);
      const answer =
        method === 'registerDevice'
          ? { state: 'FAILURE', code, msg: randomString(rng, 30) }
          : { code, msg: chance(rng, 0.8) ? randomString(rng, 30) : oddValue(rng) };
      return { body: text(answer), shape: 'code-failure' };
    }
    case 6:
      return { body: text(randomJson(rng, 4)), shape: 'random-json' };
    case 7:
      return { body: Buffer.from(deepNesting(rng, 12_000)), shape: 'deep-nesting' };
    case 8: {
      const whole = text(success);
      return { body: whole.subarray(0, int(rng, whole.length)), shape: 'truncated' };
    }
    case 9: {
      const whole = text(success);
      const at = whole.indexOf('"', 2) + 1;
      return {
        body: Buffer.concat([whole.subarray(0, at), Buffer.from(pick(rng, INVALID_UTF8)), whole.subarray(at)]),
        shape: 'invalid-utf8',
      };
    }
    case 10:
      return { body: Buffer.alloc(0), shape: 'empty' };
    case 11:
      return { body: randomBytes(rng, 2000), shape: 'random-bytes' };
    case 12: {
      const pad = MAX_RESPONSE_BYTES + 1024 + int(rng, 64 * 1024);
      return { body: text({ ...success, padding: 'x'.repeat(pad) }), shape: 'oversize' };
    }
    default:
      return {
        body: Buffer.from(
          pick(rng, ['<html><body>502 Bad Gateway</body></html>', 'null', '[]', '"text"', '0', 'true', '{}', '{"code":0}', ' {"code":0} ']),
        ),
        shape: 'odd-document',
      };
  }
}

function httpCase(rng: Rng, index: number): HttpCase {
  const method = pick(rng, METHODS);
  const { body, shape } = httpBody(rng, method);
  const status = chance(rng, 0.75) ? 200 : pick(rng, STATUSES);
  const headers: Record<string, string | string[]> = {};
  if (chance(rng, 0.85)) headers['content-type'] = pick(rng, CONTENT_TYPES);
  const date = int(rng, 4);
  if (date === 0) headers['date'] = new Date().toUTCString();
  else if (date === 1) headers['date'] = pick(rng, GARBAGE_DATES);
  else if (date === 2) headers['date'] = [new Date().toUTCString(), pick(rng, GARBAGE_DATES)];
  if (status >= 300 && status < 400 && chance(rng, 0.7))
    headers['location'] = pick(rng, ['/elsewhere', 'http://127.0.0.1:1/', 'https://example.invalid/auth']);
  const t = rng();
  let transport: Transport =
    t < 0.82
      ? 'whole'
      : t < 0.9
        ? 'chunked'
        : t < 0.925
          ? 'reset-before-headers'
          : t < 0.95
            ? 'reset-mid-body'
            : t < 0.953
              ? 'stall-headers'
              : t < 0.956
                ? 'stall-body'
                : 'raw';
  // A 204, a 304, an empty body or the answer to a HEAD is complete once the headers are in: there is no body left to break.
  const bodiless = status === 204 || status === 304 || body.length === 0 || method === 'sampleServerTime';
  if (bodiless && ['chunked', 'reset-mid-body', 'stall-body'].includes(transport)) transport = 'whole';
  const raw = chance(rng, 0.2) ? randomBytes(rng, 300) : Buffer.from(pick(rng, RAW_ANSWERS));
  return { index, method, status, headers, body, transport, raw, shape };
}

/** Writes one generated answer. */
function answer(c: HttpCase, req: IncomingMessage, res: ServerResponse): void {
  const socket = req.socket;
  switch (c.transport) {
    case 'reset-before-headers':
      socket.destroy();
      return;
    case 'stall-headers':
      return;
    case 'raw':
      socket.end(c.raw);
      return;
    default:
  }
  res.sendDate = false;
  const noBody = c.status === 204 || c.status === 304;
  const headers = { ...c.headers, ...(c.transport !== 'chunked' && !noBody && { 'content-length': String(c.body.length) }) };
  res.writeHead(c.status, headers);
  switch (c.transport) {
    case 'whole':
      res.end(c.body);
      return;
    case 'chunked': {
      const cut = Math.floor(c.body.length / 2);
      res.write(c.body.subarray(0, cut));
      res.end(c.body.subarray(cut));
      return;
    }
    case 'reset-mid-body':
      res.write(c.body.subarray(0, Math.floor(c.body.length / 2)), () => socket.destroy());
      if (c.body.length < 2) socket.destroy();
      return;
    case 'stall-body':
      res.write(c.body.subarray(0, Math.floor(c.body.length / 2)));
      return;
  }
}

const lenientUtf8 = new TextDecoder('utf-8');

type Expected = { ok: true; value: unknown } | { ok: false; code: string | RegExp };

const goodText = (v: unknown): v is string => typeof v === 'string' && v !== '';
// Tokens ride in an HTTP header: visible ASCII only (src/protocol/wire.ts).
const goodToken = (v: unknown): v is string => typeof v === 'string' && /^[\x21-\x7e]{1,4096}$/.test(v);
const goodCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 1;

/**
 * What the client must make of an answer, from the contract alone (DESIGN §1.2–1.5): only an intact
 * HTTP 200 within the size limit whose body, read as UTF-8, is JSON of the success shape is a success.
 */
function expected(c: HttpCase): Expected {
  if (c.transport === 'stall-headers') return { ok: false, code: 'ERR_TIMEOUT' };
  if (c.transport === 'reset-before-headers' || c.transport === 'raw') {
    // No raw answer carries a Date: a HEAD one that happens to parse gives no server time.
    return { ok: false, code: c.method === 'sampleServerTime' ? /^ERR_(NETWORK|TIMEOUT|BAD_RESPONSE)$/ : /^ERR_(NETWORK|TIMEOUT)$/ };
  }
  // A server time sample takes any status and no body; only a Date that can be read counts.
  if (c.method === 'sampleServerTime') {
    const date = c.headers['date'];
    return typeof date === 'string' && Number.isFinite(Date.parse(date))
      ? { ok: true, value: undefined }
      : { ok: false, code: 'ERR_BAD_RESPONSE' };
  }
  const noBody = c.status === 204 || c.status === 304;
  const oversize = !noBody && c.body.length > MAX_RESPONSE_BYTES;
  // The limit is enforced on the bytes received: a body cut short may end before it is reached.
  if (c.transport === 'stall-body') return { ok: false, code: oversize ? /^ERR_(TIMEOUT|RESPONSE_TOO_LARGE)$/ : 'ERR_TIMEOUT' };
  if (c.transport === 'reset-mid-body') return { ok: false, code: oversize ? /^ERR_(NETWORK|RESPONSE_TOO_LARGE)$/ : 'ERR_NETWORK' };
  if (oversize) return { ok: false, code: 'ERR_RESPONSE_TOO_LARGE' };
  if (c.status !== 200) {
    if (c.status >= 300 && c.status < 400) return { ok: false, code: 'ERR_HTTP_REDIRECT' };
    return { ok: false, code: 'ERR_HTTP_STATUS' };
  }
  let json: unknown;
  try {
    json = JSON.parse(lenientUtf8.decode(c.body));
  } catch {
    return { ok: false, code: 'ERR_BAD_RESPONSE' };
  }
  if (!isObject(json)) return { ok: false, code: 'ERR_BAD_RESPONSE' };
  if (c.method === 'registerDevice') {
    if (json['state'] === 'SUCCESS')
      return goodText(json['data']) ? { ok: true, value: json['data'] } : { ok: false, code: 'ERR_BAD_RESPONSE' };
    return json['state'] === 'FAILURE' ? { ok: false, code: 'ERR_REGISTER_REFUSED' } : { ok: false, code: 'ERR_BAD_RESPONSE' };
  }
  const code = json['code'];
  if (typeof code !== 'number' || !Number.isSafeInteger(code)) return { ok: false, code: 'ERR_BAD_RESPONSE' };
  if (code !== 0) return { ok: false, code: c.method === 'getToken' ? `ERR_CLOUD_${code}` : 'ERR_REFRESH_REFUSED' };
  const { accessToken, expireIn, refreshToken, refreshExpireIn } = json;
  if (!goodToken(accessToken) || !goodCount(expireIn)) return { ok: false, code: 'ERR_BAD_RESPONSE' };
  if (c.method === 'refreshToken') return { ok: true, value: { accessToken, expireIn } };
  if (!goodToken(refreshToken) || !goodCount(refreshExpireIn)) return { ok: false, code: 'ERR_BAD_RESPONSE' };
  return { ok: true, value: { accessToken, expireIn, refreshToken, refreshExpireIn } };
}

function call(client: CloudClient, method: Method): Promise<unknown> {
  switch (method) {
    case 'getToken':
      return client.getToken({ kind: 'bot', id: 'bot-1' }, Date.now());
    case 'refreshToken':
      return client.refreshToken({ kind: 'bot', id: 'bot-1' }, 'refresh-token');
    case 'registerDevice':
      return client.registerDevice('vendor-token', { vendorId: 'V1', appId: 'app', deviceId: 'SN-1', type: 'PHYSICAL_ROBOT', name: 'n' });
    case 'sampleServerTime':
      return client.sampleServerTime();
  }
}

/** The verdict on one case: undefined when the client did what the contract says. */
function judge(c: HttpCase, outcome: { ok: true; value: unknown } | { ok: false; err: unknown }): string | undefined {
  const want = expected(c);
  const what = `#${c.index} ${c.method} ${c.transport} ${c.status} ${c.shape} ${JSON.stringify(c.body.subarray(0, 100).toString('latin1'))}`;
  if (outcome.ok) {
    if (!want.ok) return `${what}: resolved ${JSON.stringify(outcome.value)?.slice(0, 120)}, expected ${String(want.code)}`;
    return JSON.stringify(outcome.value) === JSON.stringify(want.value)
      ? undefined
      : `${what}: resolved ${JSON.stringify(outcome.value)?.slice(0, 120)} instead of the body's values`;
  }
  const { err } = outcome;
  if (!(err instanceof CloudError))
    return `${what}: threw ${err instanceof Error ? `${err.constructor.name} ${err.message}` : String(err)}, not a CloudError`;
  if (!RETRY_CLASSES.has(err.retry)) return `${what}: unknown retry class ${err.retry}`;
  if (want.ok) return `${what}: failed with ${err.code} (${err.message}) on a valid success`;
  const matches = typeof want.code === 'string' ? err.code === want.code : want.code.test(err.code);
  if (!matches) return `${what}: failed with ${err.code} (${err.message}), expected ${String(want.code)}`;
  if (c.method === 'getToken' && err.serviceCode !== undefined && err.retry !== describeCode(err.serviceCode).retry) {
    return `${what}: code ${err.serviceCode} classed ${err.retry}, the code table says ${describeCode(err.serviceCode).retry}`;
  }
  return undefined;
}

describe(`CloudClient under generated answers (seed ${SEED})`, () => {
  it(`${HTTP_CASES} answers: a success only for a valid success shape, otherwise a CloudError with a known retry class`, async () => {
    const rng = prng(SEED);
    const cases = Array.from({ length: HTTP_CASES }, (_, i) => httpCase(rng, i));
    const WORKERS = 8;
    const current: (HttpCase | undefined)[] = [];
    const misrouted: string[] = [];
    const server = await startScriptedServer((req, res) => {
      const match = /^\/w(\d+)(\/.*)$/.exec(req.url ?? '');
      const c = match ? current[Number(match[1])] : undefined;
      if (!match || !c) {
        misrouted.push(req.url ?? '');
        res.writeHead(404).end();
        return;
      }
      if (match[2] !== ROUTE[c.method]) misrouted.push(`#${c.index} ${c.method} went to ${match[2]}`);
      answer(c, req, res);
    });
    cleanups.push(() => server.close());
    const serverTime = new ServerTime(systemClock);
    const problems: string[] = [];
    const tally: Record<string, number> = {};
    let next = 0;
    const clientFor = (w: number, timeoutMs: number): CloudClient =>
      new CloudClient({
        baseUrl: `${server.url}/w${w}`,
        accessKeyId: 'AK',
        secretKey: { reveal: () => 'fuzz-secret' },
        clock: systemClock,
        // A real ServerTime: a garbage Date must not make the sample bookkeeping throw.
        onDateSample: (date, sent, received) => serverTime.addSample(date, sent, received),
        connectTimeoutMs: timeoutMs,
        headersTimeoutMs: timeoutMs,
        bodyTimeoutMs: timeoutMs,
      });
    const worker = async (w: number): Promise<void> => {
      // Stalled answers meet a short timeout; the rest a long one, so a busy machine cannot turn them into timeouts.
      const quick = clientFor(w, 250);
      const patient = clientFor(w, 15_000);
      try {
        while (next < cases.length) {
          const c = cases[next++]!;
          current[w] = c;
          const client = c.transport === 'stall-headers' || c.transport === 'stall-body' ? quick : patient;
          const outcome = await call(client, c.method).then(
            (value) => ({ ok: true as const, value }),
            (err: unknown) => ({ ok: false as const, err }),
          );
          const problem = judge(c, outcome);
          if (problem) problems.push(problem);
          const key = outcome.ok
            ? 'success'
            : outcome.err instanceof CloudError
              ? outcome.err.code.replace(/^ERR_CLOUD_.*/, 'ERR_CLOUD_n')
              : 'other';
          tally[key] = (tally[key] ?? 0) + 1;
        }
      } finally {
        await Promise.all([quick.close(), patient.close()]).catch(() => undefined);
      }
    };
    await Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));
    expect(problems, `seed ${SEED}`).toEqual([]);
    expect(misrouted, `seed ${SEED}`).toEqual([]);
    // Every class of outcome is reached, valid successes included.
    for (const key of [
      'success',
      'ERR_BAD_RESPONSE',
      'ERR_HTTP_STATUS',
      'ERR_HTTP_REDIRECT',
      'ERR_NETWORK',
      'ERR_TIMEOUT',
      'ERR_RESPONSE_TOO_LARGE',
      'ERR_CLOUD_n',
      'ERR_REFRESH_REFUSED',
      'ERR_REGISTER_REFUSED',
    ]) {
      expect(tally[key] ?? 0, `${key} in ${JSON.stringify(tally)}`).toBeGreaterThan(0);
    }
    expect(serverTime.now() === undefined || Number.isFinite(serverTime.now())).toBe(true);
  });
});
