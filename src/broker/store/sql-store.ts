/**
 * The broker's store (types.ts), written once over a Driver: each method is one rule, run as a read, a
 * write, or a decision. The databases differ only in their drivers (sqlite.ts, postgres.ts).
 */
import { SqlAdminStore } from './admin-store.js';
import type { AdminStore } from './admin-types.js';
import type { Driver } from './driver.js';
import { claimDisplacementsTx, requeueDisplacementTx } from './rules/displacements.js';
import { pruneAuditTx, writeAuditTx } from './rules/audit.js';
import { addPreauthTx, enrollTx, revokeTx, rotateTx } from './rules/enrollment.js';
import {
  acceptPendingTx,
  askAgainTx,
  askPendingTx,
  askStandingTx,
  findCarriedKeyTx,
  dropPendingTx,
  findPendingTx,
  listPendingTx,
  rejectPendingTx,
} from './rules/pending.js';
import { findKeyTx, spendTx, spendVerifiedTx, sweepTx } from './rules/requests.js';
import { all, get, run, storeNow } from './sql.js';
import {
  ADD_CODE,
  CANCEL_CODE,
  COUNT_DEVICES,
  DEVICE_BY_BOT_ID,
  DEVICE_BY_DEVICE_ID,
  FIND_CODE,
  FIND_PREAUTH,
  LIST_CODES,
  LIST_DEVICES,
  PREAUTH_OF_DEVICE,
  KEEP_TOKEN,
  READ_TOKEN,
  REMOVE_PREAUTH,
} from './statements.js';
import { resetLimitsTx } from './rules/operator.js';
import type {
  AcceptCommit,
  Accepted,
  AskOutcome,
  AuditPrune,
  AuditRow,
  BrokerStore,
  CodeFilter,
  CodeListing,
  CodeRow,
  DeviceFilter,
  DeviceCounts,
  DeviceListing,
  DeviceRow,
  DueDisplacement,
  EnrollCommit,
  Enrolled,
  KnownKey,
  AgainSpend,
  AskStanding,
  PendingAsk,
  PendingFilter,
  PendingItem,
  PendingRow,
  PreauthRow,
  RemovedPreauth,
  RequestSpend,
  Revocation,
  RevokeOptions,
  RotateOutcome,
  SpendOutcome,
  StoreKind,
  TokenRow,
  VerifiedRequestSpend,
  VerifiedSpend,
} from './types.js';

export class SqlStore implements BrokerStore {
  readonly kind: StoreKind;
  readonly admin: AdminStore;
  readonly #d: Driver;

  constructor(driver: Driver) {
    this.#d = driver;
    this.kind = driver.kind;
    this.admin = new SqlAdminStore(driver);
  }

  now(): Promise<number> {
    return this.#d.run(storeNow(), 'read');
  }

  async addCode(c: CodeRow): Promise<void> {
    await this.#d.decide(run(ADD_CODE, c.id, c.hmac, c.vendorId, c.kind, c.deviceId, c.usesLeft, c.expiresAt, c.createdAt), () => true);
  }

  findCode(hmac: string): Promise<CodeRow | undefined> {
    return this.#d.run(get<CodeRow>(FIND_CODE, hmac), 'read');
  }

  findKey(keyId: string): Promise<KnownKey | undefined> {
    return this.#d.run(findKeyTx(keyId), 'read');
  }

  findPreauth(keyId: string): Promise<PreauthRow | undefined> {
    return this.#d.run(get<PreauthRow>(FIND_PREAUTH, keyId), 'read');
  }

  addPreauth(rows: readonly PreauthRow[]): Promise<{ added: number } | { conflict: string }> {
    return this.#d.decide(addPreauthTx(rows), (result) => 'added' in result);
  }

  findDeviceByDeviceId(vendorId: string, deviceId: string): Promise<DeviceRow | undefined> {
    return this.#d.run(get<DeviceRow>(DEVICE_BY_DEVICE_ID, vendorId, deviceId), 'read');
  }

  findDeviceByBotId(botId: string): Promise<DeviceRow | undefined> {
    return this.#d.run(get<DeviceRow>(DEVICE_BY_BOT_ID, botId), 'read');
  }

