/**
 * The admin API's statements (DESIGN §3.8), written once for both databases like statements.ts. Pages are
 * keyset pages over an index: a statement per combination of filters present (so each is planned with its
 * own index), the page's start a row comparison, never an OFFSET.
 */
import { PLANNED_EACH_CALL } from './sql.js';

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

/** A statement and its values, built for the filters a request has: each combination planned with its own index. */
export interface Query {
  sql: string;
  params: unknown[];
}

/** Collects a query's values, each placeholder numbered as it is added. */
class Params {
  readonly values: unknown[] = [];

  add(value: unknown, type: 'TEXT' | 'BIGINT' = 'TEXT'): string {
    this.values.push(value);
    return `CAST($${this.values.length} AS ${type})`;
  }
}

export interface DevicePage {
  state?: string | undefined;
  vendorId?: string | undefined;
  q?: string | undefined;
  after: { vendorId: string; deviceId: string; keyId: string } | null;
  limit: number;
}

/** The byte-order collation, named as each database names it: a prefix's range is exact only under it. */
export type BinaryCollation = 'BINARY' | '"C"';

/** Past every string that begins with q, in byte order (deviceIds and botIds never hold U+10FFFF). */
const PAST_PREFIX = '\u{10FFFF}';

const KEY_LINE =
  'SELECT bot_id AS "botId", device_id AS "deviceId", vendor_id AS "vendorId", key_id AS "keyId", state, ' +
  `last_seen_at AS "lastSeenAt", agent_version AS "agentVersion", ${LAST_REFUSAL} FROM keys k`;
const PREAUTH_LINE =
  'SELECT CAST(NULL AS TEXT) AS "botId", device_id AS "deviceId", vendor_id AS "vendorId", key_id AS "keyId", ' +
  '\'preauthorized\' AS state, CAST(NULL AS BIGINT) AS "lastSeenAt", CAST(NULL AS TEXT) AS "agentVersion", ' +
  'CAST(NULL AS TEXT) AS "refusalCode", CAST(NULL AS BIGINT) AS "refusalAt" FROM preauth';

/**
 * A devices page: keys and pre-authorised keys, each side cut at the limit in the page's order from the line it
 * starts after, then merged. Without q the order is (vendorId, deviceId, keyId) over keys_device and the preauth
 * unique index. With q — a literal prefix, never a pattern — the order is (deviceId, vendorId, keyId) in byte
 * order, each side a range scan of the prefix (keys_device_first, preauth_device_first; the botIds' keys_bot, on
 * PostgreSQL keys_bot_first), so a
 * rare prefix among a million keys reads only its matches.
 */
export function devicePageQuery(page: DevicePage, binary: BinaryCollation): Query {
  const p = new Params();
  const limit = p.add(page.limit, 'BIGINT');
  const state = page.state === undefined || page.state === 'preauthorized' ? undefined : p.add(page.state);
  const vendor = page.vendorId === undefined ? undefined : p.add(page.vendorId);
  const q = page.q === undefined ? undefined : [p.add(page.q), p.add(`${page.q}${PAST_PREFIX}`)];
  const after = page.after && {
    vendorId: p.add(page.after.vendorId),
    deviceId: p.add(page.after.deviceId),
    keyId: p.add(page.after.keyId),
  };
  const device = `device_id COLLATE ${binary}`;
  const order = q ? [device, 'vendor_id', 'key_id'] : ['vendor_id', 'device_id', 'key_id'];
  const past = (values: string[]): string => `(${order.join(', ')}) > (${values.join(', ')})`;
  // A deviceId range's lower bound: past the page's start when that is the tighter (a database bounds its scan by one).
  const from = q && page.q !== undefined && page.after && page.after.deviceId > page.q ? p.add(page.after.deviceId) : q?.[0];
  const inRange = (column: string, lower = q?.[0]): string => (q ? `${column} >= ${lower} AND ${column} < ${q[1]}` : '');
  // Where a page starts, as conditions each database seeks by: without q, a row comparison seeks by its first column
  // alone on SQLite, so the rest of the start's vendor and the vendors after it are two segments.
  const segments: string[][] = !after
    ? [[]]
    : q
      ? [[past([after.deviceId, after.vendorId, after.keyId])]]
      : [
          [`vendor_id = ${after.vendorId}`, `device_id >= ${after.deviceId}`, past([after.vendorId, after.deviceId, after.keyId])],
          // With vendorId filtered there is no vendor after the start's (SQLite would walk the vendor to learn it).
          ...(vendor === undefined ? [[`vendor_id > ${after.vendorId}`]] : []),
        ];
  const sides = (select: string, conditions: (string | false | undefined)[]): string[] =>
    segments.map((segment) => {
      const all = [...conditions, vendor !== undefined && `vendor_id = ${vendor}`, ...segment].filter(
        (c): c is string => typeof c === 'string' && c !== '',
      );
      return `${select}${all.length === 0 ? '' : ` WHERE ${all.join(' AND ')}`} ORDER BY ${order.join(', ')} LIMIT ${limit}`;
    });
  const keyState = state !== undefined && `state = ${state}`;
  const parts: string[] = [];
  if (page.state !== 'preauthorized') {
    parts.push(...sides(KEY_LINE, [inRange(device, from), keyState]));
    // A botId of the prefix whose deviceId is not: the side above has those whose deviceId is.
    if (q) parts.push(...sides(KEY_LINE, [inRange(`bot_id COLLATE ${binary}`), `NOT (${inRange(device)})`, keyState]));
  }
  if (page.state === undefined || page.state === 'preauthorized') parts.push(...sides(PREAUTH_LINE, [inRange(device, from)]));
  const outer = q ? `"deviceId" COLLATE ${binary}, "vendorId", "keyId"` : '"vendorId", "deviceId", "keyId"';
  const sql =
    `${PLANNED_EACH_CALL}SELECT * FROM (${parts.map((part, i) => `SELECT * FROM (${part}) AS part${i}`).join(' UNION ALL ')}) AS page ` +
    `ORDER BY ${outer} LIMIT ${limit}`;
  return { sql, params: p.values };
}

export const DEVICE_ITEM_OF_KEY =
  'SELECT bot_id AS "botId", device_id AS "deviceId", vendor_id AS "vendorId", key_id AS "keyId", state, ' +
  `last_seen_at AS "lastSeenAt", agent_version AS "agentVersion", ${LAST_REFUSAL} FROM keys k WHERE key_id = $1 ` +
  "UNION ALL SELECT CAST(NULL AS TEXT), device_id, vendor_id, key_id, 'preauthorized', CAST(NULL AS BIGINT), CAST(NULL AS TEXT), CAST(NULL AS TEXT), CAST(NULL AS BIGINT) FROM preauth WHERE key_id = $1";

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
