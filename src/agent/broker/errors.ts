/** What the broker's refusals (DESIGN §3.7) mean to the device: each a stable code, a retry class and a fix. */

import { networkError } from '../../cloud/errors.js';
import { isRefusalCode, REFUSAL_STATUS, type RefusalCode } from '../../protocol/broker.js';
import { BotlinkError, type BotlinkErrorOptions, type ErrorCode, type RetryClass } from '../../protocol/errors.js';
import { ENROLL_COMMAND } from '../config/device-key.js';

export interface BrokerErrorOptions extends BotlinkErrorOptions {
  /** The broker's own code (`revoked`), when it answered one. */
  refusal?: RefusalCode;
  status?: number;
  retryAfterMs?: number;
  serverTime?: ServerTimeSeen;
}

/** The broker's time as a `clock-skew` answer gave it, and the monotonic instant the answer arrived. */
export interface ServerTimeSeen {
  ms: number;
  atMono: number;
}

/** A broker call that did not succeed. */
export class BrokerError extends BotlinkError {
  readonly refusal: RefusalCode | undefined;
  readonly status: number | undefined;
  /** The answer's Retry-After, in ms: no retry may come sooner (429, 503). */
  readonly retryAfterMs: number | undefined;
  /** With `clock-skew`: the broker's time, to retry with once. */
  readonly serverTime: ServerTimeSeen | undefined;

  constructor(code: ErrorCode, message: string, retry: RetryClass, options: BrokerErrorOptions = {}) {
    super(code, message, retry, options);
    this.refusal = options.refusal;
    this.status = options.status;
    this.retryAfterMs = options.retryAfterMs;
    this.serverTime = options.serverTime;
  }
}

interface Meaning {
  code: ErrorCode;
  retry: RetryClass;
  fix?: string;
}

/** Every refusal code of DESIGN §3.7, as the device reads it (the compiler holds it to the contract's list). */
export const REFUSALS = Object.freeze<Record<RefusalCode, Meaning | 'by-status'>>({
  'bad-request': {
    code: 'ERR_BROKER_BAD_REQUEST',
    retry: 'needs-config',
    fix: "check that brokerUrl points at the vendor's botlink broker, and that this botlink is as new as the broker",
  },
  'bad-signature': {
    code: 'ERR_BROKER_BAD_SIGNATURE',
    retry: 'needs-config',
    fix: 'the broker knows this key but not this request: a proxy may rewrite its path or body; check brokerUrl',
  },
  'unknown-key': {
    code: 'ERR_BROKER_UNKNOWN_KEY',
    retry: 'needs-provisioning',
    fix: `the broker does not know this device key: enroll it with \`${ENROLL_COMMAND}\` and a code from the vendor`,
  },
  replayed: { code: 'ERR_BROKER_REPLAYED', retry: 'retry-soon' },
  'clock-skew': {
    code: 'ERR_BROKER_CLOCK_SKEW',
    retry: 'needs-clock',
    fix: "the device clock is more than 5 minutes off the broker's: check NTP (timedatectl status, chronyc tracking)",
  },
  revoked: {
    code: 'ERR_BROKER_REVOKED',
    retry: 'needs-provisioning',
    fix: `this device key was revoked or replaced: re-enroll with \`${ENROLL_COMMAND}\` and a new code from the vendor`,
  },
  rejected: {
    code: 'ERR_BROKER_REJECTED',
    retry: 'needs-provisioning',
    fix: `the vendor's operator rejected this device key: ask the vendor to enroll this device, and enroll it with \`${ENROLL_COMMAND}\` and the code they give (it makes a new key)`,
  },
  // Token and rotate of a key that still waits for an operator: the device asks again later, as when enrolling.
  pending: {
    code: 'ERR_BROKER_PENDING',
    retry: 'retry-backoff',
    fix: "this device key waits for the vendor's operator to accept it: its keyId is in `botlink status`; read it to the vendor",
  },
  'bad-code': {
    code: 'ERR_BROKER_BAD_CODE',
    retry: 'needs-provisioning',
    fix: 'the enrollment code is unknown, spent, expired, or bound to another device: ask the vendor for a new one',
  },
  'device-exists': {
    code: 'ERR_BROKER_DEVICE_EXISTS',
    retry: 'needs-provisioning',
    fix: 'this deviceId or its botId is bound to another key: ask the vendor for a --replace code (a swapped SD card) or an --adopt code',
  },
  // The request did not reach the broker whole in time: a slow or broken network; asked again on the schedule.
  timeout: { code: 'ERR_TIMEOUT', retry: 'retry-backoff' },
  'too-large': { code: 'ERR_BROKER_TOO_LARGE', retry: 'fatal' },
  'rate-limited': { code: 'ERR_BROKER_RATE_LIMITED', retry: 'retry-backoff' },
  'cloud-refused': {
    code: 'ERR_BROKER_CLOUD_REFUSED',
    retry: 'needs-config',
    fix: "the cloud refused the broker: tell the broker's operator; botlink asks again later",
  },
  'cloud-unreachable': { code: 'ERR_BROKER_CLOUD_UNREACHABLE', retry: 'retry-backoff' },
  // The broker's own store did not answer: as passing as an unreachable cloud, and asked again as it is.
  'store-unavailable': { code: 'ERR_BROKER_STORE_UNAVAILABLE', retry: 'retry-backoff' },
  // No such route: read like any 404, which says that no botlink broker is there.
  'not-found': 'by-status',
});

