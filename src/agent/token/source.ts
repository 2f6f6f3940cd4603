import type { Logger } from 'pino';
import type { Identity } from '../../protocol/wire.js';
import type { IdentityMode } from '../config/mode.js';
import type { TokenPair } from '../store/token-store.js';
import type { TrustedTime } from '../time/trusted-time.js';

/** What one renewal knows: for whom, the time to stamp with, and how long the new token must live. */
export interface RenewContext {
  identity: Identity;
  time: TrustedTime;
  log: Logger;
  /** The life the new access token must have: the manager's renewal threshold (policy.renewalThresholdMs). */
  minValidityMs: number;
}

/** A renewed pair, and the trusted server time it was stamped with (undefined: the local clock's guess). */
export interface Renewed {
  pair: TokenPair;
  serverNow: number | undefined;
}

/**
 * Where tokens come from, chosen once at composition: the device signs getToken itself (signing mode),
 * or asks the vendor's broker (DESIGN §3.7). The manager decides when; the source only does it.
 */
export interface TokenSource {
  readonly mode: IdentityMode;
  /** How the log says a token was obtained: `signed`, `issued by the broker`. */
  readonly obtained: string;
  /** A new token: getToken signed with trusted time (DESIGN §1.2), or the broker's. */
  obtain(ctx: RenewContext): Promise<Renewed>;
  /** The pair's access token renewed with its refresh token; 'refused' means obtain a new one. */
  refresh(ctx: RenewContext, pair: TokenPair): Promise<Renewed | 'refused'>;
  /** One server time sample from whoever issues the tokens; rejects when none could be had. */
  sampleServerTime(): Promise<void>;
}
