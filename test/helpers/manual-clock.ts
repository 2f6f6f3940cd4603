import { sleepOn, type Cancel, type Clock } from '../../src/clock.js';

const MAX_TIMERS_PER_ADVANCE = 10_000;

interface Pending {
  at: number;
  seq: number;
  fn: () => void;
}

/**
 * A Clock that moves only when told: `advance(ms)` fires every timer due in that span, in deadline
 * order (timers set while advancing fire too when they fall inside the span), letting promise
 * callbacks run between timers so async code scheduled by one timer sees the next.
 */
export class ManualClock implements Clock {
  #mono: number;
  #wall: number;
  #seq = 0;
  #timers: Pending[] = [];

  constructor(opts: { wall?: number; mono?: number } = {}) {
    this.#wall = opts.wall ?? Date.UTC(2026, 10, 22, 12, 0, 0);
    this.#mono = opts.mono ?? 1_000;
  }

  wallNow(): number {
    return this.#wall;
  }

  monoNow(): number {
    return this.#mono;
  }

  setTimer(ms: number, fn: () => void): Cancel {
    const timer: Pending = { at: this.#mono + (Number.isFinite(ms) && ms > 0 ? ms : 0), seq: this.#seq++, fn };
    this.#timers.push(timer);
    return () => {
      this.#timers = this.#timers.filter((t) => t !== timer);
    };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepOn(this, ms, signal);
  }

  /** Steps the wall clock alone (NTP stepping it, a user setting the date); timers do not move. */
  stepWall(ms: number): void {
    this.#wall += ms;
  }

  /** Timers not fired yet, as ms from now, soonest first. */
  pending(): number[] {
    return this.#sorted().map((t) => t.at - this.#mono);
  }

  /** Moves both clocks by `ms`, firing due timers on the way; resolves once their promise work has settled. */
  async advance(ms: number): Promise<void> {
    const until = this.#mono + ms;
    await settle();
    for (let fired = 0; ; fired++) {
      const next = this.#sorted()[0];
      if (!next || next.at > until) break;
      // A chain of timers that re-arm at once would spin here forever: fail the test instead.
      if (fired >= MAX_TIMERS_PER_ADVANCE)
        throw new Error(`ManualClock: over ${MAX_TIMERS_PER_ADVANCE} timers fired in one advance(${ms}): a timer re-arms at 0 ms?`);
      this.#timers = this.#timers.filter((t) => t !== next);
      this.#wall += next.at - this.#mono;
      this.#mono = next.at;
      next.fn();
      await settle();
    }
    this.#wall += until - this.#mono;
    this.#mono = until;
    await settle();
  }

  /** Advances to the next timer (if any) and fires it; returns how far it moved. */
  async next(): Promise<number> {
    const next = this.#sorted()[0];
    if (!next) return 0;
    const step = next.at - this.#mono;
    await this.advance(step);
    return step;
  }

  #sorted(): Pending[] {
    return [...this.#timers].sort((a, b) => a.at - b.at || a.seq - b.seq);
  }
}

/** Lets queued promise callbacks (and the callbacks they queue) run: a few macrotask turns. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
