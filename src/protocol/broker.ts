/**
 * The broker's wire contract (DESIGN §3.7), shared by the broker that answers, the device that asks and
 * the doctor that explains: every refusal code with its HTTP status, the time window, how long a nonce
 * is kept, and the body limit. A code missing from REFUSAL_STATUS does not exist; every table keyed by
 * RefusalCode must name each one, so the compiler finds a side that forgot a new code.
 */

export const REFUSAL_STATUS = {
  'bad-request': 400,
  'bad-signature': 401,
  'unknown-key': 401,
  replayed: 401,
  'clock-skew': 401,
  revoked: 403,
  rejected: 403,
  pending: 403,
  'bad-code': 403,
  'not-found': 404,
  timeout: 408,
  'device-exists': 409,
  'too-large': 413,
  'rate-limited': 429,
  'cloud-refused': 502,
  'cloud-unreachable': 503,
  'store-unavailable': 503,
} as const satisfies Record<string, number>;

export type RefusalCode = keyof typeof REFUSAL_STATUS;

/** Whether `code` is one of the contract's refusal codes (a string read from an answer). */
export function isRefusalCode(code: string): code is RefusalCode {
  return Object.hasOwn(REFUSAL_STATUS, code);
}

/** A signed request's ts must lie within this of the broker's time (`clock-skew` otherwise). */
export const BROKER_WINDOW_MS = 300_000;

/** A (keyId, nonce) pair is kept this long past its ts: longer than the window, so a replay inside it is always seen. */
export const NONCE_KEEP_MS = 360_000;

/** A signed request's body is at most this many bytes (`too-large` otherwise). */
export const BROKER_BODY_LIMIT = 16 * 1024;

/** The signed routes, each POST with a JSON body. */
export const BROKER_ROUTES = { enroll: '/v1/enroll', token: '/v1/token', rotate: '/v1/rotate', check: '/v1/check' } as const;

/** A code-less enrollment (or a check) of a key still waiting for an operator: 202 `{state: "pending", keyId}`, not a refusal. */
export const PENDING_STATUS = 202;

/** The Retry-After (s) of a pending answer when the broker names none: §3.7's 60 s. */
export const PENDING_RETRY_S = 60;

/**
 * The identity fields as the broker takes them (device and operator alike): anything else is a
 * `bad-request` naming the field. A device is (vendorId, deviceId) everywhere.
 */
export const IDENTITY_FIELDS = {
  deviceId: { pattern: /^[A-Za-z0-9._:-]{1,64}$/, says: '1 to 64 of A-Z a-z 0-9 . _ : -' },
  vendorId: { pattern: /^[A-Za-z0-9_-]{1,64}$/, says: '1 to 64 of A-Z a-z 0-9 _ -' },
  appId: { pattern: /^[A-Za-z0-9_-]{1,64}$/, says: '1 to 64 of A-Z a-z 0-9 _ -' },
  // 1 to 64 characters, none a control (Cc) or a format character (Cf: bidi, zero-width), no lone surrogate.
  name: { pattern: /^[^\p{Cc}\p{Cf}\p{Cs}]{1,64}$/u, says: '1 to 64 characters, none a control or format character' },
  version: { pattern: /^[A-Za-z0-9.+_-]{1,32}$/, says: '1 to 32 of A-Z a-z 0-9 . + _ -' },
} as const satisfies Record<string, { pattern: RegExp; says: string }>;

export type IdentityField = keyof typeof IDENTITY_FIELDS;

/** Whether `value` is a well-formed `field` (a string of the field's form). */
export function isIdentity(field: IdentityField, value: unknown): value is string {
  return typeof value === 'string' && IDENTITY_FIELDS[field].pattern.test(value);
}
