import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { ParserTier } from '../../cloud/http.js';
import { voiceChatUrl } from '../../protocol/conversation.js';
import { DEFAULT_CONFIG_FILE, DEFAULTS, type LogLevel, type TunableKey } from './defaults.js';
import { ConfigError } from './error.js';
import { readConfigFile } from './file.js';
import { CONFIG_KEYS, type ConfigKey, ENV_TO_KEY, envVarFor, type TextKey } from './keys.js';
import { localValues } from './local.js';
import { type BrokerModeValues, isBrokerVariable, type ModeValues, modeValues, type SignModeValues } from './mode.js';
import { type DeviceKey, DeviceKeyError, ensureDeviceKey, loadDeviceKey } from './device-key.js';
import { readSecretFile, type Secret, SecretFileError } from './secret.js';
import { closest } from './suggest.js';
import { type Raw, textValue, tunableValues } from './values.js';

export { DEFAULT_CONFIG_FILE, DEFAULTS, LOG_LEVELS, type LogLevel, TUNABLE_DEFAULTS, type TunableKey } from './defaults.js';
export { ConfigError } from './error.js';
export { CONFIG_KEYS, type ConfigKey, envVarFor } from './keys.js';
export { ENROLL_COMMAND } from './device-key.js';
export type { IdentityMode } from './mode.js';

/** The settings every mode shares. */
interface CommonValues extends Readonly<Record<TunableKey, number>> {
  readonly baseUrl: string;
  /** The cloud WebSocket, in both modes: the broker hands out tokens, the device still talks to the cloud. */
  readonly wsUrl: string;
  readonly botId: string | undefined;
  readonly vendorId: string | undefined;
  readonly deviceId: string | undefined;
  readonly stateDir: string;
  readonly runtimeDir: string;
  readonly logFile: string;
  readonly logLevel: LogLevel;
  /** Where undici's HTTP parser runs (src/cloud/parser-tier.ts): 'baseline' (default) saves a device ~11 MiB of RSS. */
  readonly httpParserTier: ParserTier;
  /** The local API's Unix socket; null when turned off (`""`). */
  readonly localSocket: string | null;
  /** The gid the socket is given; null: the daemon's own group. */
  readonly localGroup: number | null;
  /** Prometheus textfile-collector file rewritten every 60 s; null: none. */
  readonly metricsFile: string | null;
}

export type ConfigValues = CommonValues & ModeValues;

/** Where the configuration came from: the file read (null: none) and the variables that applied. */
export interface ConfigSource {
  readonly file: string | null;
  readonly env: readonly string[];
  /** The file looked for when none was named. */
  readonly defaultFile: string;
}

interface Loaded {
  readonly source: ConfigSource;
  /** The values without the secret or the key. */
  toJSON(): ConfigValues;
}

/** Signing mode, loaded: the SecretKey is read. */
export type SignConfig = CommonValues &
  SignModeValues &
  Loaded & {
    /** The only place the SecretKey lives after loading. */
    readonly secretKey: Secret;
  };

/** Broker mode, loaded: the device key is read, and the broker's private CA when one is named. */
export type BrokerConfig = CommonValues &
  BrokerModeValues &
  Loaded & {
    readonly deviceKey: DeviceKey;
    /** PEM of brokerCaFile; null: the system CAs. */
    readonly brokerCa: string | null;
  };

export type AgentConfig = SignConfig | BrokerConfig;

/** One line for `botlink doctor`: which file and which variables made this configuration. */
export function describeSource(source: ConfigSource): string {
  const env = source.env.length > 0 ? source.env.join(', ') : '';
  if (source.file === null) return `environment only (${env || 'no variables'}); no file at ${source.defaultFile}`;
  return env ? `${source.file}, overridden by ${env}` : source.file;
}

const SECRET_FIX =
  'put the SecretKey in a file only the agent can read (chmod 600) and name it with ' +
  'secretKeyFile, or pass it with systemd LoadCredential=secret-key';

type LoadOptions = {
  file?: string;
  env?: NodeJS.ProcessEnv;
  defaultFile?: string;
  /** The name messages give the file (a config about to be written, read from a copy beside it); default: its path. */
  shownAs?: string;
  /** Broker mode with no botId (zero-touch): make the device key when there is none (`botlink run`, `botlink key`). */
  makeDeviceKey?: boolean;
};

/** Reads, merges and validates the agent configuration and its secret, or in broker mode its key (DESIGN §3.2). */
export function loadConfig(opts: LoadOptions = {}): AgentConfig {
  const { values, file, used, defaultFile } = readValues(opts);
  const source = Object.freeze({ file, env: Object.freeze(used.sort()), defaultFile });
  const config =
    values.mode === 'sign'
      ? { ...values, secretKey: Object.freeze(secretOf(values)), source }
      : { ...values, ...brokerOf(values, opts.makeDeviceKey === true && values.botId === undefined), source };
  Object.defineProperty(config, 'toJSON', { value: () => values, enumerable: false });
  return Object.freeze(config) as AgentConfig;
}

function secretOf(values: SignModeValues): Secret {
  try {
    return readSecretFile(values.secretKeyFile);
  } catch (err) {
    if (err instanceof SecretFileError) throw new ConfigError('secretKeyFile', err.message, { cause: err, fix: err.fix });
    throw err;
  }
}

