import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { CloudClient, CloudError } from '../../src/agent/cloud/client.js';
import { systemClock } from '../../src/agent/time/clock.js';
import { LinkSupervisor, type LinkState, type TokenSource } from '../../src/agent/link/supervisor.js';
import { ServerTime } from '../../src/agent/time/servertime.js';
import { describeCode } from '../../src/protocol/codes.js';
import type { RetryClass } from '../../src/protocol/errors.js';
import {
  chance,
  closePayload,
  deepNesting,
  INVALID_CLOSE_CODES,
  fuzzSeed,
  int,
  INVALID_UTF8,
  NUMBERISH_STRINGS,
  ODD_NUMBERS,
  pick,
  prng,
  randomBytes,
  randomJson,
  randomString,
  type Rng,
  VALID_CLOSE_CODES,
  wsAccept,
  wsFrame as frame,
} from '../helpers/fuzz.js';
import { collectUnexpected, useHarness } from '../helpers/harness.js';
import { startScriptedServer } from '../helpers/scripted-server.js';

/**
 * Suite 4 of issue 6, the agent's half: generated answers to the cloud client (HTTP) and generated
 * WebSocket peers for the link. FUZZ_SEED=n reproduces a run; every failure message names the seed
 * and the case.
 */

const SEED = fuzzSeed(20261122);
const HTTP_CASES = 2400;
const WS_LANES = 4;
const WS_PER_LANE = 550;

const RETRY_CLASSES: ReadonlySet<RetryClass> = new Set(['retry-soon', 'retry-backoff', 'needs-clock', 'needs-config', 'needs-provisioning', 'fatal']);
const MAX_RESPONSE_BYTES = 64 * 1024;
const FAILURES = ['botId not found or invalid', 'Unauthorized', 'REPEAT_CLIENT_SESSION'] as const;
type Failure = (typeof FAILURES)[number];
const LINK_STATES: ReadonlySet<string> = new Set<LinkState>(['connecting', 'connected', 'backoff', 'displaced', 'stopped']);

const unexpected = collectUnexpected();
const { cleanups, tempDir } = useHarness(() => {
  expect(unexpected.map(String), `unhandled errors (seed ${SEED})`).toEqual([]);
});

// ---------------------------------------------------------------------------------------------
// HTTP: generated answers to CloudClient
// ---------------------------------------------------------------------------------------------

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

