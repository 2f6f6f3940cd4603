import type Database from 'better-sqlite3';
import { realpathSync } from 'node:fs';
import type { Clock } from '../../clock.js';
import { GroupCommit } from '../../sqlite/group-commit.js';
import {
  CODE_COLUMNS,
  deviceQuery,
  KEY_COLUMNS,
  keyWithTokenQuery,
  LIST_DEVICES,
  PREAUTH_COLUMNS,
  splitKeyWithToken,
  TOKEN_COLUMNS,
  verifiedSpend,
} from './columns.js';
import { KeyedChain } from './keyed-chain.js';
import { addPreauthIn, enrollIn, rotateIn, type Sql } from './sqlite-bind.js';
import { openSqliteDatabase } from './sqlite-schema.js';
import type {
  BrokerStore,
  CodeRow,
  DeviceListing,
  DeviceRow,
  EnrollCommit,
  EnrollOutcome,
  KeyRow,
  PreauthRow,
  RequestSpend,
  RotateOutcome,
  SpendOutcome,
  TokenRow,
  VerifiedSpend,
} from './types.js';
import { LAST_SEEN_STEP_MS } from './types.js';

const USE_NONCE = 'INSERT INTO nonces (key_id, nonce, keep_until) VALUES (?, ?, ?) ON CONFLICT DO NOTHING';
const HIT =
  'INSERT INTO rate_windows (bucket, window_start, count) VALUES (?, ?, 1) ' +
  'ON CONFLICT (bucket, window_start) DO UPDATE SET count = count + 1 RETURNING count';
const KEY_WITH_TOKEN = keyWithTokenQuery('?');
const TOUCH = 'UPDATE keys SET last_seen_at = ? WHERE key_id = ? AND (last_seen_at IS NULL OR last_seen_at <= ?)';

/**
 * The broker's store on one host: a SQLite file that one broker process owns. Writes are group-committed
 * (src/sqlite/group-commit.ts): each turn's in one BEGIN IMMEDIATE transaction, so operator commands (`broker code`, `broker revoke`…) that open the same file
 * from other processes are serialised with the broker by SQLite's write lock; withBotLock holds only
 * in this process, which is why a second broker on the same file is not supported (run PostgreSQL).
 */
export function openSqliteStore(path: string, clock: Pick<Clock, 'wallNow'>): BrokerStore {
  const db = openSqliteDatabase(path);
  const file = realpathSync(path);
  let locks = LOCKS.get(file);
  if (!locks) {
    locks = new KeyedChain();
    LOCKS.set(file, locks);
  }
  return new SqliteStore(db, clock, locks);
}

/** The bot locks of each file this process opened: every store on one file shares them. */
const LOCKS = new Map<string, KeyedChain>();

type Row = Record<string, unknown>;

class SqliteStore implements BrokerStore {
  readonly kind = 'sqlite';
  readonly #db: Database.Database;
  readonly #clock: Pick<Clock, 'wallNow'>;
  readonly #locks: KeyedChain;
  readonly #statements = new Map<string, Database.Statement>();
  readonly #batch: GroupCommit;
  readonly #sql: Sql = { get: (sql, ...params) => this.#get(sql, ...params), run: (sql, ...params) => this.#run(sql, ...params) };

  constructor(db: Database.Database, clock: Pick<Clock, 'wallNow'>, locks: KeyedChain) {
    this.#db = db;
    this.#clock = clock;
    this.#locks = locks;
    this.#batch = new GroupCommit(db);
  }

  async now(): Promise<number> {
    return this.#clock.wallNow();
  }

