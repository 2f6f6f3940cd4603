import type Database from 'better-sqlite3';
import type { Identity, RegisterDeviceRequest } from '../protocol/wire.js';
import { GroupCommit } from '../sqlite/group-commit.js';
import type { Seed } from './seed.js';
import { openServiceDb, prepareStatements, tokenRow, type TokenRecord } from './store-schema.js';

const CHECKPOINT_MS = 1000;
const ATOMIC = { atomic: true } as const;

/**
 * The reference service's state in SQLite: accounts, vendors, bots, token hashes, used nonces, and which
 * access tokens each refresh token issued.
 * Writes are group-committed (src/sqlite/group-commit.ts): every transaction() of one event-loop turn shares
 * one COMMIT, so pages touched by many requests are written once; callers answer only after committed() resolves.
 * Tokens and nonces are appended and found through indexes in memory, rebuilt on open and undone with any
 * rollback: an insert writes only the tables' last pages. Another process writing the same file (a second
 * `serve --db`) is seen through PRAGMA data_version, and everything held in memory is then read again.
 */
export class ServiceStore {
  readonly #db: Database.Database;
  readonly #stmt: ReturnType<typeof prepareStatements>;
  readonly #batch: GroupCommit;
  readonly #checkpointer: NodeJS.Timeout | undefined;
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
  readonly #dataVersion: Database.Statement<[], number>;
  /** data_version when what is in memory was read: it changes when another connection commits. */
  #seenVersion = 0;

  constructor(file: string) {
    this.#db = openServiceDb(file);
    this.#stmt = prepareStatements(this.#db);
    // A batch begins holding the write lock, so no other writer lands between catching up and writing.
    this.#batch = new GroupCommit(this.#db, { onBegin: () => this.#readIfChanged() });
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
    if (!this.#batch.pending) this.#readIfChanged();
  }

  #readIfChanged(): void {
    if (this.#dataVersion.get() !== this.#seenVersion) this.#load();
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
    return this.#batch.run(fn, ATOMIC);
  }

  /**
   * Runs fn in the batch that commits at the end of this turn, without a savepoint of its own (two statements
   * fewer): only for writes each harmless alone should a later one throw.
   */
  inBatch<T>(fn: () => T): T {
    return this.#batch.run(fn);
  }

  /** Resolves once every write made so far is committed; rejects if that commit failed. */
  committed(): Promise<void> {
    return this.#batch.committed();
  }

  #checkpoint(): void {
    if (this.#batch.pending) return;
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
    this.#batch.onRollback(() => this.#nonces.delete(key));
    return true;
  }

  /** Call inside transaction(). */
  saveToken(hash: string, record: TokenRecord): void {
    this.#unique(hash);
    const id = this.#nextTokenId++;
    this.#stmt.saveToken.run(...tokenRow(id, hash, record));
    this.#indexToken(hash, id);
  }

  /** The table no longer refuses a second row with the same hash; a 256-bit token never repeats, but say so if one did. */
  #unique(hash: string): void {
    if (this.#tokenIds.has(hash)) throw new Error('a token with this hash is already stored');
  }

  #indexToken(hash: string, id: number): void {
    this.#tokenIds.set(hash, id);
    this.#batch.onRollback(() => this.#tokenIds.delete(hash));
  }

  #forgetToken(hash: string, id: number): void {
    this.#tokenIds.delete(hash);
    this.#batch.onRollback(() => this.#tokenIds.set(hash, id));
  }

  /** An access and a refresh token in one statement. Call inside transaction() or inBatch(). */
  saveTokenPair(accessHash: string, access: TokenRecord, refreshHash: string, refresh: TokenRecord): void {
    this.#unique(accessHash);
    this.#unique(refreshHash);
    const accessId = this.#nextTokenId++;
    const refreshId = this.#nextTokenId++;
    this.#stmt.saveTokenPair.run(...tokenRow(accessId, accessHash, access), ...tokenRow(refreshId, refreshHash, refresh));
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
        this.#batch.onRollback(() => this.#nonces.add(key));
      }
      for (const { id, hash } of this.#stmt.purgeTokens.iterate(now)) this.#forgetToken(hash, id);
      this.#stmt.purgeRefreshed.run(now);
    });
  }

  close(): void {
    clearInterval(this.#checkpointer);
    this.#batch.flush();
    this.#db.close();
  }
}

/** One string per (account, nonce), unambiguous whatever characters either holds. */
function nonceKey(accessKeyId: string, nonce: string): string {
  return `${accessKeyId.length}:${accessKeyId}${nonce}`;
}