  async isPreauthorized(vendorId: string, deviceId: string): Promise<boolean> {
    return (await this.#d.run(get(PREAUTH_OF_DEVICE, vendorId, deviceId), 'read')) !== undefined;
  }

  spend(r: RequestSpend): Promise<SpendOutcome> {
    return this.#d.run(spendTx(r), 'write');
  }

  spendVerified(r: VerifiedRequestSpend): Promise<VerifiedSpend> {
    return this.#d.run(spendVerifiedTx(r), 'write');
  }

  /** Not a decision, as spend is not: a lastAsked lost to a power cut is one ask older, and decides nothing. */
  askAgain(r: AgainSpend): Promise<SpendOutcome | undefined> {
    return this.#d.run(askAgainTx(r), 'write');
  }

  findCarriedKey(r: AgainSpend): Promise<{ known: KnownKey | undefined; asked: SpendOutcome | undefined }> {
    return this.#d.run(findCarriedKeyTx(r), 'write');
  }

  enroll(commit: EnrollCommit): Promise<Enrolled> {
    return this.#d.decide(enrollTx(commit), (enrolled) => enrolled.outcome === 'ok');
  }

  rotate(oldKeyId: string, newKey: { keyId: string; publicKey: string }, now: number): Promise<RotateOutcome> {
    return this.#d.decide(rotateTx(oldKeyId, newKey, now), (outcome) => outcome === 'ok');
  }

  revoke(botId: string, now: number, opts?: RevokeOptions): Promise<Revocation> {
    return this.#d.decide(revokeTx(botId, now, opts), () => true);
  }

  listDevices(filter: DeviceFilter = {}): Promise<DeviceListing[]> {
    return this.#d.run(all<DeviceListing>(LIST_DEVICES, filter.state ?? null, filter.vendorId ?? null), 'read');
  }

  listCodes(filter: CodeFilter): Promise<CodeListing[]> {
    return this.#d.run(all<CodeListing>(LIST_CODES, filter.now, filter.vendorId ?? null), 'read');
  }

  /** Decisions: a cancelled code is refused from then on, and a removed pre-authorisation admits no key. */
  cancelCode(id: string): Promise<CodeListing | undefined> {
    return this.#d.decide(get<CodeListing>(CANCEL_CODE, id), () => true);
  }

  removePreauth(vendorId: string, deviceId: string): Promise<RemovedPreauth | undefined> {
    return this.#d.decide(get<RemovedPreauth>(REMOVE_PREAUTH, vendorId, deviceId), () => true);
  }

  resetLimits(prefixes: readonly string[]): Promise<number> {
    return this.#d.decide(resetLimitsTx(prefixes), () => true);
  }

  async countDevices(): Promise<DeviceCounts> {
    const row = await this.#d.run(get<DeviceCounts>(COUNT_DEVICES), 'read');
    return {
      active: Number(row?.active ?? 0),
      revoked: Number(row?.revoked ?? 0),
      preauthorized: Number(row?.preauthorized ?? 0),
      pending: Number(row?.pending ?? 0),
      rejected: Number(row?.rejected ?? 0),
    };
  }

  askPending(ask: PendingAsk): Promise<AskOutcome> {
    return this.#d.decide(askPendingTx(ask), (outcome) => outcome === 'created');
  }

  askStanding(sourceBucket: string, vendorId: string, deviceId: string): Promise<AskStanding> {
    return this.#d.run(askStandingTx(sourceBucket, vendorId, deviceId), 'read');
  }

  findPending(keyId: string): Promise<PendingRow | undefined> {
    return this.#d.run(findPendingTx(keyId), 'read');
  }

  listPending(vendorId?: string): Promise<PendingItem[]> {
    return this.#d.run(listPendingTx(vendorId), 'read');
  }

  acceptPending(commit: AcceptCommit): Promise<Accepted> {
    return this.#d.decide(acceptPendingTx(commit), (accepted) => accepted.outcome === 'ok');
  }

  rejectPending(which: { keyId: string } | PendingFilter, now: number): Promise<PendingRow[]> {
    return this.#d.decide(rejectPendingTx(which, now), () => true);
  }

  dropPending(before: number): Promise<PendingRow[]> {
    return this.#d.decide(dropPendingTx(before), () => true);
  }

  readToken(botId: string): Promise<TokenRow | undefined> {
    return this.#d.run(get<TokenRow>(READ_TOKEN, botId), 'read');
  }

  /**
   * Not a decision: a token lost to a power cut costs one more getToken (the next request signs again) and
   * breaks no rule, so tokens are written like nonces, unsynced on SQLite.
   */
  async keepToken(keyId: string, t: TokenRow): Promise<boolean> {
    const values = [t.botId, t.accessSealed, t.accessExpiresAt, t.accessLifetimeS, t.refreshSealed, t.refreshExpiresAt, t.updatedAt, keyId];
    return (await this.#d.run(get(KEEP_TOKEN, ...values), 'write')) !== undefined;
  }

  withBotLock<T>(botId: string, fn: () => Promise<T>): Promise<T> {
    return this.#d.withBotLock(botId, fn);
  }

  /** A claim lost to a power cut only displaces once more: written like nonces, not as a decision. */
  claimDisplacements(max: number): Promise<DueDisplacement[]> {
    return this.#d.run(claimDisplacementsTx(max), 'write');
  }

  requeueDisplacement(botId: string, afterMs: number, attempts: number): Promise<void> {
    return this.#d.run(requeueDisplacementTx(botId, afterMs, attempts), 'write');
  }

  /** Not a decision: rows lost to a power cut lose their story, not a rule; written whole or not at all, so a retry never doubles one. */
  writeAudit(rows: readonly AuditRow[]): Promise<void> {
    return this.#d.batch(writeAuditTx(rows));
  }

  pruneAudit(p: AuditPrune): Promise<{ deleted: number; reached: number }> {
    return this.#d.run(pruneAuditTx(p), 'write');
  }

  sweep(windowsBefore: number): Promise<void> {
    return this.#d.run(sweepTx(windowsBefore), 'write');
  }

  close(): Promise<void> {
    return this.#d.close();
  }
}
