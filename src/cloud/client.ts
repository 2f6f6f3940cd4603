import { randomUUID } from 'node:crypto';
import type { LookupFunction } from 'node:net';
import type { Dispatcher } from 'undici';
import type { RetryClass } from '../protocol/errors.js';
import { signV2, SIGNATURE_VERSION } from '../protocol/sign.js';
import {
  identityFieldsOf,
  parseGetTokenResponse,
  parseRefreshTokenResponse,
  parseRegisterDeviceResponse,
  type GetTokenSuccess,
  type Identity,
  type RefreshTokenSuccess,
  type RegisterDeviceRequest,
} from '../protocol/wire.js';
import type { Clock } from '../clock.js';
import { CloudError, closedError, codeError, networkError, parseOr, statusError } from './errors.js';
import { createPool, type HttpPool, type ParserTier } from './http.js';

/** How an HTTP client of ours calls its server: timeouts, limits, resolver, parser tier, time samples. */
export interface HttpCallOptions {
  clock: Clock;
  /** Every response's Date header with the monotonic instants that bracket the request (a server time sample). */
  onDateSample?: (date: string | undefined, monoSent: number, monoReceived: number) => void;
  connectTimeoutMs?: number;
  headersTimeoutMs?: number;
  /** Longest silence between two body chunks: undici restarts it on every byte, so it bounds no call. */
  bodyTimeoutMs?: number;
  /** Total time one call may take, connect to last byte; default the longest of the three timeouts above. */
  deadlineMs?: number;
  maxResponseBytes?: number;
  /** Resolves the service host; default the system resolver (tests inject failures and recovery). */
  lookup?: LookupFunction;
  /** Default 'baseline' (a device); the broker, which parses answers all day, takes 'optimizing'. */
  parserTier?: ParserTier;
}

export interface CloudClientOptions extends HttpCallOptions {
  baseUrl: string;
  accessKeyId: string;
  /** Only `reveal()` is used, at signing time; the secret is never kept elsewhere. */
  secretKey: { reveal(): string };
  /** Connections to the service at once; default POOL_CONNECTIONS (a device makes one call at a time). */
  connections?: number;
}

export const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024;
/** HTTP connections the pool may hold to the service at once. */
export const POOL_CONNECTIONS = 4;

/** The client's limits with every default filled in, resolved once. */
export interface CloudSettings {
  connectTimeoutMs: number;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
  deadlineMs: number;
  maxResponseBytes: number;
}

export function resolveCloudSettings(opts: Partial<CloudSettings>): CloudSettings {
  const connectTimeoutMs = opts.connectTimeoutMs ?? DEFAULT_TIMEOUT_MS;
  const headersTimeoutMs = opts.headersTimeoutMs ?? DEFAULT_TIMEOUT_MS;
  const bodyTimeoutMs = opts.bodyTimeoutMs ?? DEFAULT_TIMEOUT_MS;
  return {
    connectTimeoutMs,
    headersTimeoutMs,
    bodyTimeoutMs,
    deadlineMs: opts.deadlineMs ?? Math.max(connectTimeoutMs, headersTimeoutMs, bodyTimeoutMs),
    maxResponseBytes: opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
  };
}

/** A 13-digit ms timestamp covers 2001-09-09 … 2286-11-20; anything else is refused by the service. */
const MIN_TIMESTAMP_MS = 1e12;
const MAX_TIMESTAMP_MS = 1e13 - 1;

export function newNonce(): string {
  return randomUUID().replaceAll('-', '');
}

/** The cloud token service over HTTP (undici, keep-alive pool, no redirects). */
export class CloudClient {
  readonly #opts: CloudClientOptions;
  /** Created at the first request: a device with a valid cached token never loads undici. */
  #pool: Promise<HttpPool> | undefined;
  #closed = false;
  /** Each call in flight and its route: close() aborts them so their promises reject at once. */
  readonly #calls = new Map<AbortController, string>();
  readonly #s: CloudSettings;
  readonly #origin: string;
  readonly #basePath: string;

  constructor(opts: CloudClientOptions) {
    this.#opts = opts;
    const url = new URL(opts.baseUrl);
    this.#basePath = url.pathname.replace(/\/+$/, '');
    this.#origin = url.origin;
    this.#s = resolveCloudSettings(opts);
  }

