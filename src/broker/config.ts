/** The broker's configuration (DESIGN §3.7): a JSON file, each key overridable by BOTLINK_BROKER_<KEY>. */
import { closeSync, fstatSync, openSync, readSync, type Stats } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { isLoopbackHost } from '../loopback.js';
import { refuseUnlessPrivate } from '../private-file.js';
import { DEFAULT_AUDIT_RETENTION_DAYS } from './audit/retention.js';
import { messageOf } from '../protocol/errors.js';
import { BrokerConfigError } from './config-error.js';
import { type AdminListenerConfig, parseAdmin, parseHttpUrl, parseListen } from './config-address.js';
import { type PendingPolicy, parsePendingPolicy } from './pending-policy.js';

export const DEFAULT_CONFIG_FILE = '/etc/botlink-broker/config.json';
export const DEFAULT_STORE = 'sqlite:/var/lib/botlink-broker/broker.db';
/** Where botlink-broker.service loads its credentials from (secret-key, token-key). */
export const CREDENTIAL_SOURCE_DIR = '/etc/botlink-broker';

export interface BrokerLimits {
  /** Token requests per botId (across all its keys) and hour. */
  deviceTokensPerHour: number;
  /** Enrollment attempts per code and minute. */
  enrollPerMinute: number;
  /** Attempts with a code that does not exist, per source address (IPv6 by /64) and minute. */
  unknownCodePerMinute: number;
  /** Cloud calls in flight per replica; more wait in a queue. */
  cloudConcurrency: number;
  /** Key rotations per botId in 24 h. */
  rotatePerDay: number;
  /** Open connections per replica: at the cap the longest-idle one makes room. */
  connectionsMax: number;
  /** Open connections per source (IPv6 by /64); trusted proxies are exempt. */
  connectionsPerSource: number;
  /** Requests refused before their signature verified, per source and minute, before a source is held off. */
  unsignedPerMinute: number;
  /** Keys waiting for an operator from one source (IPv6 by /64) at once. */
  pendingPerSource: number;
  /** Keys waiting for an operator per vendor at once. */
  pendingMax: number;
  /** Seconds a waiting key is told to wait (Retry-After); its two asks are per min(60 s, this). */
  pendingRetryAfterS: number;
}

export interface BrokerConfig {
  listen: { host: string; port: number };
  baseUrl: string;
  accessKeyId: string;
  secretKeyFile: string;
  store: string;
  /** A private file holding the store's password, so that the URL holds none. */
  storePasswordFile: string | null;
  tls: { certFile: string; keyFile: string } | null;
  trustedProxies: string[];
  tokenKeyFile: string;
  logFile: string;
  logLevel: string;
  /** Days the audit keeps its rows (token-issued events 30 at most), pruned daily. */
  auditRetentionDays: number;
  /** The vendors and serials that may wait for an operator when they enroll with no code (empty: none). */
  pendingEnrollment: PendingPolicy;
  limits: BrokerLimits;
  /** The admin listener (DESIGN §3.8), when adminListen is set. */
  admin: AdminListenerConfig | null;
}

type Raw = Record<string, unknown>;

/** The keys whose value is a count (a positive integer), the limits among them. */
const COUNT_KEYS = [
  'deviceTokensPerHour',
  'enrollPerMinute',
  'cloudConcurrency',
  'rotatePerDay',
  'connectionsMax',
  'connectionsPerSource',
  'unsignedPerMinute',
  'pendingPerSource',
  'pendingMax',
  'pendingRetryAfterS',
  'auditRetentionDays',
] as const;
const KEYS = [
  'listen',
  'baseUrl',
  'accessKeyId',
  'secretKeyFile',
  'store',
  'storePasswordFile',
  'tlsCertFile',
  'tlsKeyFile',
  'trustedProxies',
  'tokenKeyFile',
  'logFile',
  'logLevel',
  'pendingEnrollment',
  'adminListen',
  'adminOrigin',
  ...COUNT_KEYS,
] as const;
type Key = (typeof KEYS)[number];

