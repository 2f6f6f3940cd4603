import type Database from 'better-sqlite3';
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { BotlinkError } from '../protocol/errors.js';
import { systemClock, type Clock } from './clock.js';
import { bootMonoNow, isAlive, selfIdentity, systemProcPaths, type ProcessIdentity, type ProcPaths } from './instance.js';
import { sqlite } from '../native.js';

export interface StoreIdentity {
  baseUrl: string;
  accessKeyId: string;
  kind: 'bot' | 'vendor';
  id: string;
}

/** Expiries and issuedAt are wall-clock ms as the server sees them. */
export interface TokenPair {
  accessToken: string;
  accessExpiresAt: number;
  refreshToken: string;
  refreshExpiresAt: number;
  issuedAt: number;
  /** When the current access token was issued; differs from issuedAt after a refresh (absent in v1 rows). */
  accessIssuedAt?: number;
}

export interface ProvisionKey {
  baseUrl: string;
  accessKeyId: string;
  vendorId: string;
  deviceId: string;
}

/** `renew`: one process refreshes at a time; `instance`: one daemon per stateDir. */
export type LeaseName = 'renew' | 'instance';

export interface Lease extends ProcessIdentity {
  ownerId: string;
  /** On the lease clock (CLOCK_MONOTONIC ms); null = held for as long as the owner process lives. */
  expiresAt: number | null;
}

export type LeaseClaim = { ok: true } | { ok: false; holder: Lease };

export interface TokenStoreOptions {
  /** Called after a corrupt database was moved aside and replaced; the caller logs it at error. */
  onCorrupt?: (info: { movedTo: string; error: unknown }) => void;
  clock?: Clock;
  procPaths?: ProcPaths;
  /** Shared by all processes of one boot so lease expiry is comparable between them. */
  leaseClock?: () => number;
}

/** Meta key of the last time the server confirmed (wall ms): the clock floor after a reboot. */
export const LAST_SERVER_TIME_KEY = 'lastServerTimeMs';

/** The token store cannot be used: the message names the path and the fix. */
export class StoreError extends BotlinkError {}

/** Migration i takes the schema from user_version i to i + 1: append new ones, never edit old ones. */
export const MIGRATIONS: readonly string[] = [
  `CREATE TABLE token_pair (
     slot INTEGER PRIMARY KEY CHECK (slot = 1),
     base_url TEXT NOT NULL, access_key_id TEXT NOT NULL,
     kind TEXT NOT NULL CHECK (kind IN ('bot', 'vendor')), identity_id TEXT NOT NULL,
     access_token TEXT NOT NULL, access_expires_at INTEGER NOT NULL,
     refresh_token TEXT NOT NULL, refresh_expires_at INTEGER NOT NULL, issued_at INTEGER NOT NULL
   ) STRICT;
   CREATE TABLE provisioned_bot (
     base_url TEXT NOT NULL, access_key_id TEXT NOT NULL, vendor_id TEXT NOT NULL, device_id TEXT NOT NULL,
     bot_id TEXT NOT NULL,
     PRIMARY KEY (base_url, access_key_id, vendor_id, device_id)
   ) STRICT;
   CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
   CREATE TABLE leases (
     name TEXT PRIMARY KEY, owner_id TEXT NOT NULL,
     pid INTEGER NOT NULL, boot_id TEXT NOT NULL, start_time INTEGER NOT NULL, expires_at INTEGER
   ) STRICT;`,
  // v2: when the current access token was issued (it changes on refresh), so its lifetime is known after a restart.
  `ALTER TABLE token_pair ADD COLUMN access_issued_at INTEGER;`,
  // v3: one pair per identity kind, so provisioning with a vendor token does not evict the bot's pair.
  `CREATE TABLE token_pair_v3 (
     kind TEXT PRIMARY KEY CHECK (kind IN ('bot', 'vendor')),
     base_url TEXT NOT NULL, access_key_id TEXT NOT NULL, identity_id TEXT NOT NULL,
     access_token TEXT NOT NULL, access_expires_at INTEGER NOT NULL,
     refresh_token TEXT NOT NULL, refresh_expires_at INTEGER NOT NULL, issued_at INTEGER NOT NULL,
     access_issued_at INTEGER
   ) STRICT;
   INSERT INTO token_pair_v3 SELECT kind, base_url, access_key_id, identity_id, access_token, access_expires_at,
     refresh_token, refresh_expires_at, issued_at, access_issued_at FROM token_pair;
   DROP TABLE token_pair;
   ALTER TABLE token_pair_v3 RENAME TO token_pair;`,
];