const STATUSES = [200, 201, 202, 204, 206, 299, 301, 302, 304, 307, 308, 400, 401, 403, 404, 405, 408, 413, 418, 429, 451, 500, 502, 503, 504, 599, 999];
const CONTENT_TYPES = ['application/json', 'application/json; charset=utf-8', 'text/html', 'text/plain', 'application/octet-stream', 'application/json; charset=latin1', '*/*', ''];
const GARBAGE_DATES = ['yesterday', '', 'Thu, 01 Jan 1970 00:00:00 GMT', 'Fri, 31 Dec 9999 23:59:59 GMT', '0', '-1', 'NaN', ' ', 'Mon, 32 Foo 2025 25:61:61 GMT', '2025-11-21T00:00:00Z', '1763683200000'];
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
      return { accessToken: token(rng), expireIn: 1 + int(rng, 1e6), refreshToken: token(rng), refreshExpireIn: 1 + int(rng, 1e7), code: 0, msg: '' };
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
      return { body: Buffer.from(JSON.stringify({ ...success, [field]: '@n@' }).replace('"@n@"', literal)), shape: `literal ${field}=${literal}` };
    }
    case 5: {
      const code = pick(rng, [1001, 1002, 1003, 1004, 1005, 1006, 1007, 42, -1, 2 ** 31, 4.5, '1006', 1e21, null]);
      const answer = method === 'registerDevice' ? { state: 'FAILURE', code, msg: randomString(rng, 30) } : { code, msg: chance(rng, 0.8) ? randomString(rng, 30) : oddValue(rng) };
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
      return { body: Buffer.concat([whole.subarray(0, at), Buffer.from(pick(rng, INVALID_UTF8)), whole.subarray(at)]), shape: 'invalid-utf8' };
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
      return { body: Buffer.from(pick(rng, ['<html><body>502 Bad Gateway</body></html>', 'null', '[]', '"text"', '0', 'true', '{}', '{"code":0}', ' {"code":0} '])), shape: 'odd-document' };
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
  if (status >= 300 && status < 400 && chance(rng, 0.7)) headers['location'] = pick(rng, ['/elsewhere', 'http://127.0.0.1:1/', 'https://example.invalid/auth']);
  const t = rng();
  let transport: Transport =
    t < 0.82 ? 'whole' : t < 0.9 ? 'chunked' : t < 0.925 ? 'reset-before-headers' : t < 0.95 ? 'reset-mid-body' : t < 0.953 ? 'stall-headers' : t < 0.956 ? 'stall-body' : 'raw';
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

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
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
    return typeof date === 'string' && Number.isFinite(Date.parse(date)) ? { ok: true, value: undefined } : { ok: false, code: 'ERR_BAD_RESPONSE' };
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
    if (json['state'] === 'SUCCESS') return goodText(json['data']) ? { ok: true, value: json['data'] } : { ok: false, code: 'ERR_BAD_RESPONSE' };
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
    return JSON.stringify(outcome.value) === JSON.stringify(want.value) ? undefined : `${what}: resolved ${JSON.stringify(outcome.value)?.slice(0, 120)} instead of the body's values`;
  }
  const { err } = outcome;
  if (!(err instanceof CloudError)) return `${what}: threw ${err instanceof Error ? `${err.constructor.name} ${err.message}` : String(err)}, not a CloudError`;
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
          const key = outcome.ok ? 'success' : outcome.err instanceof CloudError ? outcome.err.code.replace(/^ERR_CLOUD_.*/, 'ERR_CLOUD_n') : 'other';
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
    for (const key of ['success', 'ERR_BAD_RESPONSE', 'ERR_HTTP_STATUS', 'ERR_HTTP_REDIRECT', 'ERR_NETWORK', 'ERR_TIMEOUT', 'ERR_RESPONSE_TOO_LARGE', 'ERR_CLOUD_n', 'ERR_REFRESH_REFUSED', 'ERR_REGISTER_REFUSED']) {
      expect(tally[key] ?? 0, `${key} in ${JSON.stringify(tally)}`).toBeGreaterThan(0);
    }
    expect(serverTime.now() === undefined || Number.isFinite(serverTime.now())).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------
// WebSocket: generated peers for LinkSupervisor
// ---------------------------------------------------------------------------------------------

/** What the DESIGN §1.4 carriers say: a failure, none, or a form the contract leaves open. */
/** `bare`: whether the carrier may hold the bare message (handshake body, close reason) or only JSON (a frame). */
function carrierMeaning(payload: string, bare = true): { failure: Failure | undefined; ambiguous: boolean } {
  const exact = (p: string): Failure | undefined => {
    if ((FAILURES as readonly string[]).includes(p)) return bare ? (p as Failure) : undefined;
    let v: unknown;
    try {
      v = JSON.parse(p);
    } catch {
      return undefined;
    }
    return isObject(v) && v['code'] === 400 && (FAILURES as readonly unknown[]).includes(v['msg']) ? (v['msg'] as Failure) : undefined;
  };
  const failure = exact(payload);
  if (failure) return { failure, ambiguous: false };
  // Surrounding whitespace, or a code of "400"/401: lenient readers may accept them; the contract does not say.
  let loose = exact(payload.trim()) !== undefined;
  try {
    const v: unknown = JSON.parse(payload);
    loose ||= isObject(v) && (v['code'] === '400' || v['code'] === 401) && (FAILURES as readonly unknown[]).includes(v['msg']);
  } catch {
    // not JSON: nothing more to consider
  }
  return { failure: undefined, ambiguous: loose };
}

const NEAR_MESSAGES = ['unauthorized', 'UNAUTHORIZED', 'Unauthorized.', 'Un authorized', 'Unauthorised', 'Unauthorized\u0000', 'REPEAT_CLIENT_SESSIONS', 'repeat_client_session', 'REPEAT-CLIENT-SESSION', 'botId not found', 'botId not found or invalid!', 'botid not found or invalid', 'code 400', '400', ''];
const NEAR_CODES: readonly unknown[] = [200, 500, 4000, 40, -400, 400.5, null, 'x', true, [400], 0];

