/**
 * The admin API's store (AdminBook, FleetViews: admin-types.ts), written once over the same Driver as the rest
 * of the store (sql-store.ts). A revoked token's or ended session's HMAC is refused by the next read on any replica.
 */
import type { Driver } from './driver.js';
import {
  ADD_ADMIN_TOKEN,
  ADMIN_TOKEN_BY_HMAC,
  AUDIT_MINUTES_SINCE,
  CODE_PAGE,
  DEVICE_ITEM_OF_KEY,
  END_SESSION,
  KEPT_COUNTS,
  KEYS_OF_BOT,
  LIST_ADMIN_TOKENS,
  SESSION_BY_HMAC,
  TOUCH_ADMIN_TOKEN,
  auditPageQuery,
  devicePageQuery,
  pendingPageQuery,
  preauthPageQuery,
} from './admin-statements.js';
import type {
  AdminStore,
  AdminIdentity,
  AdminSessionRow,
  AdminTokenListing,
  AdminTokenRow,
  AuditBefore,
  AuditItem,
  AuditPageFilter,
  DeviceAfter,
  DeviceItemRow,
  DevicePageFilter,
  KeptCount,
  KeyOfDevice,
  PendingPageFilter,
  PendingPageItem,
  PreauthItem,
} from './admin-types.js';
import type { BinaryCollation } from './keyset.js';
import { openSessionTx, revokeAdminTokenTx } from './rules/admin.js';
import { all, get, run } from './sql.js';
import type { CodeListing } from './operator-types.js';

/** PostgreSQL returns BIGINT and SUM as strings: every count and time leaves the store as a number. */
const num = (v: unknown): number => Number(v);
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

export class SqlAdminStore implements AdminStore {
  readonly #d: Driver;

  constructor(driver: Driver) {
    this.#d = driver;
  }