const NUMBER_KEYS: ReadonlySet<Key> = new Set(COUNT_KEYS);
const LEVELS = new Set(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);
/** The agent's own variables share the prefix: they are not the broker's, so they are ignored. */
const AGENT_VARS = new Set(['BOTLINK_BROKER_URL', 'BOTLINK_BROKER_CA_FILE', 'BOTLINK_BROKER_CONFIG']);
const ENV_PREFIX = 'BOTLINK_BROKER_';

export function envName(key: Key): string {
  return ENV_PREFIX + key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase();
}

/** The config file to read: --config, else BOTLINK_BROKER_CONFIG, else the default. */
export function configFileFor(flag: string | undefined, env: NodeJS.ProcessEnv): string {
  return flag ?? env['BOTLINK_BROKER_CONFIG'] ?? DEFAULT_CONFIG_FILE;
}

/** A config file is small: anything bigger is the wrong file. */
const MAX_CONFIG_BYTES = 1024 * 1024;

export function loadBrokerConfig(file: string, env: NodeJS.ProcessEnv): BrokerConfig {
  const { text, stat } = readConfigFile(file);
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new BrokerConfigError('config', `${file} is not valid JSON (${messageOf(err)})`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new BrokerConfigError('config', `${file} must hold one JSON object`);
  if (holdsPassword((raw as Raw)['store'])) refuseExposed(file, stat);
  return parseBrokerConfig({ ...(raw as Raw), ...fromEnv(env) }, env);
}

/** The file's text, and what the descriptor it was read through says of it (the file read is the file judged). */
function readConfigFile(file: string): { text: string; stat: Stats } {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (err) {
    throw new BrokerConfigError('config', `cannot read the broker config ${file} (${messageOf(err)})`, {
      fix: `create ${file}, or name another with --config or BOTLINK_BROKER_CONFIG`,
    });
  }
  try {
    const stat = fstatSync(fd);
    const buf = Buffer.alloc(Math.min(stat.size, MAX_CONFIG_BYTES) + 1);
    const n = readSync(fd, buf, 0, buf.length, 0);
    if (n > MAX_CONFIG_BYTES) throw new BrokerConfigError('config', `${file} is larger than a broker config can be`);
    return { text: buf.subarray(0, n).toString('utf8'), stat };
  } finally {
    closeSync(fd);
  }
}

/** Whether a store URL carries a password (`postgres://user:password@host/db`). */
export function holdsPassword(store: unknown): boolean {
  if (typeof store !== 'string' || !/^postgres(ql)?:\/\//.test(store)) return false;
  try {
    return new URL(store).password !== '';
  } catch {
    return false;
  }
}

/** A config file whose store URL holds a password is a secret file: a regular file of the broker's user or root, private. */
function refuseExposed(file: string, stat: Stats): void {
  refuseUnlessPrivate(file, stat, {
    noun: "the broker config, which holds the store's password,",
    user: "the broker's user",
    credential: 'config',
    createHint: (path) => `make ${path} a regular file, or keep the password out of the URL in a storePasswordFile`,
    exposedFix: (path) => `run \`chmod 600 ${path}\`, or keep the password out of the URL in a storePasswordFile`,
    refuse: (_path, message, options) => new BrokerConfigError('config', message, options),
  });
}

function fromEnv(env: NodeJS.ProcessEnv): Raw {
  const byName = new Map(KEYS.map((k) => [envName(k), k]));
  const out: Raw = {};
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith(ENV_PREFIX) || AGENT_VARS.has(name) || value === undefined) continue;
    const key = byName.get(name);
    if (key === undefined) throw new BrokerConfigError(name, `unknown variable ${name}: the broker's keys are ${KEYS.join(', ')}`);
    // pendingEnrollment's variable holds its JSON, which pending-policy.ts reads.
    out[key] = key === 'trustedProxies' ? value.split(',').filter((s) => s !== '') : NUMBER_KEYS.has(key) ? Number(value) : value;
  }
  return out;
}

