/**
 * The statements of the pending keys (DESIGN §3.7 "Enrollment with no code"), written once for both databases
 * as statements.ts's are: PostgreSQL's `$n` placeholders, columns aliased to PendingRow's fields.
 */

export const PENDING_COLUMNS =
  'key_id AS "keyId", public_key AS "publicKey", vendor_id AS "vendorId", device_id AS "deviceId", app_id AS "appId", type, name, ' +
  'source, first_asked AS "firstAsked", last_asked AS "lastAsked"';

export const FIND_PENDING = `SELECT ${PENDING_COLUMNS} FROM pending WHERE key_id = $1`;
export const INSERT_PENDING =
  'INSERT INTO pending (key_id, public_key, vendor_id, device_id, app_id, type, name, source, source_bucket, first_asked, last_asked) ' +
  'VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)';
export const TOUCH_PENDING = 'UPDATE pending SET last_asked = $2 WHERE key_id = $1 AND last_asked < $2';
/** A key of the device in any state but pending (and rejected, which is gone): enrolled, retired, or pre-authorised. */
export const DEVICE_HELD =
  'SELECT 1 AS held FROM keys WHERE vendor_id = $1 AND device_id = $2 UNION ALL ' +
  'SELECT 1 FROM preauth WHERE vendor_id = $1 AND device_id = $2';
export const PENDING_OF_SOURCE = 'SELECT COUNT(*) AS n FROM pending WHERE source_bucket = $1';
export const PENDING_OF_VENDOR = 'SELECT COUNT(*) AS n FROM pending WHERE vendor_id = $1';

/** The waiting keys with how many others wait for their device, of one vendor unless $1 is null. */
export const LIST_PENDING =
  `SELECT ${PENDING_COLUMNS}, COUNT(*) OVER (PARTITION BY vendor_id, device_id) - 1 AS duplicates FROM pending ` +
  'WHERE CAST($1 AS TEXT) IS NULL OR vendor_id = CAST($1 AS TEXT) ORDER BY vendor_id, device_id, first_asked, key_id';

/** The pending row of exactly this key for this device, taken by its acceptance. */
export const TAKE_PENDING = `DELETE FROM pending WHERE key_id = $1 AND device_id = $2 RETURNING ${PENDING_COLUMNS}`;
export const PENDING_OF_DEVICE = `SELECT ${PENDING_COLUMNS} FROM pending WHERE vendor_id = $1 AND device_id = $2 ORDER BY key_id`;
/** A bulk reject's candidates: the vendor's (all when $1 is null), first asked before $2 (none when null). */
export const PENDING_WHERE =
  `SELECT ${PENDING_COLUMNS} FROM pending WHERE (CAST($1 AS TEXT) IS NULL OR vendor_id = CAST($1 AS TEXT)) ` +
  'AND (CAST($2 AS BIGINT) IS NULL OR first_asked < CAST($2 AS BIGINT)) ORDER BY key_id';
export const DROP_PENDING_KEY = 'DELETE FROM pending WHERE key_id = $1';
/** A rejected key's tombstone: final, and its device kept for `broker devices`. */
export const ENTOMB_REJECTED =
  "INSERT INTO tombstones (key_id, public_key, state, at, vendor_id, device_id) VALUES ($1, $2, 'rejected', $3, $4, $5) " +
  'ON CONFLICT (key_id) DO NOTHING';
export const DROP_STALE_PENDING = `DELETE FROM pending WHERE first_asked < $1 RETURNING ${PENDING_COLUMNS}`;