/** The cloud's "system error": it fails now and may not later, so the device retries on its schedule. */
const CLOUD_SYSTEM_ERROR = 1006;
/** A broker asking for more than this is obeyed only this long: no answer parks the device for good. */
export const MAX_RETRY_AFTER_MS = 3_600_000;
/** A broker's message is shown, cut to this length and stripped of control characters. */
const MAX_SHOWN_MSG = 200;

/** Retry-After as seconds (DESIGN §3.7), in ms; undefined when absent or not a number of seconds. */
export function parseRetryAfter(header: string | undefined): number | undefined {
  if (header === undefined || !/^\s*\d{1,10}\s*$/.test(header)) return undefined;
  return Math.min(Number(header) * 1000, MAX_RETRY_AFTER_MS);
}

/** What an answer other than 200 said, as far as it can be read. */
export interface FailedAnswer {
  status: number;
  /** The parsed JSON body, or undefined when it was not JSON. */
  body: unknown;
  retryAfter: string | undefined;
  /** The monotonic instant the answer arrived. */
  atMono: number;
  /** The wall-clock instant it arrived, to say when a Retry-After ends; undefined: said in seconds only. */
  atWall?: number;
}

/** The error for an answer other than 200: by the broker's code when it gave a known one at its status, else by the status. */
export function refusalError(route: string, answer: FailedAnswer): BrokerError {
  const body = typeof answer.body === 'object' && answer.body !== null ? (answer.body as Record<string, unknown>) : {};
  const refusal = typeof body.code === 'string' && isRefusalCode(body.code) ? body.code : undefined;
  const retryAfterMs = parseRetryAfter(answer.retryAfter);
  const common = { status: answer.status, ...(retryAfterMs !== undefined && { retryAfterMs }) };
  // A code at another status than the contract's is not the broker's (a proxy's page, say).
  const meaning = refusal === undefined || REFUSAL_STATUS[refusal] !== answer.status ? 'by-status' : REFUSALS[refusal];
  if (refusal === undefined || meaning === 'by-status') return statusError(route, answer.status, common);
  const said = shown(body.msg);
  const cloudCode = typeof body.cloudCode === 'number' ? body.cloudCode : undefined;
  const serverMs = typeof body.serverTime === 'number' && Number.isFinite(body.serverTime) ? body.serverTime : undefined;
  const retry = cloudCode === CLOUD_SYSTEM_ERROR ? 'retry-backoff' : meaning.retry;
  const detail = [said, cloudCode === undefined ? '' : `cloud code ${cloudCode}`].filter(Boolean).join('; ');
  return new BrokerError(meaning.code, `${route}: the broker refused: ${refusal}${detail ? ` (${detail})` : ''}`, retry, {
    ...common,
    refusal,
    fix: refusal === 'rate-limited' ? rateLimitedFix(route, retryAfterMs, answer.atWall) : meaning.fix,
    ...(refusal === 'clock-skew' && serverMs !== undefined && { serverTime: { ms: serverMs, atMono: answer.atMono } }),
  });
}

/** What spent the quota a 429 names, and when the device may ask again (DESIGN §3.7's limits). */
export function rateLimitedFix(route: string, retryAfterMs: number | undefined, atWall: number | undefined): string {
  const when =
    retryAfterMs === undefined
      ? 'it asks again on its backoff'
      : `it may ask again ${atWall === undefined ? `in ${Math.ceil(retryAfterMs / 1000)} s` : `after ${new Date(atWall + retryAfterMs).toISOString()}`} (Retry-After)`;
  if (route.endsWith('/v1/token')) {
    return (
      `${when}; the broker's deviceTokensPerHour counts every token request of this botId, from all its keys, ` +
      "restarts and `botlink token` runs alike; the vendor's operator can clear it with `botlink broker reset-limits BOTID`"
    );
  }
  if (route.endsWith('/v1/check')) return `${when}; the broker allows 60 checks an hour per botId (doctor runs one each)`;
  return `${when}; too many requests of this key or its code in a short time`;
}

function shown(msg: unknown): string {
  return typeof msg === 'string' ? msg.replace(/\p{Cc}/gu, ' ').slice(0, MAX_SHOWN_MSG) : '';
}

function statusError(route: string, status: number, common: BrokerErrorOptions): BrokerError {
  if (status >= 300 && status < 400) {
    return new BrokerError('ERR_HTTP_REDIRECT', `${route}: HTTP ${status} redirect, not followed`, 'needs-config', {
      ...common,
      fix: 'check brokerUrl',
    });
  }
  if (status === 404 || status === 405) {
    return new BrokerError('ERR_HTTP_STATUS', `${route}: HTTP ${status}: no botlink broker there`, 'needs-config', {
      ...common,
      fix: "check that brokerUrl points at the vendor's botlink broker",
    });
  }
  return new BrokerError('ERR_HTTP_STATUS', `${route}: HTTP ${status} from the broker`, 'retry-backoff', common);
}

const TLS_TRUST_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
]);

/** A call that got no answer: the cloud client's reading of the failure, with fixes that name the broker's settings. */
export function brokerNetworkError(route: string, err: unknown): BrokerError {
  const read = networkError(route, err);
  const cause = (err as { code?: unknown; cause?: { code?: unknown } }).code ?? (err as { cause?: { code?: unknown } }).cause?.code;
  const fix =
    read.code === 'ERR_DNS'
      ? 'check DNS and brokerUrl'
      : typeof cause === 'string' && TLS_TRUST_CODES.has(cause)
        ? "the broker's certificate is not trusted: name the CA that signed it with brokerCaFile"
        : read.fix;
  return new BrokerError(read.code, read.message, read.retry, { cause: err, fix });
}
