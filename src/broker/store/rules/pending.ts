/**
 * The pending keys' transactions (PendingBook), written once for both databases (sql.ts): a first ask, an
 * operator's accept — the enrollment itself, under the same device and botId locks as enroll and revoke —
 * and the rejects, each final (a tombstone).
 */
import type { AcceptCommit, Accepted, AskOutcome, PendingAsk, PendingFilter, PendingItem, PendingRow } from '../pending-types.js';
import {
  DEVICE_HELD,
  DROP_PENDING_KEY,
  DROP_STALE_PENDING,
  ENTOMB_REJECTED,
  FIND_PENDING,
  INSERT_PENDING,
  LIST_PENDING,
  PENDING_OF_DEVICE,
  PENDING_OF_SOURCE,
  PENDING_OF_VENDOR,
  PENDING_WHERE,
  TAKE_PENDING,
} from '../pending-statements.js';
import { all, type Body, get, KEY_ID_INDEX, lock, run, UniqueViolation } from '../sql.js';
import { ACTIVE_KEY_OF_BOT_OR_DEVICE, KEY_KNOWN } from '../statements.js';
import { deviceLock, insertKey, keysLock } from './enrollment.js';

/** pendingPerSource is decided under the source's lock: two replicas' first asks from one source count one after the other. */
function sourceLock(bucket: string): string {
  return `pending-source:${bucket}`;
}

/** BrokerStore.askPending: the device's lock, then the source's (never the other way round). */
export function* askPendingTx(ask: PendingAsk): Body<AskOutcome> {
  const r = ask.row;
  yield* lock(deviceLock(r.vendorId, r.deviceId));
  yield* lock(sourceLock(ask.sourceBucket));
  if (yield* get(FIND_PENDING, r.keyId)) return 'asked';
  if (yield* get(KEY_KNOWN, r.keyId)) return 'key-exists';
  if (yield* get(DEVICE_HELD, r.vendorId, r.deviceId)) return 'device-exists';
  if (yield* countOf(PENDING_OF_SOURCE, ask.sourceBucket, ask.perSource)) return 'source-full';
  // Per vendor under no lock of its own: a few replicas' asks at once may pass pendingMax by a few, never by a flood.
  if (yield* countOf(PENDING_OF_VENDOR, r.vendorId, ask.perVendor)) return 'vendor-full';
  try {
    yield* run(
      INSERT_PENDING,
      r.keyId,
      r.publicKey,
      r.vendorId,
      r.deviceId,
      r.appId,
      r.type,
      r.name,
      r.source,
      ask.sourceBucket,
      r.firstAsked,
    );
  } catch (err) {
    if (err instanceof UniqueViolation) return 'asked';
    throw err;
  }
  return 'created';
}

/** Whether the rows `sql` counts for `id` are `max` already. */
function* countOf(sql: string, id: string, max: number): Body<boolean> {
  const row = yield* get<{ n: unknown }>(sql, id);
  return Number(row?.n ?? 0) >= max;
}

/** BrokerStore.pendingCounts. */
export function* pendingCountsTx(sourceBucket: string, vendorId: string): Body<{ source: number; vendor: number }> {
  const source = yield* get<{ n: unknown }>(PENDING_OF_SOURCE, sourceBucket);
  const vendor = yield* get<{ n: unknown }>(PENDING_OF_VENDOR, vendorId);
  return { source: Number(source?.n ?? 0), vendor: Number(vendor?.n ?? 0) };
}

/** BrokerStore.findPending. */
export function* findPendingTx(keyId: string): Body<PendingRow | undefined> {
  const row = yield* get<PendingRow>(FIND_PENDING, keyId);
  return row === undefined ? undefined : pendingRow(row);
}

/** BrokerStore.listPending. */
export function* listPendingTx(vendorId: string | undefined): Body<PendingItem[]> {
  const rows = yield* all<PendingItem>(LIST_PENDING, vendorId ?? null);
  return rows.map((r) => ({ ...pendingRow(r), duplicates: Number(r.duplicates) }));
}

