import type { LookupFunction } from 'node:net';
import type { Logger } from 'pino';
import type { BackoffSettings } from '../token/backoff.js';
import type { Clock, Random } from '../../clock.js';

// The link's retry policy: how it waits after each kind of ending (decideLink reads these through LINK_DEFAULTS).

/** WebSocket reconnects: 0.5 s → 60 s, full jitter. */
export const LINK_BACKOFF: BackoffSettings = Object.freeze({ baseMs: 500, capMs: 60_000 });

/** REPEAT_CLIENT_SESSION: equal jitter, so waits run [30 s, 60 s), [60 s, 120 s), … up to [15, 30) min. */
export const DISPLACED_BACKOFF: BackoffSettings = Object.freeze({
  baseMs: 30_000,
  capMs: 1_800_000,
  jitter: 'equal',
});

/** 'botId not found or invalid': nothing will change soon, so retry slowly. */
export const BOT_INVALID_RETRY_MS = 300_000;

/** What the link needs from the token manager. */
export interface TokenSource {
  current(opts: { minLeftMs?: number; signal?: AbortSignal }): Promise<string>;
  invalidate(token?: string): void;
}

/** The link's tunables; each one left out takes its value from LINK_DEFAULTS. */
export interface LinkTunables {
  /** A token with less life than this is renewed before connecting (default 5 min). */
  tokenMarginMs?: number;
  backoff?: BackoffSettings;
  displacedBackoff?: BackoffSettings;
  botInvalidRetryMs?: number;
  heartbeatIntervalMs?: number;
  heartbeatTimeoutMs?: number;
  /** The whole handshake (connect, upgrade, any refusal body) gets this long in total (default 10 s). */
  connectTimeoutMs?: number;
  /** A connection up this long resets the reconnect backoff (default 60 s). */
  stableAfterMs?: number;
  /** Reconnects apps cause (new parameters, a re-attach) in any minute, at most (default 6). */
  appReconnectsPerMinute?: number;
}

export interface LinkOptions extends LinkTunables {
  wsUrl: string;
  botId: string;
  tokens: TokenSource;
  clock: Clock;
  log: Logger;
  /** Jitter source (default the system's); tests pin it. */
  random?: Random;
  /** A fresh sessionId for a connection no app decided (default a random UUID, as the guide advises). */
  newSessionId?: () => string;
  /** Resolves the WebSocket host; default the system resolver (tests inject failures and recovery). */
  lookup?: LookupFunction;
}

/** Every tunable with its value, and the botId the link speaks for: what its decisions and timers read. */
export interface LinkSettings extends Readonly<Required<LinkTunables>> {
  readonly botId: string;
}

/** 300 ms of 48 kHz 16-bit stereo PCM is 57,600 B (76,800 in base64 JSON): 1 MiB is ~13× that, as the relay's app limit (§3.5). */
export const MAX_CLOUD_MESSAGE_BYTES = 1024 * 1024;
/** Frames the cloud leaves unsent past this are refused (the caller drops them): memory stays bounded, audio fresh. */
export const MAX_CLOUD_BACKLOG_BYTES = 4 * 1024 * 1024;

/** The one source of the link's defaults (the config's tunables can read theirs from here). */
export const LINK_DEFAULTS: Readonly<Required<LinkTunables>> = Object.freeze({
  tokenMarginMs: 300_000,
  backoff: LINK_BACKOFF,
  displacedBackoff: DISPLACED_BACKOFF,
  botInvalidRetryMs: BOT_INVALID_RETRY_MS,
  // A silent link is cut at most 30 s after it last answered, as with a 20 s ping and a 10 s deadline,
  // without a deadline timer to wake for (heartbeat.ts).
  heartbeatIntervalMs: 15_000,
  heartbeatTimeoutMs: 15_000,
  connectTimeoutMs: 10_000,
  stableAfterMs: 60_000,
  appReconnectsPerMinute: 6,
});

/** Fills every tunable the caller left out, once, so no use site carries a default of its own. */
export function resolveLinkSettings(t: LinkTunables & { botId: string }): LinkSettings {
  return Object.freeze({
    botId: t.botId,
    tokenMarginMs: t.tokenMarginMs ?? LINK_DEFAULTS.tokenMarginMs,
    backoff: t.backoff ?? LINK_DEFAULTS.backoff,
    displacedBackoff: t.displacedBackoff ?? LINK_DEFAULTS.displacedBackoff,
    botInvalidRetryMs: t.botInvalidRetryMs ?? LINK_DEFAULTS.botInvalidRetryMs,
    heartbeatIntervalMs: t.heartbeatIntervalMs ?? LINK_DEFAULTS.heartbeatIntervalMs,
    heartbeatTimeoutMs: t.heartbeatTimeoutMs ?? LINK_DEFAULTS.heartbeatTimeoutMs,
    connectTimeoutMs: t.connectTimeoutMs ?? LINK_DEFAULTS.connectTimeoutMs,
    stableAfterMs: t.stableAfterMs ?? LINK_DEFAULTS.stableAfterMs,
    appReconnectsPerMinute: t.appReconnectsPerMinute ?? LINK_DEFAULTS.appReconnectsPerMinute,
  });
}
