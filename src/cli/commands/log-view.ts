/**
 * `botlink logs`, its pure parts: which files hold the log in which order, which lines a filter
 * keeps, and how each reads. Nothing here touches a file or a clock.
 */

import { basename } from 'node:path';
import { readableLine } from '../log-lines.js';
import { printable, printableJsonText } from '../printable.js';

/** pino's levels, lowest first: `--level warn` keeps warn, error and fatal. */
export const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;
export type Level = (typeof LEVELS)[number];

export interface LogFilter {
  /** The least level shown. */
  level: Level;
  /** Wall-clock ms: older lines are left out. */
  since: number | undefined;
}

/**
 * The log's files oldest first: logrotate's generations by falling number (`.14.gz` … `.2.gz`, `.1`:
 * delaycompress leaves the newest one plain), then the file itself. `names` lists the log's folder.
 */
export function generations(logFile: string, names: readonly string[]): { name: string; gz: boolean }[] {
  const base = basename(logFile);
  const rotated: { name: string; n: number; gz: boolean }[] = [];
  for (const name of names) {
    if (!name.startsWith(`${base}.`)) continue;
    const m = /^(\d+)(\.gz)?$/.exec(name.slice(base.length + 1));
    if (m) rotated.push({ name, n: Number(m[1]), gz: m[2] !== undefined });
  }
  rotated.sort((a, b) => b.n - a.n);
  return [...rotated.map(({ name, gz }) => ({ name, gz })), { name: base, gz: false }];
}

/** `--since`: an ISO date or time (`2026-11-25T10:00`), or a span back from now (`30s`, `10m`, `2h`, `1d`). */
export function parseSince(text: string, now: number): number | undefined {
  const span = /^(\d+(?:\.\d+)?)(s|m|h|d)$/.exec(text.trim());
  if (span) return now - Number(span[1]) * { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[span[2] as 's' | 'm' | 'h' | 'd'];
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : at;
}

function isLevel(text: string): text is Level {
  return (LEVELS as readonly string[]).includes(text);
}

/**
 * What one line of the log prints as: the readable form, the line itself for `--json`, or nothing
 * when the filter leaves it out. A line that is not a log entry (torn by a crash or a full disk) is
 * shown for what it is in the readable form and left out of `--json`, whose readers expect JSON.
 * Printable either way: a log line holds what the cloud and apps sent.
 */
export function viewLine(raw: string, filter: LogFilter, json: boolean): string | undefined {
  if (raw.trim() === '') return undefined;
  let entry: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(raw);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an entry');
    entry = parsed as Record<string, unknown>;
  } catch {
    return json ? undefined : `(not a log entry) ${printable(raw.length > 200 ? `${raw.slice(0, 200)}…` : raw)}\n`;
  }
  const level = typeof entry.level === 'string' && isLevel(entry.level) ? LEVELS.indexOf(entry.level) : LEVELS.indexOf('info');
  if (level < LEVELS.indexOf(filter.level)) return undefined;
  if (filter.since !== undefined) {
    const t = Date.parse(String(entry.time));
    if (!Number.isNaN(t) && t < filter.since) return undefined;
  }
  if (json) return `${printableJsonText(raw.trim())}\n`;
  // readableLine ends in its newline: what comes before it is one line, whatever the entry held.
  return `${printable(readableLine(entry, { withDate: true, byPart: true }).slice(0, -1))}\n`;
}

/** Splits what was read into whole lines and the unfinished rest (a line still being written, or torn). */
export function splitLines(pending: string, chunk: string): { lines: string[]; rest: string } {
  const text = pending + chunk;
  const end = text.lastIndexOf('\n');
  if (end < 0) return { lines: [], rest: text };
  return { lines: text.slice(0, end).split('\n'), rest: text.slice(end + 1) };
}
