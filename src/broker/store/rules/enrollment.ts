/**
 * The deciding transactions of the broker's store, written once for both databases (sql.ts): the
 * driver runs each between BEGIN and COMMIT, and rolls it back whole for any outcome but success.
 */
import type { EnrollCommit, Enrolled, EnrollOutcome, KeyRow, PreauthRow, Revocation, RevokeOptions, RotateOutcome } from '../types.js';
import { all, type Body, get, KEY_ID_INDEX, lock, run, UniqueViolation } from '../sql.js';
import {
  ACTIVE_KEY_OF_BOT_OR_DEVICE,
  ACTIVE_KEY_OF_DEVICE,
  ADD_PREAUTH,
  BOT_OF_KEY,
  DROP_PREAUTH_OF_BOT,
  DROP_ENTOMBED,
  DROP_PREAUTH_OF_DEVICE,
  DROP_TOKENS,
  ENTOMB_RETIRED,
  INSERT_KEY,
  KEY_KNOWN,
  PREAUTH_OF_DEVICE,
  PREAUTH_OF_DEVICE_OR_KEY,
  QUEUE_DISPLACEMENT,
  REVOKE_BOT,
  REVOKE_REPLACED,
  ROTATE_AWAY,
  SPEND_CODE_USE,
  TAKE_PREAUTH,
  TOKEN_EXPIRY,
} from '../statements.js';

/** The device a key is made for; name its name (DESIGN §3.7), NULL only for a key enrolled before keys kept one. */
type Device = Pick<KeyRow, 'botId' | 'deviceId' | 'vendorId'> & { name: string | null };

/** A device's lock: its enrollment and its pre-authorisation are decided one after the other. */
export function deviceLock(vendorId: string, deviceId: string): string {
  return `device:${vendorId}\n${deviceId}`;
}

/**
 * A botId's keys lock: every change of which of its keys is active — revoke, rotate, enroll — takes it, so
 * they happen one after another across replicas and a revoke sees the key a rotation just made (DESIGN
 * §3.7: revocation is final). Taken after the device's lock, never before it.
 */
export function keysLock(botId: string): string {
  return `keys:${botId}`;
}

/** BrokerStore.enroll; a unique index broken means another replica bound the keyId, botId or device first. */
export function* enrollTx(e: EnrollCommit): Body<Enrolled> {
  try {
    return yield* enrollChecked(e);
  } catch (err) {
    if (err instanceof UniqueViolation) return refused(err.index === KEY_ID_INDEX ? 'key-exists' : 'device-exists');
    throw err;
  }
}

/** An outcome that rolls the transaction back: nothing it revoked stays revoked. */
function refused(outcome: Exclude<EnrollOutcome, 'ok'>): Enrolled {
  return { outcome, replaced: [] };
}

function* enrollChecked(e: EnrollCommit): Body<Enrolled> {
  const { vendorId, deviceId, botId } = e;
  yield* lock(deviceLock(vendorId, deviceId), keysLock(botId));
  const admitted =
    e.admission.by === 'code'
      ? yield* get(SPEND_CODE_USE, e.admission.hmac, e.now, vendorId, deviceId)
      : yield* get(TAKE_PREAUTH, e.admission.keyId, e.key.publicKey, vendorId, deviceId);
  if (!admitted) return refused('spent');
  if (yield* get(KEY_KNOWN, e.key.keyId)) return refused('key-exists');
  let replaced: { keyId: string }[] = [];
  if (e.replace) {
    // The old key goes, and with it the tokens issued for it; a pending pre-authorisation of the device too.
    replaced = yield* all<{ keyId: string }>(REVOKE_REPLACED, e.now, botId, vendorId, deviceId);
    yield* run(DROP_TOKENS, botId);
    yield* run(DROP_PREAUTH_OF_DEVICE, vendorId, deviceId);
    yield* entombRetired(botId);
  } else if (e.admission.by === 'code' && (yield* get(PREAUTH_OF_DEVICE, vendorId, deviceId))) {
    return refused('device-exists');
  }
  // A bound botId or deviceId (replace: bound to another device) is a conflict.
  if (yield* get(ACTIVE_KEY_OF_BOT_OR_DEVICE, botId, vendorId, deviceId)) return refused('device-exists');
  yield* insertKey(e.key, { botId, deviceId, vendorId, name: e.name ?? deviceId }, e.now);
  return { outcome: 'ok', replaced: replaced.map((r) => r.keyId) };
}

