/**
 * Every statement of the broker's store, written once for both databases (their tables share names,
 * columns and indexes: sqlite-schema.ts, postgres-schema.ts). Placeholders are PostgreSQL's `$n`; columns
 * are aliased to the row types' field names (types.ts).
 */
import { LAST_SEEN_STEP_MS } from './types.js';

export const CODE_COLUMNS =
  'id, hmac, vendor_id AS "vendorId", kind, device_id AS "deviceId", uses_left AS "usesLeft", expires_at AS "expiresAt", created_at AS "createdAt"';

export const KEY_COLUMNS =
  'key_id AS "keyId", public_key AS "publicKey", bot_id AS "botId", device_id AS "deviceId", vendor_id AS "vendorId", state, reason, ' +
  'created_at AS "createdAt", last_seen_at AS "lastSeenAt", revoked_at AS "revokedAt"';

const PREAUTH_COLUMNS =
  'key_id AS "keyId", public_key AS "publicKey", device_id AS "deviceId", vendor_id AS "vendorId", created_at AS "createdAt"';

const TOKEN_COLUMNS =
  'bot_id AS "botId", access_sealed AS "accessSealed", access_expires_at AS "accessExpiresAt", access_lifetime_s AS "accessLifetimeS", ' +
  'refresh_sealed AS "refreshSealed", refresh_expires_at AS "refreshExpiresAt", updated_at AS "updatedAt"';

export const ADD_CODE =
  'INSERT INTO codes (id, hmac, vendor_id, kind, device_id, uses_left, expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)';
export const FIND_CODE = `SELECT ${CODE_COLUMNS} FROM codes WHERE hmac = $1`;
/** A use of the code, taken only while it has one left, is live, and admits this vendor and device. */
export const SPEND_CODE_USE =
  'UPDATE codes SET uses_left = uses_left - 1 WHERE hmac = $1 AND uses_left > 0 AND expires_at > $2 AND vendor_id = $3 ' +
  'AND (device_id IS NULL OR device_id = $4) RETURNING hmac';

/**
 * A key in any state, in one round trip: its row, else its tombstone (`entombedAt` set, the device's fields null),
 * else its pending row (state 'pending', the first ask's fields set).
 */
export const FIND_KEY =
  `SELECT ${KEY_COLUMNS}, NULL AS "entombedAt", NULL AS "appId", NULL AS type, NULL AS name, NULL AS source, ` +
  'CAST(NULL AS BIGINT) AS "firstAsked", CAST(NULL AS BIGINT) AS "lastAsked" FROM keys WHERE key_id = $1 UNION ALL ' +
  'SELECT key_id, public_key, NULL, NULL, NULL, state, NULL, NULL, NULL, NULL, at, NULL, NULL, NULL, NULL, NULL, NULL ' +
  'FROM tombstones WHERE key_id = $1 UNION ALL ' +
  "SELECT key_id, public_key, NULL, device_id, vendor_id, 'pending', NULL, NULL, NULL, NULL, NULL, app_id, type, name, source, " +
  'first_asked, last_asked FROM pending WHERE key_id = $1';
/** A keyId is enrolled once, in any state, tombstones included; a pre-authorised or pending one is reserved for its own enrollment. */
export const KEY_KNOWN =
  'SELECT 1 AS known FROM keys WHERE key_id = $1 UNION ALL SELECT 1 FROM preauth WHERE key_id = $1 ' +
  'UNION ALL SELECT 1 FROM tombstones WHERE key_id = $1 UNION ALL SELECT 1 FROM pending WHERE key_id = $1';
/** A key made active, with its device's name: written with the key, never after it. */
export const INSERT_KEY =
  "INSERT INTO keys (key_id, public_key, bot_id, device_id, vendor_id, state, created_at, name) VALUES ($1, $2, $3, $4, $5, 'active', $6, $7)";
/** A key the botId or the device already holds while active. */
export const ACTIVE_KEY_OF_BOT_OR_DEVICE =
  "SELECT 1 AS bound FROM keys WHERE (bot_id = $1 OR (vendor_id = $2 AND device_id = $3)) AND state = 'active'";