/** The device key and the broker's CA; read last, like the secret, so an error here means every setting passed. */
function brokerOf(values: BrokerModeValues, make: boolean): { deviceKey: DeviceKey; brokerCa: string | null } {
  const brokerCa = values.brokerCaFile === null ? null : readCaFile(values.brokerCaFile);
  try {
    return { deviceKey: make ? ensureDeviceKey(values.deviceKeyFile).key : loadDeviceKey(values.deviceKeyFile), brokerCa };
  } catch (err) {
    if (err instanceof DeviceKeyError) throw new ConfigError('deviceKeyFile', err.message, { cause: err, fix: err.fix });
    throw err;
  }
}

function readCaFile(path: string): string {
  let pem: string;
  try {
    pem = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new ConfigError('brokerCaFile', `brokerCaFile ${path} cannot be read (${code})`, {
      cause: err,
      fix: "put the PEM of the CA that signed the broker's certificate there, readable by the agent",
    });
  }
  if (pem.includes('-----BEGIN CERTIFICATE-----')) return pem;
  throw new ConfigError('brokerCaFile', `brokerCaFile ${path} holds no PEM certificate`, {
    fix: "put the PEM of the CA that signed the broker's certificate there (-----BEGIN CERTIFICATE-----)",
  });
}

/** The configuration without its secret: for commands that only read what the daemon wrote (`botlink logs`). */
export function loadConfigValues(opts: LoadOptions = {}): ConfigValues {
  return readValues(opts).values;
}

function readValues(opts: LoadOptions): { values: ConfigValues; file: string | null; used: string[]; defaultFile: string } {
  const env = opts.env ?? process.env;
  const defaultFile = opts.defaultFile ?? DEFAULT_CONFIG_FILE;
  const by = opts.file !== undefined ? '--config' : env.BOTLINK_CONFIG !== undefined ? 'BOTLINK_CONFIG' : null;
  const named = opts.file ?? env.BOTLINK_CONFIG ?? defaultFile;
  if (named === '') throw new ConfigError('config', `${by} is empty`, { fix: 'give the path of the config file' });
  const path = resolve(named);
  const fileValues = readConfigFile(path, by);
  const file = fileValues ? path : null;
  const shown = opts.shownAs ?? path;
  const { raw, used } = collect(path, shown, fileValues ?? {}, env);
  const setHint = (key: ConfigKey) => `set "${key}" in ${shown} or ${envVarFor(key)}`;
  const text = (key: TextKey) => textValue(key, raw.get(key));

  const baseUrl = text('baseUrl');
  if (baseUrl === undefined) {
    throw new ConfigError('baseUrl', 'baseUrl is required', { fix: `${setHint('baseUrl')} (e.g. "https://api.example.com")` });
  }
  const stateDir = text('stateDir') ?? DEFAULTS.stateDir;
  const mode = modeValues({ raw, text, setHint, credentials: env.CREDENTIALS_DIRECTORY, stateDir, used });
  const botId = text('botId');
  const vendorId = text('vendorId');
  if (botId === undefined && vendorId === undefined) {
    throw new ConfigError('botId', 'botId or vendorId is required', {
      fix: `${setHint('botId')}, or set "vendorId" (with "deviceId") so the agent provisions itself`,
    });
  }
  const tunables = tunableValues(raw);
  const runtimeDir = text('runtimeDir') ?? DEFAULTS.runtimeDir;

  const values: ConfigValues = Object.freeze({
    baseUrl,
    wsUrl: text('wsUrl') ?? voiceChatUrl(baseUrl),
    ...mode,
    botId,
    vendorId,
    deviceId: text('deviceId'),
    stateDir,
    runtimeDir,
    logFile: text('logFile') ?? DEFAULTS.logFile,
    logLevel: (text('logLevel') ?? DEFAULTS.logLevel) as LogLevel,
    httpParserTier: (text('httpParserTier') ?? DEFAULTS.httpParserTier) as ParserTier,
    ...localValues(raw, runtimeDir),
    ...tunables,
  });
  return { values, file, used, defaultFile };
}

/** Every setting given, file first, then BOTLINK_* variables over it; names nothing unknown. */
function collect(path: string, shown: string, fileValues: Record<string, unknown>, env: NodeJS.ProcessEnv) {
  const raw = new Map<ConfigKey, Raw>();
  for (const [name, value] of Object.entries(fileValues)) {
    if (name.toLowerCase() === 'secretkey') {
      throw new ConfigError(name, `"${name}" in ${shown}: the secret is never read from the config file`, { fix: SECRET_FIX });
    }
    if (!(CONFIG_KEYS as readonly string[]).includes(name)) throw unknown(name, `"${name}" in ${shown}`, CONFIG_KEYS);
    raw.set(name as ConfigKey, {
      value,
      where: `"${name}" in ${shown}`,
      fix: `fix it in ${shown}`,
      baseDir: dirname(path),
      fromEnv: false,
    });
  }
  const used: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith('BOTLINK_') || name === 'BOTLINK_CONFIG' || isBrokerVariable(name) || value === undefined) continue;
    if (name === 'BOTLINK_SECRET_KEY') {
      throw new ConfigError('secretKey', `${name}: the secret is never read from the environment`, { fix: SECRET_FIX });
    }
    const key = ENV_TO_KEY.get(name);
    if (key === undefined) throw unknown(name, `environment variable ${name}`, [...ENV_TO_KEY.keys(), 'BOTLINK_CONFIG']);
    raw.set(key, { value, where: `${name} (${key})`, fix: `fix or unset ${name}`, baseDir: process.cwd(), fromEnv: true });
    used.push(name);
  }
  return { raw, used };
}

function unknown(name: string, where: string, known: Iterable<string>): ConfigError {
  const near = closest(name, known);
  const fix = near ? `did you mean "${near}"?` : `use a known setting: ${[...known].join(', ')}`;
  return new ConfigError(name, `${where} is not a botlink setting`, { fix });
}