function canonicalCarrier(rng: Rng, failure: Failure, bare = true): string {
  switch (bare ? int(rng, 5) : 1 + int(rng, 4)) {
    case 0:
      return failure;
    case 1:
      return JSON.stringify({ code: 400, msg: failure });
    case 2:
      return JSON.stringify({ msg: failure, code: 400 });
    case 3:
      return `{ "code" : ${pick(rng, ['400', '400.0', '4e2', '4.00e2'])} ,\n "msg" : ${JSON.stringify(failure)} }`;
    default:
      return JSON.stringify({ code: 400, data: null, msg: failure, ts: int(rng, 1e9) });
  }
}

function nearMissCarrier(rng: Rng): string {
  switch (int(rng, 6)) {
    case 0:
      return pick(rng, NEAR_MESSAGES);
    case 1:
      return JSON.stringify({ code: 400, msg: pick(rng, NEAR_MESSAGES) });
    case 2:
      return JSON.stringify({ code: pick(rng, NEAR_CODES), msg: pick(rng, FAILURES) });
    case 3:
      return JSON.stringify(pick(rng, [{ msg: pick(rng, FAILURES) }, { code: 400 }, [400, pick(rng, FAILURES)], { code: 400, msg: [pick(rng, FAILURES)] }, { code: 400, msg: { text: pick(rng, FAILURES) } }]));
    case 4:
      return JSON.stringify(randomJson(rng, 3));
    default:
      return randomString(rng, 80);
  }
}

/** A peer's whole performance for one connection attempt, and what the link must conclude from it. */
interface WsScenario {
  /** Bytes written once the upgrade request arrived (a refusal, or the 101 and the frames). */
  write(key: string): Buffer;
  /** The failure the link must recognise; undefined for none. */
  failure: Failure | undefined;
  ambiguous: boolean;
  /** Data messages the link must pass on; undefined when delivery cannot be promised. */
  messages: number | undefined;
  desc: string;
}

