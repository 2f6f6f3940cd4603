import type { EnrollCommit, EnrollOutcome, KeyRow, PreauthRow, RotateOutcome } from './types.js';

// The bodies of the SQLite store's deciding transactions (enroll, rotate, addPreauth), run by sqlite.ts
// inside BEGIN IMMEDIATE, and rolled back whole for any outcome but success.

/** The store's statements, compiled once each. */
export interface Sql {
  get(sql: string, ...params: unknown[]): Record<string, unknown> | undefined;
  run(sql: string, ...params: unknown[]): { changes: number };
}

/** BrokerStore.addPreauth's transaction body. */
export function addPreauthIn(q: Sql, rows: readonly PreauthRow[]): { added: number } | { conflict: string } {
  for (const row of rows) {
    const taken =
      q.get("SELECT 1 FROM keys WHERE vendor_id = ? AND device_id = ? AND state = 'active'", row.vendorId, row.deviceId) ??
      q.get('SELECT 1 FROM preauth WHERE (vendor_id = ? AND device_id = ?) OR key_id = ?', row.vendorId, row.deviceId, row.keyId) ??
      q.get('SELECT 1 FROM keys WHERE key_id = ?', row.keyId);
    if (taken) return { conflict: row.deviceId };
    q.run(
      'INSERT INTO preauth (key_id, public_key, device_id, vendor_id, created_at) VALUES (?, ?, ?, ?, ?)',
      row.keyId,
      row.publicKey,
      row.deviceId,
      row.vendorId,
      row.createdAt,
    );
  }
  return { added: rows.length };
}

/** BrokerStore.enroll's transaction body. */
export function enrollIn(q: Sql, c: EnrollCommit): EnrollOutcome {
  const { vendorId, deviceId, botId } = c;
  const admitted =
    c.admission.by === 'code'
      ? q.get(
          'UPDATE codes SET uses_left = uses_left - 1 WHERE hmac = ? AND uses_left > 0 AND expires_at > ? AND vendor_id = ? ' +
            'AND (device_id IS NULL OR device_id = ?) RETURNING hmac',
          c.admission.hmac,
          c.now,
          vendorId,
          deviceId,
        )
      : q.get(
          'DELETE FROM preauth WHERE key_id = ? AND public_key = ? AND vendor_id = ? AND device_id = ? RETURNING key_id',
          c.admission.keyId,
          c.key.publicKey,
          vendorId,
          deviceId,
        );
  if (!admitted) return 'spent';
  if (keyKnown(q, c.key.keyId)) return 'key-exists';
  if (c.replace) {
    // The old key goes, and with it the tokens issued for it; a pending pre-authorisation of the device too.
    q.run(
      "UPDATE keys SET state = 'revoked', reason = 'replaced', revoked_at = ? WHERE bot_id = ? AND state = 'active' AND vendor_id = ? AND device_id = ?",
      c.now,
      botId,
      vendorId,
      deviceId,
    );
    q.run('DELETE FROM tokens WHERE bot_id = ?', botId);
    q.run('DELETE FROM preauth WHERE vendor_id = ? AND device_id = ?', vendorId, deviceId);
  } else if (c.admission.by === 'code' && q.get('SELECT 1 FROM preauth WHERE vendor_id = ? AND device_id = ?', vendorId, deviceId)) {
    return 'device-exists';
  }
  // A bound botId or deviceId (replace: bound to another device) is a conflict.
  const bound = q.get(
    "SELECT 1 FROM keys WHERE (bot_id = ? OR (vendor_id = ? AND device_id = ?)) AND state = 'active'",
    botId,
    vendorId,
    deviceId,
  );
  if (bound) return 'device-exists';
  insertKey(q, c.key, { botId, deviceId, vendorId }, c.now);
  return 'ok';
}

/** BrokerStore.rotate's transaction body. */
export function rotateIn(q: Sql, oldKeyId: string, newKey: { keyId: string; publicKey: string }, now: number): RotateOutcome {
  const device = q.get(
    "UPDATE keys SET state = 'revoked', reason = 'rotated', revoked_at = ? WHERE key_id = ? AND state = 'active' " +
      'RETURNING bot_id AS "botId", device_id AS "deviceId", vendor_id AS "vendorId"',
    now,
    oldKeyId,
  ) as Pick<KeyRow, 'botId' | 'deviceId' | 'vendorId'> | undefined;
  if (!device) return 'revoked';
  if (keyKnown(q, newKey.keyId)) return 'key-exists';
  insertKey(q, newKey, device, now);
  return 'ok';
}

/** A keyId is enrolled once, in any state; a pre-authorised one is reserved for its own enrollment. */
function keyKnown(q: Sql, keyId: string): boolean {
  return (q.get('SELECT 1 FROM keys WHERE key_id = ?', keyId) ?? q.get('SELECT 1 FROM preauth WHERE key_id = ?', keyId)) !== undefined;
}

function insertKey(
  q: Sql,
  key: { keyId: string; publicKey: string },
  d: Pick<KeyRow, 'botId' | 'deviceId' | 'vendorId'>,
  now: number,
): void {
  q.run(
    "INSERT INTO keys (key_id, public_key, bot_id, device_id, vendor_id, state, created_at) VALUES (?, ?, ?, ?, ?, 'active', ?)",
    key.keyId,
    key.publicKey,
    d.botId,
    d.deviceId,
    d.vendorId,
    now,
  );
}
