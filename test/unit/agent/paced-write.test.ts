import { describe, expect, it } from 'vitest';
import { PacedWrite } from '../../../src/agent/daemon/paced.js';
import { STATUS_PACE } from '../../../src/agent/daemon/publish.js';
import { ManualClock } from '../../helpers/manual-clock.js';

const { everyMs, burst } = STATUS_PACE;

/** A PacedWrite on a manual clock that records when it wrote and what the state was then. */
function paced() {
  const clock = new ManualClock();
  const start = clock.monoNow();
  let state = 0;
  const writes: { at: number; state: number }[] = [];
  const write = new PacedWrite(clock, STATUS_PACE, () => writes.push({ at: clock.monoNow() - start, state }));
  /** A change of state, told to the pace. */
  const change = (): void => {
    state++;
    write.request();
  };
  return { clock, write, writes, change, state: () => state };
}

describe("status.json's pace (issue 27: observers' churn)", () => {
  it('writes a burst at once, then one write per everyMs carrying every change since', async () => {
    const { clock, writes, change } = paced();
    for (let i = 0; i < burst; i++) change();
    expect(writes.map((w) => w.at)).toEqual(Array(burst).fill(0));
    // Past the burst: nothing now, one write everyMs later with the latest state.
    for (let i = 0; i < 50; i++) change();
    expect(writes).toHaveLength(burst);
    expect(clock.pending()).toEqual([everyMs]);
    await clock.advance(everyMs);
    expect(writes.at(-1)).toEqual({ at: everyMs, state: burst + 50 });
    expect(clock.pending()).toEqual([]);
  });

  it('1,000 changes 5 ms apart (an observer attaching and leaving every 10 ms): at most burst + T / everyMs writes, none later than everyMs', async () => {
    const { clock, writes, change, state } = paced();
    const changes: number[] = [];
    for (let i = 0; i < 1000; i++) {
      changes.push(clock.monoNow());
      change();
      await clock.advance(5);
    }
    await clock.advance(everyMs);
    const spanMs = 1000 * 5 + everyMs;
    expect(writes.length).toBeLessThanOrEqual(burst + Math.ceil(spanMs / everyMs));
    expect(writes.length).toBeGreaterThan(spanMs / everyMs - 1);
    // The last write holds the last change.
    expect(writes.at(-1)!.state).toBe(state());
    // Every change is in a write within everyMs of it.
    const start = changes[0]!;
    for (const [i, at] of changes.entries()) {
      const written = writes.find((w) => w.state >= i + 1);
      expect(written!.at - (at - start)).toBeLessThanOrEqual(everyMs);
    }
  });

  it('in any window of everyMs × burst, no more than 2 × burst writes', async () => {
    const { clock, writes, change } = paced();
    for (let i = 0; i < 2000; i++) {
      change();
      await clock.advance(1);
    }
    await clock.advance(everyMs);
    const window = everyMs * burst;
    for (const w of writes) expect(writes.filter((x) => x.at >= w.at && x.at < w.at + window).length).toBeLessThanOrEqual(2 * burst);
  });

  it('writes at once again once the daemon was quiet for burst × everyMs', async () => {
    const { clock, writes, change } = paced();
    for (let i = 0; i < 3 * burst; i++) change();
    await clock.advance(everyMs * burst * 2);
    const before = writes.length;
    change();
    expect(writes).toHaveLength(before + 1);
  });

  it('flush writes now and calls off the write that was due', async () => {
    const { clock, write, writes, change, state } = paced();
    for (let i = 0; i < burst + 1; i++) change();
    expect(clock.pending()).toHaveLength(1);
    write.flush();
    expect(writes.at(-1)!.state).toBe(state());
    expect(clock.pending()).toEqual([]);
    await clock.advance(10 * everyMs);
    expect(writes).toHaveLength(burst + 1);
  });
});
