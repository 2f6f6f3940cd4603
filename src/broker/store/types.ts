/**
 * The broker's store (DESIGN §3.7): one contract, kept by SQLite (one host) and by PostgreSQL (replicas).
 * Every rule that must hold across replicas — a code's uses, nonces, single flight per botId, rate
 * limits, revocation — is decided inside one of these calls by the database, never in a replica's memory.
 * Times are wall-clock ms. Tokens arrive and leave already encrypted: the store never sees a key.
 */

import type { AuditLog } from './audit-types.js';
import type { CodeKind, DeviceFilter, OperatorBook } from './operator-types.js';
import type { PendingBook, PendingKey } from './pending-types.js';
import type { AgainSpend, RequestSpend, SpendOutcome, VerifiedRequestSpend } from './request-types.js';

export type { AuditLog, AuditPrune, AuditRow } from './audit-types.js';
export type { CodeFilter, CodeKind, CodeListing, DeviceFilter, OperatorBook, RemovedPreauth } from './operator-types.js';
export type * from './pending-types.js';
export type * from './request-types.js';

import type { AdminStore } from './admin-types.js';

export type StoreKind = 'sqlite' | 'postgres';

export interface CodeRow {
  /** Random (80 bits, hex), independent of the code: operators name a code by it, never by the code. */
  id: string;
  /** HMAC of the code (hex): the code itself is never stored. */
  hmac: string;
  vendorId: string;
  kind: CodeKind;
  /** adopt and replace codes are bound to one device; plain ones may be. */
  deviceId: string | null;
  usesLeft: number;
  expiresAt: number;
  createdAt: number;
}

export type KeyState = 'active' | 'revoked';
/** Why a key stopped answering: an operator's revoke, a replace code, or a rotation to a new key. */
export type RevokeReason = 'revoked' | 'replaced' | 'rotated';

export interface KeyRow {
  keyId: string;
  /** base64url of the 32 raw bytes. */
  publicKey: string;
  botId: string;
  deviceId: string;
  vendorId: string;
  state: KeyState;
  reason: RevokeReason | null;
  createdAt: number;
  lastSeenAt: number | null;
  /** When the key stopped answering (null while active). */
  revokedAt: number | null;
}

/**
 * A key dropped from the keys table (a botId keeps its last RETIRED_KEPT retired keys as rows) or rejected:
 * its public key and its final state, so its requests are still verified before they are answered.
 */
export interface Tombstone {
  keyId: string;
  publicKey: string;
  state: 'revoked' | 'rejected';
  /** When it was revoked or rejected. */
  entombedAt: number;
}

/** A key the store knows, in any state: its row, its tombstone, or its pending row. */
export type KnownKey = KeyRow | Tombstone | PendingKey;

export function isTombstone(key: KnownKey): key is Tombstone {
  return 'entombedAt' in key;
}

export function isPending(key: KnownKey): key is PendingKey {
  return 'firstAsked' in key;
}

export interface PreauthRow {
  keyId: string;
  publicKey: string;
  deviceId: string;
  vendorId: string;
  createdAt: number;
}

/** A device the broker knows: its botId and, while it has one, its active key. */
export interface DeviceRow {
  botId: string;
  deviceId: string;
  vendorId: string;
  keyId: string | null;
}

export interface TokenRow {
  botId: string;
  /** AES-256-GCM sealed (nonce, tag and ciphertext). */
  accessSealed: Buffer;
  accessExpiresAt: number;
  /** The lifetime the cloud gave this access token (expireIn), in seconds. */
  accessLifetimeS: number;
  refreshSealed: Buffer | null;
  refreshExpiresAt: number | null;
  updatedAt: number;
}

/** A key and its botId's cached token, if any. */
export interface KeyWithToken {
  key: KeyRow;
  token: TokenRow | undefined;
}

/** What admits a new key at enrollment; checked again inside the binding transaction. */
export type Admission = { by: 'code'; hmac: string } | { by: 'preauth'; keyId: string };

export interface EnrollCommit {
  admission: Admission;
  key: { keyId: string; publicKey: string };
  botId: string;
  deviceId: string;
  vendorId: string;
  /** The device's name (DESIGN §3.7: the enroll body's, else the deviceId), kept with the key; absent: the deviceId. */
  name?: string | undefined;
  /** replace: the botId's current key is revoked with reason 'replaced'; otherwise a bound botId or deviceId is a conflict. */
  replace: boolean;
  now: number;
}

