import { describe, expect, it } from 'vitest';
import { BOT_INVALID_RETRY_MS, DISPLACED_BACKOFF, LINK_BACKOFF } from '../../../src/agent/link/options.js';
import {
  TOKEN_BACKOFF,
  backoffCeiling,
  backoffDelay,
  backoffFloor,
  honourRetryAfter,
  nextBackoff,
  RETRY_AFTER_SPREAD,
  retryAfterMsOf,
  resetBackoff,
  shouldReset,
  type BackoffSettings,
  type BackoffState,
  retriesOnSchedule,
  retryAfter,
  SLOW_RETRY_MS,
} from '../../../src/agent/token/backoff.js';
import { prng } from '../../helpers/fuzz.js';

const TOP = 0.999999;

describe('constants', () => {
  it('match the issue schedules', () => {
    expect(TOKEN_BACKOFF).toEqual({ baseMs: 1_000, capMs: 300_000 });
    expect(LINK_BACKOFF).toEqual({ baseMs: 500, capMs: 60_000 });
    expect(DISPLACED_BACKOFF).toEqual({ baseMs: 30_000, capMs: 1_800_000, jitter: 'equal' });
    expect(BOT_INVALID_RETRY_MS).toBe(300_000);
    expect(Object.isFrozen(LINK_BACKOFF)).toBe(true);
  });
});

describe('LINK_BACKOFF (full jitter, 0.5 s → 60 s)', () => {
  it.each([
    [0, 500],
    [1, 1_000],
    [2, 2_000],
    [3, 4_000],
    [4, 8_000],
    [5, 16_000],
    [6, 32_000],
    [7, 60_000],
    [8, 60_000],
    [20, 60_000],
  ])('attempt %i: ceiling %i, delay spans [0, ceiling)', (attempt, ceiling) => {
    expect(backoffCeiling(attempt, LINK_BACKOFF)).toBe(ceiling);
    expect(backoffFloor(attempt, LINK_BACKOFF)).toBe(0);
    expect(backoffDelay(attempt, LINK_BACKOFF, 0)).toBe(0);
    expect(backoffDelay(attempt, LINK_BACKOFF, 0.5)).toBe(ceiling / 2);
    const top = backoffDelay(attempt, LINK_BACKOFF, TOP);
    expect(top).toBeLessThan(ceiling);
    expect(top).toBeGreaterThanOrEqual(Math.floor(ceiling * TOP));
  });
});

describe('TOKEN_BACKOFF (full jitter, 1 s → 5 min)', () => {
  it.each([
    [0, 1_000],
    [1, 2_000],
    [5, 32_000],
    [8, 256_000],
    [9, 300_000],
    [30, 300_000],
  ])('attempt %i: ceiling %i', (attempt, ceiling) => {
    expect(backoffCeiling(attempt, TOKEN_BACKOFF)).toBe(ceiling);
    expect(backoffDelay(attempt, TOKEN_BACKOFF, TOP)).toBe(ceiling - 1);
  });
});

describe('DISPLACED_BACKOFF (equal jitter, at least 30 s, doubling, capped at 30 min)', () => {
  it.each([
    [0, 30_000, 60_000],
    [1, 60_000, 120_000],
    [2, 120_000, 240_000],
    [3, 240_000, 480_000],
    [4, 480_000, 960_000],
    [5, 900_000, 1_800_000],
    [6, 900_000, 1_800_000],
    [100, 900_000, 1_800_000],
  ])('attempt %i: delays in [%i, %i)', (attempt, floor, ceiling) => {
    expect(backoffFloor(attempt, DISPLACED_BACKOFF)).toBe(floor);
    expect(backoffCeiling(attempt, DISPLACED_BACKOFF)).toBe(ceiling);
    expect(backoffDelay(attempt, DISPLACED_BACKOFF, 0)).toBe(floor);
    const top = backoffDelay(attempt, DISPLACED_BACKOFF, TOP);
    expect(top).toBeLessThan(ceiling);
    expect(top).toBeGreaterThan(ceiling - 2);
  });

  it('never waits less than the base nor more than 30 min, and the shortest wait doubles', () => {
    let state = resetBackoff();
    const shortest: number[] = [];
    for (let i = 0; i < 12; i++) {
      const step = nextBackoff(state, DISPLACED_BACKOFF, 0);
      expect(step.delayMs).toBeGreaterThanOrEqual(DISPLACED_BACKOFF.baseMs);
      expect(nextBackoff(state, DISPLACED_BACKOFF, TOP).delayMs).toBeLessThan(DISPLACED_BACKOFF.capMs);
      shortest.push(step.delayMs);
      state = step.state;
    }
    expect(shortest.slice(0, 5)).toEqual([30_000, 60_000, 120_000, 240_000, 480_000]);
    expect(new Set(shortest.slice(5))).toEqual(new Set([900_000]));
  });
});

