import { TUNABLE_DEFAULTS, type TunableKey } from './defaults.js';

export const TEXT_KEYS = [
  'baseUrl',
  'wsUrl',
  'accessKeyId',
  'secretKeyFile',
  'botId',
  'vendorId',
  'deviceId',
  'stateDir',
  'runtimeDir',
  'logFile',
  'logLevel',
  'brokerUrl',
  'brokerCaFile',
  'deviceKeyFile',
  'httpParserTier',
] as const;
export type TextKey = (typeof TEXT_KEYS)[number];
/** The local API's keys and metricsFile (DESIGN §3.2, §3.5): read by local.ts, each with a value of its own shape. */
export const LOCAL_KEYS = ['localSocket', 'localGroup', 'metricsFile'] as const;
export type LocalKey = (typeof LOCAL_KEYS)[number];
export type ConfigKey = TextKey | LocalKey | TunableKey;
export const TUNABLE_KEYS = Object.freeze(Object.keys(TUNABLE_DEFAULTS) as TunableKey[]);
export const CONFIG_KEYS: readonly ConfigKey[] = Object.freeze([...TEXT_KEYS, ...LOCAL_KEYS, ...TUNABLE_KEYS]);

/** `baseUrl` → `BOTLINK_BASE_URL`. */
export function envVarFor(key: ConfigKey): string {
  return `BOTLINK_${key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;
}

/** `BOTLINK_BASE_URL` → `baseUrl`, for every key. */
export const ENV_TO_KEY: ReadonlyMap<string, ConfigKey> = new Map(CONFIG_KEYS.map((k) => [envVarFor(k), k]));
