/**
 * The pending keys' transactions (PendingBook), written once for both databases (sql.ts): a first ask, an
 * operator's accept — the enrollment itself, under the same device and botId locks as enroll and revoke —
 * and the rejects, each final (a tombstone).
 */
import { checkChain } from '../chain.js';
import type {
  AcceptCommit,
  Accepted,
  AskOutcome,
  AskStanding,
  PendingAsk,
  PendingFilter,
  PendingItem,
  PendingRow,
} from '../pending-types.js';
import {
  ASK_STANDING,
  ASK_STEPS,
  DEVICE_HELD,
  DROP_PENDING_KEY,
  DROP_STALE_PENDING,
  ENTOMB_REJECTED,
  FIND_PENDING,
  LIST_PENDING,
  PENDING_OF_DEVICE,
  PENDING_GATE_STEP,
  PENDING_WHERE,
  TAKE_PENDING,
  TOUCH_PENDING_STEP,
} from '../pending-statements.js';
import { all, type Body, type ChainResult, chain, get, KEY_ID_INDEX, lock, run, UniqueViolation } from '../sql.js';
import { ACTIVE_KEY_OF_BOT_OR_DEVICE, FIND_KEY, GATED_SPEND_STEPS } from '../statements.js';
import type { AgainSpend, KnownKey, SpendOutcome } from '../types.js';
import { knownKey, pendingRow } from './rows.js';
import { deviceLock, insertKey, keysLock } from './enrollment.js';

/** pendingPerSource is decided under the source's lock: two replicas' first asks from one source count one after the other. */
function sourceLock(bucket: string): string {
  return `pending-source:${bucket}`;
}

/** A first ask's chain: every rule read at once, then the row and the key's first ask counted, gated on them. */
export const ASK = checkChain({
  name: 'broker-ask-pending',
  read: undefined,
  steps: ASK_STEPS,
  outputs: ['c.asked', 'c.known', 'c.held', 'c.source', 'c.vendor', 'r.ok'],
});

/** A waiting key's later ask: held to the key still waiting for its device, its hit and nonce, then its lastAsked. */
const AGAIN_STEPS = [PENDING_GATE_STEP, ...GATED_SPEND_STEPS, TOUCH_PENDING_STEP];
const AGAIN_OUTPUTS = ['k.ok', 'n.ok', 'h.count'];

/** BrokerStore.askAgain's chain. */
export const ASK_AGAIN = checkChain({ name: 'broker-ask-again', read: undefined, steps: AGAIN_STEPS, outputs: AGAIN_OUTPUTS });

/** BrokerStore.findCarriedKey's chain: the key read as it was, and a waiting key's later ask gated on it, in one statement. */
export const FIND_CARRIED_KEY = checkChain({ name: 'broker-find-carried-key', read: FIND_KEY, steps: AGAIN_STEPS, outputs: AGAIN_OUTPUTS });

/**
 * BrokerStore.askPending: the device's lock, then the source's (never the other way round), in one round trip, then
 * one statement that judges the ask and makes its row: four round trips with BEGIN and COMMIT, not ten.
 */
export function* askPendingTx(ask: PendingAsk): Body<AskOutcome> {
  const r = ask.row;
  yield* lock(deviceLock(r.vendorId, r.deviceId), sourceLock(ask.sourceBucket));
  let out: Record<string, unknown>;
  try {
    ({ out } = yield* chain(
      ASK,
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
      ask.perSource,
      ask.perVendor,
      ask.window.bucket,
      ask.window.start,
    ));
  } catch (err) {
    if (err instanceof UniqueViolation) return 'asked';
    throw err;
  }
  if (Number(out['c.asked']) === 1) return 'asked';
  if (Number(out['c.known']) === 1) return 'key-exists';
  if (Number(out['c.held']) === 1) return 'device-exists';
  if (Number(out['c.source']) >= ask.perSource) return 'source-full';
  // Per vendor under no lock of its own: a few replicas' asks at once may pass pendingMax by a few, never by a flood.
  if (Number(out['c.vendor']) >= ask.perVendor) return 'vendor-full';
  if (out['r.ok'] == null) throw new Error('a first ask that every rule admitted made no row');
  return 'created';
}

/** BrokerStore.askStanding. */
export function* askStandingTx(sourceBucket: string, vendorId: string, deviceId: string): Body<AskStanding> {
  const row = yield* get<{ held: unknown; source: unknown; vendor: unknown }>(ASK_STANDING, sourceBucket, vendorId, deviceId);
  return { held: Number(row?.held ?? 0) === 1, source: Number(row?.source ?? 0), vendor: Number(row?.vendor ?? 0) };
}

/** BrokerStore.askAgain. */
export function* askAgainTx(r: AgainSpend): Body<SpendOutcome | undefined> {
  return againOutcome(yield* chain(ASK_AGAIN, ...againValues(r)));
}

/** BrokerStore.findCarriedKey. */
export function* findCarriedKeyTx(r: AgainSpend): Body<{ known: KnownKey | undefined; asked: SpendOutcome | undefined }> {
  const result = yield* chain(FIND_CARRIED_KEY, ...againValues(r));
  return { known: knownKey(r.keyId, result.read?.['keyId'] == null ? undefined : result.read), asked: againOutcome(result) };
}

/** AGAIN_STEPS' values. */
function againValues(r: AgainSpend): unknown[] {
  const w = r.window;
  return [
    r.keyId,
    r.nonce,
    r.keepUntil,
    r.publicKey,
    w?.bucket ?? null,
    w?.start ?? null,
    w?.limit ?? null,
    r.now,
    r.deviceId,
    r.vendorId ?? null,
  ];
}

/** Undefined when the key did not wait for that device: nothing was written. */
function againOutcome({ out }: ChainResult): SpendOutcome | undefined {
  if (out['k.ok'] == null) return undefined;
  const count = out['h.count'];
  return { count: count == null ? undefined : Number(count), replayed: out['n.ok'] == null };
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
  yield* lock(deviceLock(vendorId, deviceId), keysLock(c.botId));
  const taken = yield* get<PendingRow>(TAKE_PENDING, c.keyId, deviceId);
  if (taken === undefined) return { outcome: 'gone', rejected: [] };
  // A plain code's rules: a device new to the broker, not pre-authorised, and a botId bound to no key.
  if (yield* get(DEVICE_HELD, vendorId, deviceId)) return { outcome: 'device-exists', rejected: [] };
  if (yield* get(ACTIVE_KEY_OF_BOT_OR_DEVICE, c.botId, vendorId, deviceId)) return { outcome: 'device-exists', rejected: [] };
  try {
    yield* insertKey(found, { botId: c.botId, vendorId, deviceId, name: taken.name }, c.now);
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
