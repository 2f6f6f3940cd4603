// Taking samples on a shared machine and summing them up: alternating runs, the noise figure, idle waits.
import { median, quantile } from '../lib/stats.js';

/** Interquartile range over the median: a one-number noise figure for a sample. */
export function spread(xs: readonly number[]): number {
  if (xs.length < 4) return NaN;
  return (quantile(xs, 0.75) - quantile(xs, 0.25)) / median(xs);
}

/**
 * Runs each variant `n` times, rotating which goes first every round so slow drifts of a shared
 * machine hit all of them alike; one warm-up round (page cache, JIT of this process) is discarded.
 */
export async function alternate(n: number, variants: readonly (() => Promise<number>)[]): Promise<number[][]> {
  const samples = variants.map((): number[] => []);
  for (let round = -1; round < n; round++) {
    for (let k = 0; k < variants.length; k++) {
      const i = (Math.max(round, 0) + k) % variants.length;
      const value = await variants[i]!();
      if (round >= 0) samples[i]!.push(value);
    }
  }
  return samples;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
