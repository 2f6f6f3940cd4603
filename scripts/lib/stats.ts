// The statistics the tests and the benchmarks report with: one median, one quantile.

/** The middle value of a sample (the mean of the two middle ones for an even count). */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new Error('median of nothing');
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * The q-quantile (0 ≤ q ≤ 1) of a sample in any order: the value at index ⌊q·n⌋ of the sorted sample,
 * the last for q = 1 (p99 of 100 values is the largest). NaN for none: a cell with no answer still reports.
 */
export function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}
