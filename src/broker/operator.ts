/**
 * The operator's actions on the broker's store (DESIGN §3.7 `broker code | devices | revoke | preauth | reset-limits`;
 * the rest of codes: operator-codes.ts), apart from the command line that parses their flags and prints their results.
 */
import { IDENTITY_FIELDS, type IdentityField, isIdentity } from '../protocol/broker.js';
import { publicKeyFromWire } from '../protocol/device-sig.js';
import { BotlinkError, messageOf } from '../protocol/errors.js';
import type { AuditTrail } from './audit/trail.js';
import { bucketPrefix, RESET_LIMIT_KINDS } from './auth/limits.js';
import { newCode, newCodeId, normaliseCode } from './codes.js';
import { type Displacement, type DisplacerDeps, displace } from './displace.js';
import { auditDisplacement, DISPLACE_AFTER_EXPIRY_MS } from './displacements.js';
import type { BrokerKeys } from './keys.js';
import type { BrokerStore, CodeKind, DeviceFilter, DeviceListing, PreauthRow, RemovedPreauth } from './store/types.js';

export const DEFAULT_CODE_USES = 1;
export const DEFAULT_CODE_TTL_S = 24 * 3600;

/** Operator input the broker cannot act on: exit 65, the message names the line or the flag. */
export class OperatorInputError extends BotlinkError {
  constructor(message: string) {
    super('ERR_CONFIG', message, 'fatal');
  }
}

/** Who acts (`cli:<OS user>`), and the audit their actions go to. */
export interface Operator {
  actor: string;
  audit: AuditTrail;
}

/**
 * A code bound to one device, or — only when the operator says so — to any serial of its vendor: such a
 * code can claim a device that still signs (registration returns a known serial's botId, DESIGN §1.5).
 */
export type CodeBinding = { deviceId: string } | 'any-device';

export interface CodeRequest {
  vendorId: string;
  binding: CodeBinding;
  uses: number;
  ttlS: number;
  kind: CodeKind;
}

export interface IssuedCode {
  /** What `broker codes` lists it by and `broker cancel` takes: never the code. */
  id: string;
  code: string;
  expiresAt: number;
  uses: number;
}

/**
 * A new code; its audit event (DESIGN §3.7) says its id, vendor, binding, kind and uses — never the code. An
 * operator's command asks refuseUnknownVendor (operator-codes.ts) first, so nothing is stored for a vendor the cloud does not know.
 */
export async function createCode(store: BrokerStore, keys: BrokerKeys, req: CodeRequest, now: number, by: Operator): Promise<IssuedCode> {
  const deviceId = req.binding === 'any-device' ? null : req.binding.deviceId;
  refuseUnlessIdentity('--vendor-id', 'vendorId', req.vendorId);
  if (deviceId !== null) refuseUnlessIdentity('--device-id', 'deviceId', deviceId);
  if (req.kind !== 'plain' && deviceId === null)
    throw new OperatorInputError(`a --${req.kind} code must be bound to one device: use --device-id SN, not --any-device`);
  if (req.kind !== 'plain' && req.uses !== 1) throw new OperatorInputError(`a --${req.kind} code is single-use: drop --uses`);
  const id = newCodeId();
  const code = newCode();
  const expiresAt = now + req.ttlS * 1000;
  await store.addCode({
    id,
    hmac: keys.codeHmac(normaliseCode(code) as string),
    vendorId: req.vendorId,
    kind: req.kind,
    deviceId,
    usesLeft: req.uses,
    expiresAt,
    createdAt: now,
  });
  const binding = deviceId === null ? 'any-device' : 'device';
  by.audit.record(
    {
      action: 'code',
      actor: by.actor,
      vendorId: req.vendorId,
      deviceId,
      codeId: id,
      outcome: `made ${req.kind} uses=${req.uses} ${binding}`,
    },
    deviceId === null ? 'enrollment code made for any device of its vendor' : 'enrollment code made',
    { anyDevice: deviceId === null, kind: req.kind, uses: req.uses },
  );
  return { id, code, expiresAt, uses: req.uses };
}

/** `broker devices`: one line per device and per pre-authorised key, of one state and vendor when asked. */
export function listDevices(store: BrokerStore, filter: DeviceFilter = {}): Promise<DeviceListing[]> {
  if (filter.vendorId !== undefined) refuseUnlessIdentity('--vendor-id', 'vendorId', filter.vendorId);
  return store.listDevices(filter);
}

export interface RevokeResult {
  /** How many keys were revoked (at least one: none throws). */
  revoked: number;
  /** With displace: when the broker displaces again, once the last token handed out has expired (null: none cached). */
  displaceAt: number | null;
}

/**
 * Revokes every active key of the botId, and says how many: none is an input error (exit 65), not a silent
 * success — an unknown botId, or one whose keys were all revoked already. One audit line per key revoked
 * (DESIGN §3.7), naming the botId and the keyId, never the key itself. `displace` (revoke --displace) queues,
 * in the same transaction, the displacement due just after the last token handed out expires; the one right
 * after the revoke is the caller's (displaceRevoked), once this has committed.
 */
export async function revoke(
  store: BrokerStore,
  botId: string,
  now: number,
  by: Operator,
  opts: { displace?: boolean } = {},
): Promise<RevokeResult> {
  const { keyIds, displaceAt } = await store.revoke(botId, now, opts.displace ? { displaceAfterExpiryMs: DISPLACE_AFTER_EXPIRY_MS } : {});
  // A botId is one device's: its row names the vendorId and deviceId of every key it had.
  const device = await store.findDeviceByBotId(botId);
  const event = { action: 'revoke', actor: by.actor, vendorId: device?.vendorId, deviceId: device?.deviceId, botId } as const;
  for (const keyId of keyIds) by.audit.record({ ...event, keyId, outcome: 'revoked' }, 'revocation');
  if (keyIds.length > 0) return { revoked: keyIds.length, displaceAt };
  by.audit.record({ ...event, outcome: device ? 'none-active' : 'unknown-bot' }, 'revocation');
  throw new OperatorInputError(
    device ? `botId ${botId} has no active key: nothing was revoked` : `no device with botId ${botId} is known to this broker`,
  );
}

