import { describe, expect, it } from 'vitest';
import { median } from '../helpers/stats.js';

describe('median (test/helpers/stats.ts, shared with the benchmarks)', () => {
  it.each([
    [[7], 7],
    [[3, 1, 2], 2],
    [[10, 1, 4, 2], 3],
    [[5, 5, 1, 9], 5],
  ])('of %j is %d, whatever the order', (values, want) => {
    expect(median(values)).toBe(want);
  });

  it('leaves its input unsorted', () => {
    const values = [3, 1, 2];
    median(values);
    expect(values).toEqual([3, 1, 2]);
  });

  it('refuses an empty sample instead of inventing a figure', () => {
    expect(() => median([])).toThrow('median of nothing');
  });
});
