import type { Logger } from 'pino';
import type { Identity } from '../../protocol/wire.js';
import type { TokenStore } from '../store/token-store.js';
import type { Clock, Random } from '../../clock.js';
import type { ServerTime } from '../time/servertime.js';
import type { ClockStatus, TrustedTimeOptions } from '../time/trusted-time.js';
import type { BackoffSettings } from './backoff.js';
import type { PolicySettings } from './policy.js';
import type { TokenSource } from './source.js';

/** What a TokenManager is built from, and what it tells. */

export interface TokenManagerOptions {
  identity: Identity;
  baseUrl: string;
  /** '' in broker mode (the token store's key: StoreIdentity). */
  accessKeyId: string;
  store: TokenStore;
  /** Signing mode's cloud client, or the broker: chosen once, at composition. */
  source: TokenSource;
  serverTime: ServerTime;
  clock: Clock;
  checkTimeSync: TrustedTimeOptions['checkTimeSync'];
  log: Logger;
  policy?: PolicySettings;
  backoff?: BackoffSettings;
  /** Pace of saving again a pair the store refused (full or read-only disk). */
  saveBackoff?: BackoffSettings;
  /** Jitter of the refresh point and of the backoffs. */
  random: Random;
  /** Called on every change worth showing in status.json. */
  onChange?: () => void;
}

/** An access token held now, with its expiry in wall-clock ms as the server sees it. */
export interface HeldToken {
  token: string;
  expiresAt: number;
}

export interface TokenSnapshot {
  accessExpiresAt: number | undefined;
  refreshExpiresAt: number | undefined;
  clock: ClockStatus;
  lastError: { code: string; retry: string; message: string; fix: string | undefined } | undefined;
  renewals: { signed: number; refreshed: number };
  /** Failed renewals since start, by error code (the metrics, DESIGN §3.5). */
  failures: Record<string, number>;
  /** Whether the pair held is on disk; lastError says why not. */
  store: { persisted: boolean; lastError: string | null };
}