export const ACTIVE_KEY_OF_DEVICE = "SELECT 1 AS bound FROM keys WHERE vendor_id = $1 AND device_id = $2 AND state = 'active'";
export const REVOKE_BOT =
  "UPDATE keys SET state = 'revoked', reason = 'revoked', revoked_at = $1 WHERE bot_id = $2 AND state = 'active' RETURNING key_id AS \"keyId\"";
export const BOT_OF_KEY = 'SELECT bot_id AS "botId" FROM keys WHERE key_id = $1';
export const REVOKE_REPLACED =
  "UPDATE keys SET state = 'revoked', reason = 'replaced', revoked_at = $1 WHERE bot_id = $2 AND state = 'active' AND vendor_id = $3 AND device_id = $4 " +
  'RETURNING key_id AS "keyId"';
/** The rotated key's device, its name included: the key that takes its place keeps them. */
export const ROTATE_AWAY =
  "UPDATE keys SET state = 'revoked', reason = 'rotated', revoked_at = $1 WHERE key_id = $2 AND state = 'active' " +
  'RETURNING bot_id AS "botId", device_id AS "deviceId", vendor_id AS "vendorId", name';

/** How many retired (revoked, replaced, rotated) keys a botId keeps as rows; older ones become tombstones. */
export const RETIRED_KEPT = 16;
const OLDER_RETIRED =
  "bot_id = $1 AND state <> 'active' AND key_id NOT IN " +
  `(SELECT key_id FROM keys WHERE bot_id = $1 AND state <> 'active' ORDER BY revoked_at DESC, key_id DESC LIMIT ${RETIRED_KEPT})`;
/** The botId's retired keys past the newest RETIRED_KEPT, as tombstones (then ENTOMBED_DROP drops their rows). */
export const ENTOMB_RETIRED =
  `INSERT INTO tombstones (key_id, public_key, state, at) SELECT key_id, public_key, 'revoked', revoked_at FROM keys WHERE ${OLDER_RETIRED} ` +
  'ON CONFLICT (key_id) DO NOTHING';
export const DROP_ENTOMBED = `DELETE FROM keys WHERE ${OLDER_RETIRED}`;

export const FIND_PREAUTH = `SELECT ${PREAUTH_COLUMNS} FROM preauth WHERE key_id = $1`;
export const PREAUTH_OF_DEVICE = 'SELECT 1 AS held FROM preauth WHERE vendor_id = $1 AND device_id = $2';
export const PREAUTH_OF_DEVICE_OR_KEY = 'SELECT 1 AS held FROM preauth WHERE (vendor_id = $1 AND device_id = $2) OR key_id = $3';
export const ADD_PREAUTH = 'INSERT INTO preauth (key_id, public_key, device_id, vendor_id, created_at) VALUES ($1, $2, $3, $4, $5)';
/** The pre-authorisation of exactly this key for this device, used up by its enrollment. */
export const TAKE_PREAUTH =
  'DELETE FROM preauth WHERE key_id = $1 AND public_key = $2 AND vendor_id = $3 AND device_id = $4 RETURNING key_id';
export const DROP_PREAUTH_OF_DEVICE = 'DELETE FROM preauth WHERE vendor_id = $1 AND device_id = $2';
/** `broker preauth --remove`: the row it dropped. */
export const REMOVE_PREAUTH =
  'DELETE FROM preauth WHERE vendor_id = $1 AND device_id = $2 RETURNING key_id AS "keyId", vendor_id AS "vendorId", device_id AS "deviceId"';
export const DROP_PREAUTH_OF_BOT =
  'DELETE FROM preauth WHERE (vendor_id, device_id) IN (SELECT vendor_id, device_id FROM keys WHERE bot_id = $1)';

/** A device's row: its active key, else its latest; keyId only while active. */
function deviceQuery(where: string): string {
  return (
    `SELECT bot_id AS "botId", device_id AS "deviceId", vendor_id AS "vendorId", CASE WHEN state = 'active' THEN key_id END AS "keyId" ` +
    `FROM keys WHERE ${where} ORDER BY state = 'active' DESC, created_at DESC, key_id DESC LIMIT 1`
  );
}
export const DEVICE_BY_DEVICE_ID = deviceQuery('vendor_id = $1 AND device_id = $2');
export const DEVICE_BY_BOT_ID = deviceQuery('bot_id = $1');

