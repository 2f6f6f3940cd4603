import { describe, expect, it } from 'vitest';
import { StepLoop } from '../../../src/agent/token/step-loop.js';
import { ManualClock } from '../../helpers/manual-clock.js';

/** A loop whose step records each run and waits until the test lets it finish. */
function rig() {
  const clock = new ManualClock();
  const runs: number[] = [];
  const failures: unknown[] = [];
  let finish: (() => void) | undefined;
  let behaviour: 'hold' | 'throw' | 'return' = 'return';
  const loop = new StepLoop(
    clock,
    async () => {
      runs.push(runs.length + 1);
      if (behaviour === 'throw') throw new Error('step failed');
      if (behaviour === 'hold') await new Promise<void>((r) => (finish = r));
    },
    (err) => failures.push(err),
  );
  const settle = async () => {
    for (let i = 0; i < 10; i++) await Promise.resolve();
  };
  return { clock, loop, runs, failures, settle, set: (b: typeof behaviour) => (behaviour = b), finish: () => finish?.() };
}

describe('StepLoop: one step at a time', () => {
  it('kicks while a step runs make exactly one more run after it', async () => {
    const r = rig();
    r.set('hold');
    r.loop.start();
    r.loop.kick();
    r.loop.kick();
    await r.settle();
    expect(r.runs).toEqual([1]);
    r.set('return');
    r.finish();
    await r.settle();
    expect(r.runs).toEqual([1, 2]);
  });

  it('wakeIn runs it once at that time, replacing the wake before', async () => {
    const r = rig();
    r.loop.start();
    await r.settle();
    r.loop.wakeIn(1000);
    r.loop.wakeIn(500);
    expect(r.clock.pending()).toEqual([500]);
    await r.clock.advance(500);
    await r.settle();
    expect(r.runs).toEqual([1, 2]);
  });

  it('a failed step goes to failed; retryIn drops a run asked for meanwhile', async () => {
    const clock = new ManualClock();
    const runs: string[] = [];
    let loop!: StepLoop;
    loop = new StepLoop(
      clock,
      async () => {
        runs.push('run');
        loop.again();
        throw new Error('down');
      },
      (err) => {
        runs.push((err as Error).message);
        loop.retryIn(1000);
      },
    );
    loop.start();
    for (let i = 0; i < 10; i++) await Promise.resolve();
    expect([runs, clock.pending()]).toEqual([['run', 'down'], [1000]]);
  });

  it('stopped, it neither runs nor schedules', async () => {
    const r = rig();
    r.loop.stop();
    r.loop.kick();
    r.loop.wakeIn(10);
    await r.settle();
    expect([r.runs, r.clock.pending(), r.loop.stopped]).toEqual([[], [], true]);
  });
});
