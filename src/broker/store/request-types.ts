/** What a signed request writes in the broker's store (types.ts' RequestBook): its nonce, its count and last seen. */

/** A rate limit's window as the store counts it: its bucket (`kind:id/windowMs`), its start, and the limit. */
export interface RateWindow {
  bucket: string;
  start: number;
  limit: number;
}

/** What a request whose signature verified writes: its nonce and, under a limit, one hit in the limit's window. */
export interface RequestSpend {
  keyId: string;
  nonce: string;
  /** The nonce is kept until then, by the store's clock. */
  keepUntil: number;
  /** Absent: the request is under no limit, and nothing is counted. */
  window?: RateWindow;
  /** A request its admission refused: its count is taken (a failed code attempt), its nonce is not (DESIGN §3.7). */
  countOnly?: boolean;
  /** The agent version the request reports (a token request's `agent.version`): kept with last seen, on an enrolled key. */
  agentVersion?: string | undefined;
}

/** A request signed by an enrolled key (BrokerStore.spendVerified). */
export interface VerifiedRequestSpend extends RequestSpend {
  /** The public key (base64url) the request's signature was verified with: nothing is written unless it is the key's. */
  publicKey: string;
  /** The request's time: last seen moves to it, within the limit, when at least LAST_SEEN_STEP_MS past the one recorded. */
  now: number;
}

/** A waiting key's later ask (§3.7 "Waiting"): written only while the key waits, with this public key, for this device. */
export interface AgainSpend extends VerifiedRequestSpend {
  deviceId: string;
  /** The vendorId the ask names; undefined: any. */
  vendorId: string | undefined;
}

/**
 * count: the window's count after this hit, when the request is under a limit (counted first: a request
 * past its limit takes no nonce). replayed: within its limit, the nonce was one some replica saw before.
 */
export interface SpendOutcome {
  count: number | undefined;
  replayed: boolean;
}
