/** What every route of the broker works with, built once by broker.ts. */
import type { CloudClient } from '../cloud/client.js';
import type { Clock } from '../clock.js';
import type { AuditTrail, RefusedKey } from './audit/trail.js';
import type { CloudGate } from './cloud-gate.js';
import type { BrokerLimits } from './config.js';
import type { UnsignedRefusals } from './auth/unsigned.js';
import type { DeviceCensus } from './device-census.js';
import type { KeyCache } from './key-cache.js';
import type { BrokerKeys } from './keys.js';
import type { BrokerMetrics } from './metrics.js';
import type { PendingPolicy } from './pending-policy.js';
import type { TokenIssuer } from './tokens.js';
import type { BrokerStore } from './store/types.js';
import type { VendorTokens } from './vendor-tokens.js';

export interface BrokerContext {
  store: BrokerStore;
  keys: BrokerKeys;
  /** Public keys of the devices that asked lately (a read saved, never a decision). */
  keyCache: KeyCache;
  /** Refusals of requests whose signature did not verify, per source, in memory. */
  unsigned: UnsignedRefusals;
  cloud: CloudClient;
  gate: CloudGate;
  issuer: TokenIssuer;
  vendors: VendorTokens;
  clock: Clock;
  limits: BrokerLimits;
  /** pendingEnrollment: who may wait for an operator when they enroll with no code. */
  pending: PendingPolicy;
  metrics: BrokerMetrics;
  /** Devices by state for /metrics, counted by the store at most every 30 s. */
  census: DeviceCensus;
  /** Every audit event: a log line at once, a row for the store in a batch — never a token, a code or a key. */
  audit: AuditTrail;
}

/** A request to a signed route once its body is read: who sent it, and from where (a trusted proxy's client). */
export interface SignedRequest {
  method: string;
  path: string;
  authorization: string | undefined;
  raw: Buffer;
  source: string;
  /** Set by the authentication stages once the signature verified: the key a refusal from then on is audited against. */
  signer?: RefusedKey;
}

export interface RouteAnswer {
  status: number;
  body: unknown;
  /** Seconds, sent as Retry-After (a pending enrollment's 202). */
  retryAfterS?: number;
}
