/** Every way the broker turns a request down (DESIGN §3.7): an HTTP status, a string code, a message. */

export type RefusalCode =
  | 'bad-request'
  | 'bad-signature'
  | 'unknown-key'
  | 'replayed'
  | 'clock-skew'
  | 'revoked'
  | 'bad-code'
  | 'device-exists'
  | 'too-large'
  | 'rate-limited'
  | 'cloud-refused'
  | 'cloud-unreachable'
  | 'not-found';

const STATUS: Record<RefusalCode, number> = {
  'bad-request': 400,
  'bad-signature': 401,
  'unknown-key': 401,
  replayed: 401,
  'clock-skew': 401,
  revoked: 403,
  'bad-code': 403,
  'device-exists': 409,
  'too-large': 413,
  'rate-limited': 429,
  'cloud-refused': 502,
  'cloud-unreachable': 503,
  'not-found': 404,
};

export const REFUSAL_CODES = Object.keys(STATUS) as RefusalCode[];

/** A refusal the client is told about; `extra` joins `{code, msg}` in the body (serverTime, cloudCode). */
export class Refusal extends Error {
  readonly code: RefusalCode;
  readonly status: number;
  readonly extra: Record<string, number>;
  /** Seconds, for 429 and 503. */
  readonly retryAfterS: number | undefined;

  constructor(code: RefusalCode, message: string, opts: { extra?: Record<string, number>; retryAfterS?: number } = {}) {
    super(message);
    this.name = 'Refusal';
    this.code = code;
    this.status = STATUS[code];
    this.extra = opts.extra ?? {};
    this.retryAfterS = opts.retryAfterS;
  }
}