  async addCode(row: CodeRow): Promise<void> {
    await this.#durably(() =>
      this.#run(
        'INSERT INTO codes (hmac, vendor_id, kind, device_id, uses_left, expires_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
        row.hmac,
        row.vendorId,
        row.kind,
        row.deviceId,
        row.usesLeft,
        row.expiresAt,
        row.createdAt,
      ),
    );
  }

  async findCode(hmac: string): Promise<CodeRow | undefined> {
    return this.#get(`SELECT ${CODE_COLUMNS} FROM codes WHERE hmac = ?`, hmac) as CodeRow | undefined;
  }

  async findKey(keyId: string): Promise<KeyRow | undefined> {
    return this.#get(`SELECT ${KEY_COLUMNS} FROM keys WHERE key_id = ?`, keyId) as KeyRow | undefined;
  }

  async findPreauth(keyId: string): Promise<PreauthRow | undefined> {
    return this.#get(`SELECT ${PREAUTH_COLUMNS} FROM preauth WHERE key_id = ?`, keyId) as PreauthRow | undefined;
  }

  async addPreauth(rows: readonly PreauthRow[]): Promise<{ added: number } | { conflict: string }> {
    return this.#durably(
      () => addPreauthIn(this.#sql, rows),
      (result) => 'added' in result,
    );
  }

  async findDeviceByDeviceId(vendorId: string, deviceId: string): Promise<DeviceRow | undefined> {
    return this.#get(deviceQuery('vendor_id = ? AND device_id = ?'), vendorId, deviceId) as DeviceRow | undefined;
  }

  async findDeviceByBotId(botId: string): Promise<DeviceRow | undefined> {
    return this.#get(deviceQuery('bot_id = ?'), botId) as DeviceRow | undefined;
  }

  async isPreauthorized(vendorId: string, deviceId: string): Promise<boolean> {
    return this.#get('SELECT 1 FROM preauth WHERE vendor_id = ? AND device_id = ?', vendorId, deviceId) !== undefined;
  }

  useNonce(keyId: string, nonce: string, keepUntil: number): Promise<boolean> {
    return this.#batch.write(() => this.#run(USE_NONCE, keyId, nonce, keepUntil).changes === 1, { durable: false });
  }

  spendVerified(r: RequestSpend): Promise<VerifiedSpend> {
    return this.#batch.write(
      () => verifiedSpend(splitKeyWithToken(this.#get(KEY_WITH_TOKEN, r.keyId)), r.publicKey, () => this.#spend(r)),
      { durable: false },
    );
  }

  #spend(r: RequestSpend): SpendOutcome {
    if (this.#run(USE_NONCE, r.keyId, r.nonce, r.keepUntil).changes !== 1) return { replayed: true };
    const count = (this.#get(HIT, r.bucket, r.windowStart) as { count: number }).count;
    if (count <= r.limit) this.#touch(r.keyId, r.now);
    return { replayed: false, count };
  }

  async enroll(commit: EnrollCommit): Promise<EnrollOutcome> {
    return this.#durably(
      () => enrollIn(this.#sql, commit),
      (outcome) => outcome === 'ok',
    );
  }

  async rotate(oldKeyId: string, newKey: { keyId: string; publicKey: string }, now: number): Promise<RotateOutcome> {
    return this.#durably(
      () => rotateIn(this.#sql, oldKeyId, newKey, now),
      (outcome) => outcome === 'ok',
    );
  }

  revoke(botId: string, now: number): Promise<number> {
    return this.#durably(
      () => {
        const revoked = this.#run(
          "UPDATE keys SET state = 'revoked', reason = 'revoked', revoked_at = ? WHERE bot_id = ? AND state = 'active'",
          now,
          botId,
        );
        this.#run('DELETE FROM preauth WHERE (vendor_id, device_id) IN (SELECT vendor_id, device_id FROM keys WHERE bot_id = ?)', botId);
        this.#run('DELETE FROM tokens WHERE bot_id = ?', botId);
        return revoked.changes;
      },
      () => true,
    );
  }

  #touch(keyId: string, now: number): void {
    try {
      this.#run(TOUCH, now, keyId, now - LAST_SEEN_STEP_MS);
    } catch {
      // Best effort by contract: a busy or full disk must not fail the request that was seen.
    }
  }

  async listDevices(): Promise<DeviceListing[]> {
    return this.#statement(LIST_DEVICES).all() as DeviceListing[];
  }

  hit(bucket: string, windowStart: number): Promise<number> {
    return this.#batch.write(() => (this.#get(HIT, bucket, windowStart) as { count: number }).count, { durable: false });
  }

  async readToken(botId: string): Promise<TokenRow | undefined> {
    return this.#get(`SELECT ${TOKEN_COLUMNS} FROM tokens WHERE bot_id = ?`, botId) as TokenRow | undefined;
  }

  /**
   * Not a decision: a token lost to a power cut costs one more getToken (the next request signs again) and
   * breaks no rule, so tokens commit like nonces, unsynced — a synced commit per token stalled the event
   * loop once per cloud call, the whole cost of a fleet's first tokens.
   */
  async writeToken(row: TokenRow): Promise<void> {
    await this.#batch.write(
      () =>
        this.#run(
          'INSERT INTO tokens (bot_id, access_sealed, access_expires_at, access_lifetime_s, refresh_sealed, refresh_expires_at, updated_at) ' +
            'VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (bot_id) DO UPDATE SET access_sealed = excluded.access_sealed, ' +
            'access_expires_at = excluded.access_expires_at, access_lifetime_s = excluded.access_lifetime_s, ' +
            'refresh_sealed = excluded.refresh_sealed, refresh_expires_at = excluded.refresh_expires_at, updated_at = excluded.updated_at',
          row.botId,
          row.accessSealed,
          row.accessExpiresAt,
          row.accessLifetimeS,
          row.refreshSealed,
          row.refreshExpiresAt,
          row.updatedAt,
        ),
      { durable: false },
    );
  }

  withBotLock<T>(botId: string, fn: () => Promise<T>): Promise<T> {
    return this.#locks.run(botId, fn);
  }

  async sweep(windowsBefore: number): Promise<void> {
    const now = this.#clock.wallNow();
    await this.#batch.write(
      () => {
        this.#run('DELETE FROM nonces WHERE keep_until < ?', now);
        this.#run('DELETE FROM rate_windows WHERE window_start < ?', windowsBefore);
      },
      { durable: false, keep: () => true },
    );
  }

  async close(): Promise<void> {
    // What this turn wrote is committed first; better-sqlite3's close is idempotent: a second close does nothing.
    if (this.#db.open) this.#batch.flush();
    this.#db.close();
  }

  #get(sql: string, ...params: unknown[]): Row | undefined {
    return this.#statement(sql).get(...params) as Row | undefined;
  }

  #run(sql: string, ...params: unknown[]): Database.RunResult {
    return this.#statement(sql).run(...params);
  }

  /** Each statement is compiled once: the hot path (nonce, hit, key) then only binds and steps. */
  #statement(sql: string): Database.Statement {
    let statement = this.#statements.get(sql);
    if (!statement) {
      statement = this.#db.prepare(sql);
      this.#statements.set(sql, statement);
    }
    return statement;
  }

  /**
   * A decision that must outlive a power cut, in the turn's transaction committed with synchronous=FULL.
   * A body of several statements passes `keep`: they stand or are undone together (its own writes only).
   */
  #durably<T>(body: () => T, keep?: (value: T) => boolean): Promise<T> {
    return this.#batch.write(body, { durable: true, ...(keep && { keep }) });
  }
}