function refusalScenario(rng: Rng): WsScenario {
  const status = pick(rng, [400, 400, 401, 401, 403, 404, 426, 429, 500, 503, 200, 301, 418]);
  const carrier = int(rng, 3);
  const failure = carrier === 0 ? pick(rng, FAILURES) : undefined;
  const body = failure ? canonicalCarrier(rng, failure) : carrier === 1 ? nearMissCarrier(rng) : pick(rng, ['', '<html>nope</html>', randomString(rng, 200), 'x'.repeat(5000 + int(rng, 20_000))]);
  const delivery = pick(rng, ['length', 'length', 'chunked', 'close', 'truncated'] as const);
  const bytes = Buffer.from(body);
  const head = [`HTTP/1.1 ${status} ${pick(rng, ['Bad Request', 'Nope', ''])}`, `Content-Type: ${pick(rng, CONTENT_TYPES)}`];
  let payload: Buffer;
  if (delivery === 'length') {
    head.push(`Content-Length: ${bytes.length}`);
    payload = bytes;
  } else if (delivery === 'truncated') {
    head.push(`Content-Length: ${bytes.length + 10}`);
    payload = bytes;
  } else if (delivery === 'chunked') {
    head.push('Transfer-Encoding: chunked');
    payload = bytes.length > 0 ? Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, Buffer.from('\r\n0\r\n\r\n')]) : Buffer.from('0\r\n\r\n');
  } else {
    payload = bytes;
  }
  if (status === 301) head.push('Location: /elsewhere');
  const complete = delivery !== 'truncated';
  const meaning = carrierMeaning(body);
  const said = complete ? meaning.failure : undefined;
  // A refusal whose body names nothing: 401 alone says Unauthorized.
  const expectedFailure = said ?? (complete && status === 401 && !meaning.ambiguous ? 'Unauthorized' : undefined);
  return {
    write: () => Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\nConnection: close\r\n\r\n`), payload]),
    failure: expectedFailure,
    // A truncated 401 may be read as Unauthorized (status) or as a drop (body never ended): both are sound.
    ambiguous: meaning.ambiguous || (status === 401 && !complete),
    messages: undefined,
    desc: `refusal ${status} ${delivery} ${JSON.stringify(body.slice(0, 80))}`,
  };
}

function badHandshakeScenario(rng: Rng): WsScenario {
  const variant = int(rng, 5);
  return {
    write: (key) => {
      const accept = wsAccept(key);
      const lines = ['HTTP/1.1 101 Switching Protocols', 'Upgrade: websocket', 'Connection: Upgrade'];
      if (variant === 0) lines.push('Sec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=');
      if (variant === 1) lines.splice(1, 1);
      if (variant === 2) lines.push(`Sec-WebSocket-Accept: ${accept}`, 'Sec-WebSocket-Protocol: chat');
      if (variant === 3) lines.push(`Sec-WebSocket-Accept: ${accept}`, 'Sec-WebSocket-Extensions: permessage-deflate');
      return variant === 4 ? Buffer.alloc(0) : Buffer.from(`${lines.join('\r\n')}\r\n\r\n`);
    },
    failure: undefined,
    ambiguous: false,
    messages: undefined,
    desc: `bad handshake variant ${variant}`,
  };
}

function openScenario(rng: Rng): WsScenario {
  const parts: Buffer[] = [];
  const desc: string[] = [];
  let messages = 0;
  let ambiguous = false;
  const carrier = pick(rng, ['none', 'none', 'frame', 'close'] as const);
  const failure = carrier === 'none' ? undefined : pick(rng, FAILURES);
  const frames = int(rng, 5);
  const carrierAt = carrier === 'frame' ? int(rng, frames + 1) : -1;
  for (let i = 0; i <= frames; i++) {
    if (i === carrierAt && failure) {
      const text = Buffer.from(canonicalCarrier(rng, failure, false));
      if (chance(rng, 0.3) && text.length > 2) {
        const cut = 1 + int(rng, text.length - 1);
        parts.push(frame(0x1, text.subarray(0, cut), { fin: false }), frame(0x0, text.subarray(cut)));
        desc.push('fragmented failure frame');
      } else {
        parts.push(frame(0x1, text));
        desc.push('failure frame');
      }
      continue;
    }
    if (i === frames) break;
    const kind = int(rng, 7);
    if (kind <= 1) {
      const text = nearMissCarrier(rng);
      ambiguous ||= carrierMeaning(text, false).ambiguous || carrierMeaning(text, false).failure !== undefined;
      parts.push(frame(0x1, Buffer.from(text)));
      messages++;
      desc.push(`text ${JSON.stringify(text.slice(0, 40))}`);
    } else if (kind === 2) {
      parts.push(frame(0x2, Buffer.from(chance(rng, 0.5) ? JSON.stringify({ code: 400, msg: pick(rng, FAILURES) }) : randomBytes(rng, 300))));
      messages++;
      desc.push('binary');
    } else if (kind === 3) {
      parts.push(frame(0x1, Buffer.from('y'.repeat(4097 + int(rng, 20_000)))));
      messages++;
      desc.push('large text');
    } else if (kind === 4) {
      parts.push(frame(0x9, randomBytes(rng, 100)));
      desc.push('ping');
    } else if (kind === 5) {
      parts.push(frame(0xa, randomBytes(rng, 100)));
      desc.push('pong');
    } else {
      parts.push(frame(0x1, Buffer.alloc(0)));
      messages++;
      desc.push('empty text');
    }
  }
  let ending = pick(rng, ['close', 'close', 'end', 'protocol-error'] as const);
  if (carrier === 'close') ending = 'close';
  let checkable = true;
  if (ending === 'close') {
    const reason = carrier === 'close' && failure ? canonicalCarrier(rng, failure) : chance(rng, 0.5) ? nearMissCarrier(rng).slice(0, 40) : '';
    if (carrier !== 'close') ambiguous ||= carrierMeaning(reason).ambiguous || carrierMeaning(reason).failure !== undefined;
    const reasonBytes = Buffer.from(reason);
    const code = pick(rng, VALID_CLOSE_CODES);
    parts.push(frame(0x8, closePayload(code, reasonBytes.length <= 123 ? reasonBytes : reasonBytes.subarray(0, 0))));
    desc.push(`close ${code} ${JSON.stringify(reason)}`);
  } else if (ending === 'end') {
    desc.push('end without close');
  } else {
    const broken = int(rng, 9);
    const bad = [
      () => frame(0x3, Buffer.from('reserved opcode')),
      () => frame(0x1, Buffer.from('rsv1 without an extension'), { rsv: 4 }),
      () => frame(0x1, Buffer.from('masked by a server'), { mask: true }),
      () => frame(0x1, Buffer.from(pick(rng, INVALID_UTF8))),
      () => frame(0x8, closePayload(pick(rng, INVALID_CLOSE_CODES), 'bad code')),
      () => frame(0x8, Buffer.from([0x03])),
      () => frame(0x9, Buffer.alloc(126)),
      () => frame(0x9, Buffer.from('fragmented ping'), { fin: false }),
      () => frame(0x0, Buffer.from('continuation out of nowhere')),
    ][broken]!;
    parts.push(bad());
    desc.push(`protocol error ${broken}`);
    checkable = false;
  }
  return {
    write: (key) => {
      const accept = wsAccept(key);
      return Buffer.concat([Buffer.from(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`), ...parts]);
    },
    failure,
    ambiguous,
    messages: checkable && !failure ? messages : undefined,
    desc: `open: ${desc.join(', ')}`,
  };
}

