/**
 * Retry delays as pure arithmetic: the caller passes the random draw, so every schedule is testable
 * and nothing here reads a clock or a random source.
 */

import type { RetryClass } from '../../protocol/errors.js';

export interface BackoffSettings {
  readonly baseMs: number;
  readonly capMs: number;
  /**
   * `full` (default): uniform in [0, ceiling), the best spread for a fleet reconnecting at once.
   * `equal`: half the ceiling fixed, half random, so every wait is at least `baseMs`
   * (when capMs ≥ 2·baseMs).
   */
  readonly jitter?: 'full' | 'equal';
}

/** A small immutable tracker: the attempt number the next delay is drawn for. */
export interface BackoffState {
  readonly attempt: number;
}

/** Past this exponent base·2^attempt has long exceeded any cap; clamping keeps 0·2^n from being NaN. */
const MAX_EXPONENT = 1023;

const DEFAULT_RESET_AFTER_MS = 60_000;

/** The largest double below 1, so a random draw of exactly 1 still lands inside [0, 1). */
const BELOW_ONE = 1 - Number.EPSILON / 2;

function nonNegative(value: number): number {
  return Number.isFinite(value) && value > 0 ? value : 0;
}

function attemptIndex(attempt: number): number {
  if (Number.isNaN(attempt) || attempt <= 0) return 0;
  return Math.min(Math.floor(attempt), MAX_EXPONENT);
}

function unitRandom(random: number): number {
  if (Number.isNaN(random) || random <= 0) return 0;
  return Math.min(random, BELOW_ONE);
}

/** Upper bound for that attempt (what the jitter spreads over), whole milliseconds. */
export function backoffCeiling(attempt: number, settings: BackoffSettings): number {
  const cap = nonNegative(settings.capMs);
  // Equal jitter doubles the ceiling so its fixed half, the shortest wait, starts at the base.
  const exponent = Math.min(attemptIndex(attempt) + (settings.jitter === 'equal' ? 1 : 0), MAX_EXPONENT);
  return Math.floor(Math.min(cap, nonNegative(settings.baseMs) * 2 ** exponent));
}

/** Lower bound for that attempt: 0 for full jitter, half the ceiling for equal jitter. */
export function backoffFloor(attempt: number, settings: BackoffSettings): number {
  return settings.jitter === 'equal' ? Math.floor(backoffCeiling(attempt, settings) / 2) : 0;
}

/**
 * A delay in [floor, ceiling) for that attempt, whole milliseconds; `random` in [0, 1) (clamped).
 * attempt counts from 0. A ceiling of 0 gives 0.
 */
export function backoffDelay(attempt: number, settings: BackoffSettings, random: number): number {
  const ceiling = backoffCeiling(attempt, settings);
  if (ceiling < 1) return 0;
  const floor = backoffFloor(attempt, settings);
  const delay = floor + Math.floor(unitRandom(random) * (ceiling - floor));
  // Rounding of r·span can land on the span itself; the bound is exclusive.
  return Math.min(delay, ceiling - 1);
}

export function resetBackoff(): BackoffState {
  return Object.freeze({ attempt: 0 });
}

/** The delay for the current attempt and the state for the one after. */
export function nextBackoff(state: BackoffState, settings: BackoffSettings, random: number): { delayMs: number; state: BackoffState } {
  const attempt = attemptIndex(state.attempt);
  return {
    delayMs: backoffDelay(attempt, settings, random),
    // Held at MAX_EXPONENT: beyond it every delay is already capped, and the counter cannot overflow.
    state: Object.freeze({ attempt: Math.min(attempt + 1, MAX_EXPONENT) }),
  };
}

/** Failures a retry cannot fix soon (wrong secret, unknown identity, refused parameters) wait this long. */
export const SLOW_RETRY_MS = 5 * 60_000;

/** Whether failures of this class are retried on the backoff schedule rather than slowly. */
export function retriesOnSchedule(retry: RetryClass): boolean {
  return retry === 'retry-backoff' || retry === 'retry-soon' || retry === 'needs-clock';
}

/** The wait before retrying a failure: the backoff schedule for transient classes, SLOW_RETRY_MS for the rest. */
export function retryAfter(
  retry: RetryClass,
  state: BackoffState,
  settings: BackoffSettings,
  random: number,
): { delayMs: number; state: BackoffState } {
  return retriesOnSchedule(retry) ? nextBackoff(state, settings, random) : { delayMs: SLOW_RETRY_MS, state };
}

/** A Retry-After is stretched by up to this fraction, so a fleet told the same wait does not come back at one instant. */
export const RETRY_AFTER_SPREAD = 0.5;

/**
 * The wait before a retry that the server asked to come no sooner than `retryAfterMs` (an HTTP
 * Retry-After): the longer of the schedule's wait and the asked one stretched by the jitter draw.
 */
export function honourRetryAfter(scheduledMs: number, retryAfterMs: number | undefined, random: number): number {
  if (retryAfterMs === undefined || !(retryAfterMs >= 0) || !Number.isFinite(retryAfterMs)) return scheduledMs;
  return Math.max(scheduledMs, Math.floor(retryAfterMs * (1 + RETRY_AFTER_SPREAD * unitRandom(random))));
}

/** What a failure may say of its next try: an HTTP Retry-After, in ms (the broker's errors carry one). */
export function retryAfterMsOf(err: unknown): number | undefined {
  const ms = typeof err === 'object' && err !== null ? (err as { retryAfterMs?: unknown }).retryAfterMs : undefined;
  return typeof ms === 'number' ? ms : undefined;
}

/** Whether an up-time of `upMs` earns a reset of the streak (default threshold 60 s). */
export function shouldReset(upMs: number, thresholdMs: number = DEFAULT_RESET_AFTER_MS): boolean {
  return upMs >= thresholdMs;
}

/** Token service failures (1006, 5xx, network): 1 s → 5 min, full jitter. */
export const TOKEN_BACKOFF: BackoffSettings = Object.freeze({ baseMs: 1_000, capMs: 300_000 });
