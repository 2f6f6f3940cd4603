import { describe, expect, it } from 'vitest';
import {
  APP_RECONNECT_WINDOW_MS,
  appReconnectMade,
  paceAppReconnect,
  withdrawAppReconnect,
  type AppPacingMemory,
} from '../../../src/agent/link/app-pacing.js';
import { S } from '../../helpers/time.js';

const T = 9_000_000;
/** Each delay drawn at its window's ceiling − 1, so the windows tell apart. */
const HIGH = 1 - Number.EPSILON;
/** Not the built-in backoff (0.5 s → 60 s): a pacing that read the wrong one shows. */
const PACING = { backoff: { baseMs: 100, capMs: 1_600 }, appReconnectsPerMinute: 6 };

/** The replacements made at `made`, on backoff attempt `attempt`; frozen: the pacing never writes into it. */
const memory = (made: number[], attempt = 0): AppPacingMemory => Object.freeze({ backoff: { attempt }, appReconnects: made });
/** Six replacements made between 49 and 44 s ago. */
const SIX = [1, 2, 3, 4, 5, 6].map((i) => T - 50 * S + i * S);
const PACED = (n: number) =>
  `an app asked for other connection parameters: reconnects apps cause are paced (${n} in the last minute, at most 6)`;

describe('paceAppReconnect: when a replacement an app causes is made (DESIGN §3.5)', () => {
  it('at once when no app caused one in the last minute, and recorded when made', () => {
    const p = paceAppReconnect('app-params', memory([T - APP_RECONNECT_WINDOW_MS]), T, PACING, HIGH);
    expect(p).toEqual({ delayMs: 0, reason: 'an app asked for other connection parameters', memory: memory([]) });
    expect(appReconnectMade(p.memory, T, PACING).appReconnects).toEqual([T]);
  });

  it('then on the link schedule', () => {
    const p = paceAppReconnect('app-reattach', memory([T - S]), T, PACING, HIGH);
    expect(p.delayMs).toBe(99);
    expect(p.reason).toBe('an app needs a session of its own: reconnects apps cause are paced (1 in the last minute, at most 6)');
    // Not made yet: only when the shell makes it, at the end of the wait.
    expect(p.memory).toEqual(memory([T - S], 1));
  });

  it('never lets more than the cap happen in any minute, whatever the schedule draws', () => {
    const p = paceAppReconnect('app-params', memory(SIX), T, PACING, 0);
    // The oldest of the six leaves the window at T + 11 s.
    expect(p.delayMs).toBe(11 * S);
    expect(p.reason).toBe(PACED(6));
    expect(p.memory.appReconnects).toEqual(SIX);
  });

  it('any number of app requests in a row make at most 6 reconnects a minute', () => {
    let m = memory([]);
    const due: number[] = [];
    for (let i = 0; i < 100; i++) {
      const p = paceAppReconnect('app-params', m, T + i * 100, PACING, 0);
      due.push(T + i * 100 + p.delayMs);
      m = appReconnectMade(p.memory, due.at(-1)!, PACING);
    }
    for (const t of due) expect(due.filter((u) => u >= t && u < t + APP_RECONNECT_WINDOW_MS).length).toBeLessThanOrEqual(6);
  });

  it('a paced reconnect withdrawn (the app left first) leaves no trace', () => {
    const before = memory([T - S], 2);
    const p = paceAppReconnect('app-params', before, T, PACING, HIGH);
    expect(withdrawAppReconnect(p.memory, before.backoff)).toEqual(before);
  });

  it('a reconnect withdrawn while it waited for the cap leaves the six made counted: the next waits for the oldest too', () => {
    // CI's storm: the waiting one once took the oldest's place in the memory; withdrawn, it left five, and a seventh went.
    const before = memory(SIX, 3);
    const capped = paceAppReconnect('app-params', before, T, PACING, 0);
    expect(capped.delayMs).toBe(11 * S);
    const withdrawn = withdrawAppReconnect(capped.memory, before.backoff);
    expect(withdrawn.appReconnects).toEqual(SIX);
    expect(paceAppReconnect('app-params', withdrawn, T + S, PACING, 0).delayMs).toBe(10 * S);
  });

  it('keeps the rest of the memory it is given as it was', () => {
    const link = { ...memory([T - S]), displacements: [T - 2 * S] };
    const p = paceAppReconnect('app-params', link, T, PACING, HIGH);
    expect(appReconnectMade(withdrawAppReconnect(p.memory, link.backoff), T, PACING).displacements).toEqual([T - 2 * S]);
  });
});

describe('appReconnectMade: the replacements the cap counts', () => {
  it.each([
    { made: [], want: [T], why: 'the first' },
    { made: [T - S], want: [T - S, T], why: 'beside one of the minute' },
    { made: [T - APP_RECONNECT_WINDOW_MS, T - S], want: [T - S, T], why: 'one a minute old has left the window' },
    { made: [T - APP_RECONNECT_WINDOW_MS + 1], want: [T - APP_RECONNECT_WINDOW_MS + 1, T], why: 'a millisecond younger has not' },
    { made: [6, 5, 4, 3, 2, 1].map((i) => T - i * S), want: [5, 4, 3, 2, 1, 0].map((i) => T - i * S), why: 'the last six only' },
  ])('$why', ({ made, want }) => {
    expect(appReconnectMade(memory(made), T, PACING).appReconnects).toEqual(want);
  });
});