/** Brings `db` to the last schema version in one write transaction, so concurrent openers migrate once. */
export function migrate(db: Database.Database, migrations: readonly string[]): void {
  db.transaction(() => {
    const from = db.pragma('user_version', { simple: true }) as number;
    if (from > migrations.length) {
      throw new StoreError(
        'ERR_STORE_VERSION',
        `${db.name} has schema version ${from} but this botlink knows only up to ${migrations.length}: ` +
          'it was written by a newer release. Fix: upgrade botlink, or move the file aside to start with an empty token cache.',
        'fatal',
      );
    }
    for (const sql of migrations.slice(from)) db.exec(sql);
    if (from < migrations.length) db.pragma(`user_version = ${migrations.length}`);
  }).immediate();
}

const PAIR_COLUMNS =
  'base_url, access_key_id, kind, identity_id, access_token, access_expires_at, refresh_token, refresh_expires_at, issued_at, access_issued_at';
const PAIR_FIELDS =
  'base_url AS baseUrl, access_key_id AS accessKeyId, kind, identity_id AS id, access_token AS accessToken, ' +
  'access_expires_at AS accessExpiresAt, refresh_token AS refreshToken, refresh_expires_at AS refreshExpiresAt, issued_at AS issuedAt, ' +
  'access_issued_at AS accessIssuedAt';
const SAME_IDENTITY = 'base_url = ? AND access_key_id = ? AND kind = ? AND identity_id = ?';
const LEASE_COLUMNS = 'owner_id AS ownerId, pid, boot_id AS bootId, start_time AS startTime, expires_at AS expiresAt';

function identityArgs(i: StoreIdentity): [string, string, string, string] {
  return [i.baseUrl, i.accessKeyId, i.kind, i.id];
}

