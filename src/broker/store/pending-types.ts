/** The pending part of the broker's store (types.ts): keys that enrolled with no code and wait for an operator (DESIGN §3.7). */
import type { DeviceType } from '../../protocol/wire.js';

/** A key waiting for an operator, pinned to its first ask: the device it named then is the one it may become. */
export interface PendingRow {
  keyId: string;
  /** base64url of the 32 raw bytes. */
  publicKey: string;
  vendorId: string;
  deviceId: string;
  appId: string;
  type: DeviceType;
  name: string;
  /** The first ask's source address. */
  source: string;
  firstAsked: number;
  lastAsked: number;
}

/** A pending key as the key stage finds it (RequestBook.findKey). */
export type PendingKey = PendingRow & { state: 'pending' };

/** A first ask, and the limits the transaction that makes its row holds it to. */
export interface PendingAsk {
  row: PendingRow;
  /** The source as limits count it (IPv6 by /64): pendingPerSource counts rows by it. */
  sourceBucket: string;
  /** pendingPerSource: keys waiting from one source at once. */
  perSource: number;
  /** pendingMax: keys waiting for one vendor at once. */
  perVendor: number;
  /** The key's window of two asks a minute (the rate window's bucket and start): a row made counts its first ask there. */
  window: { bucket: string; start: number };
}

/** What a first ask is judged by before its nonce: the device held (a key in a state but pending, or pre-authorised), the keys waiting. */
export interface AskStanding {
  held: boolean;
  /** Keys waiting from the source (its bucket). */
  source: number;
  /** Keys waiting for the vendor. */
  vendor: number;
}

/**
 * created: the key waits. asked: it waited already (a concurrent first ask won). device-exists: the broker holds
 * a key of the device in a state other than pending, or a pre-authorisation of it; key-exists: the keyId is
 * known in another state. source-full, vendor-full: pendingPerSource, pendingMax.
 */
export type AskOutcome = 'created' | 'asked' | 'device-exists' | 'key-exists' | 'source-full' | 'vendor-full';

/** An operator's acceptance: the pending key, the device the operator expects, the botId the cloud registered. */
export interface AcceptCommit {
  keyId: string;
  deviceId: string;
  botId: string;
  now: number;
}

/**
 * ok: the key is active for the botId. gone: it no longer waits for that device (rejected, dropped, or accepted
 * meanwhile): nothing bound. device-exists: the device or the botId is bound, or the device pre-authorised.
 */
export interface Accepted {
  outcome: 'ok' | 'gone' | 'device-exists';
  /** The other keys that waited for the device, rejected in the same transaction (none unless ok). */
  rejected: PendingRow[];
}

/** A bulk reject's filter: every field given must hold; `source` tests the first ask's source address. */
export interface PendingFilter {
  vendorId?: string | undefined;
  source?: ((address: string) => boolean) | undefined;
  firstAskedBefore?: number | undefined;
}

/** `broker pending`: a pending row and how many other keys wait for the same (vendorId, deviceId). */
export type PendingItem = PendingRow & { duplicates: number };

/** Keys waiting for an operator: their asks, the operator's verdicts, and the housekeeping's drop (DESIGN §3.7). */
export interface PendingBook {
  /** One transaction: the device's lock, the rules of a first ask, the limits, then the row. */
  askPending(ask: PendingAsk): Promise<AskOutcome>;
  /** One read: whether the device is held, and how many keys wait from the source and for the vendor, so a first ask over a limit is refused before it writes. */
  askStanding(sourceBucket: string, vendorId: string, deviceId: string): Promise<AskStanding>;
  findPending(keyId: string): Promise<PendingRow | undefined>;
  /** Every waiting key of the vendor (all when undefined), by vendorId, deviceId and first ask. */
  listPending(vendorId?: string): Promise<PendingItem[]>;
  /**
   * One transaction, under the device's and the botId's locks: the key must still wait for this device; binds it
   * (a plain code's rules), and rejects every other key waiting for the device.
   */
  acceptPending(commit: AcceptCommit): Promise<Accepted>;
  /** Rejects every waiting key the filter holds for (one keyId: `{keyId}`), in one transaction: their rows, now tombstones. */
  rejectPending(which: { keyId: string } | PendingFilter, now: number): Promise<PendingRow[]>;
  /** Drops the keys first asked before `before` (7 days, DESIGN §3.7): their rows, gone without a tombstone. */
  dropPending(before: number): Promise<PendingRow[]>;
}
