import { randomBytes } from 'node:crypto';
import type { Dispatcher } from 'undici';
import { type HttpCallOptions, resolveCloudSettings, type CloudSettings } from '../../cloud/client.js';
import { createPool, type HttpPool } from '../../cloud/http.js';
import type { DeviceKey } from '../config/device-key.js';
import { PENDING_STATUS } from '../../protocol/broker.js';
import { VERSION } from '../../version.js';
import {
  parseChecked,
  parseEnrolled,
  parseHealth,
  parseIssued,
  parsePending,
  type BrokerHealth,
  type CheckAnswer,
  type EnrollAnswer,
  type EnrollRequest,
  type IssuedToken,
} from './answers.js';
import { BrokerError, brokerNetworkError, parseRetryAfter, refusalError } from './errors.js';

export interface BrokerClientOptions extends HttpCallOptions {
  brokerUrl: string;
  /** PEM of the private CA the broker's certificate must chain to; null: the system CAs. */
  ca: string | null;
  key: DeviceKey;
}

/** A device asks for one token at a time, and enrolls once: two connections are plenty. */
const POOL_CONNECTIONS = 2;
/** The broker takes 13-digit ms timestamps (DESIGN §3.7). */
const MIN_TS_MS = 1e12;
const MAX_TS_MS = 1e13 - 1;
/** 16 random bytes: 22 base64url characters, inside the broker's 16–64. */
const NONCE_BYTES = 16;

/** One answer: its status, body text, Retry-After, and when it arrived. */
interface Answer {
  status: number;
  text: string;
  retryAfter: string | undefined;
  atMono: number;
  atWall: number;
}

/**
 * The device's client of the vendor's broker (DESIGN §3.7): every request but health signed with the
 * device key, a fresh nonce each, over undici's pool like the cloud client, each call within one deadline.
 */
export class BrokerClient {
  readonly #opts: BrokerClientOptions;
  readonly #s: CloudSettings;
  readonly #origin: string;
  readonly #basePath: string;
  #pool: Promise<HttpPool> | undefined;
  #closed = false;
  readonly #calls = new Set<AbortController>();

  constructor(opts: BrokerClientOptions) {
    this.#opts = opts;
    const url = new URL(opts.brokerUrl);
    this.#origin = url.origin;
    this.#basePath = url.pathname.replace(/\/+$/, '');
    this.#s = resolveCloudSettings(opts);
  }

  /** The device key's keyId, which the broker knows it by. */
  get keyId(): string {
    return this.#opts.key.keyId;
  }

  /**
   * `POST /v1/token`: an access token for this key's botId with at least `minValidityS` left (the broker
   * caps it); with this agent's version, which the broker keeps for its operators.
   */
  async token(tsMs: number, minValidityS?: number): Promise<IssuedToken> {
    const body = { ...(minValidityS !== undefined && { minValidityS: Math.max(0, Math.ceil(minValidityS)) }), agent: { version: VERSION } };
    const answer = await this.#signed('/v1/token', body, tsMs);
    return parseIssued(success('POST /v1/token', answer));
  }

  /** `POST /v1/enroll`, signed by the key being enrolled (proof of possession): bound, or (no code) pending. */
  async enroll(req: EnrollRequest, tsMs: number): Promise<EnrollAnswer> {
    const { key } = this.#opts;
    const route = 'POST /v1/enroll';
    const answer = await this.#signed('/v1/enroll', { ...req, publicKey: key.publicKey }, tsMs);
    if (answer.status === PENDING_STATUS) return pending(route, answer);
    return { state: 'active', ...parseEnrolled(success(route, answer)) };
  }

  /** `POST /v1/check`: whether the broker holds this key active, at no token's cost (doctor, a pending device). */
  async check(tsMs: number): Promise<CheckAnswer> {
    const route = 'POST /v1/check';
    const answer = await this.#signed('/v1/check', {}, tsMs);
    if (answer.status === PENDING_STATUS) return pending(route, answer);
    return parseChecked(success(route, answer));
  }

  /** `GET /v1/health`, unsigned; its Date is a server time sample like every answer's. */
  async health(): Promise<BrokerHealth> {
    const route = 'GET /v1/health';
    const answer = await this.#call(route, { path: `${this.#basePath}/v1/health`, method: 'GET', headers: { accept: 'application/json' } });
    return parseHealth(success(route, answer));
  }