/**
 * `broker devices`: one line per device (botId), its active key else its latest, last seen by any of its
 * keys and the agent version that key last reported; then one per pre-authorised, pending and rejected key.
 * $1 a state, $2 a vendorId: only those lines (NULL: any).
 */
export const LIST_DEVICES = `
  SELECT * FROM (
    SELECT "botId", "deviceId", "vendorId", "keyId", state, "lastSeenAt", "agentVersion" FROM (
      SELECT bot_id AS "botId", device_id AS "deviceId", vendor_id AS "vendorId", key_id AS "keyId", state,
        MAX(last_seen_at) OVER (PARTITION BY bot_id) AS "lastSeenAt", agent_version AS "agentVersion",
        ROW_NUMBER() OVER (PARTITION BY bot_id ORDER BY state = 'active' DESC, created_at DESC, key_id DESC) AS pick
      FROM keys
    ) AS devices WHERE pick = 1
    UNION ALL
    SELECT NULL, device_id, vendor_id, key_id, 'preauthorized', NULL, NULL FROM preauth
    UNION ALL
    SELECT NULL, device_id, vendor_id, key_id, 'pending', NULL, NULL FROM pending
    UNION ALL
    SELECT NULL, device_id, vendor_id, key_id, 'rejected', NULL, NULL FROM tombstones WHERE state = 'rejected'
  ) AS listed
  WHERE (CAST($1 AS TEXT) IS NULL OR state = CAST($1 AS TEXT)) AND (CAST($2 AS TEXT) IS NULL OR "vendorId" = CAST($2 AS TEXT))
  ORDER BY 3, 2, 5, 4`;

/** listDevices' lines by state: botIds with an active key, botIds without one, pre-authorised, pending and rejected keys. */
export const COUNT_DEVICES =
  "SELECT COUNT(DISTINCT CASE WHEN state = 'active' THEN bot_id END) AS active, " +
  "COUNT(DISTINCT bot_id) - COUNT(DISTINCT CASE WHEN state = 'active' THEN bot_id END) AS revoked, " +
  '(SELECT COUNT(*) FROM preauth) AS preauthorized, (SELECT COUNT(*) FROM pending) AS pending, ' +
  "(SELECT COUNT(*) FROM tombstones WHERE state = 'rejected') AS rejected FROM keys";

const CODE_LISTING = 'id, vendor_id AS "vendorId", device_id AS "deviceId", kind, uses_left AS "usesLeft", expires_at AS "expiresAt"';
/** `broker codes`: the codes with a use left, live at $1, of vendor $2 (NULL: any), soonest to expire first. */
export const LIST_CODES =
  `SELECT ${CODE_LISTING} FROM codes WHERE uses_left > 0 AND expires_at > $1 ` +
  'AND (CAST($2 AS TEXT) IS NULL OR vendor_id = CAST($2 AS TEXT)) ORDER BY expires_at, id';
/** `broker cancel`: the code with this id, gone whatever its uses; its row as it was. */
export const CANCEL_CODE = `DELETE FROM codes WHERE id = $1 RETURNING ${CODE_LISTING}`;
/** `broker reset-limits`: the windows of buckets that begin with $1 (a botId's, `kind:botId/`). */
export const RESET_WINDOWS = 'DELETE FROM rate_windows WHERE substr(bucket, 1, length(CAST($1 AS TEXT))) = CAST($1 AS TEXT)';

export const READ_TOKEN = `SELECT ${TOKEN_COLUMNS} FROM tokens WHERE bot_id = $1`;
export const DROP_TOKENS = 'DELETE FROM tokens WHERE bot_id = $1';
/**
 * A token written only while the key $8 is still active for its botId. FOR SHARE holds that key row until
 * the write commits, so a revoke (which updates the row) either comes after, and drops the token, or
 * came before, and nothing is written; SQLite's one writer orders them anyway (its driver drops the clause).
 */