function wsScenario(seed: number, lane: number, attempt: number): WsScenario {
  const rng = prng((seed ^ Math.imul(lane + 1, 0x9e3779b1) ^ Math.imul(attempt, 0x85ebca6b)) >>> 0);
  const r = rng();
  return r < 0.35 ? refusalScenario(rng) : r < 0.4 ? badHandshakeScenario(rng) : openScenario(rng);
}

interface Attempt {
  served: number;
  invalidated: boolean;
  displaced: number;
  backoffs: string[];
  messages: number;
}

/** A raw peer that plays the scenario named by the attempt number in the Bearer token. */
async function rawPeer(lane: number): Promise<{ url: string; served: Map<number, WsScenario>; close(): Promise<void> }> {
  const served = new Map<number, WsScenario>();
  const sockets = new Set<Socket>();
  const server = createServer((_req, res) => res.writeHead(404).end());
  server.on('upgrade', (req: IncomingMessage, socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    // Whatever the link sends (pongs, close frames) is read and ignored.
    socket.resume();
    const attempt = Number(/^Bearer tok-\d+-(\d+)$/.exec(req.headers.authorization ?? '')?.[1]);
    const scenario = wsScenario(SEED, lane, attempt);
    served.set(attempt, scenario);
    socket.end(scenario.write(String(req.headers['sec-websocket-key'] ?? '')));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `ws://127.0.0.1:${port}/soulmate/voiceChat/v1`,
    served,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

interface LaneResult {
  problems: string[];
  states: string[];
  attempts: number;
  /** Attempts by the failure the link recognised ('none' for a plain drop). */
  recognised: Record<string, number>;
  messagesChecked: number;
}

async function runLane(lane: number, logDir: string): Promise<LaneResult> {
  const peer = await rawPeer(lane);
  cleanups.push(() => peer.close());
  const attempts: Attempt[] = [];
  let n = 0;
  const tokens: TokenSource = {
    current: () => {
      n++;
      attempts[n] = { served: 0, invalidated: false, displaced: 0, backoffs: [], messages: 0 };
      return Promise.resolve(`tok-${lane}-${n}`);
    },
    invalidate: (token) => {
      const at = Number(/^tok-\d+-(\d+)$/.exec(token ?? '')?.[1]);
      if (attempts[at]) attempts[at].invalidated = true;
    },
  };
  const log = pino({ level: 'debug' }, pino.destination({ dest: join(logDir, `lane-${lane}.log`), sync: true }));
  const link = new LinkSupervisor({
    wsUrl: peer.url,
    botId: 'bot-fuzz',
    tokens,
    clock: systemClock,
    log,
    backoff: { baseMs: 0, capMs: 0 },
    displacedBackoff: { baseMs: 0, capMs: 0 },
    botInvalidRetryMs: 0,
    connectTimeoutMs: 5000,
    heartbeatIntervalMs: 60_000,
  });
  const states: string[] = [];
  link.on('state', (s: { state: string }) => states.push(s.state));
  link.on('backoff', (b: { reason: string }) => attempts[n]?.backoffs.push(b.reason));
  link.on('displaced', () => {
    const a = attempts[n];
    if (a) a.displaced++;
  });
  link.on('message', () => {
    const a = attempts[n];
    if (a) a.messages++;
  });
  cleanups.push(() => link.stop());
  link.start();
  let last = 0;
  let lastProgress = performance.now();
  while (n <= WS_PER_LANE) {
    await new Promise((resolve) => setTimeout(resolve, 25));
    if (n !== last) {
      last = n;
      lastProgress = performance.now();
    } else if (performance.now() - lastProgress > 10_000) {
      const stuck = peer.served.get(n);
      throw new Error(`seed ${SEED} lane ${lane}: the link made no progress for 10 s at attempt ${n} (${stuck?.desc ?? 'never reached the peer'}), state ${link.status.state}`);
    }
  }
  await link.stop();

  const problems: string[] = [];
  const recognised: Record<string, number> = {};
  let messagesChecked = 0;
  for (let i = 1; i <= WS_PER_LANE; i++) {
    const a = attempts[i]!;
    const s = peer.served.get(i);
    const where = `seed ${SEED} lane ${lane} attempt ${i}`;
    if (!s) {
      problems.push(`${where}: never reached the peer`);
      continue;
    }
    const seen: Failure[] = [];
    if (a.invalidated) seen.push('Unauthorized');
    if (a.displaced > 0) seen.push('REPEAT_CLIENT_SESSION');
    if (a.backoffs.some((b) => b.startsWith('botId not found or invalid'))) seen.push('botId not found or invalid');
    recognised[seen[0] ?? 'none'] = (recognised[seen[0] ?? 'none'] ?? 0) + 1;
    if (s.messages !== undefined) messagesChecked++;
    const endings = a.backoffs.length + (a.invalidated && a.backoffs.length === 0 ? 1 : 0);
    if (seen.length > 1 || endings !== 1) problems.push(`${where}: ${endings} endings, recognised [${seen.join(', ')}] for ${s.desc}`);
    else if (!s.ambiguous && seen[0] !== s.failure) problems.push(`${where}: recognised ${seen[0] ?? 'nothing'}, expected ${s.failure ?? 'nothing'} for ${s.desc}`);
    else if (s.messages !== undefined && a.messages !== s.messages) problems.push(`${where}: passed on ${a.messages} messages, expected ${s.messages} for ${s.desc}`);
  }
  return { problems, states, attempts: WS_PER_LANE, recognised, messagesChecked };
}

describe(`LinkSupervisor under generated WebSocket peers (seed ${SEED})`, () => {
  it(`${WS_LANES * WS_PER_LANE} connection attempts: five states only, exactly the three 400 messages recognised, nothing thrown`, async () => {
    const logDir = tempDir('botlink-fuzz-ws-');
    const lanes = await Promise.all(Array.from({ length: WS_LANES }, (_, lane) => runLane(lane, logDir)));
    const problems = lanes.flatMap((l) => l.problems);
    expect(problems.slice(0, 20), `seed ${SEED}: ${problems.length} problems`).toEqual([]);
    const states = new Set(lanes.flatMap((l) => l.states));
    expect([...states].filter((s) => !LINK_STATES.has(s))).toEqual([]);
    expect(states.has('connected') && states.has('displaced') && states.has('backoff')).toBe(true);
    expect(lanes.reduce((sum, l) => sum + l.attempts, 0)).toBeGreaterThanOrEqual(2000);
    // The generator reaches every outcome often: each failure, plain drops, and counted deliveries.
    const total = (key: string): number => lanes.reduce((sum, l) => sum + (l.recognised[key] ?? 0), 0);
    for (const failure of FAILURES) expect(total(failure), failure).toBeGreaterThanOrEqual(100);
    expect(total('none')).toBeGreaterThanOrEqual(800);
    expect(lanes.reduce((sum, l) => sum + l.messagesChecked, 0)).toBeGreaterThanOrEqual(300);
  });
});
