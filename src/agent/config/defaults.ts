import type { ParserTier } from '../../cloud/http.js';
import { DEFAULT_TIMEOUT_MS } from '../../cloud/client.js';
import { LINK_DEFAULTS } from '../link/options.js';
import { TOKEN_BACKOFF } from '../token/backoff.js';
import { DEFAULT_POLICY } from '../token/policy.js';

export const DEFAULT_CONFIG_FILE = '/etc/botlink/config.json';
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * Tunables beyond DESIGN §3.2: positive numbers, `…Ms` in milliseconds, `…S` in seconds. Each default is
 * read from the module it tunes, so the config and a module built without one cannot disagree.
 */
export const TUNABLE_DEFAULTS = Object.freeze({
  httpTimeoutMs: DEFAULT_TIMEOUT_MS,
  refreshMarginS: DEFAULT_POLICY.refreshMarginMs / 1000,
  resignMarginS: DEFAULT_POLICY.resignMarginMs / 1000,
  linkMarginS: LINK_DEFAULTS.tokenMarginMs / 1000,
  tokenBackoffBaseMs: TOKEN_BACKOFF.baseMs,
  tokenBackoffCapMs: TOKEN_BACKOFF.capMs,
  linkBackoffBaseMs: LINK_DEFAULTS.backoff.baseMs,
  linkBackoffCapMs: LINK_DEFAULTS.backoff.capMs,
  heartbeatIntervalMs: LINK_DEFAULTS.heartbeatIntervalMs,
  heartbeatTimeoutMs: LINK_DEFAULTS.heartbeatTimeoutMs,
  connectTimeoutMs: LINK_DEFAULTS.connectTimeoutMs,
  /** Local API connections at once (DESIGN §3.5); past it new ones are refused at once. */
  localConnectionsMax: 64,
});
export type TunableKey = keyof typeof TUNABLE_DEFAULTS;

/** Fixed defaults; wsUrl and secretKeyFile have derived defaults (see loadConfig). */
export const DEFAULTS = Object.freeze({
  stateDir: '/var/lib/botlink',
  runtimeDir: '/run/botlink',
  logFile: '/var/log/botlink/botlink.log',
  logLevel: 'info' as LogLevel,
  httpParserTier: 'baseline' as ParserTier,
  ...TUNABLE_DEFAULTS,
});
