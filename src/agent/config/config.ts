import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { BotlinkError } from '../../protocol/errors.js';
import { readSecretFile, type Secret, SecretFileError } from './secret.js';

export const DEFAULT_CONFIG_FILE = '/etc/botlink/config.json';
export const WS_PATH = '/soulmate/voiceChat/v1';
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Tunables beyond DESIGN §3.2: positive numbers, `…Ms` in milliseconds, `…S` in seconds. */
export const TUNABLE_DEFAULTS = Object.freeze({
  httpTimeoutMs: 10_000,
  refreshMarginS: 1800,
  resignMarginS: 86_400,
  linkMarginS: 300,
  tokenBackoffBaseMs: 1000,
  tokenBackoffCapMs: 300_000,
  linkBackoffBaseMs: 500,
  linkBackoffCapMs: 60_000,
  heartbeatIntervalMs: 20_000,
  heartbeatTimeoutMs: 10_000,
  connectTimeoutMs: 10_000,
});
export type TunableKey = keyof typeof TUNABLE_DEFAULTS;

/** Fixed defaults; wsUrl and secretKeyFile have derived defaults (see loadConfig). */
export const DEFAULTS = Object.freeze({
  stateDir: '/var/lib/botlink',
  runtimeDir: '/run/botlink',
  logFile: '/var/log/botlink/botlink.log',
  logLevel: 'info' as LogLevel,
  ...TUNABLE_DEFAULTS,
});

const TEXT_KEYS = ['baseUrl', 'wsUrl', 'accessKeyId', 'secretKeyFile', 'botId', 'vendorId', 'deviceId',
  'stateDir', 'runtimeDir', 'logFile', 'logLevel'] as const;
type TextKey = (typeof TEXT_KEYS)[number];
export type ConfigKey = TextKey | TunableKey;
export const CONFIG_KEYS: readonly ConfigKey[] = Object.freeze([
  ...TEXT_KEYS,
  ...(Object.keys(TUNABLE_DEFAULTS) as TunableKey[]),
]);

export interface ConfigValues extends Readonly<Record<TunableKey, number>> {
  readonly baseUrl: string;
  readonly wsUrl: string;
  readonly accessKeyId: string;
  readonly secretKeyFile: string;
  readonly botId: string | undefined;
  readonly vendorId: string | undefined;
  readonly deviceId: string | undefined;
  readonly stateDir: string;
  readonly runtimeDir: string;
  readonly logFile: string;
  readonly logLevel: LogLevel;
}

/** Where the configuration came from: the file read (null: none) and the variables that applied. */
export interface ConfigSource {
  readonly file: string | null;
  readonly env: readonly string[];
  /** The file looked for when none was named. */
  readonly defaultFile: string;
}

export interface AgentConfig extends ConfigValues {
  /** The only place the SecretKey lives after loading. */
  readonly secretKey: Secret;
  readonly source: ConfigSource;
  /** The values without the secret. */
  toJSON(): ConfigValues;
}

/** A configuration problem; `key` is the offending key ('config' for the file as a whole). */
export class ConfigError extends BotlinkError {
  readonly key: string;

  constructor(key: string, message: string, options?: { cause?: unknown }) {
    super('ERR_CONFIG', message, 'needs-config', options);
    this.key = key;
  }
}