/**
 * ok: bound. spent: the code had no use left, had expired, or the preauth row is gone (a race lost).
 * device-exists: the deviceId or botId is bound to (has) another active key and may not be replaced, or a
 * code would take a device pre-authorised for another key.
 * Any outcome but ok rolls the whole transaction back: nothing is spent.
 * key-exists: the keyId was enrolled before, in any state.
 */
export type EnrollOutcome = 'ok' | 'spent' | 'device-exists' | 'key-exists';

/** An enrollment's outcome, and the keyIds a replace revoked with it (none for any outcome but ok: rolled back). */
export interface Enrolled {
  outcome: EnrollOutcome;
  replaced: string[];
}

/** ok: the new key is active and the old one rotated away. revoked: the old key is no longer active. */
export type RotateOutcome = 'ok' | 'revoked' | 'key-exists';

export interface RevokeOptions {
  /** revoke --displace: queue a displacement due this long after the dropped token's expiry. */
  displaceAfterExpiryMs?: number;
}

export interface Revocation {
  /** The keys revoked: every key of the botId that was active when the revoke committed. */
  keyIds: string[];
  /** When the displacement this revoke queued is due (null: none was asked, no key revoked, or no token cached). */
  displaceAt: number | null;
}

/** A displacement taken off the queue: its botId, when it was due, and how many attempts at it failed before. */
export interface DueDisplacement {
  botId: string;
  dueAt: number;
  attempts: number;
}

/** One line per device (its active key, else its latest one), and one per pre-authorised, pending or rejected key. */
export interface DeviceListing {
  /** null for a key not enrolled (pre-authorised, pending, rejected): the cloud gives a botId only at enrollment. */
  botId: string | null;
  deviceId: string;
  vendorId: string;
  keyId: string;
  state: 'active' | 'revoked' | 'preauthorized' | 'pending' | 'rejected';
  lastSeenAt: number | null;
  /** The agent version its key last reported with a token request (null: none reported). */
  agentVersion: string | null;
}

/** How many devices are in each state, as `broker devices` would list them (its one line per botId, and per pre-authorised key). */
export type DeviceCounts = Record<DeviceListing['state'], number>;

/**
 * Last seen is kept to the minute: `broker devices` needs no finer, and writing the key row on every
 * request cost PostgreSQL a new row version and an entry in each of the keys table's indexes per request.
 */
export const LAST_SEEN_STEP_MS = 60_000;

/**
 * What spendVerified found and did. No key: nothing written. A key that is not active, or whose stored
 * public key is not the one verified: `spent` is undefined, nothing written. Else the spend, with the key
 * (as read before this request's last-seen) and its botId's cached token.
 */
export type VerifiedSpend = { key: undefined } | { key: KeyRow; token: TokenRow | undefined; spent: SpendOutcome | undefined };

/** Per-request bookkeeping: the keys requests name, their nonces and their counts. */
export interface RequestBook {
  /** A key in any state, its tombstone included. */
  findKey(keyId: string): Promise<KnownKey | undefined>;
  /** The window's hit, then — within the limit — the nonce, atomically across replicas: one step. */
  spend(r: RequestSpend): Promise<SpendOutcome>;
  /**
   * spend, for a request whose signature was verified with `r.publicKey`, in one step (one round trip):
   * the key and its botId's cached token are read, and only while the key is active with that public key
   * is anything written — the hit, then (within the limit) the nonce, then (a new nonce) last seen.
   * Revocation is read in the same step as the write it stops.
   */
  spendVerified(r: VerifiedRequestSpend): Promise<VerifiedSpend>;
  /**
   * A waiting key's later ask (§3.7 "Waiting"), in one step: spend's hit and nonce, then (a new nonce) its lastAsked;
   * undefined, writing nothing, when the key no longer waits for that device.
   */
  askAgain(r: AgainSpend): Promise<SpendOutcome | undefined>;
  /**
   * The key an enrollment carries (findKey), and in the same step, when it waits for the very device the request
   * names, its later ask (askAgain: `asked`); else nothing is written and `asked` is undefined.
   */
  findCarriedKey(r: AgainSpend): Promise<{ known: KnownKey | undefined; asked: SpendOutcome | undefined }>;
}

