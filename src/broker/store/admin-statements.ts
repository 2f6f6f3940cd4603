/**
 * The admin API's statements (DESIGN §3.8), written once for both databases like statements.ts. Pages are
 * keyset pages over an index: a statement per combination of filters present (so each is planned with its
 * own index), the page's start a row comparison, never an OFFSET.
 */
import { type BinaryCollation, KeysetPage, type KeysetRequest, Params, type Query } from './keyset.js';

const TOKEN_LISTING =
  'name, role, created_at AS "createdAt", expires_at AS "expiresAt", last_used_at AS "lastUsedAt", revoked_at AS "revokedAt"';

/** A name is taken by any row, revoked or expired: names are never reused. */
export const ADD_ADMIN_TOKEN =
  'INSERT INTO admin_tokens (name, hmac, role, created_at, expires_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name) DO NOTHING';
export const LIST_ADMIN_TOKENS = `SELECT ${TOKEN_LISTING} FROM admin_tokens ORDER BY name`;
export const REVOKE_ADMIN_TOKEN = 'UPDATE admin_tokens SET revoked_at = $2 WHERE name = $1 AND revoked_at IS NULL RETURNING name';
export const END_SESSIONS_OF_TOKEN = 'DELETE FROM admin_sessions WHERE token_name = $1';
export const ADMIN_TOKEN_BY_HMAC =
  'SELECT name, role, expires_at AS "expiresAt", last_used_at AS "lastUsedAt" FROM admin_tokens ' +
  'WHERE hmac = $1 AND revoked_at IS NULL AND expires_at > $2';
export const TOUCH_ADMIN_TOKEN =
  'UPDATE admin_tokens SET last_used_at = $2 WHERE name = $1 AND (last_used_at IS NULL OR last_used_at <= CAST($2 AS BIGINT) - 60000)';
export const DROP_ENDED_SESSIONS = 'DELETE FROM admin_sessions WHERE expires_at <= $1';
export const OPEN_SESSION = 'INSERT INTO admin_sessions (hmac, token_name, created_at, expires_at) VALUES ($1, $2, $3, $4)';
export const SESSION_BY_HMAC =
  'SELECT t.name, t.role, t.expires_at AS "expiresAt", t.last_used_at AS "lastUsedAt", s.expires_at AS "sessionExpiresAt" ' +
  'FROM admin_sessions s JOIN admin_tokens t ON t.name = s.token_name ' +
  'WHERE s.hmac = $1 AND s.expires_at > $2 AND t.revoked_at IS NULL AND t.expires_at > $2';
export const END_SESSION = 'DELETE FROM admin_sessions WHERE hmac = $1 RETURNING token_name AS "tokenName"';

// Keys that wait: the per-vendor counts pendingMax is judged by (pending_vendors, kept by triggers), summed.
export const KEPT_COUNTS =
  'SELECT kind, name, n FROM device_counts WHERE n <> 0 ' +
  "UNION ALL SELECT 'state', 'pending', SUM(waiting) FROM pending_vendors HAVING SUM(waiting) > 0";

/** Tokens and refusals counted by minute (audit_minutes) from the minute $1 on, by action and outcome. */
export const AUDIT_MINUTES_SINCE = 'SELECT action, outcome, SUM(n) AS n FROM audit_minutes WHERE minute >= $1 GROUP BY action, outcome';

/** The latest refusal audited against a key (the audit_key index), as two columns of a device line. */
const LAST_REFUSAL =
  '(SELECT outcome FROM audit a WHERE a.key_id = k.key_id AND a.action = \'refusal\' ORDER BY a.at DESC LIMIT 1) AS "refusalCode", ' +
  '(SELECT at FROM audit a WHERE a.key_id = k.key_id AND a.action = \'refusal\' ORDER BY a.at DESC LIMIT 1) AS "refusalAt"';

export interface DevicePage extends KeysetRequest {
  state?: string | undefined;
}

const NO_REFUSAL = 'CAST(NULL AS TEXT) AS "refusalCode", CAST(NULL AS BIGINT) AS "refusalAt"';
const KEY_LINE =
  'SELECT bot_id AS "botId", device_id AS "deviceId", vendor_id AS "vendorId", key_id AS "keyId", state, ' +
  `last_seen_at AS "lastSeenAt", agent_version AS "agentVersion", ${LAST_REFUSAL}, name FROM keys k`;
