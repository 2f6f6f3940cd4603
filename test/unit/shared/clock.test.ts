import { describe, expect, it } from 'vitest';
import { systemClock, withWallClock } from '../../../src/clock.js';
import { ManualClock } from '../../helpers/manual-clock.js';

describe('systemClock timers', () => {
  it('fires a timer once and a cancelled one never', async () => {
    const fired: string[] = [];
    const cancel = systemClock.setTimer(5, () => fired.push('cancelled'));
    systemClock.setTimer(10, () => fired.push('kept'));
    cancel();
    cancel();
    await systemClock.sleep(40);
    expect(fired).toEqual(['kept']);
  });

  it('sleep resolves at once when its signal aborts, and at once for an aborted signal', async () => {
    const ac = new AbortController();
    const slept = systemClock.sleep(60_000, ac.signal);
    ac.abort();
    // A sleep that waited its 60 s would fail this test by its 20 s timeout.
    await expect(slept).resolves.toBeUndefined();
    await expect(systemClock.sleep(60_000, ac.signal)).resolves.toBeUndefined();
  });

  it('withWallClock moves only the wall clock', () => {
    const clock = withWallClock(() => 86_400_000);
    expect(clock.wallNow()).toBe(86_400_000);
    expect(Math.abs(clock.monoNow() - systemClock.monoNow())).toBeLessThan(1000);
  });
});

describe('ManualClock', () => {
  it('fires due timers in deadline order, including those set while advancing', async () => {
    const clock = new ManualClock();
    const fired: string[] = [];
    clock.setTimer(30, () => fired.push('b@30'));
    clock.setTimer(10, () => {
      fired.push('a@10');
      clock.setTimer(5, () => fired.push('c@15'));
      clock.setTimer(50, () => fired.push('d@60'));
    });
    clock.setTimer(30, () => fired.push('b2@30'));
    await clock.advance(40);
    expect(fired).toEqual(['a@10', 'c@15', 'b@30', 'b2@30']);
    expect(clock.pending()).toEqual([20]);
  });

  it('moves wall and monotonic time together, and stepWall moves the wall alone', async () => {
    const clock = new ManualClock({ wall: 1_000_000, mono: 5 });
    let firedAtWall = 0;
    clock.setTimer(100, () => (firedAtWall = clock.wallNow()));
    clock.stepWall(-500_000);
    await clock.advance(100);
    expect(firedAtWall).toBe(500_100);
    expect(clock.monoNow()).toBe(105);
  });

  it('lets async work started by a timer finish before the next timer', async () => {
    const clock = new ManualClock();
    const log: string[] = [];
    clock.setTimer(10, () => {
      void (async () => {
        await Promise.resolve();
        await Promise.resolve();
        log.push('async after 10');
      })();
    });
    clock.setTimer(20, () => log.push('timer 20'));
    await clock.advance(20);
    expect(log).toEqual(['async after 10', 'timer 20']);
  });

  it('fails an advance whose timers re-arm at 0 ms forever instead of spinning', async () => {
    const clock = new ManualClock();
    const rearm = (): void => void clock.setTimer(0, rearm);
    rearm();
    await expect(clock.advance(1)).rejects.toThrow(/timers fired in one advance/);
  });

  it('sleep wakes at its deadline or on abort', async () => {
    const clock = new ManualClock();
    let woke = false;
    const slept = clock.sleep(1000).then(() => (woke = true));
    await clock.advance(999);
    expect(woke).toBe(false);
    await clock.advance(1);
    await slept;
    expect(woke).toBe(true);
    const ac = new AbortController();
    const aborted = clock.sleep(1000, ac.signal);
    ac.abort();
    await aborted;
    expect(clock.pending()).toEqual([]);
  });
});
