/** Cancels a timer; calling it again, or after the timer fired, does nothing. */
export type Cancel = () => void;

export interface TimerOptions {
  /** Hold the event loop open until the timer fires (default: no, background work never keeps a command alive). */
  ref?: boolean;
}

/**
 * The only way time enters the agent. `wallNow` is the local wall clock (may be wrong: 1970 at boot,
 * stepped by NTP); `monoNow` never jumps and is what timers and ages are measured on. Timers fire on
 * monotonic deadlines, so a wall-clock step never moves them.
 */
export interface Clock {
  wallNow(): number;
  monoNow(): number;
  /** Calls `fn` once, `ms` from now (negative and NaN mean now). */
  setTimer(ms: number, fn: () => void, opts?: TimerOptions): Cancel;
  /** Resolves after `ms`, or as soon as `signal` aborts (never rejects). */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** What code that only reads the time needs (no timers). */
export type TimeReader = Pick<Clock, 'wallNow' | 'monoNow'>;

/** The only way chance enters the agent: a number in [0, 1). Injected so jitter can be pinned in tests. */
export type Random = () => number;

export const systemRandom: Random = Math.random;

/**
 * Monotonic milliseconds from an arbitrary origin. Not performance.now(): the first read of the
 * `performance` global loads perf_hooks and eight more of Node's modules, ~1 ms of every start.
 */
function monoMs(): number {
  const [s, ns] = process.hrtime();
  return s * 1000 + ns / 1e6;
}

/** Node fires a setTimeout longer than this at once; longer timers are chained. */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

function systemTimer(ms: number, fn: () => void, opts: TimerOptions = {}): Cancel {
  const deadline = monoMs() + (Number.isFinite(ms) && ms > 0 ? ms : 0);
  let handle: NodeJS.Timeout | undefined;
  const arm = (): void => {
    const left = deadline - monoMs();
    if (left > MAX_TIMEOUT_MS) {
      handle = setTimeout(arm, MAX_TIMEOUT_MS);
    } else {
      handle = setTimeout(
        () => {
          handle = undefined;
          fn();
        },
        Math.max(0, left),
      );
    }
    if (!opts.ref) handle.unref();
  };
  arm();
  return () => {
    if (handle !== undefined) clearTimeout(handle);
    handle = undefined;
  };
}

/** Resolves after `ms` on `clock`'s timers, or when `signal` aborts. */
export function sleepOn(clock: Pick<Clock, 'setTimer'>, ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      cancel();
      signal?.removeEventListener('abort', done);
      resolve();
    };
    // A sleep holds the loop: whoever awaits it expects to wake up.
    const cancel = clock.setTimer(ms, done, { ref: true });
    signal?.addEventListener('abort', done, { once: true });
  });
}

export const systemClock: Clock = Object.freeze({
  wallNow: () => Date.now(),
  monoNow: monoMs,
  setTimer: systemTimer,
  sleep: (ms: number, signal?: AbortSignal) => sleepOn({ setTimer: systemTimer }, ms, signal),
});

/** The system clock with another wall clock (a board at 1970, a clock days ahead); timers stay real. */
export function withWallClock(wallNow: () => number, base: Clock = systemClock): Clock {
  return { ...base, wallNow };
}
