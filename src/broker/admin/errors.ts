/** The admin API's refusals (DESIGN §3.8): `{code, msg}` with their status; nothing else leaves as an error. */

export const ADMIN_STATUS = {
  'bad-request': 400,
  unauthenticated: 401,
  forbidden: 403,
  'not-found': 404,
  'method-not-allowed': 405,
  conflict: 409,
  'too-large': 413,
  'rate-limited': 429,
  'cloud-refused': 502,
  unavailable: 503,
} as const satisfies Record<string, number>;

export type AdminErrorCode = keyof typeof ADMIN_STATUS;

export class AdminError extends Error {
  readonly code: AdminErrorCode;
  readonly status: number;
  /** Seconds, for 429 and 503. */
  readonly retryAfterS: number | undefined;

  constructor(code: AdminErrorCode, message: string, retryAfterS?: number) {
    super(message);
    this.name = 'AdminError';
    this.code = code;
    this.status = ADMIN_STATUS[code];
    this.retryAfterS = retryAfterS;
  }
}

export const badRequest = (msg: string): AdminError => new AdminError('bad-request', msg);
export const notFound = (msg: string): AdminError => new AdminError('not-found', msg);
