/** The admin API's part of the broker's store (DESIGN §3.8): admin tokens, console sessions, and the fleet's pages and counts. */
import type { AuditRow } from './audit-types.js';
import type { LineKey } from './keyset.js';
import type { CodeListing } from './operator-types.js';

export type AdminRole = 'viewer' | 'operator';

/** A new admin token as stored: its HMAC, never the token. */
export interface AdminTokenRow {
  name: string;
  hmac: string;
  role: AdminRole;
  createdAt: number;
  expiresAt: number;
}

/** `broker admin-token list`: every token ever made (a revoked one keeps its name). */
export interface AdminTokenListing {
  name: string;
  role: AdminRole;
  createdAt: number;
  expiresAt: number;
  lastUsedAt: number | null;
  revokedAt: number | null;
}

/** Who a live token (or a session it opened) acts as, re-read on every request. */
export interface AdminIdentity {
  name: string;
  role: AdminRole;
  /** The token's expiry. */
  expiresAt: number;
  lastUsedAt: number | null;
}

/** A console session: its HMAC, the token that opened it, and its end. */
export interface AdminSessionRow {
  hmac: string;
  tokenName: string;
  createdAt: number;
  expiresAt: number;
}

export interface AdminBook {
  /** false: the name is taken (by a live, expired or revoked token: names are never reused). */
  addAdminToken(row: AdminTokenRow): Promise<boolean>;
  listAdminTokens(): Promise<AdminTokenListing[]>;
  /** Revokes the live token of this name and ends its sessions, in one transaction; undefined when there is none. */
  revokeAdminToken(name: string, now: number): Promise<{ sessions: number } | undefined>;
  /** The token with this HMAC while it is neither revoked nor expired at `now`. */
  adminTokenByHmac(hmac: string, now: number): Promise<AdminIdentity | undefined>;
  /** Sets last use to `now` unless it was set less than a minute before. */
  touchAdminToken(name: string, now: number): Promise<void>;
  /** Stores the session (and drops sessions that ended before `now`). */
  openAdminSession(row: AdminSessionRow, now: number): Promise<void>;
  /** The session's token, while the session and the token both live at `now`. */
  adminSessionByHmac(hmac: string, now: number): Promise<(AdminIdentity & { sessionExpiresAt: number }) | undefined>;
  /** Ends the session; the name of the token that opened it, undefined when there was none. */
  endAdminSession(hmac: string): Promise<string | undefined>;
}

/** The states a devices page lists: an enrolled key's, a pre-authorised, a waiting or a rejected key's. */
export const DEVICE_STATES = ['active', 'revoked', 'preauthorized', 'pending', 'rejected'] as const;
export type DeviceState = (typeof DEVICE_STATES)[number];

/**
 * A line of the devices list: a key in any state (botId null but for an enrolled key's); lastSeenAt a pending key's
 * last ask; name the device's (a pending key's the one it asked with; null for a pre-authorised or rejected key, and
 * for a key enrolled before migration 10).
 */
export interface DeviceItemRow {
  botId: string | null;
  deviceId: string;
  vendorId: string;
  keyId: string;
  state: DeviceState;
  lastSeenAt: number | null;
  agentVersion: string | null;
  refusalCode: string | null;
  refusalAt: number | null;
  name: string | null;
}

/** The devices list's filters: each absent means any; q a literal prefix of botId or deviceId. */
export interface DevicePageFilter {
  state?: DeviceState | undefined;
  vendorId?: string | undefined;
  q?: string | undefined;
}

/** Where a devices or pending page starts: after this line (its order: vendorId, deviceId, keyId; with q deviceId first). */
export type DeviceAfter = LineKey;

/** The pending page's filters: each absent means any; q a literal prefix of the deviceId. */
export interface PendingPageFilter {
  vendorId?: string | undefined;
  q?: string | undefined;
}

/** A line of the pending page (DESIGN §3.8): a waiting key and how many others wait for its (vendorId, deviceId). */
export interface PendingPageItem {
  keyId: string;
  deviceId: string;
  vendorId: string;
  name: string;
  source: string;
  firstAsked: number;
  lastAsked: number;
  /** How many other keys wait for the same (vendorId, deviceId). */
  duplicates: number;
}

export interface KeyOfDevice {
  keyId: string;
  state: 'active' | 'revoked';
  createdAt: number;
  retiredAt: number | null;
}

/** An audit row as a page reads it: its id (the page's order after `at`), without its fold bookkeeping. */
export type AuditItem = Omit<AuditRow, 'count' | 'fold'> & { id: number };

export interface AuditPageFilter {
  botId?: string | undefined;
  keyId?: string | undefined;
  action?: string | undefined;
}

/** Where an audit page starts, newest first: before this event. */
export interface AuditBefore {
  at: number;
  id: number;
}

export interface PreauthItem {
  vendorId: string;
  deviceId: string;
  keyId: string;
  addedAt: number;
}

/** A count the store keeps: kind `state` (active, revoked, preauthorized) or `version` (active keys; '' none reported). */
export interface KeptCount {
  kind: string;
  name: string;
  n: number;
}

export interface FleetViews {
  /** The counts kept by the store's triggers: no scan. */
  keptCounts(): Promise<KeptCount[]>;
  /** Tokens issued and refusals since `since` (to the minute), by action and outcome: the per-minute counts, no scan of the audit. */
  auditCountsSince(since: number): Promise<{ action: string; outcome: string; n: number }[]>;
  pageDevices(filter: DevicePageFilter, after: DeviceAfter | null, limit: number): Promise<DeviceItemRow[]>;
  /** Waiting keys, a keyset page over their index (the source's CIDR filter is the caller's, over these pages). */
  pagePending(filter: PendingPageFilter, after: DeviceAfter | null, limit: number): Promise<PendingPageItem[]>;
  /** The line of the key (undefined: no line — a revoked key's tombstone, or unknown). */
  deviceItemOfKey(keyId: string): Promise<DeviceItemRow | undefined>;
  keysOfBot(botId: string): Promise<KeyOfDevice[]>;
  pageAudit(filter: AuditPageFilter, before: AuditBefore | null, limit: number): Promise<AuditItem[]>;
  pageCodes(
    filter: { vendorId?: string | undefined; now: number },
    after: { expiresAt: number; id: string } | null,
    limit: number,
  ): Promise<CodeListing[]>;
  pagePreauth(
    filter: { vendorId?: string | undefined },
    after: { vendorId: string; deviceId: string } | null,
    limit: number,
  ): Promise<PreauthItem[]>;
}

/** The admin API's part of the store. */
export type AdminStore = AdminBook & FleetViews;