export const KEEP_TOKEN =
  'INSERT INTO tokens (bot_id, access_sealed, access_expires_at, access_lifetime_s, refresh_sealed, refresh_expires_at, updated_at) ' +
  "SELECT $1, $2, $3, $4, $5, $6, $7 FROM keys WHERE key_id = $8 AND bot_id = $1 AND state = 'active' FOR SHARE " +
  'ON CONFLICT (bot_id) DO UPDATE SET access_sealed = excluded.access_sealed, ' +
  'access_expires_at = excluded.access_expires_at, access_lifetime_s = excluded.access_lifetime_s, ' +
  'refresh_sealed = excluded.refresh_sealed, refresh_expires_at = excluded.refresh_expires_at, updated_at = excluded.updated_at ' +
  'RETURNING 1 AS kept';

/** A key with its botId's cached token (LEFT JOIN USING bot_id, so bot_id is one column). */
export const KEY_WITH_TOKEN =
  `SELECT ${KEY_COLUMNS}, access_sealed AS "accessSealed", access_expires_at AS "accessExpiresAt", ` +
  'access_lifetime_s AS "accessLifetimeS", refresh_sealed AS "refreshSealed", refresh_expires_at AS "refreshExpiresAt", ' +
  'updated_at AS "tokenUpdatedAt" FROM keys LEFT JOIN tokens USING (bot_id) WHERE key_id = $1';

/** The botId's cached token's expiry: a revoke reads it before it drops the token (revoke --displace). */
export const TOKEN_EXPIRY = 'SELECT access_expires_at AS "expiresAt" FROM tokens WHERE bot_id = $1';
/** A displacement of botId $1 due at $2, after $3 failed attempts; of two for one botId the later due time stands. */
export const QUEUE_DISPLACEMENT =
  'INSERT INTO displacements (bot_id, due_at, attempts) VALUES ($1, $2, $3) ' +
  'ON CONFLICT (bot_id) DO UPDATE SET due_at = excluded.due_at, attempts = excluded.attempts WHERE excluded.due_at > displacements.due_at';
/**
 * At most $2 displacements due by $1, taken off the queue in one statement: a row one replica deleted is
 * returned to no other (PostgreSQL's second DELETE waits on the row, then finds it gone).
 */
export const CLAIM_DISPLACEMENTS =
  'DELETE FROM displacements WHERE bot_id IN (SELECT bot_id FROM displacements WHERE due_at <= $1 ORDER BY due_at, bot_id LIMIT $2) ' +
  'RETURNING bot_id AS "botId", due_at AS "dueAt", attempts';
/** The columns of an audit row, in AuditRow's order (rules/audit.ts binds them so). */
export const AUDIT_COLUMNS = [
  'at',
  'action',
  'actor',
  'vendor_id',
  'device_id',
  'bot_id',
  'key_id',
  'code_id',
  'source',
  'outcome',
  'count',
  'fold',
];
const auditInserts = new Map<number, string>();
/**
 * `rows` audit rows in one statement; a folded refusal adds its count to the row of its fold, whichever
 * replica wrote it (a NULL fold never conflicts). One text per row count, made once.
 */
export function auditInsert(rows: number): string {
  let sql = auditInserts.get(rows);
  if (sql === undefined) {
    const n = AUDIT_COLUMNS.length;
    const tuples = Array.from({ length: rows }, (_, r) => `(${AUDIT_COLUMNS.map((_, c) => `$${r * n + c + 1}`).join(', ')})`);
    sql =
      `INSERT INTO audit (${AUDIT_COLUMNS.join(', ')}) VALUES ${tuples.join(', ')} ` +
      'ON CONFLICT (fold) DO UPDATE SET count = audit.count + excluded.count';
    auditInserts.set(rows, sql);
  }
  return sql;
}
/**
 * One batch of a prune, oldest first from $2 (so a batch never walks again the rows the batches before it
 * kept): rows before $3, of the action $1 alone unless it is null, at most $4; their times.
 */
export const PRUNE_AUDIT =
  'DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE (CAST($1 AS TEXT) IS NULL OR action = CAST($1 AS TEXT)) ' +
  'AND at >= $2 AND at < $3 ORDER BY at LIMIT $4) RETURNING at';

