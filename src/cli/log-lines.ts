/**
 * The reading side of the log (the writer is src/log.ts): a JSON log entry as a person reads it, for
 * `botlink logs`, `watch` and the demo's stdout. What it returns may hold a peer's bytes: print it
 * through printable().
 */

const JSON_ONLY_FIELDS = new Set(['time', 'level', 'msg', 'name', 'pid', 'hostname']);

const pad = (n: number, width = 2): string => String(n).padStart(width, '0');

/** "14:03:07.215": local time of day to the millisecond, as a person on the device reads it. */
export function localClock(t: Date): string {
  return `${pad(t.getHours())}:${pad(t.getMinutes())}:${pad(t.getSeconds())}.${pad(t.getMilliseconds(), 3)}`;
}

/**
 * One log entry as a person reads it, in local time: `12:00:01.123 INFO  name: message key=value …`;
 * `withDate` puts the local date first (a log spans days); `byPart` names the part of the daemon
 * (link, relay, local) instead of the program. Keys ending in `At` read as UTC times.
 */
export function readableLine(entry: Record<string, unknown>, opts: { withDate?: boolean; byPart?: boolean } = {}): string {
  const t = new Date(String(entry.time));
  const date = opts.withDate ? `${t.getFullYear()}-${pad(t.getMonth() + 1)}-${pad(t.getDate())} ` : '';
  const parts = [date + localClock(t), String(entry.level).toUpperCase().padEnd(5)];
  const whoKey = opts.byPart && entry.part !== undefined ? 'part' : 'name';
  const who = entry[whoKey] === undefined ? '' : `${String(entry[whoKey])}: `;
  parts.push(who + (entry.msg === undefined ? '' : String(entry.msg)));
  for (const [key, value] of Object.entries(entry)) {
    if (!JSON_ONLY_FIELDS.has(key) && key !== whoKey) parts.push(`${key}=${prettyValue(key, value)}`);
  }
  return `${parts.join(' ')}\n`;
}

/**
 * Errors show their message only: the stack is in the JSON log, the demo wants one line. Keys ending
 * in `At` hold wall-clock ms (accessExpiresAt, …): a person reads them as a UTC time.
 */
function prettyValue(key: string, value: unknown): string {
  if (key.endsWith('At') && typeof value === 'number' && Number.isFinite(value)) return new Date(value).toISOString();
  if (typeof value === 'string') return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  const message = (value as { message?: unknown } | null)?.message;
  return JSON.stringify(key === 'err' && typeof message === 'string' ? message : value);
}
