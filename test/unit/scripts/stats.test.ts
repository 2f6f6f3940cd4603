import { describe, expect, it } from 'vitest';
import { median, quantile } from '../../../scripts/lib/stats.js';

describe('median (scripts/lib/stats.ts, shared with the benchmarks)', () => {
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

describe('quantile (scripts/lib/stats.ts): the value at index ⌊q·n⌋ of the sorted sample', () => {
  const hundred = Array.from({ length: 100 }, (_, i) => 100 - i);

  it.each([
    [0, 1],
    [0.25, 26],
    [0.5, 51],
    [0.99, 100],
    [1, 100],
  ])('of 1..100 in reverse order, q = %d is %d', (q, want) => {
    expect(quantile(hundred, q)).toBe(want);
  });

  it('of one value is that value, of four its upper middle at 0.5', () => {
    expect(quantile([7], 0.99)).toBe(7);
    expect(quantile([10, 1, 4, 2], 0.5)).toBe(4);
  });

  it('leaves its input unsorted, and is NaN for an empty sample (a cell with no answer)', () => {
    expect(quantile(hundred, 0.5)).toBe(51);
    expect(hundred[0]).toBe(100);
    expect(quantile([], 0.5)).toBeNaN();
  });
});
