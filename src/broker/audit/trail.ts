/**
 * The broker's audit (DESIGN §3.7). Every event goes through record(): its log line (pino JSON, to
 * logFile) at once, its row queued for the store, where any replica reads it. Rows are written in batches
 * — a full batch at once, else within flushMs — so a request never waits on an audit write, and a store that
 * fails fails no request: its batch waits for the next flush, the queue bounded. Refusals are counted,
 * never written one per request: a signed one folds into one row per key, code and minute; an unsigned one
 * writes nothing to the store, and both are told in one log line per key (or source) and code per minute.
 * Never a token, a code, a key or a cookie.
 */
import type { Logger } from 'pino';
import type { Cancel, Clock } from '../../clock.js';
import { messageOf } from '../../protocol/errors.js';
import { addressBucket } from '../auth/limits.js';
import type { RefusalCode } from '../refusal.js';
import type { AuditLog, AuditRow } from '../store/types.js';
import { AuditQueue, foldOf } from './queue.js';
import { MinuteTally, type TalliedMinute } from './tally.js';

export type AuditAction =
  | 'enroll'
  | 'token'
  | 'rotate'
  | 'revoke'
  | 'displace'
  | 'code'
  | 'preauth'
  | 'pending'
  | 'accept'
  | 'reject'
  | 'reset-limits'
  | 'refusal'
  | 'admin-token'
  | 'admin-session';

/** The actor of a device's own request (an operator's is `cli:<OS user>`). */
export const DEVICE_ACTOR = 'device';

export interface AuditEvent {
  action: AuditAction;
  actor: string;
  vendorId?: string | null | undefined;
  deviceId?: string | null | undefined;
  botId?: string | null | undefined;
  keyId?: string | null | undefined;
  /** The id of the code the event is about (made, cancelled, spent): never the code. */
  codeId?: string | null | undefined;
  source?: string | null | undefined;
  outcome: string;
}

/** The key a request's signature verified with, and what is known of its device: whom its refusal is audited against. */
export interface RefusedKey {
  keyId: string;
  vendorId?: string | undefined;
  deviceId?: string | undefined;
  botId?: string | undefined;
}

/** A refusal of a request whose signature verified: its key and code, where it came from. */
export interface SignedRefusal extends RefusedKey {
  code: RefusalCode;
  source: string;
}

interface UnsignedRefusal {
  source: string;
  code: RefusalCode;
}

export interface AuditStats {
  /** Rows waiting for the store. */
  queued: number;
  /** Rows dropped because the queue was full. */
  dropped: number;
}

export interface AuditTrailOptions {
  /** Rows waiting for the store at most; past it a new row is dropped and counted (its log line is written). */
  maxQueued?: number;
  /** Rows one write (one transaction) takes at most; a queue this long is written at once. */
  batchRows?: number;
  /** How long a row waits for its write at most, while the store answers. */
  flushMs?: number;
  /** Keys, or sources, told apart in one minute's refusal lines. */
  maxTallied?: number;
}

export interface AuditTrailDeps {
  store: Pick<AuditLog, 'writeAudit'>;
  log: Logger;
  clock: Pick<Clock, 'wallNow' | 'setTimer'>;
}

/**
 * A batch is one transaction: on SQLite every index leaf a batch touches is written to the WAL once per
 * commit, whatever the rows per leaf, so a busy replica's rows are one batch, not a dozen (measured with a
 * (bot_id, at) index: 256-row batches cost twice the CPU per row of 4,096-row ones once it was large).
 */
const DEFAULT_BATCH_ROWS = 4_096;

export class AuditTrail {
  readonly #d: AuditTrailDeps;
  readonly #batchRows: number;
  readonly #flushMs: number;
  readonly #queue: AuditQueue;
  readonly #signed: MinuteTally<SignedRefusal>;
  readonly #unsigned: MinuteTally<UnsignedRefusal>;
  #timer: Cancel | undefined;
  /** The write under way, and those chained after it: one at a time. */
  #writing: Promise<void> | undefined;
  /** The last write failed: said once, until one succeeds. */
  #failing = false;
  #closed = false;

  constructor(deps: AuditTrailDeps, o: AuditTrailOptions = {}) {
    this.#d = deps;
    this.#batchRows = o.batchRows ?? DEFAULT_BATCH_ROWS;
    // 5 s, not 1: a key asking in a loop folds five times as long, and PostgreSQL takes a fifth of the upserts.
    this.#flushMs = o.flushMs ?? 5_000;
    this.#queue = new AuditQueue(o.maxQueued ?? 10_000);
    this.#signed = new MinuteTally(o.maxTallied ?? 10_000);
    this.#unsigned = new MinuteTally(o.maxTallied ?? 10_000);
  }

  /** An event: its log line now, its row for the store. `extra` goes to the log line alone (no column holds it). */
  record(event: AuditEvent, msg: string, extra?: Record<string, unknown>): void {
    const row = rowOf(event, this.#d.clock.wallNow(), null);
    this.#d.log.info(extra === undefined ? lineOf(row) : { ...lineOf(row), ...extra }, msg);
    this.#enqueue(row);
  }

  /**
   * An event that folds into its key's row of the minute for the same outcome (a token issued): its log line
   * now, as record's; its row counts every such event of that key and minute, so a device asking in a loop
   * costs the store one row a minute, not one a request.
   */
  recordFolded(event: AuditEvent & { keyId: string }, msg: string): void {
    const at = this.#d.clock.wallNow();
    const row = rowOf(event, at, foldOf(event.keyId, `${event.action}:${event.outcome}`, at));
    this.#d.log.info(lineOf(row), msg);
    this.#enqueue(row);
  }