const PREAUTH_LINE =
  'SELECT CAST(NULL AS TEXT) AS "botId", device_id AS "deviceId", vendor_id AS "vendorId", key_id AS "keyId", ' +
  `'preauthorized' AS state, CAST(NULL AS BIGINT) AS "lastSeenAt", CAST(NULL AS TEXT) AS "agentVersion", ${NO_REFUSAL}, ` +
  'CAST(NULL AS TEXT) AS name FROM preauth k';
/** A key that waits: the name it asked with, its last ask as its last seen. */
const PENDING_LINE =
  'SELECT CAST(NULL AS TEXT) AS "botId", device_id AS "deviceId", vendor_id AS "vendorId", key_id AS "keyId", ' +
  `'pending' AS state, last_asked AS "lastSeenAt", CAST(NULL AS TEXT) AS "agentVersion", ${LAST_REFUSAL}, name FROM pending k`;
/** A rejected key: its tombstone, which keeps its device (only rejected ones are lines: a revoked key's device went with its row). */
const REJECTED_LINE =
  'SELECT CAST(NULL AS TEXT) AS "botId", device_id AS "deviceId", vendor_id AS "vendorId", key_id AS "keyId", ' +
  `state, CAST(NULL AS BIGINT) AS "lastSeenAt", CAST(NULL AS TEXT) AS "agentVersion", ${LAST_REFUSAL}, CAST(NULL AS TEXT) AS name ` +
  'FROM tombstones k';

/**
 * A devices page (keyset.ts): keys in every state, each source a side over its own index — keys (keys_device,
 * keys_device_first, the revoked ones keys_revoked and keys_revoked_first; with q the botIds' keys_bot, on
 * PostgreSQL keys_bot_first), pre-authorised keys (their unique
 * index, preauth_device_first), pending keys (pending_device, pending_device_first) and rejected keys' tombstones
 * (tombstones_rejected, tombstones_rejected_first) — unless `state` keeps one.
 */
export function devicePageQuery(page: DevicePage, binary: BinaryCollation): Query {
  const k = new KeysetPage(page, binary);
  const wants = (...states: string[]): boolean => page.state === undefined || states.includes(page.state);
  const parts: string[] = [];
  if (wants('active', 'revoked')) {
    // A literal, not a value: a partial index (keys_revoked) is chosen only for a state the statement names.
    const keyState = page.state === 'active' || page.state === 'revoked' ? `state = '${page.state}'` : undefined;
    parts.push(...k.side(KEY_LINE, [k.deviceInPrefix(), keyState]));
    // A botId of the prefix whose deviceId is not: the side above has those whose deviceId is.
    if (k.hasPrefix) parts.push(...k.side(KEY_LINE, [k.inPrefix(k.binary('bot_id')), `NOT (${k.inPrefix(k.device)})`, keyState]));
  }
  if (wants('preauthorized')) parts.push(...k.side(PREAUTH_LINE, [k.deviceInPrefix()]));
  if (wants('pending')) parts.push(...k.side(PENDING_LINE, [k.deviceInPrefix()]));
  if (wants('rejected')) parts.push(...k.side(REJECTED_LINE, ["state = 'rejected'", k.deviceInPrefix()]));
  if (parts.length === 0) throw new Error(`a devices page of unknown state ${page.state}`);
  return k.merged(parts);
}

const PENDING_ITEM =
  'SELECT key_id AS "keyId", device_id AS "deviceId", vendor_id AS "vendorId", name, source, first_asked AS "firstAsked", ' +
  'last_asked AS "lastAsked", (SELECT COUNT(*) FROM pending d WHERE d.vendor_id = k.vendor_id AND d.device_id = k.device_id) - 1 AS duplicates ' +
  'FROM pending k';

/** A pending page (keyset.ts) over pending_device or, with q, pending_device_first; each with how many others wait for its device. */
export function pendingPageQuery(page: KeysetRequest, binary: BinaryCollation): Query {
  const k = new KeysetPage(page, binary);
  return k.merged(k.side(PENDING_ITEM, [k.deviceInPrefix()]));
}