/** `baseUrl` → `BOTLINK_BASE_URL`. */
export function envVarFor(key: ConfigKey): string {
  return `BOTLINK_${key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;
}

/** One line for `botlink doctor`: which file and which variables made this configuration. */
export function describeSource(source: ConfigSource): string {
  const env = source.env.length > 0 ? source.env.join(', ') : '';
  if (source.file === null) return `environment only (${env || 'no variables'}); no file at ${source.defaultFile}`;
  return env ? `${source.file}, overridden by ${env}` : source.file;
}

const ENV_TO_KEY = new Map(CONFIG_KEYS.map((k) => [envVarFor(k), k]));
const SECRET_FIX = 'put the SecretKey in a file only the agent can read (chmod 600) and name it with ' +
  'secretKeyFile, or pass it with systemd LoadCredential=secret-key';
/** setTimeout fires at once beyond this, so no timer-like value may exceed it. */
const MAX_TIMER_MS = 2_147_483_647;
const PAIRS: readonly (readonly [TunableKey, TunableKey])[] = [
  ['tokenBackoffBaseMs', 'tokenBackoffCapMs'],
  ['linkBackoffBaseMs', 'linkBackoffCapMs'],
  ['heartbeatTimeoutMs', 'heartbeatIntervalMs'],
];

interface Raw {
  value: unknown;
  /** How a message names the setting, e.g. `"baseUrl" in /etc/botlink/config.json`. */
  where: string;
  fix: string;
  /** Relative paths resolve against the config file's folder, or the working directory for env. */
  baseDir: string;
  fromEnv: boolean;
}

/** Reads, merges and validates the agent configuration and its secret (DESIGN §3.2). */
export function loadConfig(opts: { file?: string; env?: NodeJS.ProcessEnv; defaultFile?: string } = {}): AgentConfig {
  const env = opts.env ?? process.env;
  const defaultFile = opts.defaultFile ?? DEFAULT_CONFIG_FILE;
  const by = opts.file !== undefined ? '--config' : env.BOTLINK_CONFIG !== undefined ? 'BOTLINK_CONFIG' : null;
  const named = opts.file ?? env.BOTLINK_CONFIG ?? defaultFile;
  if (named === '') throw new ConfigError('config', `${by} is empty: give the path of the config file`);
  const path = resolve(named);
  const fileValues = readConfigFile(path, by);
  const file = fileValues ? path : null;
  const { raw, used } = collect(path, fileValues ?? {}, env);
  const setHint = (key: ConfigKey) => `set "${key}" in ${path} or ${envVarFor(key)}`;

  const text = (key: TextKey): string | undefined => {
    const r = raw.get(key);
    if (r === undefined) return undefined;
    if (typeof r.value !== 'string' || r.value === '') throw bad(key, r, 'must be a non-empty string');
    return CHECKS[key](key, r.value, r);
  };
  const baseUrl = text('baseUrl');
  if (baseUrl === undefined) throw new ConfigError('baseUrl', `baseUrl is required: ${setHint('baseUrl')} (e.g. "https://api.example.com")`);
  const accessKeyId = text('accessKeyId');
  if (accessKeyId === undefined) throw new ConfigError('accessKeyId', `accessKeyId is required: ${setHint('accessKeyId')}`);
  const credentials = env.CREDENTIALS_DIRECTORY;
  let secretKeyFile = text('secretKeyFile');
  if (secretKeyFile === undefined && credentials) {
    secretKeyFile = join(credentials, 'secret-key');
    used.push('CREDENTIALS_DIRECTORY');
  }
  if (secretKeyFile === undefined) {
    throw new ConfigError('secretKeyFile', `secretKeyFile is required: ${setHint('secretKeyFile')}, or run under systemd with LoadCredential=secret-key`);
  }
  const botId = text('botId');
  const vendorId = text('vendorId');
  if (botId === undefined && vendorId === undefined) {
    throw new ConfigError('botId', `botId or vendorId is required: ${setHint('botId')}, or set "vendorId" (with "deviceId") so the agent provisions itself`);
  }
  const tunables = {} as Record<TunableKey, number>;
  for (const key of Object.keys(TUNABLE_DEFAULTS) as TunableKey[]) tunables[key] = number(key, raw.get(key));
  for (const [low, high] of PAIRS) {
    if (tunables[low] <= tunables[high]) continue;
    const key = raw.has(low) ? low : high;
    throw bad(key, raw.get(key)!, `must keep ${low} (${tunables[low]}) no larger than ${high} (${tunables[high]})`);
  }

  const values: ConfigValues = Object.freeze({
    baseUrl,
    wsUrl: text('wsUrl') ?? baseUrl.replace(/^http/, 'ws') + WS_PATH,
    accessKeyId,
    secretKeyFile,
    botId,
    vendorId,
    deviceId: text('deviceId'),
    stateDir: text('stateDir') ?? DEFAULTS.stateDir,
    runtimeDir: text('runtimeDir') ?? DEFAULTS.runtimeDir,
    logFile: text('logFile') ?? DEFAULTS.logFile,
    logLevel: (text('logLevel') ?? DEFAULTS.logLevel) as LogLevel,
    ...tunables,
  });
  let secretKey: Secret;
  try {
    secretKey = readSecretFile(secretKeyFile);
  } catch (err) {
    if (err instanceof SecretFileError) throw new ConfigError('secretKeyFile', err.message, { cause: err });
    throw err;
  }
  const config = { ...values, secretKey: Object.freeze(secretKey), source: Object.freeze({ file, env: Object.freeze(used.sort()), defaultFile }) };
  Object.defineProperty(config, 'toJSON', { value: () => values, enumerable: false });
  return Object.freeze(config) as AgentConfig;
}

/** Every setting given, file first, then BOTLINK_* variables over it; names nothing unknown. */
function collect(path: string, fileValues: Record<string, unknown>, env: NodeJS.ProcessEnv) {
  const raw = new Map<ConfigKey, Raw>();
  for (const [name, value] of Object.entries(fileValues)) {
    if (name.toLowerCase() === 'secretkey') {
      throw new ConfigError(name, `"${name}" in ${path}: the secret is never read from the config file; ${SECRET_FIX}`);
    }
    if (!(CONFIG_KEYS as readonly string[]).includes(name)) throw unknown(name, `"${name}" in ${path}`, CONFIG_KEYS);
    raw.set(name as ConfigKey, { value, where: `"${name}" in ${path}`, fix: `fix it in ${path}`, baseDir: dirname(path), fromEnv: false });
  }
  const used: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith('BOTLINK_') || name === 'BOTLINK_CONFIG' || value === undefined) continue;
    if (name === 'BOTLINK_SECRET_KEY') {
      throw new ConfigError('secretKey', `${name}: the secret is never read from the environment; ${SECRET_FIX}`);
    }
    const key = ENV_TO_KEY.get(name);
    if (key === undefined) throw unknown(name, `environment variable ${name}`, [...ENV_TO_KEY.keys(), 'BOTLINK_CONFIG']);
    raw.set(key, { value, where: `${name} (${key})`, fix: `fix or unset ${name}`, baseDir: process.cwd(), fromEnv: true });
    used.push(name);
  }
  return { raw, used };
}

function bad(key: string, r: Raw, problem: string): ConfigError {
  return new ConfigError(key, `${r.where} ${problem}; ${r.fix}`);
}

function unknown(name: string, where: string, known: Iterable<string>): ConfigError {
  const near = closest(name, known);
  const hint = near ? `did you mean "${near}"?` : `known: ${[...known].join(', ')}`;
  return new ConfigError(name, `${where} is not a botlink setting; ${hint}`);
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
  logLevel: (key, v, r) => {
    if ((LOG_LEVELS as readonly string[]).includes(v)) return v;
    throw bad(key, r, `must be one of ${LOG_LEVELS.join(', ')}; got ${JSON.stringify(v)}`);
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
  if (scheme === plain && !isLoopback(url.hostname)) {
    throw bad(key, r, `must use ${secure}:// unless the host is loopback (127.0.0.0/8, ::1, localhost); got ${JSON.stringify(v)}`);
  }
  if (url.username || url.password) throw bad(key, r, 'must not contain a user name or password');
  if (url.search || url.hash) throw bad(key, r, `must not have a query or fragment; got ${JSON.stringify(v)}`);
  return url.origin + url.pathname.replace(/\/+$/, '');
}