/**
 * BrokerStore.acceptPending: the row taken only while it still waits for this device (a reject or the drop
 * that came first wins), the device bound under a plain code's rules, the other keys waiting for it rejected.
 */
export function* acceptPendingTx(c: AcceptCommit): Body<Accepted> {
  const found = yield* findPendingTx(c.keyId);
  if (found === undefined || found.deviceId !== c.deviceId) return { outcome: 'gone', rejected: [] };
  const { vendorId, deviceId } = found;
  yield* lock(deviceLock(vendorId, deviceId));
  yield* lock(keysLock(c.botId));
  const taken = yield* get<PendingRow>(TAKE_PENDING, c.keyId, deviceId);
  if (taken === undefined) return { outcome: 'gone', rejected: [] };
  // A plain code's rules: a device new to the broker, not pre-authorised, and a botId bound to no key.
  if (yield* get(DEVICE_HELD, vendorId, deviceId)) return { outcome: 'device-exists', rejected: [] };
  if (yield* get(ACTIVE_KEY_OF_BOT_OR_DEVICE, c.botId, vendorId, deviceId)) return { outcome: 'device-exists', rejected: [] };
  try {
    yield* insertKey(found, { botId: c.botId, vendorId, deviceId }, c.now);
  } catch (err) {
    if (err instanceof UniqueViolation && err.index !== KEY_ID_INDEX) return { outcome: 'device-exists', rejected: [] };
    throw err;
  }
  const others = (yield* all<PendingRow>(PENDING_OF_DEVICE, vendorId, deviceId)).map(pendingRow);
  const rejected: PendingRow[] = [];
  for (const other of others) if (yield* entombRejected(other, c.now)) rejected.push(other);
  return { outcome: 'ok', rejected };
}

/** BrokerStore.rejectPending: one key, or every key a filter holds for, in one transaction. */
export function* rejectPendingTx(which: { keyId: string } | PendingFilter, now: number): Body<PendingRow[]> {
  let rows: PendingRow[];
  if ('keyId' in which) {
    const one = yield* findPendingTx(which.keyId);
    rows = one === undefined ? [] : [one];
  } else {
    const { vendorId, firstAskedBefore, source } = which;
    rows = (yield* all<PendingRow>(PENDING_WHERE, vendorId ?? null, firstAskedBefore ?? null))
      .map(pendingRow)
      .filter((r) => source === undefined || source(r.source));
  }
  const rejected: PendingRow[] = [];
  for (const row of rows) if (yield* entombRejected(row, now)) rejected.push(row);
  return rejected;
}

/**
 * A pending key rejected: its row gone, its tombstone final (it answers `rejected` on every route). Only a row
 * this transaction removed is entombed: one an accept took meanwhile is an active key, and stays one.
 */
function* entombRejected(row: PendingRow, now: number): Body<boolean> {
  if ((yield* run(DROP_PENDING_KEY, row.keyId)) === 0) return false;
  yield* run(ENTOMB_REJECTED, row.keyId, row.publicKey, now, row.vendorId, row.deviceId);
  return true;
}

/** BrokerStore.dropPending. */
export function* dropPendingTx(before: number): Body<PendingRow[]> {
  return (yield* all<PendingRow>(DROP_STALE_PENDING, before)).map(pendingRow);
}

/** A row as the driver read it: times as numbers (PostgreSQL's BIGINT arrives as text). */
function pendingRow(r: PendingRow): PendingRow {
  return {
    keyId: r.keyId,
    publicKey: r.publicKey,
    vendorId: r.vendorId,
    deviceId: r.deviceId,
    appId: r.appId,
    type: r.type,
    name: r.name,
    source: r.source,
    firstAsked: Number(r.firstAsked),
    lastAsked: Number(r.lastAsked),
  };
}