  /** The signed flow (DESIGN §1.2); `timestampMs` must come from a trusted clock or server time. */
  async getToken(identity: Identity, timestampMs: number): Promise<GetTokenSuccess> {
    const ts = Math.round(timestampMs);
    if (!(ts >= MIN_TIMESTAMP_MS && ts <= MAX_TIMESTAMP_MS)) {
      throw new CloudError('ERR_CLOCK_UNTRUSTED', `refusing to sign with timestamp ${ts}: the clock is not usable`, 'needs-clock');
    }
    const signed = {
      accessKeyId: this.#opts.accessKeyId,
      accessNonce: newNonce(),
      accessTimestamp: String(ts),
      accessVersion: SIGNATURE_VERSION,
    };
    const body = { ...signed, accessSign: signV2(signed, this.#opts.secretKey.reveal()), ...identityFieldsOf(identity) };
    const answer = parseOr(parseGetTokenResponse, await this.#post('/auth/getToken', body));
    if (answer.ok) {
      const { ok: _ok, ...success } = answer;
      return success;
    }
    throw codeError(answer.code, answer.msg);
  }

  /** No signature and no timestamp: works with a wrong clock. Any refusal means "run the signed flow". */
  async refreshToken(identity: Identity, refreshToken: string): Promise<RefreshTokenSuccess> {
    const body = { accessKeyId: this.#opts.accessKeyId, refreshToken, ...identityFieldsOf(identity) };
    const answer = parseOr(parseRefreshTokenResponse, await this.#post('/auth/refreshToken', body));
    if (answer.ok) return { accessToken: answer.accessToken, expireIn: answer.expireIn };
    throw new CloudError(
      'ERR_REFRESH_REFUSED',
      `refreshToken refused (code ${answer.code}${answer.msg ? `: ${answer.msg}` : ''}); signing again`,
      'retry-soon',
      {
        serviceCode: answer.code,
      },
    );
  }

  /** Registers a device under a vendor (DESIGN §1.5) with the vendor's access token; resolves to the botId. */
  async registerDevice(vendorAccessToken: string, req: RegisterDeviceRequest): Promise<string> {
    const answer = parseOr(parseRegisterDeviceResponse, await this.#post('/device/register', req, vendorAccessToken));
    if (answer.ok) return answer.botId;
    const retry: RetryClass = answer.code === '401' ? 'retry-soon' : 'needs-config';
    throw new CloudError(
      'ERR_REGISTER_REFUSED',
      `device registration refused (code ${answer.code}${answer.msg ? `: ${answer.msg}` : ''})`,
      retry,
      /^\d+$/.test(answer.code) ? { serviceCode: Number(answer.code) } : {},
    );
  }

  /**
   * A server time sample: a HEAD of the base URL, which no one reads as a failed authentication. Any
   * status will do; only the Date header and the round trip count, so an answer without a Date fails.
   */
  async sampleServerTime(): Promise<void> {
    const path = `${this.#basePath}/`;
    const route = `HEAD ${path}`;
    const { date } = await this.#call(route, { path, method: 'HEAD' });
    if (date === undefined || !Number.isFinite(Date.parse(date))) {
      throw new CloudError(
        'ERR_BAD_RESPONSE',
        `${route}: the answer carried no valid Date header, so it gives no server time`,
        'retry-backoff',
      );
    }
  }

  /** Refuses new calls and ends those in flight at once: their promises reject with a network-class error. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const [call, route] of this.#calls) call.abort(closedError(route));
    // A pool that failed to come up has nothing to destroy; its requests already reported why.
    const pool = await this.#pool?.catch(() => undefined);
    await pool?.destroy();
  }

  #getPool(): Promise<HttpPool> {
    const { lookup } = this.#opts;
    this.#pool ??= createPool(
      this.#origin,
      {
        connections: this.#opts.connections ?? POOL_CONNECTIONS,
        connectTimeout: this.#s.connectTimeoutMs,
        headersTimeout: this.#s.headersTimeoutMs,
        bodyTimeout: this.#s.bodyTimeoutMs,
        maxResponseSize: this.#s.maxResponseBytes,
        ...(lookup && { connect: { lookup } }),
      },
      this.#opts.parserTier,
    );
    return this.#pool;
  }

  async #post(route: string, body: unknown, bearer?: string): Promise<unknown> {
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
    if (bearer !== undefined) headers['authorization'] = `Bearer ${bearer}`;
    const res = await this.#call(route, { path: this.#basePath + route, method: 'POST', headers, body: JSON.stringify(body) });
    if (res.statusCode !== 200) throw statusError(route, res.statusCode);
    try {
      return JSON.parse(res.text) as unknown;
    } catch (err) {
      throw new CloudError('ERR_BAD_RESPONSE', `${route}: the service answered with malformed JSON`, 'retry-backoff', { cause: err });
    }
  }

  /**
   * One request within the total deadline: undici's own timeouts bound each phase, but its body timeout
   * restarts on every byte, so a server trickling bytes would otherwise hold the call for as long as it likes.
   */
  async #call(route: string, request: Dispatcher.RequestOptions): Promise<Exchange> {
    if (this.#closed) throw closedError(route);
    const call = new AbortController();
    const seconds = this.#s.deadlineMs / 1000;
    // Ref'd, like the request it bounds: the caller is waiting on it.
    const cancelDeadline = this.#opts.clock.setTimer(
      this.#s.deadlineMs,
      () => call.abort(new CloudError('ERR_TIMEOUT', `${route}: the cloud did not answer within ${seconds} s`, 'retry-backoff')),
      { ref: true },
    );
    this.#calls.set(call, route);
    try {
      return await untilAborted(this.#exchange(route, { ...request, signal: call.signal }), call.signal);
    } finally {
      cancelDeadline();
      this.#calls.delete(call);
    }
  }

  async #exchange(route: string, request: Dispatcher.RequestOptions): Promise<Exchange> {
    const pool = await this.#getPool();
    // Taken once the pool exists: the first request loads undici, which is no part of the round trip
    // that bounds the server-time sample.
    const monoSent = this.#opts.clock.monoNow();
    try {
      const res = await pool.request(request);
      const date = res.headers['date'];
      this.#opts.onDateSample?.(typeof date === 'string' ? date : undefined, monoSent, this.#opts.clock.monoNow());
      return { statusCode: res.statusCode, date: typeof date === 'string' ? date : undefined, text: await res.body.text() };
    } catch (err) {
      throw err instanceof CloudError ? err : networkError(route, err);
    }
  }
}

/** What a call brought back: the status, the Date header (one, as a string) and the body. */
interface Exchange {
  statusCode: number;
  date: string | undefined;
  text: string;
}

/** `work`'s outcome, or the signal's reason the moment it aborts: undici cannot abort a request still waiting for its socket. */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