/** BrokerStore.rotate. */
export function* rotateTx(oldKeyId: string, newKey: { keyId: string; publicKey: string }, now: number): Body<RotateOutcome> {
  const owner = yield* get<{ botId: string }>(BOT_OF_KEY, oldKeyId);
  if (!owner) return 'revoked';
  yield* lock(keysLock(owner.botId));
  const device = yield* get<Device>(ROTATE_AWAY, now, oldKeyId);
  if (!device) return 'revoked';
  if (yield* get(KEY_KNOWN, newKey.keyId)) return 'key-exists';
  try {
    yield* insertKey(newKey, device, now);
  } catch (err) {
    if (err instanceof UniqueViolation) return 'key-exists';
    throw err;
  }
  yield* entombRetired(device.botId);
  return 'ok';
}

/** BrokerStore.addPreauth. */
export function* addPreauthTx(rows: readonly PreauthRow[]): Body<{ added: number } | { conflict: string }> {
  // The devices' locks, in one order: two batches naming the same devices never wait on each other in a cycle.
  for (const name of [...new Set(rows.map((r) => deviceLock(r.vendorId, r.deviceId)))].sort()) yield* lock(name);
  for (const row of rows) {
    const taken =
      (yield* get(ACTIVE_KEY_OF_DEVICE, row.vendorId, row.deviceId)) ??
      (yield* get(PREAUTH_OF_DEVICE_OR_KEY, row.vendorId, row.deviceId, row.keyId)) ??
      (yield* get(KEY_KNOWN, row.keyId));
    if (taken) return { conflict: row.deviceId };
    try {
      yield* run(ADD_PREAUTH, row.keyId, row.publicKey, row.deviceId, row.vendorId, row.createdAt);
    } catch (err) {
      if (err instanceof UniqueViolation) return { conflict: row.deviceId };
      throw err;
    }
  }
  return { added: rows.length };
}

/**
 * BrokerStore.revoke: every key of the botId active when it commits. The token it drops may still be in a
 * thief's hands until it expires: with displaceAfterExpiryMs, a displacement is queued for just after then.
 */
export function* revokeTx(botId: string, now: number, opts: RevokeOptions = {}): Body<Revocation> {
  yield* lock(keysLock(botId));
  const keyIds = (yield* all<{ keyId: string }>(REVOKE_BOT, now, botId)).map((r) => r.keyId);
  const after = opts.displaceAfterExpiryMs;
  const token = after === undefined || keyIds.length === 0 ? undefined : yield* get<{ expiresAt: number }>(TOKEN_EXPIRY, botId);
  yield* run(DROP_PREAUTH_OF_BOT, botId);
  yield* run(DROP_TOKENS, botId);
  yield* entombRetired(botId);
  if (token === undefined || after === undefined) return { keyIds, displaceAt: null };
  const displaceAt = Number(token.expiresAt) + after;
  yield* run(QUEUE_DISPLACEMENT, botId, displaceAt, 0);
  return { keyIds, displaceAt };
}

/** A botId keeps its newest RETIRED_KEPT retired keys as rows; older ones become tombstones (DESIGN §3.7). */
export function* entombRetired(botId: string): Body<void> {
  yield* run(ENTOMB_RETIRED, botId);
  yield* run(DROP_ENTOMBED, botId);
}

export function* insertKey(key: { keyId: string; publicKey: string }, d: Device, now: number): Body<void> {
  yield* run(INSERT_KEY, key.keyId, key.publicKey, d.botId, d.deviceId, d.vendorId, now, d.name);
}
