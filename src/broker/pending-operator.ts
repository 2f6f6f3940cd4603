/**
 * The operator's verdicts on keys that wait (DESIGN §3.7 "Enrollment with no code", `broker pending | accept |
 * reject`, §3.8's pending items): accept is the enrollment itself, in the operator's request — the cloud
 * registers the device, one transaction binds it under a plain code's rules and rejects the other keys that
 * waited for it —; reject is final; and the housekeeping drops a key 7 days after its first ask. Each audited.
 */
import { IDENTITY_FIELDS, isIdentity } from '../protocol/broker.js';
import { BotlinkError, type ErrorCode } from '../protocol/errors.js';
import type { AuditTrail } from './audit/trail.js';
import { parseCidr } from './cidr.js';
import { BROKER_ACTOR } from './displacements.js';
import { type Operator, OperatorInputError } from './operator.js';
import { Refusal } from './refusal.js';
import type { Register } from './registrar.js';
import { type Binding, refuseAfterRegistering, refuseBeforeRegistering } from './routes/admission.js';
import type { BrokerStore, PendingFilter, PendingRow } from './store/types.js';
import type { PendingPageItem } from './store/admin-types.js';

/** A key waits at most this long after its first ask. */
export const PENDING_KEPT_MS = 7 * 86_400_000;
/** An accepted key binds as a plain code's would: a device new to the broker. */
const ACCEPTED: Binding = { kind: 'plain', byCode: true };
const KEY_ID = /^[0-9a-f]{32}$/;

/** A verdict the broker cannot give, with the admin API's status: 404 no such key, 409 a conflict, 502/503 the cloud. */
export class PendingActionError extends BotlinkError {
  readonly status: 404 | 409 | 502 | 503;

  constructor(status: 404 | 409 | 502 | 503, message: string) {
    const code: ErrorCode = status === 502 ? 'ERR_BROKER_CLOUD_REFUSED' : status === 503 ? 'ERR_BROKER_CLOUD_UNREACHABLE' : 'ERR_CONFIG';
    // 404 and 409 are the operator's to mend (exit 65); the cloud's are worth trying again (69).
    super(code, message, status >= 500 ? 'retry-soon' : 'fatal');
    this.status = status;
  }
}

/** §3.8's pending item: the store's pending page line, one type for the store's page and this list. */
export type PendingListed = PendingPageItem;

/** The keys that wait, of one vendor and one source block when given. */
export async function listPending(store: BrokerStore, filter: { vendorId?: string; source?: string }): Promise<PendingListed[]> {
  checkVendorId(filter.vendorId);
  const inBlock = filter.source === undefined ? undefined : sourceTest(filter.source);
  const items = await store.listPending(filter.vendorId);
  return items
    .filter((i) => inBlock === undefined || inBlock(i.source))
    .map(({ keyId, deviceId, vendorId, name, source, firstAsked, lastAsked, duplicates }) => ({
      keyId,
      deviceId,
      vendorId,
      name,
      source,
      firstAsked,
      lastAsked,
      duplicates,
    }));
}

export interface AcceptDeps {
  store: BrokerStore;
  register: Register;
  now(): number;
}

/**
 * Accepts the whole keyId for the deviceId the operator expects: the botId, and how many other keys that
 * waited for the device were rejected with it. Nothing changes unless it binds.
 */