export function parseBrokerConfig(raw: Raw, env: NodeJS.ProcessEnv): BrokerConfig {
  for (const key of Object.keys(raw)) {
    if (!(KEYS as readonly string[]).includes(key)) throw new BrokerConfigError(key, `unknown key "${key}" in the broker config`);
  }
  const credentials = env['CREDENTIALS_DIRECTORY'];
  const str = (key: Key, fallback?: string): string => {
    const value = raw[key] ?? fallback;
    if (typeof value !== 'string' || value === '') {
      throw new BrokerConfigError(key, `${key} is required and must be a non-empty string`);
    }
    return value;
  };
  // The unit hands both files over as credentials; an operator's command on the host reads them where the
  // unit loads them from (LoadCredential=), so `broker code` works there without further settings.
  const credential = (key: Key, name: string): string =>
    str(key, credentials === undefined || credentials === '' ? join(CREDENTIAL_SOURCE_DIR, name) : join(credentials, name));
  const count = (key: Key, fallback: number): number => {
    const value = raw[key] ?? fallback;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1)
      throw new BrokerConfigError(key, `${key} must be a whole number ≥ 1`);
    return value;
  };

  const listen = parseListen(str('listen'));
  const baseUrl = parseHttpUrl('baseUrl', str('baseUrl'));
  const certFile = raw['tlsCertFile'];
  const keyFile = raw['tlsKeyFile'];
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new BrokerConfigError(certFile === undefined ? 'tlsCertFile' : 'tlsKeyFile', 'tlsCertFile and tlsKeyFile go together');
  }
  const tls = certFile === undefined ? null : { certFile: str('tlsCertFile'), keyFile: str('tlsKeyFile') };
  if (tls === null && !isLoopbackHost(listen.host)) {
    throw new BrokerConfigError('listen', `plain http is only for loopback, and listen is ${listen.host}`, {
      fix: 'set tlsCertFile and tlsKeyFile, or listen on 127.0.0.1 behind a TLS proxy',
    });
  }
  const proxies = raw['trustedProxies'] ?? [];
  if (!Array.isArray(proxies) || proxies.some((p) => typeof p !== 'string' || isIP(p) === 0)) {
    throw new BrokerConfigError('trustedProxies', 'trustedProxies must be a list of IP addresses');
  }
  const logLevel = str('logLevel', 'info');
  if (!LEVELS.has(logLevel)) throw new BrokerConfigError('logLevel', `logLevel must be one of ${[...LEVELS].join(', ')}`);
  const store = str('store', DEFAULT_STORE);
  if (!/^(sqlite:.+|postgres(ql)?:\/\/.+)$/.test(store)) {
    throw new BrokerConfigError('store', 'store must be sqlite:PATH or a postgres:// URL');
  }
  const storePasswordFile = raw['storePasswordFile'] === undefined ? null : str('storePasswordFile');
  if (storePasswordFile !== null && !store.startsWith('postgres')) {
    throw new BrokerConfigError('storePasswordFile', 'storePasswordFile is for a postgres:// store');
  }
  const admin = parseAdmin(raw, tls !== null);
  return {
    admin,
    listen,
    baseUrl,
    accessKeyId: str('accessKeyId'),
    secretKeyFile: credential('secretKeyFile', 'secret-key'),
    store,
    storePasswordFile,
    tls,
    trustedProxies: proxies as string[],
    tokenKeyFile: credential('tokenKeyFile', 'token-key'),
    logFile: str('logFile', '-'),
    logLevel,
    auditRetentionDays: count('auditRetentionDays', DEFAULT_AUDIT_RETENTION_DAYS),
    pendingEnrollment: parsePendingPolicy(raw['pendingEnrollment'] ?? {}, (msg) => new BrokerConfigError('pendingEnrollment', msg)),
    limits: {
      deviceTokensPerHour: count('deviceTokensPerHour', 12),
      enrollPerMinute: count('enrollPerMinute', 5),
      unknownCodePerMinute: 30,
      cloudConcurrency: count('cloudConcurrency', 8),
      rotatePerDay: count('rotatePerDay', 4),
      connectionsMax: count('connectionsMax', 1024),
      connectionsPerSource: count('connectionsPerSource', 32),
      unsignedPerMinute: count('unsignedPerMinute', 120),
      pendingPerSource: count('pendingPerSource', 50),
      pendingMax: count('pendingMax', 10_000),
      pendingRetryAfterS: count('pendingRetryAfterS', 60),
    },
  };
}
