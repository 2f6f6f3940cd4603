import type { Cancel, Clock } from '../../clock.js';

/** How often a paced write may run: `burst` at once, then one every `everyMs` while asked for more. */
export interface Pace {
  everyMs: number;
  burst: number;
}

/**
 * Runs `write` when asked: at once while the pace allows, else once, when it does, for every request made
 * meanwhile (the write reads the latest state itself). Over any stretch of T ms it runs at most
 * burst + T / everyMs times, and a request waits at most everyMs (a virtual-scheduling rate limiter).
 */
export class PacedWrite {
  readonly #clock: Pick<Clock, 'monoNow' | 'setTimer'>;
  readonly #write: () => void;
  readonly #pace: Pace;
  /** When the pace would be back to a full burst (monotonic ms): `everyMs` further on per write. */
  #full: number;
  #due: Cancel | undefined;

  constructor(clock: Pick<Clock, 'monoNow' | 'setTimer'>, pace: Pace, write: () => void) {
    this.#clock = clock;
    this.#pace = pace;
    this.#write = write;
    this.#full = clock.monoNow();
  }

  /** Something changed: written now, or by the one write already due. */
  request(): void {
    if (this.#due) return;
    const { everyMs, burst } = this.#pace;
    const now = this.#clock.monoNow();
    const waitMs = Math.max(this.#full, now) - now - (burst - 1) * everyMs;
    if (waitMs > 0) this.#due = this.#clock.setTimer(waitMs, () => this.flush());
    else this.flush();
  }

  /** Writes now, whatever is due or not (the last write at stop): a write due later is called off. */
  flush(): void {
    this.#due?.();
    this.#due = undefined;
    this.#full = Math.max(this.#full, this.#clock.monoNow()) + this.#pace.everyMs;
    this.#write();
  }
}