/** Codes, pre-authorisations, enrollment, rotation and revocation: the decisions, each one transaction. */
export interface Enrollment {
  addCode(row: CodeRow): Promise<void>;
  findCode(hmac: string): Promise<CodeRow | undefined>;
  findPreauth(keyId: string): Promise<PreauthRow | undefined>;
  /**
   * Rows for deviceIds already bound (an active key) or preauthorised, or whose keyId is known in any state,
   * are refused whole ('conflict', naming the first such deviceId).
   */
  addPreauth(rows: readonly PreauthRow[]): Promise<{ added: number } | { conflict: string }>;
  findDeviceByDeviceId(vendorId: string, deviceId: string): Promise<DeviceRow | undefined>;
  findDeviceByBotId(botId: string): Promise<DeviceRow | undefined>;
  /** Whether a preauth row names this device (a plain code may not take a pre-authorised device). */
  isPreauthorized(vendorId: string, deviceId: string): Promise<boolean>;
  /** One transaction: re-check and spend the admission, check bindings, bind the key (and revoke the old on replace). */
  enroll(commit: EnrollCommit): Promise<Enrolled>;
  /** One transaction: the old key must still be active; the new keyId must be new in every state. */
  rotate(oldKeyId: string, newKey: { keyId: string; publicKey: string }, now: number): Promise<RotateOutcome>;
  /**
   * Revokes every key of the botId active when it commits (a key a concurrent rotation made included: the
   * botId's keys change one at a time), drops its preauth rows and its cached tokens; the keyIds revoked.
   * With `displaceAfterExpiryMs`, a revoke that revoked a key queues a displacement due that long after the
   * expiry of the token it dropped (none without one), in the same transaction.
   */
  revoke(botId: string, now: number, opts?: RevokeOptions): Promise<Revocation>;
  listDevices(filter?: DeviceFilter): Promise<DeviceListing[]>;
  /** listDevices' lines counted by state: one scan of the keys, for /metrics (which caches it). */
  countDevices(): Promise<DeviceCounts>;
}

/** The botIds' sealed tokens, and the lock that makes one cloud call per botId at a time. */
export interface TokenCache {
  readToken(botId: string): Promise<TokenRow | undefined>;
  /** Writes the botId's token only while `keyId` is still its active key; whether it did (no: revoked meanwhile). */
  keepToken(keyId: string, row: TokenRow): Promise<boolean>;
  /**
   * Runs `fn` while holding the botId's lock, across replicas (PostgreSQL: an advisory lock on a
   * dedicated connection; SQLite: one process owns the file). The lock is released when fn settles,
   * or when the holder's connection dies (kill -9).
   */
  withBotLock<T>(botId: string, fn: () => Promise<T>): Promise<T>;
}

/**
 * The displacements revoke --displace leaves due (DESIGN §3.7): a replica's housekeeping takes each off the
 * queue once due by the store's clock — exactly one replica takes each — and puts back one that failed.
 */
export interface DisplacementQueue {
  /** At most `max` displacements due by the store's clock, removed from the queue, soonest first. */
  claimDisplacements(max: number): Promise<DueDisplacement[]>;
  /** Queues one again, due `afterMs` from the store's now with `attempts`; a later one queued for the botId meanwhile stands. */
  requeueDisplacement(botId: string, afterMs: number, attempts: number): Promise<void>;
}

/** The store itself: which database, its clock, the sweep of what has expired, and closing. */
export interface Housekeeping {
  readonly kind: StoreKind;
  /** The store's own clock (ms): nonces are kept by it, so replicas with skewed clocks agree. */
  now(): Promise<number>;
  /** Deletes nonces past their keepUntil and rate windows older than `windowsBefore`. */
  sweep(windowsBefore: number): Promise<void>;
  close(): Promise<void>;
}

export interface BrokerStore
  extends RequestBook,
    Enrollment,
    OperatorBook,
    PendingBook,
    TokenCache,
    DisplacementQueue,
    AuditLog,
    Housekeeping {
  /** The admin API's tokens, sessions, pages and counts (DESIGN §3.8). */
  readonly admin: AdminStore;
}
