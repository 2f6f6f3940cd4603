/** How a caller should react to a failure. */
export type RetryClass =
  | 'retry-soon'
  | 'retry-backoff'
  | 'needs-clock'
  | 'needs-config'
  | 'needs-provisioning'
  | 'fatal';

/** Base of every error botlink raises on purpose: a stable `code` string and a retry class. */
export class BotlinkError extends Error {
  readonly code: string;
  readonly retry: RetryClass;

  constructor(code: string, message: string, retry: RetryClass, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.retry = retry;
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

/** Any thrown value as a BotlinkError: ours pass through, anything else becomes `code`, retried with backoff. */
export function toBotlinkError(err: unknown, code: string): BotlinkError {
  if (err instanceof BotlinkError) return err;
  return new BotlinkError(code, err instanceof Error ? err.message : String(err), 'retry-backoff', { cause: err });
}
