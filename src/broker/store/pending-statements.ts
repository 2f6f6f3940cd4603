/**
 * The statements of the pending keys (DESIGN §3.7 "Enrollment with no code"), written once for both databases
 * as statements.ts's are: PostgreSQL's `$n` placeholders, columns aliased to PendingRow's fields.
 */

export const PENDING_COLUMNS =
  'key_id AS "keyId", public_key AS "publicKey", vendor_id AS "vendorId", device_id AS "deviceId", app_id AS "appId", type, name, ' +
  'source, first_asked AS "firstAsked", last_asked AS "lastAsked"';

export const FIND_PENDING = `SELECT ${PENDING_COLUMNS} FROM pending WHERE key_id = $1`;
/** A key of the device in any state but pending (and rejected, which is gone): enrolled, retired, or pre-authorised. */
export const DEVICE_HELD =
  'SELECT 1 AS held FROM keys WHERE vendor_id = $1 AND device_id = $2 UNION ALL ' +
  'SELECT 1 FROM preauth WHERE vendor_id = $1 AND device_id = $2';
/** The vendor's waiting keys, as pending_vendors keeps them (O(1), not a count over the fleet). */
function pendingOfVendor(vendorId: string): string {
  return `COALESCE((SELECT waiting FROM pending_vendors WHERE vendor_id = ${vendorId}), 0)`;
}

/**
 * What a first ask is judged by before its nonce, in one round trip: whether the device is held, and the keys
 * waiting from the source ($1) and for the vendor ($2). $3: the deviceId.
 */
export const ASK_STANDING =
  'SELECT CASE WHEN EXISTS (SELECT 1 FROM keys WHERE vendor_id = CAST($2 AS TEXT) AND device_id = CAST($3 AS TEXT) UNION ALL ' +
  'SELECT 1 FROM preauth WHERE vendor_id = CAST($2 AS TEXT) AND device_id = CAST($3 AS TEXT)) THEN 1 ELSE 0 END AS held, ' +
  '(SELECT COUNT(*) FROM pending WHERE source_bucket = CAST($1 AS TEXT)) AS source, ' +
  `${pendingOfVendor('CAST($2 AS TEXT)')} AS vendor`;

/**
 * A first ask's row as the steps of a gated chain (chain.ts), run under the device's and the source's locks, over
 * $1 keyId, $2 publicKey, $3 vendorId, $4 deviceId, $5 appId, $6 type, $7 name, $8 source, $9 its bucket, $10 the
 * time, $11 pendingPerSource, $12 pendingMax, $13 the key's ask window's bucket, $14 its start:
 * c, every rule of §3.7 read at once; r, the row, only when all of them hold; w, the first ask's place among the
 * key's two a minute, only for a row made.
 */
export const ASK_STEPS = [
  {
    name: 'c',
    sql:
      'SELECT CASE WHEN EXISTS (SELECT 1 FROM pending WHERE key_id = CAST($1 AS TEXT)) THEN 1 ELSE 0 END AS asked, ' +
      'CASE WHEN EXISTS (SELECT 1 FROM keys WHERE key_id = CAST($1 AS TEXT) UNION ALL SELECT 1 FROM preauth WHERE key_id = CAST($1 AS TEXT) ' +
      'UNION ALL SELECT 1 FROM tombstones WHERE key_id = CAST($1 AS TEXT)) THEN 1 ELSE 0 END AS known, ' +
      'CASE WHEN EXISTS (SELECT 1 FROM keys WHERE vendor_id = CAST($3 AS TEXT) AND device_id = CAST($4 AS TEXT) UNION ALL ' +
      'SELECT 1 FROM preauth WHERE vendor_id = CAST($3 AS TEXT) AND device_id = CAST($4 AS TEXT)) THEN 1 ELSE 0 END AS held, ' +
      '(SELECT COUNT(*) FROM pending WHERE source_bucket = CAST($9 AS TEXT)) AS source, ' +
      `${pendingOfVendor('CAST($3 AS TEXT)')} AS vendor`,
  },
  {
    name: 'r',
    sql:
      'INSERT INTO pending (key_id, public_key, vendor_id, device_id, app_id, type, name, source, source_bucket, first_asked, last_asked) ' +
      'SELECT CAST($1 AS TEXT), CAST($2 AS TEXT), CAST($3 AS TEXT), CAST($4 AS TEXT), CAST($5 AS TEXT), CAST($6 AS TEXT), CAST($7 AS TEXT), ' +
      'CAST($8 AS TEXT), CAST($9 AS TEXT), CAST($10 AS BIGINT), CAST($10 AS BIGINT) ' +
      'WHERE {c.asked} = 0 AND {c.known} = 0 AND {c.held} = 0 AND {c.source} < CAST($11 AS BIGINT) AND {c.vendor} < CAST($12 AS BIGINT) ' +
      'RETURNING 1 AS ok',
  },
  {
    name: 'w',
    sql:
      'INSERT INTO rate_windows (bucket, window_start, count) SELECT CAST($13 AS TEXT), CAST($14 AS BIGINT), 1 WHERE {r.ok} = 1 ' +
      'ON CONFLICT (bucket, window_start) DO UPDATE SET count = rate_windows.count + 1 RETURNING count',
  },
] as const;

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

/**
 * A waiting key's later ask, as the steps of a gated chain over spend's values (statements.ts: $1 keyId, $2 nonce,
 * $3 keepUntil, $4 its public key, $5–$7 its window of two a minute, $8 the ask's time) and $9 the deviceId and
 * $10 the vendorId (null: any) the ask names: `k` admits the key only while it waits for that very device, the hit
 * and the nonce follow (GATED_SPEND_STEPS), then its lastAsked, only for an ask that took its nonce.
 */
export const PENDING_GATE_STEP = {
  name: 'k',
  sql:
    'SELECT 1 AS ok FROM pending WHERE key_id = CAST($1 AS TEXT) AND public_key = CAST($4 AS TEXT) AND device_id = CAST($9 AS TEXT) ' +
    'AND (CAST($10 AS TEXT) IS NULL OR vendor_id = CAST($10 AS TEXT))',
} as const;
export const TOUCH_PENDING_STEP = {
  name: 'p',
  sql:
    'UPDATE pending SET last_asked = CAST($8 AS BIGINT) WHERE key_id = CAST($1 AS TEXT) AND last_asked < CAST($8 AS BIGINT) ' +
    'AND {n.ok} = 1 RETURNING 1 AS ok',
} as const;
