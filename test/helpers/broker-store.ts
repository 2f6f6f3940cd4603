import { randomBytes, randomUUID } from 'node:crypto';
import type { AuditRow, BrokerStore, CodeRow, EnrollCommit } from '../../src/broker/store/types.js';
import { H } from './time.js';

const hex = (bytes: number): string => randomBytes(bytes).toString('hex');

/** A key of its own: a random keyId and a stand-in public key (the store never verifies with it). */
export function newKey(): { keyId: string; publicKey: string } {
  const keyId = hex(16);
  return { keyId, publicKey: `pk-${keyId}` };
}

/** A code row as `broker code` stores it: plain, one use, vendor V1, an hour to live; `over` changes any field. */
export function codeRow(over: Partial<CodeRow> = {}): CodeRow {
  return {
    id: hex(10),
    hmac: hex(32),
    vendorId: 'V1',
    kind: 'plain',
    deviceId: null,
    usesLeft: 1,
    expiresAt: Date.now() + H,
    createdAt: Date.now(),
    ...over,
  };
}

/** The enrollment of a new key with `code`, as a device of its own (botId `bot-<deviceId>`); `over` changes any field. */
export function byCode(code: CodeRow, over: Partial<EnrollCommit> = {}): EnrollCommit {
  const deviceId = over.deviceId ?? `SN-${hex(4)}`;
  return {
    admission: { by: 'code', hmac: code.hmac },
    key: newKey(),
    botId: `bot-${deviceId}`,
    deviceId,
    vendorId: code.vendorId,
    replace: code.kind === 'replace',
    now: Date.now(),
    ...over,
  };
}

/** Takes (keyId, nonce) as an enrollment's spend does, under no limit: true when no replica had seen it. */
export async function takeNonce(store: BrokerStore, keyId: string, nonce: string, keepUntil: number): Promise<boolean> {
  return !(await store.spend({ keyId, nonce, keepUntil })).replayed;
}

/** One more hit in `bucket`'s window starting at `start` (a spend with a nonce of its own): the count after it. */
export async function hitIn(store: BrokerStore, bucket: string, start: number): Promise<number> {
  const spent = await store.spend({
    keyId: 'hits',
    nonce: randomUUID(),
    keepUntil: Date.now() + 60_000,
    window: { bucket, start, limit: Number.MAX_SAFE_INTEGER },
  });
  if (spent.replayed || spent.count === undefined) throw new Error('a fresh nonce was refused, or nothing was counted');
  return spent.count;
}

/** An audit row of a token issued to bot-1 from 192.0.2.1; `over` changes any field. */
export function auditRow(over: Partial<AuditRow> = {}): AuditRow {
  return {
    at: 1_000,
    action: 'token',
    actor: 'device',
    vendorId: 'V1',
    deviceId: 'SN-1',
    botId: 'bot-1',
    keyId: 'k1',
    codeId: null,
    source: '192.0.2.1',
    outcome: 'cache',
    count: 1,
    fold: null,
    ...over,
  };
}

/** The audit table as AuditRow fields, oldest first, on either database (BIGINT columns as the driver reads them). */
export const AUDIT_ROWS_SQL =
  'SELECT at, action, actor, vendor_id AS "vendorId", device_id AS "deviceId", bot_id AS "botId", key_id AS "keyId", ' +
  'code_id AS "codeId", source, outcome, count, fold FROM audit ORDER BY id';
