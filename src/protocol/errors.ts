/** How a caller should react to a failure. */
export type RetryClass = 'retry-soon' | 'retry-backoff' | 'needs-clock' | 'needs-config' | 'needs-provisioning' | 'fatal';

/** Every code botlink raises or logs, in one closed list: a code used anywhere else does not compile. */
export const ERROR_CODES = [
  // configuration and files the agent needs
  'ERR_CONFIG',
  'ERR_SECRET_FILE',
  'ERR_LOG_FILE',
  // the cloud token service (ERR_CLOUD_<code>: a getToken refusal, below)
  'ERR_CLOCK_UNTRUSTED',
  'ERR_REFRESH_REFUSED',
  'ERR_REGISTER_REFUSED',
  'ERR_WIRE_SHAPE',
  'ERR_BAD_RESPONSE',
  'ERR_RESPONSE_TOO_LARGE',
  'ERR_HTTP_STATUS',
  'ERR_HTTP_REDIRECT',
  'ERR_DNS',
  'ERR_NETWORK',
  'ERR_TIMEOUT',
  'ERR_DEADLINE',
  // the token store and its locks
  'ERR_STORE_VERSION',
  'ERR_STORE_ACCESS',
  'ERR_STORE_RECOVERY',
  'ERR_STORE_CORRUPT',
  'ERR_STORE_KEY',
  'ERR_STORE_WRITE',
  'ERR_STORE_CHANGED',
  'ERR_LOCK_UNUSABLE',
  // the daemon and its parts
  'ERR_ALREADY_RUNNING',
  'ERR_NO_IDENTITY',
  'ERR_NO_DEVICE_ID',
  'ERR_PROVISION',
  'ERR_STOPPED',
  'ERR_INTERNAL',
  // broker mode (DESIGN §3.7): the device's key, and each way the broker refuses it
  'ERR_DEVICE_KEY',
  'ERR_BROKER_BAD_REQUEST',
  'ERR_BROKER_BAD_SIGNATURE',
  'ERR_BROKER_UNKNOWN_KEY',
  'ERR_BROKER_REPLAYED',
  'ERR_BROKER_CLOCK_SKEW',
  'ERR_BROKER_REVOKED',
  'ERR_BROKER_REJECTED',
  'ERR_BROKER_PENDING',
  'ERR_BROKER_BAD_CODE',
  'ERR_BROKER_DEVICE_EXISTS',
  'ERR_BROKER_TOO_LARGE',
  'ERR_BROKER_RATE_LIMITED',
  'ERR_BROKER_CLOUD_REFUSED',
  'ERR_BROKER_CLOUD_UNREACHABLE',
  'ERR_BROKER_STORE_UNAVAILABLE',
  'ERR_BROKER_BOT_MISMATCH',
  // the reference service
  'ERR_SEED',
  'ERR_SERVICE_DB',
] as const;

/** A getToken refusal carries the service's own code (DESIGN §1.2), whichever it is. */
export type CloudRefusalCode = `ERR_CLOUD_${number}`;

export type ErrorCode = (typeof ERROR_CODES)[number] | CloudRefusalCode;

export interface BotlinkErrorOptions {
  cause?: unknown;
  /** What a person can do about it, as one sentence ("run `chmod 600 /etc/botlink/secret-key`"). */
  fix?: string | undefined;
}

/**
 * Base of every error botlink raises on purpose: a stable `code`, a retry class, and where a person
 * can act, a `fix` kept apart from the message, so each printer shows the two its own way.
 */
export class BotlinkError extends Error {
  readonly code: ErrorCode;
  readonly retry: RetryClass;
  readonly fix: string | undefined;

  constructor(code: ErrorCode, message: string, retry: RetryClass, options?: BotlinkErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.retry = retry;
    this.fix = options?.fix;
  }
}

/** A value on the wire did not have the shape the protocol requires. */
export class WireError extends BotlinkError {
  /** Dotted path of the offending field, or '' for the whole value. */
  readonly field: string;

  constructor(field: string, message: string) {
    super('ERR_WIRE_SHAPE', field ? `${field}: ${message}` : message, 'retry-backoff');
    this.field = field;
  }
}

/** The message of anything thrown: an Error's message, else the value as a string. */
export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The fix a botlink error carries; nothing for anything else. */
export function fixOf(err: unknown): string | undefined {
  return err instanceof BotlinkError ? err.fix : undefined;
}

/** One line for a log message, a status field or sd_notify: what went wrong, then what to do. */
export function withFix(message: string, fix: string | undefined): string {
  return fix ? `${message} — fix: ${fix}` : message;
}

/** `withFix` for anything thrown. */
export function describeError(err: unknown): string {
  return withFix(messageOf(err), fixOf(err));
}

/** Any thrown value as a BotlinkError: ours pass through, anything else becomes `code`, retried with backoff. */
export function toBotlinkError(err: unknown, code: ErrorCode): BotlinkError {
  if (err instanceof BotlinkError) return err;
  return new BotlinkError(code, messageOf(err), 'retry-backoff', { cause: err });
}