  /** A refusal of a signed request: its row folds into its key's, code's and minute's; its line comes at the minute's end, with the count. */
  refusedSigned(r: SignedRefusal): void {
    const at = this.#d.clock.wallNow();
    const fold = foldOf(r.keyId, r.code, at);
    this.#tell(this.#signed.add(fold, r, at), true);
    this.#enqueue(rowOf({ ...r, action: 'refusal', actor: DEVICE_ACTOR, outcome: r.code }, at, fold));
  }

  /** A refusal before the signature verified: nothing for the store; one line per source (IPv6 by /64) and code at the minute's end. */
  refusedUnsigned(source: string, code: RefusalCode): void {
    const at = this.#d.clock.wallNow();
    const bucket = addressBucket(source);
    this.#tell(this.#unsigned.add(`${bucket}/${code}`, { source: bucket, code }, at), false);
    this.#arm();
  }

  stats(): AuditStats {
    return { queued: this.#queue.size, dropped: this.#queue.dropped };
  }

  /** Resolves once less than a batch waits: a caller recording many events at once (a preauth file) waits here, so none is dropped. */
  async room(): Promise<void> {
    if (this.#queue.size >= this.#batchRows) await this.#write(false);
  }

  /** Writes every row waiting (a failing store: tried once). */
  flush(): Promise<void> {
    return this.#write(true);
  }

  /** Tells the minutes' refusals counted so far, writes what waits, and arms no timer again. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#timer?.();
    this.#timer = undefined;
    const now = this.#d.clock.wallNow();
    this.#tell(this.#signed.take(now, true), true);
    this.#tell(this.#unsigned.take(now, true), false);
    await this.flush();
    if (this.#queue.size > 0) this.#d.log.warn({ lost: this.#queue.size }, 'audit rows the store did not take before the broker stopped');
  }

  #enqueue(row: AuditRow): void {
    if (!this.#queue.push(row)) return;
    if (this.#queue.size >= this.#batchRows && this.#writing === undefined) void this.#write(false);
    this.#arm();
  }

  /** The flush timer, while anything waits: a row, or a minute's refusals to tell. */
  #arm(): void {
    if (this.#timer !== undefined || this.#closed) return;
    this.#timer = this.#d.clock.setTimer(this.#flushMs, () => {
      this.#timer = undefined;
      const now = this.#d.clock.wallNow();
      this.#tell(this.#signed.take(now), true);
      this.#tell(this.#unsigned.take(now), false);
      const written = this.#queue.size > 0 && this.#writing === undefined ? this.#write(false) : Promise.resolve();
      void written.then(() => {
        if (this.#queue.size > 0 || this.#signed.pending || this.#unsigned.pending) this.#arm();
      });
    });
  }

  /** One write after another: full batches back to back, and the partial last one first, or — `everything` — last too. */
  #write(everything: boolean): Promise<void> {
    const next = (this.#writing ?? Promise.resolve()).then(() => this.#drain(everything));
    this.#writing = next;
    void next.then(() => {
      if (this.#writing === next) this.#writing = undefined;
    });
    return next;
  }

  async #drain(everything: boolean): Promise<void> {
    for (let first = true; this.#queue.size > 0 && (first || everything || this.#queue.size >= this.#batchRows); first = false) {
      const batch = this.#queue.take(this.#batchRows);
      try {
        await this.#d.store.writeAudit(batch);
        if (this.#failing) this.#d.log.info({ queued: this.#queue.size }, 'the store takes audit rows again');
        this.#failing = false;
      } catch (err) {
        this.#queue.putBack(batch);
        if (!this.#failing) {
          this.#d.log.warn(
            { err: messageOf(err), queued: this.#queue.size },
            'the store did not take audit rows: they wait for the next flush',
          );
        }
        this.#failing = true;
        return;
      }
    }
  }

  /** A minute's refusals as log lines: one per key (signed) or source (unsigned) and code, with its count. */
  #tell(m: TalliedMinute<SignedRefusal> | TalliedMinute<UnsignedRefusal> | undefined, signed: boolean): void {
    if (m === undefined) return;
    const msg = signed ? 'refusals of a signed request in one minute' : 'refusals of unsigned requests in one minute';
    for (const { fields, count } of m.entries) {
      const event: AuditEvent = signed
        ? { ...fields, action: 'refusal', actor: DEVICE_ACTOR, outcome: fields.code }
        : unsignedEvent(fields);
      this.#d.log.info({ ...lineOf(rowOf(event, m.minute, null)), count, signed }, msg);
    }
    if (m.overflow > 0) {
      this.#d.log.info(
        { audit: 'refusal', at: m.minute, count: m.overflow, signed },
        `${msg}, of more keys or sources than one minute's lines tell apart`,
      );
    }
  }
}

/** An unsigned request proved no one: its actor is unknown, its source the /64 (or address) it came from. */
function unsignedEvent(r: UnsignedRefusal): AuditEvent {
  return { action: 'refusal', actor: 'unknown', source: r.source, outcome: r.code };
}

function rowOf(e: AuditEvent, at: number, fold: string | null): AuditRow {
  return {
    at,
    action: e.action,
    actor: e.actor,
    vendorId: e.vendorId ?? null,
    deviceId: e.deviceId ?? null,
    // A tombstone's key has no botId left: '' is none.
    botId: e.botId || null,
    keyId: e.keyId ?? null,
    codeId: e.codeId ?? null,
    source: e.source ?? null,
    outcome: e.outcome,
    count: 1,
    fold,
  };
}

/** A row's fields as its log line says them, `audit` naming the action as the broker's lines always have. */
function lineOf(r: AuditRow): Record<string, unknown> {
  const { at, actor, vendorId, deviceId, botId, keyId, codeId, source, outcome } = r;
  return { audit: r.action, at, actor, vendorId, deviceId, botId, keyId, codeId, source, outcome };
}