function prepareStatements(db: Database.Database) {
  return {
    getPair: db.prepare<[string], StoreIdentity & TokenPair>(`SELECT ${PAIR_FIELDS} FROM token_pair WHERE kind = ?`),
    putPair: db.prepare(`INSERT OR REPLACE INTO token_pair (${PAIR_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    dropOtherPair: db.prepare(`DELETE FROM token_pair WHERE kind = ? AND NOT (${SAME_IDENTITY})`),
    updateAccess: db.prepare(`UPDATE token_pair SET access_token = ?, access_expires_at = ?, access_issued_at = ? WHERE ${SAME_IDENTITY}`),
    clearPair: db.prepare('DELETE FROM token_pair'),
    getBot: db.prepare<string[], string>(
      'SELECT bot_id FROM provisioned_bot WHERE base_url = ? AND access_key_id = ? AND vendor_id = ? AND device_id = ?',
    ).pluck(),
    putBot: db.prepare(
      'INSERT OR REPLACE INTO provisioned_bot (base_url, access_key_id, vendor_id, device_id, bot_id) VALUES (?, ?, ?, ?, ?)',
    ),
    getMeta: db.prepare<[string], string>('SELECT value FROM meta WHERE key = ?').pluck(),
    putMeta: db.prepare('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)'),
    getLease: db.prepare<[string], Lease>(`SELECT ${LEASE_COLUMNS} FROM leases WHERE name = ?`),
    putLease: db.prepare(
      'INSERT OR REPLACE INTO leases (name, owner_id, pid, boot_id, start_time, expires_at) VALUES (?, ?, ?, ?, ?, ?)',
    ),
    dropLease: db.prepare(
      'DELETE FROM leases WHERE name = ? AND owner_id = ? AND pid = ? AND boot_id = ? AND start_time = ?',
    ),
  };
}

/** Errors that mean the file's contents are unusable (as opposed to the file being unreachable). */
function isCorruption(error: unknown): boolean {
  if (!(error instanceof sqlite().SqliteError)) return false;
  return error.code === 'SQLITE_NOTADB' || error.code.startsWith('SQLITE_CORRUPT') || error.code === 'SQLITE_ERROR';
}

function accessError(path: string, error: unknown): StoreError {
  const reason = (error as { code?: string }).code ?? String(error);
  return new StoreError(
    'ERR_STORE_ACCESS',
    `cannot use the token store ${path} (${reason}: ${(error as Error).message}). Fix: stateDir must be a directory ` +
      'that the user botlink runs as can write (create it, chown it to that user, chmod 0700) on a writable disk with free space.',
    'needs-config',
    { cause: error },
  );
}

const SIDE_FILES = ['', '-wal', '-shm'];

function moveAside(path: string, wallMs: number): string {
  const movedTo = `${path}.corrupt-${wallMs}`;
  for (const suffix of SIDE_FILES) if (existsSync(path + suffix)) renameSync(path + suffix, movedTo + suffix);
  return movedTo;
}

/** The agent's token cache in `<stateDir>/botlink.db`; safe to share between processes. */
export class TokenStore {
  readonly path: string;
  private readonly db: Database.Database;
  private readonly stmt: ReturnType<typeof prepareStatements>;
  private readonly procPaths: ProcPaths;
  private readonly leaseClock: () => number;
  private self: ProcessIdentity | undefined;

  static open(stateDir: string, opts: TokenStoreOptions = {}): TokenStore {
    const path = join(stateDir, 'botlink.db');
    try {
      mkdirSync(stateDir, { recursive: true, mode: 0o700 });
      return new TokenStore(path, opts);
    } catch (error) {
      if (!isCorruption(error)) throw error instanceof StoreError ? error : accessError(path, error);
      const movedTo = moveAside(path, (opts.clock ?? systemClock).wallNow());
      opts.onCorrupt?.({ movedTo, error });
    }
    try {
      return new TokenStore(path, opts);
    } catch (error) {
      throw error instanceof StoreError ? error : accessError(path, error);
    }
  }

  private constructor(path: string, opts: TokenStoreOptions) {
    this.path = path;
    this.procPaths = opts.procPaths ?? systemProcPaths;
    this.leaseClock = opts.leaseClock ?? bootMonoNow;
    // Created before SQLite sees it so the tokens are never readable by others, even for a moment.
    closeSync(openSync(path, 'a', 0o600));
    chmodSync(path, 0o600);
    this.db = new (sqlite())(path);
    try {
      this.db.pragma('busy_timeout = 5000');
      this.db.pragma('synchronous = FULL');
      const check = this.db.pragma('quick_check', { simple: true });
      if (check !== 'ok') throw new (sqlite().SqliteError)(`quick_check: ${String(check)}`, 'SQLITE_CORRUPT');
      migrate(this.db, MIGRATIONS);
      // Preparing every statement proves the tables have the columns this release uses.
      this.stmt = prepareStatements(this.db);
      // Switched only once the file proved usable, so a file moved aside keeps its original bytes.
      this.db.pragma('journal_mode = WAL');
    } catch (error) {
      this.db.close();
      throw error;
    }
    for (const suffix of SIDE_FILES.slice(1)) if (existsSync(path + suffix)) chmodSync(path + suffix, 0o600);
  }

  /** The cached pair of one kind (default: the bot's, else the vendor's), without discarding anything (for status). */
  peekPair(only?: StoreIdentity['kind']): { identity: StoreIdentity; pair: TokenPair } | undefined {
    const row = only ? this.stmt.getPair.get(only) : (this.stmt.getPair.get('bot') ?? this.stmt.getPair.get('vendor'));
    if (!row) return undefined;
    const { baseUrl, accessKeyId, kind, id, accessIssuedAt, ...rest } = row;
    const pair: TokenPair = accessIssuedAt == null ? rest : { ...rest, accessIssuedAt };
    return { identity: { baseUrl, accessKeyId, kind, id }, pair };
  }

  /** The pair issued for `identity`; a pair of the same kind issued for any other identity is deleted. */
  loadPair(identity: StoreIdentity): TokenPair | undefined {
    // Conditional delete: never removes a pair another process just saved for the right identity.
    if (this.stmt.dropOtherPair.run(identity.kind, ...identityArgs(identity)).changes > 0) return undefined;
    return this.peekPair(identity.kind)?.pair;
  }

  /** Replaces the pair in one statement, hence one transaction: a crash leaves the old pair or the new. */
  savePair(identity: StoreIdentity, pair: TokenPair): void {
    const { accessToken, accessExpiresAt, refreshToken, refreshExpiresAt, issuedAt } = pair;
    const accessIssuedAt = pair.accessIssuedAt ?? null;
    this.stmt.putPair.run(...identityArgs(identity), accessToken, accessExpiresAt, refreshToken, refreshExpiresAt, issuedAt, accessIssuedAt);
  }

  /** After a refresh: new access token, same refresh token; nothing happens when no pair for `identity`. */
  updateAccess(identity: StoreIdentity, accessToken: string, accessExpiresAt: number, accessIssuedAt?: number): void {
    this.stmt.updateAccess.run(accessToken, accessExpiresAt, accessIssuedAt ?? null, ...identityArgs(identity));
  }

  clearPair(): void {
    this.stmt.clearPair.run();
  }

  getProvisionedBotId(key: ProvisionKey): string | undefined {
    return this.stmt.getBot.get(key.baseUrl, key.accessKeyId, key.vendorId, key.deviceId);
  }

  setProvisionedBotId(key: ProvisionKey, botId: string): void {
    this.stmt.putBot.run(key.baseUrl, key.accessKeyId, key.vendorId, key.deviceId, botId);
  }

  getMeta(key: string): string | undefined {
    return this.stmt.getMeta.get(key);
  }

  setMeta(key: string, value: string): void {
    this.stmt.putMeta.run(key, value);
  }

  /** Cross-process renew lock: true when this process (as `ownerId`) now holds it for `leaseMs`. */
  tryAcquireRenewLock(ownerId: string, leaseMs: number): boolean {
    return this.acquireLease('renew', ownerId, this.selfIdentity(), leaseMs).ok;
  }

  releaseRenewLock(ownerId: string): void {
    this.releaseLease('renew', ownerId, this.selfIdentity());
  }

  /**
   * Takes lease `name` for `holder` unless another live owner holds it; the same owner renews it.
   * Judged inside BEGIN IMMEDIATE, so two processes can never both see it free.
   */
  acquireLease(name: LeaseName, ownerId: string, holder: ProcessIdentity, leaseMs?: number): LeaseClaim {
    return this.db.transaction((): LeaseClaim => {
      const current = this.stmt.getLease.get(name);
      if (current && !isSameOwner(current, ownerId, holder) && this.isLive(current)) return { ok: false, holder: current };
      const expiresAt = leaseMs === undefined ? null : this.leaseClock() + leaseMs;
      this.stmt.putLease.run(name, ownerId, holder.pid, holder.bootId, holder.startTime, expiresAt);
      return { ok: true };
    }).immediate();
  }

  /** Gives lease `name` up, only if `ownerId` in `holder` still holds it. */
  releaseLease(name: LeaseName, ownerId: string, holder: ProcessIdentity): void {
    this.stmt.dropLease.run(name, ownerId, holder.pid, holder.bootId, holder.startTime);
  }

  /** The holder of lease `name` if its process lives and the lease has not expired. */
  liveLease(name: LeaseName): Lease | undefined {
    const lease = this.stmt.getLease.get(name);
    return lease && this.isLive(lease) ? lease : undefined;
  }

  integrityCheck(): string {
    const rows = this.db.pragma('integrity_check', { simple: false }) as { integrity_check: string }[];
    return rows.map((r) => r.integrity_check).join('\n');
  }

  close(): void {
    this.db.close();
  }

  private isLive(lease: Lease): boolean {
    // An expiry is only comparable within one boot, and isAlive already rejects other boots.
    return isAlive(lease, this.procPaths) && (lease.expiresAt === null || lease.expiresAt > this.leaseClock());
  }

  private selfIdentity(): ProcessIdentity {
    this.self ??= selfIdentity(this.procPaths);
    return this.self;
  }
}

function isSameOwner(lease: Lease, ownerId: string, p: ProcessIdentity): boolean {
  return lease.ownerId === ownerId && lease.pid === p.pid && lease.bootId === p.bootId && lease.startTime === p.startTime;
}