function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(hostname);
}

function number(key: TunableKey, r: Raw | undefined): number {
  if (r === undefined) return TUNABLE_DEFAULTS[key];
  const max = key.endsWith('Ms') ? MAX_TIMER_MS : Math.floor(MAX_TIMER_MS / 1000);
  const n = r.fromEnv
    ? typeof r.value === 'string' && /^\d+(\.\d+)?$/.test(r.value) ? Number(r.value) : NaN
    : typeof r.value === 'number' ? r.value : NaN;
  if (n > 0 && n <= max) return n;
  throw bad(key, r, `must be a positive number no larger than ${max}; got ${JSON.stringify(r.value)}`);
}

/** Reads the JSON object at `path`; null when the default file is absent (env-only configuration). */
function readConfigFile(path: string, by: string | null): Record<string, unknown> | null {
  let body: string;
  try {
    body = readFileSync(path, 'utf8').replace(/^\uFEFF/, '');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' && by === null) return null;
    const why = code === 'ENOENT' ? `does not exist (named by ${by}): create it or fix ${by}` : `cannot be read (${code}): check its path and permissions`;
    throw new ConfigError('config', `config file ${path} ${why}`, { cause: err });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    // V8's message may quote the file, which could hold a pasted secret: locate the error ourselves.
    const at = jsonErrorOffset(body);
    const line = body.slice(0, at).split('\n').length;
    const column = at - body.lastIndexOf('\n', at - 1);
    throw new ConfigError('config', `config file ${path} is not valid JSON: syntax error at line ${line}, column ${column} (position ${at}); fix the file`);
  }
  if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  throw new ConfigError('config', `config file ${path} must hold a JSON object like {"baseUrl": "https://…"}; fix the file`);
}

/** Offset of the first JSON syntax error in `s` (s.length when it ends too early). */
function jsonErrorOffset(s: string): number {
  let i = 0;
  const ws = () => {
    while (' \t\n\r'.includes(s[i] ?? '.')) i++;
  };
  const token = (re: RegExp): boolean => {
    re.lastIndex = i;
    if (!re.test(s)) return false;
    i = re.lastIndex;
    return true;
  };
  const string = () => token(/"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y);
  const member = (): boolean => {
    ws();
    if (!string()) return false;
    ws();
    if (s[i] !== ':') return false;
    i++;
    return value();
  };
  const container = (close: string, item: () => boolean): boolean => {
    i++;
    ws();
    for (let first = true; ; first = false) {
      if (s[i] === close && first) break;
      if (!item()) return false;
      ws();
      if (s[i] === close) break;
      if (s[i] !== ',') return false;
      i++;
    }
    i++;
    return true;
  };
  const value = (): boolean => {
    ws();
    if (s[i] === '{') return container('}', member);
    if (s[i] === '[') return container(']', value);
    return string() || token(/true|false|null|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y);
  };
  if (value()) ws();
  return i;
}

/** The closest candidate within two edits, ignoring case, to suggest for a misspelt name. */
function closest(word: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = 3;
  for (const c of candidates) {
    const d = editDistance(word.toLowerCase(), c.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [c, d];
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length]!;
}
