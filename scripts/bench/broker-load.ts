// The broker bench's devices and load: Ed25519 keys made ahead, requests signed ahead (the load generator
// would otherwise spend ~50 µs of its own CPU per request signing, on the cores the servers use), and a
// closed loop of callers that sends them.
import { generateKeyPairSync, type KeyObject, randomBytes } from 'node:crypto';
import { Pool } from 'undici';
import { keyIdOf, rawPublicKeyOf, signRequest } from '../../src/protocol/device-sig.js';
import { signV2 } from '../../src/protocol/sign.js';
import { quantile } from '../lib/stats.js';

export const VENDOR = 'V1';
export const ACCESS_KEY_ID = 'AK';
export const SECRET = 'SK-broker-bench';
const TOKEN_PATH = '/v1/token';
const TOKEN_BODY = '{}';

export interface BenchDevice {
  key: KeyObject;
  keyId: string;
  publicKey: string;
  deviceId: string;
  botId: string;
}

/** `n` devices with keys of their own; `prefix` keeps the deviceIds and botIds of two fleets apart. */
export function makeDevices(n: number, prefix: string): BenchDevice[] {
  return Array.from({ length: n }, (_, i) => {
    const key = generateKeyPairSync('ed25519').privateKey;
    const raw = rawPublicKeyOf(key);
    return { key, keyId: keyIdOf(raw), publicKey: raw.toString('base64url'), deviceId: `SN-${prefix}-${i}`, botId: `bot-${prefix}-${i}` };
  });
}

/** One request ready to send: its path, headers and exact body. */
export interface Prepared {
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** POST /v1/token for `device`, signed now with a fresh nonce (DESIGN §3.7). */
export function signedTokenRequest(device: BenchDevice): Prepared {
  const authorization = signRequest(device.key, {
    method: 'POST',
    path: TOKEN_PATH,
    keyId: device.keyId,
    ts: String(Date.now()),
    nonce: randomBytes(12).toString('base64url'),
    body: TOKEN_BODY,
  });
  return { path: TOKEN_PATH, headers: { 'content-type': 'application/json', authorization }, body: TOKEN_BODY };
}

/** POST /auth/getToken for `botId`, signed with the account secret (DESIGN §1.1): what a signing device sends. */
export function signedGetToken(botId: string): Prepared {
  const params = {
    accessKeyId: ACCESS_KEY_ID,
    accessNonce: randomBytes(16).toString('hex'),
    accessTimestamp: String(Date.now()),
    accessVersion: 'V2',
  };
  const body = JSON.stringify({ ...params, accessSign: signV2(params, SECRET), botId });
  return { path: '/auth/getToken', headers: { 'content-type': 'application/json' }, body };
}

export interface LoadResult {
  /** Answers per second inside the measured window. */
  rps: number;
  p50: number;
  p99: number;
  /** Answers that were not a success, inside the window. */
  errors: number;
  /** Answers inside the window. */
  answered: number;
  /** Every answer, the warm-up's too (for CPU per request). */
  total: number;
  /** The measured window in ms (a fleet's: first send to last answer). */
  windowMs: number;
  /** Latencies inside the window, in ms, sorted. */
  latencies: number[];
  /** Requests the generator had to sign while sending, because the signed ones ran out. */
  signedInline: number;
  /** The first failure seen, for the report. */
  firstError: string | undefined;
}

export interface LoadOptions {
  url: string;
  concurrency: number;
  /** Requests signed ahead, sent in order. */
  requests: readonly Prepared[];
  /** Signs one more when `requests` run out before the window ends (a cell); undefined ends the load there (a fleet). */
  more?: () => Prepared;
  /** Sent but not measured; 0 for a fleet, whose every request counts. */
  warmMs: number;
  /** The measured window; Infinity sends every request once. */
  cellMs: number;
  /** Whether an answer is a success. */
  ok: (status: number, json: unknown) => boolean;
}

/** Closed-loop load: `concurrency` callers, each sending the next request when its last was answered. */
export async function load(o: LoadOptions): Promise<LoadResult> {
  const pool = new Pool(o.url, { connections: o.concurrency });
  const latencies: number[] = [];
  let next = 0;
  let signedInline = 0;
  let errors = 0;
  let total = 0;
  let firstError: string | undefined;
  const started = performance.now();
  const warmEnd = started + o.warmMs;
  const end = warmEnd + o.cellMs;
  let lastAnswer = warmEnd;
  const take = (): Prepared | undefined => {
    if (next < o.requests.length) return o.requests[next++];
    if (!o.more) return undefined;
    signedInline += 1;
    return o.more();
  };
  const caller = async (): Promise<void> => {
    for (;;) {
      const sent = performance.now();
      if (sent >= end) return;
      const request = take();
      if (!request) return;
      const res = await pool.request({ path: request.path, method: 'POST', headers: request.headers, body: request.body });
      const text = await res.body.text();
      const answered = performance.now();
      total += 1;
      if (sent < warmEnd || answered > end) continue;
      lastAnswer = answered;
      latencies.push(answered - sent);
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
      if (!o.ok(res.statusCode, json)) {
        errors += 1;
        firstError ??= `${res.statusCode} ${text.slice(0, 200)}`;
      }
    }
  };
  await Promise.all(Array.from({ length: o.concurrency }, caller));
  await pool.close();
  const windowMs = Number.isFinite(o.cellMs) ? o.cellMs : lastAnswer - warmEnd;
  latencies.sort((a, b) => a - b);
  return {
    rps: latencies.length / (windowMs / 1000),
    p50: quantile(latencies, 0.5),
    p99: quantile(latencies, 0.99),
    errors,
    answered: latencies.length,
    total,
    windowMs,
    latencies,
    signedInline,
    firstError,
  };
}

/** A broker's token answer: 200 with an access token. */
export const tokenOk = (status: number, json: unknown): boolean =>
  status === 200 && typeof (json as { accessToken?: unknown } | undefined)?.accessToken === 'string';

/** The cloud's getToken answer: code 0. */
export const getTokenOk = (status: number, json: unknown): boolean =>
  status === 200 && (json as { code?: unknown } | undefined)?.code === 0;