/** The line of one key in any state it has a line in (a revoked key's tombstone has none: its device went with its row). */
export const DEVICE_ITEM_OF_KEY = [KEY_LINE, PREAUTH_LINE, PENDING_LINE, REJECTED_LINE]
  .map((line, i) => `${line} WHERE key_id = $1${i === 3 ? " AND state = 'rejected'" : ''}`)
  .join(' UNION ALL ');

export const KEYS_OF_BOT =
  'SELECT key_id AS "keyId", state, created_at AS "createdAt", revoked_at AS "retiredAt" FROM keys WHERE bot_id = $1 ' +
  "ORDER BY state = 'active' DESC, created_at DESC, key_id DESC";

const AUDIT_ITEM =
  'id, at, action, actor, vendor_id AS "vendorId", device_id AS "deviceId", bot_id AS "botId", key_id AS "keyId", ' +
  'code_id AS "codeId", source, outcome';

export interface AuditPage {
  botId?: string | undefined;
  keyId?: string | undefined;
  action?: string | undefined;
  before: { at: number; id: number } | null;
  limit: number;
}

/** An audit page, newest first, over audit_bot, audit_key, audit_action or audit_at as its filters allow. */
export function auditPageQuery(page: AuditPage): Query {
  const p = new Params();
  const parts: string[] = [];
  if (page.botId !== undefined) parts.push(`bot_id = ${p.add(page.botId)}`);
  if (page.keyId !== undefined) parts.push(`key_id = ${p.add(page.keyId)}`);
  if (page.action !== undefined) parts.push(`action = ${p.add(page.action)}`);
  if (page.before) parts.push(`(at, id) < (${p.add(page.before.at, 'BIGINT')}, ${p.add(page.before.id, 'BIGINT')})`);
  const where = parts.length === 0 ? '' : `WHERE ${parts.join(' AND ')}`;
  return {
    sql: `SELECT ${AUDIT_ITEM} FROM audit ${where} ORDER BY at DESC, id DESC LIMIT ${p.add(page.limit, 'BIGINT')}`,
    params: p.values,
  };
}

const CODE_ITEM = 'id, vendor_id AS "vendorId", device_id AS "deviceId", kind, uses_left AS "usesLeft", expires_at AS "expiresAt"';
/** Live codes with a use left at $1, of vendor $2 (NULL: any), soonest to expire first, after ($3 expiresAt, $4 id) unless NULL; $5 the limit. */
export const CODE_PAGE =
  `SELECT ${CODE_ITEM} FROM codes WHERE uses_left > 0 AND expires_at > $1 ` +
  'AND (CAST($2 AS TEXT) IS NULL OR vendor_id = CAST($2 AS TEXT)) ' +
  'AND (CAST($3 AS BIGINT) IS NULL OR (expires_at, id) > (CAST($3 AS BIGINT), CAST($4 AS TEXT))) ORDER BY expires_at, id LIMIT $5';

/**
 * A page of pre-authorised keys in (vendorId, deviceId) order over their unique index: the rest of the start's
 * vendor, then (unless vendorId is filtered) the vendors after it — each a seek on either database.
 */
export function preauthPageQuery(vendorId: string | undefined, after: { vendorId: string; deviceId: string } | null, limit: number): Query {
  const p = new Params();
  const n = p.add(limit, 'BIGINT');
  const vendor = vendorId === undefined ? [] : [`vendor_id = ${p.add(vendorId)}`];
  const start = after && { vendorId: p.add(after.vendorId), deviceId: p.add(after.deviceId) };
  const segments = !start
    ? [vendor]
    : [
        [...vendor, `vendor_id = ${start.vendorId}`, `device_id > ${start.deviceId}`],
        ...(vendorId === undefined ? [[`vendor_id > ${start.vendorId}`]] : []),
      ];
  const select = 'SELECT vendor_id AS "vendorId", device_id AS "deviceId", key_id AS "keyId", created_at AS "addedAt" FROM preauth';
  const parts = segments.map(
    (where, i) =>
      `SELECT * FROM (${select}${where.length === 0 ? '' : ` WHERE ${where.join(' AND ')}`} ORDER BY vendor_id, device_id LIMIT ${n}) AS part${i}`,
  );
  return { sql: `SELECT * FROM (${parts.join(' UNION ALL ')}) AS page ORDER BY "vendorId", "deviceId" LIMIT ${n}`, params: p.values };
}
