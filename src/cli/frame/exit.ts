import { messageOf } from '../../protocol/errors.js';

/** sysexits.h codes used by every command (DESIGN §3.1). */
export const Exit = {
  OK: 0,
  FAILURE: 1,
  USAGE: 64,
  DATAERR: 65,
  UNAVAILABLE: 69,
  TEMPFAIL: 75,
  NOPERM: 77,
  CONFIG: 78,
} as const;

/** A command-line mistake: printed with the command's usage, exit 64. */
export class UsageError extends Error {}

/** In which sense a command failed, when the command knows it better than the error does (failures.ts gives each its exit code). */
export type FailureKind = 'failed' | 'data' | 'unavailable' | 'later' | 'denied' | 'config';

/**
 * A failure in the command's own words: its message and fix, printed after the command's label, and
 * its kind, else that of the error it wraps (`cause`).
 */
export class Failure extends Error {
  readonly fix: string | undefined;
  readonly kind: FailureKind | undefined;

  constructor(message: string, options: { fix?: string | undefined; kind?: FailureKind; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.fix = options.fix;
    this.kind = options.kind;
  }
}

/**
 * `botlink run`'s daemon did not start, for the reason its `cause` gives. Its exit code is the
 * daemon's own (failures.ts): 78 for its config, 69 when another daemon runs, else 1.
 */
export class DaemonNotStarted extends Error {
  constructor(cause: unknown) {
    super(messageOf(cause), { cause });
  }
}
