import type { Cancel, Clock } from '../../clock.js';

/** One line a minute at most, however often the event comes. */
export const TALLY_WINDOW_MS = 60_000;

/** Says `count` events: `first` is the one told at once after a quiet minute, the others a minute's rest. */
export type TallyLine = (count: number, first: boolean) => void;

/**
 * Counts an event that can come in a flood (an app attaching in a loop, connections refused at the cap)
 * and says it in one line a minute at most: the first of a quiet minute at once, the rest of each minute
 * in one line at its end. The disk never fills however often it comes.
 */
export class MinuteTally {
  readonly #clock: Clock;
  readonly #say: TallyLine;
  #untold = 0;
  #cancel: Cancel | undefined;

  constructor(clock: Clock, say: TallyLine) {
    this.#clock = clock;
    this.#say = say;
  }

  add(): void {
    this.#untold++;
    if (!this.#cancel) this.#tell(true);
  }

  stop(): void {
    this.#cancel?.();
    this.#cancel = undefined;
  }

  #tell(first: boolean): void {
    this.#cancel = undefined;
    if (this.#untold === 0) return;
    const count = this.#untold;
    this.#untold = 0;
    this.#say(count, first);
    this.#cancel = this.#clock.setTimer(TALLY_WINDOW_MS, () => this.#tell(false));
  }
}
