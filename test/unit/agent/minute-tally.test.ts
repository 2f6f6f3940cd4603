import { describe, expect, it } from 'vitest';
import { MinuteTally, TALLY_WINDOW_MS } from '../../../src/agent/local/minute-tally.js';
import { ManualClock } from '../../helpers/manual-clock.js';

function tally(): { clock: ManualClock; lines: [number, boolean][]; t: MinuteTally } {
  const clock = new ManualClock();
  const lines: [number, boolean][] = [];
  return { clock, lines, t: new MinuteTally(clock, (count, first) => lines.push([count, first])) };
}

describe('MinuteTally: one line a minute at most', () => {
  it('tells the first event of a quiet minute at once, and the rest of the minute in one line at its end', async () => {
    const { clock, lines, t } = tally();
    for (let i = 0; i < 1000; i++) t.add();
    expect(lines).toEqual([[1, true]]);
    await clock.advance(TALLY_WINDOW_MS - 1);
    expect(lines).toEqual([[1, true]]);
    await clock.advance(1);
    expect(lines).toEqual([
      [1, true],
      [999, false],
    ]);
  });

  it('keeps a line a minute while the flood lasts, then falls quiet and tells the next first event at once again', async () => {
    const { clock, lines, t } = tally();
    t.add();
    await clock.advance(TALLY_WINDOW_MS / 2);
    t.add();
    await clock.advance(TALLY_WINDOW_MS / 2);
    t.add();
    t.add();
    await clock.advance(TALLY_WINDOW_MS);
    expect(lines).toEqual([
      [1, true],
      [1, false],
      [2, false],
    ]);
    // A minute with nothing to tell ends the run: no timer is left behind.
    await clock.advance(TALLY_WINDOW_MS);
    expect(clock.pending()).toEqual([]);
    t.add();
    expect(lines.at(-1)).toEqual([1, true]);
  });

  it('stop() cancels the minute: what it counted is not told, and no timer is left', async () => {
    const { clock, lines, t } = tally();
    t.add();
    t.add();
    t.stop();
    expect(clock.pending()).toEqual([]);
    await clock.advance(TALLY_WINDOW_MS * 2);
    expect(lines).toEqual([[1, true]]);
  });
});