describe('guards', () => {
  it.each([
    ['huge attempt', 1e9],
    ['max safe integer', Number.MAX_SAFE_INTEGER],
    ['infinite attempt', Infinity],
  ])('%s stays at the cap', (_name, attempt) => {
    expect(backoffCeiling(attempt, LINK_BACKOFF)).toBe(60_000);
    expect(backoffDelay(attempt, LINK_BACKOFF, TOP)).toBe(59_999);
    expect(backoffDelay(attempt, DISPLACED_BACKOFF, 0)).toBe(900_000);
  });

  it.each([
    ['negative attempt', -3],
    ['NaN attempt', NaN],
    ['negative infinite attempt', -Infinity],
  ])('%s counts as attempt 0', (_name, attempt) => {
    expect(backoffCeiling(attempt, LINK_BACKOFF)).toBe(500);
  });

  it('a fractional attempt rounds down', () => {
    expect(backoffCeiling(2.9, LINK_BACKOFF)).toBe(2_000);
  });

  it.each([
    ['negative', -0.5, 0],
    ['NaN', NaN, 0],
    ['exactly 1', 1, 499],
    ['above 1', 7, 499],
    ['infinite', Infinity, 499],
    ['negative infinite', -Infinity, 0],
  ])('a %s random is clamped into [0, 1)', (_name, random, delay) => {
    expect(backoffDelay(0, LINK_BACKOFF, random)).toBe(delay);
  });

  it.each<[string, BackoffSettings]>([
    ['zero base', { baseMs: 0, capMs: 1_000 }],
    ['negative base', { baseMs: -5, capMs: 1_000 }],
    ['NaN base', { baseMs: NaN, capMs: 1_000 }],
    ['infinite base', { baseMs: Infinity, capMs: 1_000 }],
    ['zero cap', { baseMs: 100, capMs: 0 }],
    ['NaN cap', { baseMs: 100, capMs: NaN }],
    ['negative cap', { baseMs: 100, capMs: -1 }],
  ])('%s gives 0, never NaN or negative', (_name, settings) => {
    for (const attempt of [0, 1, 5000, Infinity]) {
      expect(backoffCeiling(attempt, settings)).toBe(0);
      expect(backoffDelay(attempt, settings, TOP)).toBe(0);
      expect(backoffDelay(attempt, { ...settings, jitter: 'equal' }, TOP)).toBe(0);
    }
  });

  it('fractional settings still give whole milliseconds', () => {
    const settings = { baseMs: 333.7, capMs: 10_000.9 };
    expect(backoffCeiling(0, settings)).toBe(333);
    expect(backoffCeiling(10, settings)).toBe(10_000);
    expect(Number.isInteger(backoffDelay(1, settings, 0.123456))).toBe(true);
  });
});

describe('nextBackoff / resetBackoff', () => {
  it('walks the schedule one attempt at a time without mutating the state', () => {
    const start = resetBackoff();
    expect(start).toEqual({ attempt: 0 });
    const first = nextBackoff(start, LINK_BACKOFF, TOP);
    expect(first.delayMs).toBe(499);
    expect(first.state).toEqual({ attempt: 1 });
    expect(start).toEqual({ attempt: 0 });
    expect(Object.isFrozen(first.state)).toBe(true);
    const second = nextBackoff(first.state, LINK_BACKOFF, TOP);
    expect(second.delayMs).toBe(999);
    expect(second.state).toEqual({ attempt: 2 });
  });

  it('reaches the cap and stays there', () => {
    let state: BackoffState = resetBackoff();
    const ceilings: number[] = [];
    for (let i = 0; i < 10; i++) {
      const step = nextBackoff(state, LINK_BACKOFF, TOP);
      ceilings.push(step.delayMs + 1);
      state = step.state;
    }
    expect(ceilings).toEqual([500, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000]);
  });

  it('reset starts the schedule over', () => {
    let state: BackoffState = resetBackoff();
    for (let i = 0; i < 6; i++) state = nextBackoff(state, LINK_BACKOFF, 0.5).state;
    expect(nextBackoff(state, LINK_BACKOFF, TOP).delayMs).toBe(31_999);
    state = resetBackoff();
    expect(nextBackoff(state, LINK_BACKOFF, TOP).delayMs).toBe(499);
  });

  it('a huge or corrupt attempt counter neither overflows nor yields NaN', () => {
    for (const attempt of [Number.MAX_SAFE_INTEGER, Infinity, NaN, -1]) {
      const step = nextBackoff({ attempt }, LINK_BACKOFF, 0.5);
      expect(Number.isFinite(step.delayMs)).toBe(true);
      expect(step.delayMs).toBeGreaterThanOrEqual(0);
      expect(Number.isFinite(step.state.attempt)).toBe(true);
      expect(step.state.attempt).toBeGreaterThan(0);
    }
    let state: BackoffState = { attempt: Number.MAX_SAFE_INTEGER };
    for (let i = 0; i < 3; i++) state = nextBackoff(state, LINK_BACKOFF, 0).state;
    expect(backoffCeiling(state.attempt, LINK_BACKOFF)).toBe(60_000);
  });
});