export async function acceptPending(
  d: AcceptDeps,
  keyId: string,
  deviceId: string,
  by: Operator,
): Promise<{ botId: string; rejected: number }> {
  if (!KEY_ID.test(keyId)) throw new OperatorInputError('a keyId is 32 lower-case hex characters, as the device shows it whole');
  const row = await d.store.findPending(keyId);
  if (row === undefined) throw new PendingActionError(404, `no key waits with keyId ${keyId}`);
  if (row.deviceId !== deviceId)
    throw new PendingActionError(409, `key ${keyId} waits for device ${row.deviceId}, not ${deviceId}: nothing was accepted`);
  const { vendorId } = row;
  const known = await d.store.findDeviceByDeviceId(vendorId, deviceId);
  conflictUnless(refuseBeforeRegistering(ACCEPTED, known));
  let botId: string;
  try {
    botId = await d.register({ vendorId, appId: row.appId, deviceId, type: row.type, name: row.name });
  } catch (err) {
    if (err instanceof Refusal) throw new PendingActionError(err.status === 502 ? 502 : 503, err.message);
    throw err;
  }
  conflictUnless(
    refuseAfterRegistering(ACCEPTED, {
      botId,
      wanted: undefined,
      known,
      holder: await d.store.findDeviceByBotId(botId),
      preauthorized: await d.store.isPreauthorized(vendorId, deviceId),
    }),
  );
  const accepted = await d.store.acceptPending({ keyId, deviceId, botId, now: d.now() });
  if (accepted.outcome === 'gone')
    throw new PendingActionError(409, `key ${keyId} no longer waits (rejected or dropped meanwhile): nothing was bound`);
  if (accepted.outcome === 'device-exists')
    throw new PendingActionError(409, `device ${deviceId} or its botId ${botId} is bound meanwhile: nothing was bound`);
  const event = { actor: by.actor, vendorId, deviceId, botId, source: row.source };
  by.audit.record({ ...event, action: 'accept', keyId, outcome: 'accepted' }, 'pending key accepted');
  for (const other of accepted.rejected)
    by.audit.record(
      { ...event, action: 'reject', keyId: other.keyId, outcome: 'another-accepted', source: other.source },
      'pending key rejected',
      {
        acceptedKeyId: keyId,
      },
    );
  return { botId, rejected: accepted.rejected.length };
}

function conflictUnless(refusal: Refusal | undefined): void {
  if (refusal) throw new PendingActionError(409, `${refusal.message}: nothing was accepted`);
}

/** What `broker reject` names: one whole keyId, or a filter (a vendor, a source block, a first ask before a time). */
export type RejectWhich = { keyId: string } | { vendorId?: string; source?: string; firstAskedBefore?: number };

/** Rejects, in one transaction: how many keys. One named keyId that does not wait is a 404; a filter that holds for none rejects 0. */
export async function rejectPending(store: BrokerStore, which: RejectWhich, now: number, by: Operator): Promise<number> {
  let filter: { keyId: string } | PendingFilter;
  if ('keyId' in which) filter = which;
  else {
    if (which.vendorId === undefined && which.source === undefined && which.firstAskedBefore === undefined)
      throw new OperatorInputError('a bulk reject needs a filter: a vendor, a source or a first-asked time');
    checkVendorId(which.vendorId);
    filter = { ...which, source: which.source === undefined ? undefined : sourceTest(which.source) };
  }
  const rows = await store.rejectPending(filter, now);
  if ('keyId' in which && rows.length === 0) throw new PendingActionError(404, `no key waits with keyId ${which.keyId}`);
  for (const row of rows) auditGone(by.audit, by.actor, 'reject', row, 'rejected');
  return rows.length;
}

/** The housekeeping's drop of keys first asked 7 days ago or more, one audit event each; never rejects. */
export async function dropStalePending(
  store: Pick<BrokerStore, 'dropPending'>,
  audit: Pick<AuditTrail, 'record'>,
  now: number,
): Promise<number> {
  const rows = await store.dropPending(now - PENDING_KEPT_MS);
  for (const row of rows) auditGone(audit, BROKER_ACTOR, 'pending', row, 'dropped');
  return rows.length;
}

function auditGone(audit: Pick<AuditTrail, 'record'>, actor: string, action: 'pending' | 'reject', row: PendingRow, outcome: string): void {
  const { vendorId, deviceId, keyId, source } = row;
  audit.record(
    { action, actor, vendorId, deviceId, keyId, source, outcome },
    outcome === 'dropped' ? 'pending key dropped' : 'pending key rejected',
  );
}

/** `--source` (and the admin API's `source`): an address or a block as a test of a first ask's source. */
export function sourceTest(cidr: string): (address: string) => boolean {
  const test = parseCidr(cidr);
  if (test === undefined)
    throw new OperatorInputError(`--source must be an address or a block address/prefix, got ${JSON.stringify(cidr)}`);
  return test;
}

function checkVendorId(vendorId: string | undefined): void {
  if (vendorId !== undefined && !isIdentity('vendorId', vendorId))
    throw new OperatorInputError(`--vendor-id must be ${IDENTITY_FIELDS.vendorId.says}`);
}
