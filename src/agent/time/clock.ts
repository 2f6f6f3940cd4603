/**
 * The only way time enters the agent. `wallNow` is the local wall clock (may be wrong: 1970 at boot,
 * stepped by NTP); `monoNow` never jumps and is what timers and ages are measured on.
 */
export interface Clock {
  wallNow(): number;
  monoNow(): number;
}

export const systemClock: Clock = Object.freeze({
  wallNow: () => Date.now(),
  monoNow: () => performance.now(),
});
