import { isNetworkFailure } from '../cloud/network.js';
import { BotlinkError, fixOf, messageOf } from '../protocol/errors.js';
import { printable } from './printable.js';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const UNITS: readonly (readonly [number, string])[] = [
  [DAY, 'd'],
  [HOUR, 'h'],
  [MINUTE, 'm'],
  [SECOND, 's'],
];

/** "45s", "4m 10s", "1h 59m", "6d 23h": the two largest units, enough for a person reading status. */
export function formatDuration(ms: number): string {
  const total = Math.floor(Math.abs(ms) / SECOND) * SECOND;
  const i = UNITS.findIndex(([size]) => total >= size);
  if (i === -1) return '0s';
  const [size, name] = UNITS[i]!;
  const major = `${Math.floor(total / size)}${name}`;
  const next = UNITS[i + 1];
  if (!next) return major;
  const minor = Math.floor((total % size) / next[0]);
  return minor === 0 ? major : `${major} ${minor}${next[1]}`;
}

/** "3m 10s ago"; under a second is "just now". */
export function formatAgo(ms: number): string {
  return Math.abs(ms) < SECOND ? 'just now' : `${formatDuration(ms)} ago`;
}

/** "1h 59m left" or "expired 3m ago", for an expiry against the same clock's now. */
export function formatLeft(expiresAt: number, now: number): string {
  return expiresAt > now ? `${formatDuration(expiresAt - now)} left` : `expired ${formatAgo(now - expiresAt)}`;
}

/** "2025-01-31 12:00:05Z": UTC to the second, one width for every line. */
export function formatTime(ms: number): string {
  return new Date(ms)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, 'Z');
}

/** "+12 ms", "-1.5 s": a clock offset with its sign. */
export function formatOffset(ms: number): string {
  const sign = ms < 0 ? '-' : '+';
  const abs = Math.abs(ms);
  return abs < SECOND ? `${sign}${Math.round(abs)} ms` : `${sign}${(abs / SECOND).toFixed(1)} s`;
}

/** What a field command was doing when it failed: enough to name the fix. */
export interface FailureContext {
  baseUrl: string;
  accessKeyId: string;
  secretKeyFile: string;
  /** The identity being signed for. */
  identity: { kind: 'bot' | 'vendor'; id: string };
}

const CLOCK_FIX =
  'the device clock is more than 5 minutes off the service: check NTP (timedatectl status, chronyc tracking), then run botlink doctor';

/** The cause as the error states it, and the one thing to do about it: what the command knows, else the error's own fix. */
export function explainFailure(err: unknown, ctx: FailureContext): { cause: string; fix: string | undefined } {
  const cause = messageOf(err);
  const code = err instanceof BotlinkError ? err.code : undefined;
  const { kind, id } = ctx.identity;
  switch (code) {
    case 'ERR_CLOUD_1005':
      return {
        cause,
        fix: `check the secret-key file (${ctx.secretKeyFile}) and accessKeyId "${ctx.accessKeyId}": they must be the pair issued together`,
      };
    case 'ERR_CLOUD_1003':
    case 'ERR_CLOCK_UNTRUSTED':
      return { cause, fix: CLOCK_FIX };
    case 'ERR_CLOUD_1004':
      return {
        cause,
        fix:
          kind === 'vendor'
            ? `vendorId "${id}" not known under this access key ("${ctx.accessKeyId}"): check --vendor-id and accessKeyId`
            : `botId "${id}" not known under this access key ("${ctx.accessKeyId}"): run botlink provision, or fix botId in the config`,
      };
    case 'ERR_REGISTER_REFUSED':
      return { cause, fix: 'the service refused to register this device: check --vendor-id, --app-id and --type' };
  }
  if (isNetworkFailure(err)) {
    return {
      cause,
      fix: `cannot reach baseUrl ${ctx.baseUrl}: check the network, DNS and the baseUrl setting (botlink doctor tells which step fails)`,
    };
  }
  return { cause, fix: fixOf(err) };
}

/**
 * `<prefix>: <cause>`, then `  fix: <fix>` on a line of its own when there is one: what a command
 * prints on stderr. Cause and fix are printable, one line each: they may quote the cloud or a peer.
 */
export function failureLines(prefix: string, cause: string, fix: string | undefined): string {
  return `${prefix}: ${printable(cause)}\n${fix ? `  fix: ${printable(fix)}\n` : ''}`;
}

/** failureLines for anything thrown, with the fix it carries. */
export function formatFailure(prefix: string, err: unknown): string {
  return failureLines(prefix, messageOf(err), fixOf(err));
}