  /** A server time sample: any answer to health will do, as long as it carries a Date. */
  async sampleServerTime(): Promise<void> {
    let dated = false;
    const route = 'GET /v1/health';
    await this.#call(route, { path: `${this.#basePath}/v1/health`, method: 'GET' }, (date) => {
      dated = date !== undefined && Number.isFinite(Date.parse(date));
    });
    if (!dated)
      throw new BrokerError('ERR_BAD_RESPONSE', `${route}: the answer carried no valid Date header, so it gives no time`, 'retry-backoff');
  }

  /** Refuses new calls and ends those in flight at once. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const call of this.#calls) call.abort(closedError());
    const pool = await this.#pool?.catch(() => undefined);
    await pool?.destroy();
  }

  async #signed(route: string, body: Record<string, unknown>, tsMs: number): Promise<Answer> {
    const ts = Math.round(tsMs);
    if (!(ts >= MIN_TS_MS && ts <= MAX_TS_MS)) {
      throw new BrokerError(
        'ERR_CLOCK_UNTRUSTED',
        `refusing to sign a broker request with timestamp ${ts}: the clock is not usable`,
        'needs-clock',
      );
    }
    const path = this.#basePath + route;
    const bytes = Buffer.from(JSON.stringify(body), 'utf8');
    const nonce = randomBytes(NONCE_BYTES).toString('base64url');
    const authorization = this.#opts.key.authorize({ method: 'POST', path, ts: String(ts), nonce, body: bytes });
    const headers = { 'content-type': 'application/json', accept: 'application/json', authorization };
    const name = `POST ${route}`;
    return this.#call(name, { path, method: 'POST', headers, body: bytes });
  }

  #getPool(): Promise<HttpPool> {
    const { ca, lookup } = this.#opts;
    this.#pool ??= createPool(
      this.#origin,
      {
        connections: POOL_CONNECTIONS,
        connectTimeout: this.#s.connectTimeoutMs,
        headersTimeout: this.#s.headersTimeoutMs,
        bodyTimeout: this.#s.bodyTimeoutMs,
        maxResponseSize: this.#s.maxResponseBytes,
        connect: { ...(ca !== null && { ca }), ...(lookup && { lookup }) },
      },
      this.#opts.parserTier,
    );
    return this.#pool;
  }

  /** One request within the total deadline (undici's body timeout restarts on every byte, so it bounds nothing). */
  async #call(route: string, request: Dispatcher.RequestOptions, onDate?: (date: string | undefined) => void): Promise<Answer> {
    if (this.#closed) throw closedError();
    const call = new AbortController();
    const cancelDeadline = this.#opts.clock.setTimer(
      this.#s.deadlineMs,
      () =>
        call.abort(
          new BrokerError('ERR_TIMEOUT', `${route}: the broker did not answer within ${this.#s.deadlineMs / 1000} s`, 'retry-backoff'),
        ),
      { ref: true },
    );
    this.#calls.add(call);
    const aborted = new Promise<never>((_, reject) =>
      call.signal.addEventListener('abort', () => reject(call.signal.reason), { once: true }),
    );
    try {
      return await Promise.race([this.#exchange(route, { ...request, signal: call.signal }, onDate), aborted]);
    } finally {
      cancelDeadline();
      this.#calls.delete(call);
    }
  }

  async #exchange(route: string, request: Dispatcher.RequestOptions, onDate?: (date: string | undefined) => void): Promise<Answer> {
    const pool = await this.#getPool();
    const { clock } = this.#opts;
    const monoSent = clock.monoNow();
    try {
      const res = await pool.request(request);
      const atMono = clock.monoNow();
      const date = one(res.headers['date']);
      this.#opts.onDateSample?.(date, monoSent, atMono);
      onDate?.(date);
      const atWall = clock.wallNow();
      return { status: res.statusCode, text: await res.body.text(), retryAfter: one(res.headers['retry-after']), atMono, atWall };
    } catch (err) {
      throw err instanceof BrokerError ? err : brokerNetworkError(`broker ${route}`, err);
    }
  }
}

function one(header: string | string[] | undefined): string | undefined {
  return typeof header === 'string' ? header : undefined;
}

function closedError(): BrokerError {
  return new BrokerError('ERR_NETWORK', 'the broker client is closed', 'retry-backoff');
}

/** A 202 answer: the key waits for an operator, and asks again no sooner than its Retry-After. */
function pending(route: string, answer: Answer): ReturnType<typeof parsePending> {
  let body: unknown;
  try {
    body = JSON.parse(answer.text) as unknown;
  } catch (err) {
    throw new BrokerError('ERR_BAD_RESPONSE', `${route}: the broker answered with malformed JSON`, 'retry-backoff', { cause: err });
  }
  return parsePending(route, body, parseRetryAfter(answer.retryAfter));
}

/** The JSON of a 200 answer; any other answer as the error its refusal means. */
function success(route: string, answer: Answer): unknown {
  let body: unknown;
  try {
    body = JSON.parse(answer.text) as unknown;
  } catch (err) {
    if (answer.status === 200) {
      throw new BrokerError('ERR_BAD_RESPONSE', `${route}: the broker answered with malformed JSON`, 'retry-backoff', { cause: err });
    }
  }
  if (answer.status === 200) return body;
  throw refusalError(route, { status: answer.status, body, retryAfter: answer.retryAfter, atMono: answer.atMono, atWall: answer.atWall });
}
