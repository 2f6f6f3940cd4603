import { chmodSync, closeSync, existsSync, openSync } from 'node:fs';
import type Database from 'better-sqlite3';
import { BotlinkError, messageOf } from '../protocol/errors.js';
import type { Identity, RegisterDeviceRequest } from '../protocol/wire.js';
import type { Seed } from './seed.js';
import { sqlite } from '../native.js';

export type TokenKind = 'access' | 'refresh';

/** What the service remembers about an issued token; the token itself is never stored. */
export interface TokenRecord {
  kind: TokenKind;
  accessKeyId: string;
  identity: Identity;
  expiresAt: number;
}

interface NonceRow {
  access_key_id: string;
  nonce: string;
}

interface TokenRow {
  kind: TokenKind;
  access_key_id: string;
  identity_kind: Identity['kind'];
  identity_id: string;
  expires_at: number;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS accounts (access_key_id TEXT PRIMARY KEY, secret_key TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS vendors (vendor_id TEXT PRIMARY KEY, access_key_id TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS bots (
  bot_id TEXT PRIMARY KEY, vendor_id TEXT NOT NULL,
  device_id TEXT, app_id TEXT, type TEXT, name TEXT
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS bots_by_device ON bots (vendor_id, device_id);
CREATE TABLE IF NOT EXISTS tokens (
  id INTEGER PRIMARY KEY, hash TEXT NOT NULL, kind TEXT NOT NULL, access_key_id TEXT NOT NULL,
  identity_kind TEXT NOT NULL, identity_id TEXT NOT NULL, expires_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS tokens_by_expiry ON tokens (expires_at);
CREATE TABLE IF NOT EXISTS nonces (access_key_id TEXT NOT NULL, nonce TEXT NOT NULL, expires_at INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS nonces_by_expiry ON nonces (expires_at);
CREATE TABLE IF NOT EXISTS refreshed (
  refresh_hash TEXT PRIMARY KEY, newest_hash TEXT NOT NULL, older_hash TEXT, expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS refreshed_by_expiry ON refreshed (expires_at);
`;

const CHECKPOINT_MS = 1000;

// Tables the first schema keyed by a random value: every insert then rewrote a random page (three per getToken).
const REKEYED: readonly { table: string; columns: string; index: string }[] = [
  { table: 'tokens', columns: 'hash, kind, access_key_id, identity_kind, identity_id, expires_at', index: 'tokens_by_expiry' },
  { table: 'nonces', columns: 'access_key_id, nonce, expires_at', index: 'nonces_by_expiry' },
];

/** Moves the rows of a first-schema database into the appended tables, once. */
function migrate(db: Database.Database): void {
  const sqlOf = db.prepare<[string], string>("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?").pluck();
  db.transaction(() => {
    for (const { table, columns, index } of REKEYED) {
      if (!/WITHOUT ROWID/i.test(sqlOf.get(table) ?? '')) continue;
      db.exec(`DROP INDEX ${index}; ALTER TABLE ${table} RENAME TO ${table}_v1; ${SCHEMA}`);
      db.exec(`INSERT INTO ${table} (${columns}) SELECT ${columns} FROM ${table}_v1; DROP TABLE ${table}_v1;`);
    }
  })();
}

function open(file: string): Database.Database {
  const onDisk = file !== ':memory:';
  let db: Database.Database | undefined;
  try {
    // The account secrets are in it in plain text: created 0600 before SQLite sees it, and an older 0644 file is fixed.
    if (onDisk) {
      closeSync(openSync(file, 'a', 0o600));
      chmodSync(file, 0o600);
    }
    db = new (sqlite())(file);
    if (onDisk) {
      db.pragma('journal_mode = WAL');
      // Answers wait for COMMIT, so a killed process loses nothing; a power loss may roll back the commits since
      // the last checkpoint (≤ CHECKPOINT_MS: clients holding those tokens sign again), never corrupts.
      // FULL (an fsync per group commit) cost a third of getToken/s.
      db.pragma('synchronous = NORMAL');
      // Checkpoints (the only fsyncs under NORMAL) run on a timer instead of inside a request.
      db.pragma('wal_autocheckpoint = 0');
    }
    db.pragma('busy_timeout = 2000');
    db.exec(SCHEMA);
    migrate(db);
    // SQLite gives its side files the database's mode; these may predate the chmod above.
    for (const side of ['-wal', '-shm']) if (onDisk && existsSync(file + side)) chmodSync(file + side, 0o600);
    return db;
  } catch (err) {
    db?.close();
    throw new ServiceDbError(file, err);
  }
}

function prepareStatements(db: Database.Database) {
  return {
    upsertAccount: db.prepare(
      'INSERT INTO accounts (access_key_id, secret_key) VALUES (?, ?) ON CONFLICT (access_key_id) DO UPDATE SET secret_key = excluded.secret_key',
    ),
    upsertVendor: db.prepare(
      'INSERT INTO vendors (vendor_id, access_key_id) VALUES (?, ?) ON CONFLICT (vendor_id) DO UPDATE SET access_key_id = excluded.access_key_id',
    ),
    upsertBot: db.prepare(
      'INSERT INTO bots (bot_id, vendor_id) VALUES (?, ?) ON CONFLICT (bot_id) DO UPDATE SET vendor_id = excluded.vendor_id',
    ),
    secret: db.prepare<[string], { secret_key: string }>('SELECT secret_key FROM accounts WHERE access_key_id = ?'),
    ownsBot: db.prepare<[string, string], unknown>(
      'SELECT 1 FROM bots JOIN vendors USING (vendor_id) WHERE bots.bot_id = ? AND vendors.access_key_id = ?',
    ),
    ownsVendor: db.prepare<[string, string], unknown>('SELECT 1 FROM vendors WHERE vendor_id = ? AND access_key_id = ?'),
    claimNonce: db.prepare('INSERT INTO nonces (access_key_id, nonce, expires_at) VALUES (?, ?, ?)'),
    saveToken: db.prepare(
      'INSERT INTO tokens (id, hash, kind, access_key_id, identity_kind, identity_id, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
    ),
    saveTokenPair: db.prepare(
      'INSERT INTO tokens (id, hash, kind, access_key_id, identity_kind, identity_id, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?, ?)',
    ),
    deleteToken: db.prepare('DELETE FROM tokens WHERE id = ?'),
    refreshedBy: db.prepare<[string], { newest_hash: string; older_hash: string | null }>(
      'SELECT newest_hash, older_hash FROM refreshed WHERE refresh_hash = ?',
    ),
    setRefreshed: db.prepare(
      'INSERT INTO refreshed (refresh_hash, newest_hash, older_hash, expires_at) VALUES (?, ?, ?, ?) ' +
        'ON CONFLICT (refresh_hash) DO UPDATE SET newest_hash = excluded.newest_hash, older_hash = excluded.older_hash',
    ),
    findToken: db.prepare<[number], TokenRow>(
      'SELECT kind, access_key_id, identity_kind, identity_id, expires_at FROM tokens WHERE id = ?',
    ),
    allTokens: db.prepare<[], { id: number; hash: string }>('SELECT id, hash FROM tokens'),
    allNonces: db.prepare<[], NonceRow>('SELECT access_key_id, nonce FROM nonces'),
    botOfDevice: db.prepare<[string, string], { bot_id: string }>('SELECT bot_id FROM bots WHERE vendor_id = ? AND device_id = ?'),
    insertDevice: db.prepare('INSERT INTO bots (bot_id, vendor_id, device_id, app_id, type, name) VALUES (?, ?, ?, ?, ?, ?)'),
    purgeNonces: db.prepare<[number], NonceRow>('DELETE FROM nonces WHERE expires_at < ? RETURNING access_key_id, nonce'),
    purgeTokens: db.prepare<[number], { id: number; hash: string }>('DELETE FROM tokens WHERE expires_at < ? RETURNING id, hash'),
    purgeRefreshed: db.prepare('DELETE FROM refreshed WHERE expires_at < ?'),
  };
}

/** The database file cannot be opened or initialised. */
export class ServiceDbError extends BotlinkError {
  constructor(file: string, cause: unknown) {
    super('ERR_SERVICE_DB', `cannot open database ${file}: ${messageOf(cause)}`, 'fatal', { cause });
  }
}

interface Batch {
  committed: Promise<void>;
  resolve(): void;
  reject(err: unknown): void;
}

/**
 * The reference service's state in SQLite: accounts, vendors, bots, token hashes, used nonces, and which
 * access tokens each refresh token issued.
 * Writes are group-committed: every transaction() of one event-loop turn shares one COMMIT, so pages
 * touched by many requests are written once; callers answer only after committed() resolves.
 * Tokens and nonces are appended and found through indexes in memory, rebuilt on open and undone with any
 * rollback: an insert writes only the tables' last pages. Another process writing the same file (a second
 * `serve --db`) is seen through PRAGMA data_version, and everything held in memory is then read again.
 */
export class ServiceStore {
  readonly #db: Database.Database;
  readonly #stmt: ReturnType<typeof prepareStatements>;
  /** Inside the open batch, better-sqlite3 runs this as a SAVEPOINT: fn is atomic on its own. */
  readonly #atomically: (fn: () => unknown) => unknown;
  readonly #begin: Database.Statement;
  readonly #commit: Database.Statement;
  readonly #checkpointer: NodeJS.Timeout | undefined;
  #batch: Batch | undefined;
  /** Secrets found so far; accounts change only in applySeed, which clears it (as #load does). Unknown keys are not kept. */
  readonly #secrets = new Map<string, string>();
  /** Ownerships found so far; only applySeed can take one away, and it clears this (as #load does). */
  readonly #owned = new Set<string>();
  /** Token hash → row id, for every row of tokens. */
  readonly #tokenIds = new Map<string, number>();
  /** Ids are given, not read back: RETURNING doubled the cost of the insert. Gaps left by rollbacks are harmless. */
  #nextTokenId = 1;
  /** nonceKey() of every row of nonces. */
  readonly #nonces = new Set<string>();
  /** How to take back the index changes of the open batch, newest last. */
  #undo: (() => void)[] = [];
  readonly #dataVersion: Database.Statement<[], number>;
  /** data_version when what is in memory was read: it changes when another connection commits. */
  #seenVersion = 0;

  constructor(file: string) {
    this.#db = open(file);
    this.#stmt = prepareStatements(this.#db);
    this.#atomically = this.#db.transaction((fn: () => unknown) => fn());
    // IMMEDIATE: the batch holds the write lock from its start, so no other writer lands between catching up and writing.
    this.#begin = this.#db.prepare('BEGIN IMMEDIATE');
    this.#commit = this.#db.prepare('COMMIT');
    this.#dataVersion = this.#db.prepare<[], number>('PRAGMA data_version').pluck();
    this.#load();
    if (file !== ':memory:') this.#checkpointer = setInterval(() => this.#checkpoint(), CHECKPOINT_MS).unref();
  }

  /** Reads the indexes from the file and forgets the cached secrets and ownerships. */
  #load(): void {
    this.#seenVersion = this.#dataVersion.get()!;
    this.#secrets.clear();
    this.#owned.clear();
    this.#tokenIds.clear();
    this.#nonces.clear();
    this.#nextTokenId = 1;
    for (const { id, hash } of this.#stmt.allTokens.iterate()) {
      this.#tokenIds.set(hash, id);
      this.#nextTokenId = Math.max(this.#nextTokenId, id + 1);
    }
    for (const row of this.#stmt.allNonces.iterate()) this.#nonces.add(nonceKey(row.access_key_id, row.nonce));
  }

  /** Reads again what another process changed in the file. A batch catches up as it begins, and then holds the write lock. */
  #catchUp(): void {
    if (!this.#batch && this.#dataVersion.get() !== this.#seenVersion) this.#load();
  }

  /** Adds or updates the seed's accounts, vendors and bots; registered devices and tokens stay. */
  applySeed(seed: Seed): void {
    this.#secrets.clear();
    this.#owned.clear();
    this.transaction(() => {
      for (const account of seed.accounts) {
        this.#stmt.upsertAccount.run(account.accessKeyId, account.secretKey);
        for (const vendor of account.vendors) {
          this.#stmt.upsertVendor.run(vendor.vendorId, account.accessKeyId);
          for (const botId of vendor.bots) this.#stmt.upsertBot.run(botId, vendor.vendorId);
        }
      }
    });
  }

  /** Runs fn atomically (rolled back alone if it throws) in the batch that commits at the end of this turn. */
  transaction<T>(fn: () => T): T {
    if (!this.#batch) this.#openBatch();
    const mark = this.#undo.length;
    try {
      return this.#atomically(fn) as T;
    } catch (err) {
      this.#undoTo(mark);
      throw err;
    }
  }

  #undoTo(mark: number): void {
    for (const undo of this.#undo.splice(mark).reverse()) undo();
  }

  /**
   * Runs fn in the batch that commits at the end of this turn, without a savepoint of its own (two statements
   * fewer): only for writes each harmless alone should a later one throw.
   */
  inBatch<T>(fn: () => T): T {
    if (!this.#batch) this.#openBatch();
    return fn();
  }

  /** Resolves once every write made so far is committed; rejects if that commit failed. */
  committed(): Promise<void> {
    return this.#batch?.committed ?? Promise.resolve();
  }

  #openBatch(): void {
    let resolve!: () => void;
    let reject!: (err: unknown) => void;
    const committed = new Promise<void>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    // A failed batch is reported to whoever awaits committed(); nobody awaiting is not an error.
    committed.catch(() => undefined);
    this.#begin.run();
    this.#catchUp();
    this.#batch = { committed, resolve, reject };
    setImmediate(() => this.#commitBatch());
  }

  #commitBatch(): void {
    const batch = this.#batch;
    if (!batch) return;
    this.#batch = undefined;
    try {
      this.#commit.run();
      this.#undo = [];
      batch.resolve();
    } catch (err) {
      if (this.#db.inTransaction) this.#db.exec('ROLLBACK');
      this.#undoTo(0);
      batch.reject(err);
    }
  }

  #checkpoint(): void {
    if (this.#batch) return;
    try {
      this.#db.pragma('wal_checkpoint(PASSIVE)');
    } catch {
      // The WAL stays valid without it; the next tick tries again.
    }
  }

  secretOf(accessKeyId: string): string | undefined {
    this.#catchUp();
    const known = this.#secrets.get(accessKeyId);
    if (known !== undefined) return known;
    const secret = this.#stmt.secret.get(accessKeyId)?.secret_key;
    if (secret !== undefined) this.#secrets.set(accessKeyId, secret);
    return secret;
  }

  /** Whether the bot or vendor is registered under that account. */
  owns(accessKeyId: string, identity: Identity): boolean {
    this.#catchUp();
    const key = `${accessKeyId}\n${identity.kind}\n${identity.id}`;
    if (this.#owned.has(key)) return true;
    const stmt = identity.kind === 'bot' ? this.#stmt.ownsBot : this.#stmt.ownsVendor;
    const owned = stmt.get(identity.id, accessKeyId) !== undefined;
    if (owned) this.#owned.add(key);
    return owned;
  }

  /** Records a nonce until expiresAt; false when it was already used. Call inside transaction(). */
  claimNonce(accessKeyId: string, nonce: string, expiresAt: number): boolean {
    const key = nonceKey(accessKeyId, nonce);
    if (this.#nonces.has(key)) return false;
    this.#stmt.claimNonce.run(accessKeyId, nonce, expiresAt);
    this.#nonces.add(key);
    this.#undo.push(() => this.#nonces.delete(key));
    return true;
  }

  /** Call inside transaction(). */
  saveToken(hash: string, record: TokenRecord): void {
    this.#unique(hash);
    const { kind, accessKeyId, identity, expiresAt } = record;
    const id = this.#nextTokenId++;
    this.#stmt.saveToken.run(id, hash, kind, accessKeyId, identity.kind, identity.id, expiresAt);
    this.#indexToken(hash, id);
  }

  /** The table no longer refuses a second row with the same hash; a 256-bit token never repeats, but say so if one did. */
  #unique(hash: string): void {
    if (this.#tokenIds.has(hash)) throw new Error('a token with this hash is already stored');
  }

  #indexToken(hash: string, id: number): void {
    this.#tokenIds.set(hash, id);
    this.#undo.push(() => this.#tokenIds.delete(hash));
  }

  #forgetToken(hash: string, id: number): void {
    this.#tokenIds.delete(hash);
    this.#undo.push(() => this.#tokenIds.set(hash, id));
  }

  /** An access and a refresh token in one statement. Call inside transaction() or inBatch(). */
  saveTokenPair(accessHash: string, access: TokenRecord, refreshHash: string, refresh: TokenRecord): void {
    this.#unique(accessHash);
    this.#unique(refreshHash);
    const [a, r] = [access, refresh];
    const accessId = this.#nextTokenId++;
    const refreshId = this.#nextTokenId++;
    this.#stmt.saveTokenPair.run(
      accessId,
      accessHash,
      a.kind,
      a.accessKeyId,
      a.identity.kind,
      a.identity.id,
      a.expiresAt,
      refreshId,
      refreshHash,
      r.kind,
      r.accessKeyId,
      r.identity.kind,
      r.identity.id,
      r.expiresAt,
    );
    this.#indexToken(accessHash, accessId);
    this.#indexToken(refreshHash, refreshId);
  }

  /**
   * Saves an access token issued by a refresh and forgets the one issued two refreshes ago: a refresh
   * token has at most two refreshed access tokens alive, however often it is used. Call inside transaction().
   */
  saveRefreshedToken(refreshHash: string, refreshExpiresAt: number, hash: string, record: TokenRecord): void {
    const before = this.#stmt.refreshedBy.get(refreshHash);
    const older = before?.older_hash ?? undefined;
    const olderId = older === undefined ? undefined : this.#tokenIds.get(older);
    if (older !== undefined && olderId !== undefined) {
      this.#stmt.deleteToken.run(olderId);
      this.#forgetToken(older, olderId);
    }
    this.saveToken(hash, record);
    this.#stmt.setRefreshed.run(refreshHash, hash, before?.newest_hash ?? null, refreshExpiresAt);
  }

  findToken(hash: string): TokenRecord | undefined {
    this.#catchUp();
    const id = this.#tokenIds.get(hash);
    const row = id === undefined ? undefined : this.#stmt.findToken.get(id);
    if (!row) return undefined;
    return {
      kind: row.kind,
      accessKeyId: row.access_key_id,
      identity: { kind: row.identity_kind, id: row.identity_id },
      expiresAt: row.expires_at,
    };
  }

  /** The botId of (vendorId, deviceId), registering it under newBotId the first time. */
  registerDevice(req: RegisterDeviceRequest, newBotId: string): string {
    return this.transaction(() => {
      const existing = this.#stmt.botOfDevice.get(req.vendorId, req.deviceId);
      if (existing) return existing.bot_id;
      this.#stmt.insertDevice.run(newBotId, req.vendorId, req.deviceId, req.appId, req.type, req.name);
      return newBotId;
    });
  }

  /** Forgets nonces and tokens whose expiry is before now. */
  purgeExpired(now: number): void {
    this.transaction(() => {
      for (const row of this.#stmt.purgeNonces.iterate(now)) {
        const key = nonceKey(row.access_key_id, row.nonce);
        this.#nonces.delete(key);
        this.#undo.push(() => this.#nonces.add(key));
      }
      for (const { id, hash } of this.#stmt.purgeTokens.iterate(now)) this.#forgetToken(hash, id);
      this.#stmt.purgeRefreshed.run(now);
    });
  }

  close(): void {
    clearInterval(this.#checkpointer);
    this.#commitBatch();
    this.#db.close();
  }
}

/** One string per (account, nonce), unambiguous whatever characters either holds. */
function nonceKey(accessKeyId: string, nonce: string): string {
  return `${accessKeyId.length}:${accessKeyId}${nonce}`;
}
