import { resolve } from 'node:path';
import { LOG_LEVELS, TUNABLE_DEFAULTS, type TunableKey } from './defaults.js';
import { ConfigError } from './error.js';
import { type ConfigKey, type TextKey, TUNABLE_KEYS } from './keys.js';
import { PARSER_TIERS } from '../../cloud/http.js';
import { isLoopbackHost } from '../../loopback.js';

/** One setting as given, with what a message needs to name it and its fix. */
export interface Raw {
  value: unknown;
  /** How a message names the setting, e.g. `"baseUrl" in /etc/botlink/config.json`. */
  where: string;
  fix: string;
  /** Relative paths resolve against the config file's folder, or the working directory for env. */
  baseDir: string;
  fromEnv: boolean;
}

/** setTimeout fires at once beyond this, so no timer-like value may exceed it. */
const MAX_TIMER_MS = 2_147_483_647;
const PAIRS: readonly (readonly [TunableKey, TunableKey])[] = [
  ['tokenBackoffBaseMs', 'tokenBackoffCapMs'],
  ['linkBackoffBaseMs', 'linkBackoffCapMs'],
  ['heartbeatTimeoutMs', 'heartbeatIntervalMs'],
];

export function bad(key: string, r: Raw, problem: string): ConfigError {
  return new ConfigError(key, `${r.where} ${problem}`, { fix: r.fix });
}

/** A text setting checked (and paths resolved); undefined when not given. */
export function textValue(key: TextKey, r: Raw | undefined): string | undefined {
  if (r === undefined) return undefined;
  if (typeof r.value !== 'string' || r.value === '') throw bad(key, r, 'must be a non-empty string');
  return CHECKS[key](key, r.value, r);
}

/** Every tunable, given or default, with each base no larger than its cap. */
export function tunableValues(raw: ReadonlyMap<ConfigKey, Raw>): Record<TunableKey, number> {
  const tunables = {} as Record<TunableKey, number>;
  for (const key of TUNABLE_KEYS) tunables[key] = numberValue(key, raw.get(key));
  for (const [low, high] of PAIRS) {
    if (tunables[low] <= tunables[high]) continue;
    const key = raw.has(low) ? low : high;
    throw bad(key, raw.get(key)!, `must keep ${low} (${tunables[low]}) no larger than ${high} (${tunables[high]})`);
  }
  return tunables;
}

const CHECKS: Record<TextKey, (key: TextKey, value: string, r: Raw) => string> = {
  baseUrl: (key, v, r) => checkUrl(key, v, r, 'http'),
  wsUrl: (key, v, r) => checkUrl(key, v, r, 'ws'),
  accessKeyId: checkId,
  botId: checkId,
  vendorId: checkId,
  deviceId: checkId,
  secretKeyFile: checkPath,
  stateDir: checkPath,
  runtimeDir: checkPath,
  logFile: (key, v, r) => (v === '-' ? v : checkPath(key, v, r)),
  brokerUrl: (key, v, r) => checkUrl(key, v, r, 'http'),
  brokerCaFile: checkPath,
  deviceKeyFile: checkPath,
  logLevel: (key, v, r) => {
    if ((LOG_LEVELS as readonly string[]).includes(v)) return v;
    throw bad(key, r, `must be one of ${LOG_LEVELS.join(', ')}; got ${JSON.stringify(v)}`);
  },
  httpParserTier: (key, v, r) => {
    if ((PARSER_TIERS as readonly string[]).includes(v)) return v;
    throw bad(key, r, `must be one of ${PARSER_TIERS.join(', ')}; got ${JSON.stringify(v)}`);
  },
};

function checkId(key: TextKey, v: string, r: Raw): string {
  if (v.length <= 256 && /^[^\s\p{Cc}]+$/u.test(v)) return v;
  throw bad(key, r, `must be at most 256 characters without spaces or control characters; got ${JSON.stringify(v)}`);
}

function checkPath(key: TextKey, v: string, r: Raw): string {
  if (!v.includes('\0')) return resolve(r.baseDir, v);
  throw bad(key, r, 'must be a file system path');
}

/** The secure scheme is required unless the host is a loopback address, where nothing leaves the box. */
function checkUrl(key: TextKey, v: string, r: Raw, plain: 'http' | 'ws'): string {
  const secure = `${plain}s`;
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    throw bad(key, r, `must be a ${secure}:// URL; got ${JSON.stringify(v)}`);
  }
  const scheme = url.protocol.slice(0, -1);
  if (scheme !== plain && scheme !== secure) throw bad(key, r, `must be a ${secure}:// URL; got ${JSON.stringify(v)}`);
  if (scheme === plain && !isLoopbackHost(url.hostname)) {
    throw bad(key, r, `must use ${secure}:// unless the host is loopback (127.0.0.0/8, ::1, localhost); got ${JSON.stringify(v)}`);
  }
  if (url.username || url.password) throw bad(key, r, 'must not contain a user name or password');
  if (url.search || url.hash) throw bad(key, r, `must not have a query or fragment; got ${JSON.stringify(v)}`);
  return url.origin + url.pathname.replace(/\/+$/, '');
}

function numberValue(key: TunableKey, r: Raw | undefined): number {
  if (r === undefined) return TUNABLE_DEFAULTS[key];
  const max = key.endsWith('Ms') ? MAX_TIMER_MS : Math.floor(MAX_TIMER_MS / 1000);
  const n = r.fromEnv
    ? typeof r.value === 'string' && /^\d+(\.\d+)?$/.test(r.value)
      ? Number(r.value)
      : NaN
    : typeof r.value === 'number'
      ? r.value
      : NaN;
  if (n > 0 && n <= max) return n;
  throw bad(key, r, `must be a positive number no larger than ${max}; got ${JSON.stringify(r.value)}`);
}
