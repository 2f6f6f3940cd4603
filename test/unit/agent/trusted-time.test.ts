import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { ServerTime } from '../../../src/agent/time/servertime.js';
import type { TimeSyncResult, Verdict } from '../../../src/agent/time/timesync.js';
import { SAMPLE_RETRY_MS, TrustedTime, VERDICT_TTL_MS } from '../../../src/agent/time/trusted-time.js';
import { ManualClock } from '../../helpers/manual-clock.js';
import { MIN } from '../../helpers/time.js';

/** The server's clock runs this far ahead of the local wall clock in every test. */
const AHEAD_MS = 10 * MIN;

const VERDICTS: Record<Verdict, TimeSyncResult> = {
  synced: { verdict: 'synced', source: 'chrony', detail: 'chronyc: Normal' },
  unsynced: { verdict: 'unsynced', source: 'floor', detail: 'before the floor' },
  unknown: { verdict: 'unknown', source: 'none', detail: 'no source' },
};

/** A TrustedTime on a manual clock whose verdicts and server samples the test controls and counts. */
function setup(verdict: Verdict) {
  const clock = new ManualClock();
  const serverTime = new ServerTime(clock);
  const state = {
    verdict,
    checks: 0,
    firsts: [] as boolean[],
    samples: 0,
    sampled: 0,
    down: false,
    hold: undefined as Promise<void> | undefined,
  };
  const time = new TrustedTime({
    clock,
    serverTime,
    checkTimeSync: async (first) => {
      state.checks++;
      state.firsts.push(first);
      return VERDICTS[state.verdict];
    },
    // A HEAD whose Date header says the server's time, answered at once (or failing while `down`).
    sampleServerTime: async () => {
      state.samples++;
      await state.hold;
      if (state.down) throw new Error('ECONNREFUSED');
      serverTime.addSample(new Date(clock.wallNow() + AHEAD_MS).toUTCString(), clock.monoNow(), clock.monoNow());
    },
    log: pino({ level: 'silent' }),
    onSampled: () => state.sampled++,
  });
  return { clock, time, state };
}

describe('TrustedTime: the verdict cache', () => {
  it.each(Object.keys(VERDICTS) as Verdict[])('a %s verdict is asked again exactly when its TTL runs out', async (verdict) => {
    const { clock, time, state } = setup(verdict);
    expect(time.checked).toBe(false);
    await time.verdict();
    expect(time.checked).toBe(true);
    await clock.advance(VERDICT_TTL_MS[verdict] - 1);
    await time.verdict();
    expect(state.checks).toBe(1);
    await clock.advance(1);
    await time.verdict();
    expect(state.checks).toBe(2);
    // Only the first check may run the tools side by side (a boot may wait on it).
    expect(state.firsts).toEqual([true, false]);
  });

  it('holds an unsynced verdict a minute, a synced one 5 min and none at all 10 min', () => {
    expect(VERDICT_TTL_MS).toEqual({ unsynced: MIN, synced: 5 * MIN, unknown: 10 * MIN });
  });

  it('a wall-clock step does not age a verdict: its TTL runs on monotonic time', async () => {
    const { clock, time, state } = setup('synced');
    await time.verdict();
    clock.stepWall(3_600_000);
    await time.verdict();
    expect(state.checks).toBe(1);
  });
});

describe('TrustedTime: now and signing time', () => {
  it('before any verdict nothing is trusted', () => {
    const { time } = setup('synced');
    expect(time.now()).toBeUndefined();
    expect(time.status()).toEqual({ trusted: false, verdict: 'pending', source: 'none', offsetMs: undefined });
  });

  it('a synced clock is trusted as it reads, and signs without a sample', async () => {
    const { clock, time, state } = setup('synced');
    await time.verdict();
    expect(time.now()).toBe(clock.wallNow());
    await expect(time.forSigning()).resolves.toEqual({ ok: true, ms: clock.wallNow(), source: 'wall' });
    expect(state.samples).toBe(0);
    expect(time.status()).toEqual({ trusted: true, verdict: 'synced', source: 'chrony', offsetMs: undefined });
  });

  it.each(['unsynced', 'unknown'] as const)('an %s clock signs on server time, sampled first', async (verdict) => {
    const { clock, time, state } = setup(verdict);
    await time.verdict();
    expect(time.now()).toBeUndefined();
    const chosen = await time.forSigning();
    expect(state.samples).toBe(1);
    expect(chosen).toMatchObject({ ok: true, source: 'server' });
    expect(Math.abs((chosen.ok ? chosen.ms : 0) - (clock.wallNow() + AHEAD_MS))).toBeLessThanOrEqual(1000);
    expect(time.now()).toBe(time.sampledNow());
    expect(time.status()).toMatchObject({ trusted: true, verdict, source: 'server' });
    // A fresh sample is reused rather than fetched again.
    await time.forSigning();
    expect(state.samples).toBe(1);
  });

  it('a synced clock that a fresh sample contradicts by minutes gives way to server time', async () => {
    const { time } = setup('synced');
    await time.verdict();
    await time.sample();
    expect(time.status()).toMatchObject({ trusted: true, source: 'server' });
    expect(time.now()).toBe(time.sampledNow());
  });

  it('a failed sample before signing fails the signing', async () => {
    const { time, state } = setup('unknown');
    state.down = true;
    await expect(time.forSigning()).rejects.toThrow('ECONNREFUSED');
  });
});

describe('TrustedTime: background samples', () => {
  it('a synced clock never samples in the background', async () => {
    const { time, state } = setup('synced');
    await time.verdict();
    time.sampleIfStale();
    expect(state.samples).toBe(0);
  });

  it('an untrusted clock samples once at a time, and reports each arrival', async () => {
    const { time, state } = setup('unknown');
    await time.verdict();
    let release = (): void => undefined;
    state.hold = new Promise((resolve) => (release = resolve));
    time.sampleIfStale();
    time.sampleIfStale();
    expect(state.samples).toBe(1);
    release();
    await state.hold;
    await new Promise((resolve) => setImmediate(resolve));
    expect(state.sampled).toBe(1);
    expect(time.status()).toMatchObject({ trusted: true, source: 'server' });
    // Fresh now: nothing to fetch.
    time.sampleIfStale();
    expect(state.samples).toBe(1);
  });

  it('while samples fail, tries again only every 30 s of monotonic time', async () => {
    const { clock, time, state } = setup('unsynced');
    state.down = true;
    await time.verdict();
    time.sampleIfStale();
    await clock.advance(0);
    expect(state.samples).toBe(1);
    expect(state.sampled).toBe(0);
    await clock.advance(SAMPLE_RETRY_MS - 1);
    time.sampleIfStale();
    expect(state.samples).toBe(1);
    await clock.advance(1);
    time.sampleIfStale();
    expect(state.samples).toBe(2);
    expect(SAMPLE_RETRY_MS).toBe(30_000);
  });
});