export const SWEEP_NONCES = 'DELETE FROM nonces WHERE keep_until < $1';
export const SWEEP_WINDOWS = 'DELETE FROM rate_windows WHERE window_start < $1';
/** The audit's per-minute counts are kept as long as the rate windows. */
export const SWEEP_AUDIT_MINUTES = 'DELETE FROM audit_minutes WHERE minute < $1';
/** Tokens issued and refusals, counted by minute as their audit rows are written (the admin summary's last hour). */
export const COUNTED_ACTIONS: readonly string[] = ['token', 'refusal'];
export const COUNT_AUDIT_MINUTE =
  'INSERT INTO audit_minutes (minute, action, outcome, n) VALUES ($1, $2, $3, $4) ' +
  'ON CONFLICT (minute, action, outcome) DO UPDATE SET n = audit_minutes.n + excluded.n';

/**
 * A request's bookkeeping as the steps of a gated chain (chain.ts), over the values
 * $1 keyId, $2 nonce (null: count only, a refused request's), $3 keepUntil, $4 the public key the signature was verified with (null: no key to
 * hold), $5 the rate bucket (null: no limit), $6 its window's start, $7 the limit, $8 the request's time, $9 the agent version
 * it reports (null: none).
 * Each step gates the next: the count only while the key is active with that public key (or with no key
 * to hold: an enrollment's new key); the nonce only within the limit (a refused request leaves no nonce);
 * last seen (and the agent version) only for a new nonce, a step past the one recorded or with a version other than the one kept.
 * The hit and the nonce are gated on a step named `k`: whether the key may spend (SPEND_STEPS', or a caller's own).
 */
const HIT_STEP = {
  name: 'h',
  sql:
    'INSERT INTO rate_windows (bucket, window_start, count) SELECT CAST($5 AS TEXT), CAST($6 AS BIGINT), 1 ' +
    'WHERE {k.ok} = 1 AND CAST($5 AS TEXT) IS NOT NULL ' +
    'ON CONFLICT (bucket, window_start) DO UPDATE SET count = rate_windows.count + 1 RETURNING count',
} as const;
const NONCE_STEP = {
  name: 'n',
  sql:
    'INSERT INTO nonces (key_id, nonce, keep_until) SELECT CAST($1 AS TEXT), CAST($2 AS TEXT), CAST($3 AS BIGINT) ' +
    'WHERE {k.ok} = 1 AND CAST($2 AS TEXT) IS NOT NULL AND (CAST($5 AS TEXT) IS NULL OR {h.count} <= CAST($7 AS BIGINT)) ' +
    'ON CONFLICT DO NOTHING RETURNING 1 AS ok',
} as const;
/** The hit and the nonce of a key `k` admits (a step of the caller's, over the same values). */
export const GATED_SPEND_STEPS = [HIT_STEP, NONCE_STEP] as const;

/** An enrollment's or an enrolled key's spend: `k` admits an active key with the public key verified, or no key to hold. */
export const SPEND_STEPS = [
  {
    name: 'k',
    sql:
      "SELECT 1 AS ok FROM keys WHERE key_id = CAST($1 AS TEXT) AND state = 'active' AND public_key = CAST($4 AS TEXT) " +
      'UNION ALL SELECT 1 WHERE CAST($4 AS TEXT) IS NULL',
  },
  ...GATED_SPEND_STEPS,
] as const;

/** An enrolled key's request: its spend, then its last seen. */
export const REQUEST_STEPS = [
  ...SPEND_STEPS,
  {
    name: 't',
    sql:
      'UPDATE keys SET last_seen_at = CASE WHEN last_seen_at > CAST($8 AS BIGINT) THEN last_seen_at ELSE CAST($8 AS BIGINT) END, ' +
      'agent_version = COALESCE(CAST($9 AS TEXT), agent_version) WHERE key_id = CAST($1 AS TEXT) AND CAST($4 AS TEXT) IS NOT NULL ' +
      `AND {n.ok} = 1 AND (last_seen_at IS NULL OR last_seen_at <= CAST($8 AS BIGINT) - ${LAST_SEEN_STEP_MS} ` +
      'OR (CAST($9 AS TEXT) IS NOT NULL AND (agent_version IS NULL OR agent_version <> CAST($9 AS TEXT)))) ' +
      'RETURNING 1 AS ok',
  },
] as const;
