// How results are printed: units, verdicts, aligned tables and the machine they were measured on.
import { readFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { median } from '../lib/stats.js';
import { spread } from './sample.js';

export const ms = (x: number): string => (Number.isFinite(x) ? `${x.toFixed(x < 10 ? 1 : 0)} ms` : 'n/a');
export const times = (x: number): string => (Number.isFinite(x) ? `${x.toFixed(2)}×` : 'n/a');
export const verdict = (ok: boolean): string => (ok ? 'PASS' : 'MISS');

/**
 * A table row: a figure against its baseline (medians of both), the ratio, its goal (`≤ goal×`, or
 * `≥ goal×` for a figure where more is better) and each sample's spread.
 */
export function ratioRow(
  name: string,
  a: readonly number[],
  b: readonly number[],
  goal: number,
  unit: (x: number) => string = ms,
  moreIsBetter = false,
): string[] {
  const r = median(a) / median(b);
  return [
    name,
    unit(median(a)),
    unit(median(b)),
    times(r),
    `${moreIsBetter ? '≥' : '≤'} ${goal}×`,
    verdict(moreIsBetter ? r >= goal : r <= goal),
    spreads(a, b),
  ];
}

/** Each sample's IQR/median, as the table's last column shows them. */
export const spreads = (a: readonly number[], b: readonly number[]): string => `${spread(a).toFixed(2)} · ${spread(b).toFixed(2)}`;

/** A table row for a figure with a ceiling in ms and no baseline. */
export function ceilingRow(name: string, xs: readonly number[], goalMs: number): string[] {
  return [name, ms(median(xs)), '—', '—', `≤ ${goalMs} ms`, verdict(median(xs) <= goalMs), spread(xs).toFixed(2)];
}

/** Prints rows as aligned columns under a header and a rule. */
export function printTable(header: readonly string[], rows: readonly (readonly string[])[]): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const r of rows) console.log(line(r));
}

/** Date, CPU model, cores and node version: the line every result needs beside it. */
export function machineLine(): string {
  let model = cpus()[0]?.model ?? 'unknown cpu';
  try {
    const info = readFileSync('/proc/cpuinfo', 'utf8');
    // x86 says "model name"; Raspberry Pi kernels say "Model" (the board) instead.
    model = /^model name\s*:\s*(.+)$/m.exec(info)?.[1] ?? /^Model\s*:\s*(.+)$/m.exec(info)?.[1] ?? model;
  } catch {
    // not Linux: os.cpus() has it
  }
  return `${new Date().toISOString()} · ${model.trim()} · ${availableParallelism()} cores · node ${process.version} · ${process.arch}`;
}
