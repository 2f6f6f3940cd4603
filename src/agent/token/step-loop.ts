import type { Cancel, Clock } from '../../clock.js';

/**
 * Runs a step one at a time: a kick while it runs makes it run once more after it; `again()` from inside
 * the step asks the same; `wakeIn(ms)` kicks it later (one timer at a time). A step that throws goes to
 * `failed`, which schedules the retry (retryIn). Stopped, it runs nothing and schedules nothing.
 */
export class StepLoop {
  readonly #clock: Pick<Clock, 'setTimer'>;
  readonly #step: () => Promise<void>;
  readonly #failed: (err: unknown) => void;
  #cancelTimer: Cancel | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = false;

  constructor(clock: Pick<Clock, 'setTimer'>, step: () => Promise<void>, failed: (err: unknown) => void) {
    this.#clock = clock;
    this.#step = step;
    this.#failed = failed;
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  start(): void {
    this.#stopped = false;
    this.kick();
  }

  stop(): void {
    this.#stopped = true;
    this.#cancelTimer?.();
  }

  kick(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#cancelTimer?.();
    this.#running = this.#loop().finally(() => {
      this.#running = undefined;
    });
  }

  /** From inside the step: run once more when it returns. */
  again(): void {
    this.#again = true;
  }

  /** The next kick in `ms`, replacing the one pending. */
  wakeIn(ms: number): void {
    this.#cancelTimer?.();
    if (this.#stopped) return;
    // Unref'd (the clock's default): a waiting timer never keeps a command such as `botlink token` alive.
    this.#cancelTimer = this.#clock.setTimer(Math.max(0, ms), () => this.kick());
  }

  /** After a failure: nothing runs before the retry in `ms`, whatever asked for a run meanwhile. */
  retryIn(ms: number): void {
    this.#again = false;
    this.wakeIn(ms);
  }

  async #loop(): Promise<void> {
    do {
      this.#again = false;
      try {
        await this.#step();
      } catch (err) {
        this.#failed(err);
      }
    } while (this.#again && !this.#stopped);
  }
}