/** revoke --displace's first displacement, right after the revoke committed; audited, and told, never thrown. */
export async function displaceRevoked(deps: DisplacerDeps, botId: string, by: Operator): Promise<Displacement> {
  const result = await displace(deps, botId);
  auditDisplacement(by.audit, by.actor, botId, result);
  return result;
}

/** An operator's identity field of §3.7's form, else exit 65 naming the flag and the form. */
export function refuseUnlessIdentity(flag: string, field: IdentityField, value: string): void {
  if (!isIdentity(field, value)) throw new OperatorInputError(`${flag} must be ${IDENTITY_FIELDS[field].says}`);
}

/** Lines `deviceId,publicKey` (blank lines and # comments skipped); every line is checked before any is stored. */
export function parsePreauth(text: string, vendorId: string, now: number): PreauthRow[] {
  refuseUnlessIdentity('--vendor-id', 'vendorId', vendorId);
  const rows: PreauthRow[] = [];
  const seen = new Set<string>();
  text.split(/\r?\n/).forEach((line, i) => {
    let row: PreauthRow | undefined;
    try {
      row = parsePreauthLine(line, vendorId, now);
    } catch (err) {
      throw new OperatorInputError(`line ${i + 1}: ${messageOf(err)}`);
    }
    if (row === undefined) return;
    if (seen.has(row.deviceId)) throw new OperatorInputError(`line ${i + 1}: deviceId ${row.deviceId} appears twice`);
    seen.add(row.deviceId);
    rows.push(row);
  });
  if (rows.length === 0) throw new OperatorInputError('no deviceId,publicKey lines in the file');
  return rows;
}

/** One line `deviceId,publicKey` as a row; undefined for a blank line or a # comment; an OperatorInputError saying what is wrong. */
export function parsePreauthLine(line: string, vendorId: string, now: number): PreauthRow | undefined {
  const trimmed = line.trim();
  if (trimmed === '' || trimmed.startsWith('#')) return undefined;
  const m = /^([^,]*),([A-Za-z0-9_-]{43})$/.exec(trimmed);
  if (!m) throw new OperatorInputError('expected deviceId,publicKey (base64url of 32 bytes)');
  const [, deviceId = '', publicKey = ''] = m;
  if (!isIdentity('deviceId', deviceId)) throw new OperatorInputError(`a deviceId is ${IDENTITY_FIELDS.deviceId.says}`);
  try {
    return { keyId: publicKeyFromWire(publicKey).keyId, publicKey, deviceId, vendorId, createdAt: now };
  } catch (err) {
    throw new OperatorInputError(messageOf(err));
  }
}

/** Pre-authorises every row or none; one audit event per row added (DESIGN §3.7). */
export async function preauthorize(store: BrokerStore, rows: readonly PreauthRow[], by: Operator): Promise<number> {
  const result = await store.addPreauth(rows);
  if ('conflict' in result) throw new OperatorInputError(`deviceId ${result.conflict} is enrolled or pre-authorised already`);
  await auditPreauthorized(rows, by);
  return result.added;
}

/** One audit event per row pre-authorised. */
export async function auditPreauthorized(rows: Iterable<PreauthRow>, by: Operator): Promise<void> {
  for (const { vendorId, deviceId, keyId } of rows) {
    by.audit.record({ action: 'preauth', actor: by.actor, vendorId, deviceId, keyId, outcome: 'added' }, 'device pre-authorised');
    // A file of many lines: each row waits for room rather than be dropped.
    await by.audit.room();
  }
}

/** `broker preauth --remove`: the device's pre-authorisation dropped, audited; none is 65. */
export async function removePreauth(store: BrokerStore, vendorId: string, deviceId: string, by: Operator): Promise<RemovedPreauth> {
  refuseUnlessIdentity('--vendor-id', 'vendorId', vendorId);
  refuseUnlessIdentity('DEVICEID', 'deviceId', deviceId);
  const removed = await store.removePreauth(vendorId, deviceId);
  if (removed === undefined) throw new OperatorInputError(`no pre-authorisation of device ${deviceId} for vendor ${vendorId}`);
  by.audit.record(
    { action: 'preauth', actor: by.actor, vendorId, deviceId, keyId: removed.keyId, outcome: 'removed' },
    'device pre-authorisation removed',
  );
  return removed;
}

/**
 * `broker reset-limits`: the botId's hourly counts cleared — its token requests (and its checks: RESET_LIMIT_KINDS),
 * never its rotations (rotatePerDay) — audited; a botId the broker does not know is 65.
 */
export async function resetLimits(store: BrokerStore, botId: string, by: Operator): Promise<number> {
  const device = await store.findDeviceByBotId(botId);
  if (device === undefined) throw new OperatorInputError(`no device with botId ${botId} is known to this broker`);
  const cleared = await store.resetLimits(RESET_LIMIT_KINDS.map((kind) => bucketPrefix(kind, botId)));
  by.audit.record(
    { action: 'reset-limits', actor: by.actor, vendorId: device.vendorId, deviceId: device.deviceId, botId, outcome: `cleared ${cleared}` },
    'rate limits reset',
  );
  return cleared;
}
