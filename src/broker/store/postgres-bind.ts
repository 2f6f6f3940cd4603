import { createHash } from 'node:crypto';
import type { PoolClient } from 'pg';
import type { EnrollCommit, EnrollOutcome, KeyRow, PreauthRow, RotateOutcome } from './types.js';

// The bodies of the PostgreSQL store's deciding transactions (enroll, rotate, addPreauth), run by
// postgres.ts between BEGIN and COMMIT, or ROLLBACK for any outcome but success.

const UNIQUE_VIOLATION = '23505';

/** A 64-bit advisory lock key for `name` (single-key space; the schema lock uses the two-key one). */
export function lockKey(name: string): string {
  return createHash('sha256').update(name).digest().readBigInt64BE(0).toString();
}

export type Q = Pick<PoolClient, 'query'>;

/** A statement, or a named one: PostgreSQL parses and plans that once per connection, not at every call. */
export type Statement = string | { name: string; text: string };

export async function one<T>(q: Q, sql: Statement, params: unknown[]): Promise<T | undefined> {
  const result = typeof sql === 'string' ? await q.query(sql, params) : await q.query({ ...sql, values: params });
  return result.rows[0] as T | undefined;
}

/** The device's advisory lock, so that its enrollment and its pre-authorisation are decided one after the other. */
function deviceLock(vendorId: string, deviceId: string): string {
  return lockKey(`device:${vendorId}\n${deviceId}`);
}

/** BrokerStore.addPreauth's transaction body. */
export async function addPreauthIn(c: Q, rows: readonly PreauthRow[]): Promise<{ added: number } | { conflict: string }> {
  // The devices' locks, in one order: two batches naming the same devices never wait on each other in a cycle.
  for (const key of [...new Set(rows.map((r) => deviceLock(r.vendorId, r.deviceId)))].sort()) {
    await c.query('SELECT pg_advisory_xact_lock($1)', [key]);
  }
  for (const row of rows) {
    const taken =
      (await one(c, "SELECT 1 FROM keys WHERE vendor_id = $1 AND device_id = $2 AND state = 'active'", [row.vendorId, row.deviceId])) ??
      (await one(c, 'SELECT 1 FROM preauth WHERE (vendor_id = $1 AND device_id = $2) OR key_id = $3', [
        row.vendorId,
        row.deviceId,
        row.keyId,
      ])) ??
      (await one(c, 'SELECT 1 FROM keys WHERE key_id = $1', [row.keyId]));
    if (taken) return { conflict: row.deviceId };
    try {
      await c.query('INSERT INTO preauth (key_id, public_key, device_id, vendor_id, created_at) VALUES ($1, $2, $3, $4, $5)', [
        row.keyId,
        row.publicKey,
        row.deviceId,
        row.vendorId,
        row.createdAt,
      ]);
    } catch (err) {
      if (isUniqueViolation(err)) return { conflict: row.deviceId };
      throw err;
    }
  }
  return { added: rows.length };
}

/** BrokerStore.rotate's transaction body. */
export async function rotateIn(c: Q, oldKeyId: string, newKey: { keyId: string; publicKey: string }, now: number): Promise<RotateOutcome> {
  const device = await one<Pick<KeyRow, 'botId' | 'deviceId' | 'vendorId'>>(
    c,
    "UPDATE keys SET state = 'revoked', reason = 'rotated', revoked_at = $1 WHERE key_id = $2 AND state = 'active' " +
      'RETURNING bot_id AS "botId", device_id AS "deviceId", vendor_id AS "vendorId"',
    [now, oldKeyId],
  );
  if (!device) return 'revoked';
  if (await keyKnown(c, newKey.keyId)) return 'key-exists';
  try {
    await insertKey(c, newKey, device, now);
  } catch (err) {
    if (isUniqueViolation(err)) return 'key-exists';
    throw err;
  }
  return 'ok';
}

function isUniqueViolation(err: unknown): boolean {
  return (err as { code?: string }).code === UNIQUE_VIOLATION;
}

/** A keyId is enrolled once, in any state; a pre-authorised one is reserved for its own enrollment. */
async function keyKnown(c: Q, keyId: string): Promise<boolean> {
  return (await one(c, 'SELECT 1 FROM keys WHERE key_id = $1 UNION ALL SELECT 1 FROM preauth WHERE key_id = $1', [keyId])) !== undefined;
}

function insertKey(
  c: Q,
  key: { keyId: string; publicKey: string },
  d: Pick<KeyRow, 'botId' | 'deviceId' | 'vendorId'>,
  now: number,
): Promise<unknown> {
  return c.query(
    "INSERT INTO keys (key_id, public_key, bot_id, device_id, vendor_id, state, created_at) VALUES ($1, $2, $3, $4, $5, 'active', $6)",
    [key.keyId, key.publicKey, d.botId, d.deviceId, d.vendorId, now],
  );
}

/** BrokerStore.enroll's transaction body; a unique violation means another replica bound the keyId, botId or device first. */
export async function enrollIn(c: Q, e: EnrollCommit): Promise<EnrollOutcome> {
  try {
    return await enrollChecked(c, e);
  } catch (err) {
    if (isUniqueViolation(err)) return (err as { constraint?: string }).constraint === 'keys_pkey' ? 'key-exists' : 'device-exists';
    throw err;
  }
}

/** The rules are SQLite's (sqlite-bind.ts), statement for statement, plus the device's advisory lock. */
async function enrollChecked(c: Q, e: EnrollCommit): Promise<EnrollOutcome> {
  const { vendorId, deviceId, botId } = e;
  // The device's lock orders this enrollment with a concurrent addPreauth of the same device.
  await c.query('SELECT pg_advisory_xact_lock($1)', [deviceLock(vendorId, deviceId)]);
  const admitted =
    e.admission.by === 'code'
      ? await one(
          c,
          'UPDATE codes SET uses_left = uses_left - 1 WHERE hmac = $1 AND uses_left > 0 AND expires_at > $2 AND vendor_id = $3 ' +
            'AND (device_id IS NULL OR device_id = $4) RETURNING hmac',
          [e.admission.hmac, e.now, vendorId, deviceId],
        )
      : await one(c, 'DELETE FROM preauth WHERE key_id = $1 AND public_key = $2 AND vendor_id = $3 AND device_id = $4 RETURNING key_id', [
          e.admission.keyId,
          e.key.publicKey,
          vendorId,
          deviceId,
        ]);
  if (!admitted) return 'spent';
  if (await keyKnown(c, e.key.keyId)) return 'key-exists';
  if (e.replace) {
    await c.query(
      "UPDATE keys SET state = 'revoked', reason = 'replaced', revoked_at = $1 WHERE bot_id = $2 AND state = 'active' AND vendor_id = $3 AND device_id = $4",
      [e.now, botId, vendorId, deviceId],
    );
    await c.query('DELETE FROM tokens WHERE bot_id = $1', [botId]);
    await c.query('DELETE FROM preauth WHERE vendor_id = $1 AND device_id = $2', [vendorId, deviceId]);
  } else if (
    e.admission.by === 'code' &&
    (await one(c, 'SELECT 1 FROM preauth WHERE vendor_id = $1 AND device_id = $2', [vendorId, deviceId]))
  ) {
    return 'device-exists';
  }
  const bound = await one(c, "SELECT 1 FROM keys WHERE (bot_id = $1 OR (vendor_id = $2 AND device_id = $3)) AND state = 'active'", [
    botId,
    vendorId,
    deviceId,
  ]);
  if (bound) return 'device-exists';
  await insertKey(c, e.key, { botId, deviceId, vendorId }, e.now);
  return 'ok';
}