  /** Byte order, as this database names it. */
  get #binary(): BinaryCollation {
    return this.#d.kind === 'sqlite' ? 'BINARY' : '"C"';
  }

  async addAdminToken(t: AdminTokenRow): Promise<boolean> {
    return (await this.#d.decide(run(ADD_ADMIN_TOKEN, t.name, t.hmac, t.role, t.createdAt, t.expiresAt), () => true)) === 1;
  }

  async listAdminTokens(): Promise<AdminTokenListing[]> {
    const rows = await this.#d.run(all<AdminTokenListing>(LIST_ADMIN_TOKENS), 'read');
    return rows.map((r) => ({
      ...r,
      createdAt: num(r.createdAt),
      expiresAt: num(r.expiresAt),
      lastUsedAt: numOrNull(r.lastUsedAt),
      revokedAt: numOrNull(r.revokedAt),
    }));
  }

  revokeAdminToken(name: string, now: number): Promise<{ sessions: number } | undefined> {
    return this.#d.decide(revokeAdminTokenTx(name, now), () => true);
  }

  async adminTokenByHmac(hmac: string, now: number): Promise<AdminIdentity | undefined> {
    const row = await this.#d.run(get<AdminIdentity>(ADMIN_TOKEN_BY_HMAC, hmac, now), 'read');
    return row && { ...row, expiresAt: num(row.expiresAt), lastUsedAt: numOrNull(row.lastUsedAt) };
  }

  /** Not a decision: a last use lost to a power cut is a minute's less precision. */
  async touchAdminToken(name: string, now: number): Promise<void> {
    await this.#d.run(run(TOUCH_ADMIN_TOKEN, name, now), 'write');
  }

  openAdminSession(s: AdminSessionRow, now: number): Promise<void> {
    return this.#d.decide(openSessionTx(s, now), () => true);
  }

  async adminSessionByHmac(hmac: string, now: number): Promise<(AdminIdentity & { sessionExpiresAt: number }) | undefined> {
    const row = await this.#d.run(get<AdminIdentity & { sessionExpiresAt: number }>(SESSION_BY_HMAC, hmac, now), 'read');
    return (
      row && { ...row, expiresAt: num(row.expiresAt), lastUsedAt: numOrNull(row.lastUsedAt), sessionExpiresAt: num(row.sessionExpiresAt) }
    );
  }

  async endAdminSession(hmac: string): Promise<string | undefined> {
    return (await this.#d.decide(get<{ tokenName: string }>(END_SESSION, hmac), () => true))?.tokenName;
  }

  async keptCounts(): Promise<KeptCount[]> {
    const rows = await this.#d.run(all<KeptCount>(KEPT_COUNTS), 'read');
    return rows.map((r) => ({ ...r, n: num(r.n) }));
  }

  async auditCountsSince(since: number): Promise<{ action: string; outcome: string; n: number }[]> {
    const minute = Math.floor(since / 60_000) * 60_000;
    const rows = await this.#d.run(all<{ action: string; outcome: string; n: unknown }>(AUDIT_MINUTES_SINCE, minute), 'read');
    return rows.map((r) => ({ action: r.action, outcome: r.outcome, n: num(r.n) }));
  }

  async pageDevices(filter: DevicePageFilter, after: DeviceAfter | null, limit: number): Promise<DeviceItemRow[]> {
    const q = devicePageQuery({ ...filter, after, limit }, this.#binary);
    return (await this.#d.run(all<DeviceItemRow>(q.sql, ...q.params), 'read')).map(deviceItem);
  }

  async pagePending(filter: PendingPageFilter, after: DeviceAfter | null, limit: number): Promise<PendingPageItem[]> {
    const q = pendingPageQuery({ ...filter, after, limit }, this.#binary);
    const rows = await this.#d.run(all<PendingPageItem>(q.sql, ...q.params), 'read');
    return rows.map((r) => ({ ...r, firstAsked: num(r.firstAsked), lastAsked: num(r.lastAsked), duplicates: num(r.duplicates) }));
  }

  async deviceItemOfKey(keyId: string): Promise<DeviceItemRow | undefined> {
    const row = await this.#d.run(get<DeviceItemRow>(DEVICE_ITEM_OF_KEY, keyId), 'read');
    return row && deviceItem(row);
  }

  async keysOfBot(botId: string): Promise<KeyOfDevice[]> {
    const rows = await this.#d.run(all<KeyOfDevice>(KEYS_OF_BOT, botId), 'read');
    return rows.map((r) => ({ ...r, createdAt: num(r.createdAt), retiredAt: numOrNull(r.retiredAt) }));
  }

  async pageAudit(filter: AuditPageFilter, before: AuditBefore | null, limit: number): Promise<AuditItem[]> {
    const q = auditPageQuery({ ...filter, before, limit });
    const rows = await this.#d.run(all<AuditItem>(q.sql, ...q.params), 'read');
    return rows.map((r) => ({ ...r, id: num(r.id), at: num(r.at) }));
  }

  async pageCodes(
    filter: { vendorId?: string | undefined; now: number },
    after: { expiresAt: number; id: string } | null,
    limit: number,
  ): Promise<CodeListing[]> {
    const rows = await this.#d.run(
      all<CodeListing>(CODE_PAGE, filter.now, filter.vendorId ?? null, after?.expiresAt ?? null, after?.id ?? null, limit),
      'read',
    );
    return rows.map((r) => ({ ...r, usesLeft: num(r.usesLeft), expiresAt: num(r.expiresAt) }));
  }

  async pagePreauth(
    filter: { vendorId?: string | undefined },
    after: { vendorId: string; deviceId: string } | null,
    limit: number,
  ): Promise<PreauthItem[]> {
    const q = preauthPageQuery(filter.vendorId, after, limit);
    const rows = await this.#d.run(all<PreauthItem>(q.sql, ...q.params), 'read');
    return rows.map((r) => ({ ...r, addedAt: num(r.addedAt) }));
  }
}

function deviceItem(r: DeviceItemRow): DeviceItemRow {
  return { ...r, lastSeenAt: numOrNull(r.lastSeenAt), refusalAt: numOrNull(r.refusalAt) };
}
