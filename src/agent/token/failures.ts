import type { Logger } from 'pino';
import { toBotlinkError, type BotlinkError, type ErrorCode } from '../../protocol/errors.js';
import type { Random } from '../../clock.js';
import { honourRetryAfter, resetBackoff, retryAfter, retryAfterMsOf, type BackoffSettings, type BackoffState } from './backoff.js';

/**
 * The failures of one job that retries until it succeeds (the token manager's renewals, provisioning):
 * the backoff, the last error and counts by code. A failure is logged once here, at warn for a retry
 * on the schedule and at error for one that needs a person, and says how long to wait (never less than
 * a Retry-After it carries).
 */
export class FailureRun {
  readonly #settings: BackoffSettings;
  readonly #random: Random;
  readonly #log: Logger;
  #backoff: BackoffState = resetBackoff();
  #last: BotlinkError | undefined;
  readonly #byCode: Record<string, number> = {};

  constructor(settings: BackoffSettings, random: Random, log: Logger) {
    this.#settings = settings;
    this.#random = random;
    this.#log = log;
  }

  /** Records a failure (anything thrown; not ours becomes `code`); returns it as ours, and the wait before the next try. */
  failed(err: unknown, code: ErrorCode, what = ''): { error: BotlinkError; waitMs: number } {
    const error = toBotlinkError(err, code);
    this.#byCode[error.code] = (this.#byCode[error.code] ?? 0) + 1;
    const next = retryAfter(error.retry, this.#backoff, this.#settings, this.#random());
    this.#backoff = next.state;
    this.#last = error;
    // A server that said when to come back (Retry-After) is not asked sooner; the draw is taken only then.
    const asked = retryAfterMsOf(error);
    const waitMs = asked === undefined ? next.delayMs : honourRetryAfter(next.delayMs, asked, this.#random());
    const level = error.retry === 'retry-backoff' ? 'warn' : 'error';
    const fields = { code: error.code, retry: error.retry, fix: error.fix, retryInMs: Math.round(waitMs) };
    this.#log[level](fields, what ? `${what}: ${error.message}` : error.message);
    return { error, waitMs };
  }

  /** The job succeeded: the next failure starts the schedule afresh. */
  succeeded(): void {
    this.#backoff = resetBackoff();
    this.#last = undefined;
  }

  /** The last failure since the last success. */
  get last(): BotlinkError | undefined {
    return this.#last;
  }

  /** Failures so far by code, successes between them notwithstanding. */
  get byCode(): Record<string, number> {
    return { ...this.#byCode };
  }
}