describe('shouldReset', () => {
  it.each([
    [0, undefined, false],
    [59_999, undefined, false],
    [60_000, undefined, true],
    [3_600_000, undefined, true],
    [NaN, undefined, false],
    [-1, undefined, false],
    [4_999, 5_000, false],
    [5_000, 5_000, true],
  ])('up %s ms with threshold %s → %s', (upMs, threshold, expected) => {
    expect(shouldReset(upMs, threshold)).toBe(expected);
  });
});

describe('property: every delay lies in [floor, ceiling)', () => {
  it.each<[string, BackoffSettings]>([
    ['LINK_BACKOFF', LINK_BACKOFF],
    ['TOKEN_BACKOFF', TOKEN_BACKOFF],
    ['DISPLACED_BACKOFF', DISPLACED_BACKOFF],
    ['odd settings', { baseMs: 7.3, capMs: 12_345.6 }],
    ['odd equal settings', { baseMs: 3, capMs: 7, jitter: 'equal' }],
  ])('%s over 20 000 seeded draws', (_name, settings) => {
    const random = prng(0xb07);
    const outside: string[] = [];
    for (let i = 0; i < 20_000; i++) {
      const attempt = Math.floor(random() * 40);
      const draw = random();
      const floor = backoffFloor(attempt, settings);
      const ceiling = backoffCeiling(attempt, settings);
      const delay = backoffDelay(attempt, settings, draw);
      if (!Number.isInteger(delay) || delay < floor || delay >= ceiling || ceiling > settings.capMs) {
        outside.push(`attempt ${attempt} random ${draw}: ${delay} not in [${floor}, ${ceiling})`);
      }
    }
    expect(outside).toEqual([]);
  });
});

describe('retryAfter: which failures wait on the schedule and which wait slowly', () => {
  const settings = { baseMs: 1000, capMs: 300_000 };
  it.each([
    ['retry-soon', true],
    ['retry-backoff', true],
    ['needs-clock', true],
    ['needs-config', false],
    ['needs-provisioning', false],
    ['fatal', false],
  ] as const)('%s → on schedule: %s', (retry, onSchedule) => {
    expect(retriesOnSchedule(retry)).toBe(onSchedule);
    const state = { attempt: 3 };
    const next = retryAfter(retry, state, settings, 0.5);
    if (onSchedule) {
      expect(next).toEqual(nextBackoff(state, settings, 0.5));
    } else {
      expect(next.delayMs).toBe(SLOW_RETRY_MS);
      expect(next.state).toBe(state);
    }
  });
  it('waits 5 minutes for what a retry cannot fix soon', () => {
    expect(SLOW_RETRY_MS).toBe(300_000);
  });
});

describe('honourRetryAfter: a server that said when to come back is not asked sooner', () => {
  it.each([
    ['no Retry-After: the schedule', 700, undefined, 0.9, 700],
    ['Retry-After longer than the schedule, no jitter drawn', 700, 10_000, 0, 10_000],
    ['stretched by the draw, up to half again', 700, 10_000, 0.5, 12_500],
    ['the draw just under 1: just under 15 s', 700, 10_000, 0.999, 14_995],
    ['the schedule already longer', 60_000, 10_000, 0.999, 60_000],
    ['Retry-After 0: the schedule', 700, 0, 0.9, 700],
    ['a NaN or negative hint is no hint', 700, Number.NaN, 0.9, 700],
    ['a negative hint', 700, -5, 0.9, 700],
    ['an infinite hint', 700, Number.POSITIVE_INFINITY, 0.9, 700],
    ['a draw outside [0, 1) is clamped', 700, 10_000, 7, 15_000],
  ])('%s', (_, scheduledMs, retryAfterMs, random, want) => {
    expect(honourRetryAfter(scheduledMs, retryAfterMs, random)).toBe(want);
  });

  it('spreads a fleet told the same wait over [wait, 1.5 × wait]', () => {
    const next = prng(7);
    const waits = Array.from({ length: 1000 }, () => honourRetryAfter(0, 10_000, next()));
    expect(Math.min(...waits)).toBeGreaterThanOrEqual(10_000);
    expect(Math.max(...waits)).toBeLessThanOrEqual(10_000 * (1 + RETRY_AFTER_SPREAD));
    expect(new Set(waits.map((w) => Math.floor(w / 1000))).size).toBe(5);
  });

  it('reads the hint a failure carries, and nothing else', () => {
    expect(retryAfterMsOf({ retryAfterMs: 3000 })).toBe(3000);
    expect(retryAfterMsOf({ retryAfterMs: '3000' })).toBeUndefined();
    expect(retryAfterMsOf(new Error('x'))).toBeUndefined();
    expect(retryAfterMsOf(undefined)).toBeUndefined();
  });
});
