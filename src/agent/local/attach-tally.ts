import type { Logger } from 'pino';
import type { Cancel, Clock } from '../../clock.js';

/** One line a minute at most: how often apps attached, however many times that was. */
export const TALLY_WINDOW_MS = 60_000;

/**
 * Says at info how many times apps attached in the last minute, once a minute while they do: each
 * attach logs at debug only, so an app attaching in a loop leaves one line a minute, not one each time.
 */
export class AttachTally {
  readonly #clock: Clock;
  readonly #log: Logger;
  #count = 0;
  #cancel: Cancel | undefined;

  constructor(clock: Clock, log: Logger) {
    this.#clock = clock;
    this.#log = log;
  }

  attached(): void {
    this.#count++;
    if (this.#cancel) return;
    // The first attach of a quiet minute is told at once; the rest of the minute in one line at its end.
    this.#log.info('an app attached');
    this.#count = 0;
    this.#cancel = this.#clock.setTimer(TALLY_WINDOW_MS, () => this.#flush());
  }

  stop(): void {
    this.#cancel?.();
    this.#cancel = undefined;
  }

  #flush(): void {
    this.#cancel = undefined;
    if (this.#count === 0) return;
    this.#log.info({ attaches: this.#count }, `apps attached ${this.#count} more times in the last minute`);
    this.#count = 0;
    this.#cancel = this.#clock.setTimer(TALLY_WINDOW_MS, () => this.#flush());
  }
}
