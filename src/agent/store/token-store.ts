import type Database from 'better-sqlite3';
import { join } from 'node:path';
import { SqliteError } from '../../native.js';
import { systemClock, type TimeReader } from '../../clock.js';
import {
  accessError,
  connect,
  isCorruption,
  leaveWal,
  migrate,
  MIGRATIONS,
  moveAside,
  readError,
  refuseNewer,
  StoreError,
} from './store-file.js';

export interface StoreIdentity {
  baseUrl: string;
  /** '' in broker mode, which has none: a pair from the broker is never taken for a signed one, nor the reverse. */
  accessKeyId: string;
  kind: 'bot' | 'vendor';
  id: string;
}

/** Expiries and issuedAt are wall-clock ms as the server sees them. */
export interface TokenPair {
  accessToken: string;
  accessExpiresAt: number;
  /** '' in broker mode (DESIGN §3.7), where the device holds no refresh token; refreshExpiresAt is then accessExpiresAt. */
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

export interface TokenStoreOptions {
  /** Called after a corrupt database was moved aside and replaced; the caller logs it at error. */
  onCorrupt?: (info: { movedTo: string; error: unknown }) => void;
  clock?: TimeReader;
  /** For `botlink status`: never creates, migrates, converts or moves the file, and writes nothing. */
  readOnly?: boolean;
}

export const DB_FILE = 'botlink.db';

/** Meta key of the last time the server confirmed (wall ms): the clock floor after a reboot. */
export const LAST_SERVER_TIME_KEY = 'lastServerTimeMs';
/** Meta key of the random key the cross-process locks are named with (./lock.ts). */
const LOCK_KEY = 'lockKey';

const PAIR_COLUMNS =
  'base_url, access_key_id, kind, identity_id, access_token, access_expires_at, refresh_token, refresh_expires_at, issued_at, access_issued_at';
const PAIR_FIELDS =
  'base_url AS baseUrl, access_key_id AS accessKeyId, kind, identity_id AS id, access_token AS accessToken, ' +
  'access_expires_at AS accessExpiresAt, refresh_token AS refreshToken, refresh_expires_at AS refreshExpiresAt, issued_at AS issuedAt, ' +
  'access_issued_at AS accessIssuedAt';
const SAME_IDENTITY = 'base_url = ? AND access_key_id = ? AND kind = ? AND identity_id = ?';

function identityArgs(i: StoreIdentity): [string, string, string, string] {
  return [i.baseUrl, i.accessKeyId, i.kind, i.id];
}

/** The one test of whether a cached pair is `b`'s: same service, same access key ('' for the broker's), same identity. */
function sameIdentity(a: StoreIdentity, b: StoreIdentity): boolean {
  return a.baseUrl === b.baseUrl && a.accessKeyId === b.accessKeyId && a.kind === b.kind && a.id === b.id;
}

/** The key a pair is cached under: the account it was issued through (accessKeyId '' in broker mode) and the identity. */
export function storeIdentity(
  account: { baseUrl: string; accessKeyId: string },
  identity: Pick<StoreIdentity, 'kind' | 'id'>,
): StoreIdentity {
  return { baseUrl: account.baseUrl, accessKeyId: account.accessKeyId, kind: identity.kind, id: identity.id };
}

function prepareStatements(db: Database.Database) {
  return {
    getPair: db.prepare<[string], StoreIdentity & TokenPair>(`SELECT ${PAIR_FIELDS} FROM token_pair WHERE kind = ?`),
    putPair: db.prepare(`INSERT OR REPLACE INTO token_pair (${PAIR_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    dropOtherPair: db.prepare(`DELETE FROM token_pair WHERE kind = ? AND NOT (${SAME_IDENTITY})`),
    clearPair: db.prepare('DELETE FROM token_pair'),
    getBot: db
      .prepare<string[], string>(
        'SELECT bot_id FROM provisioned_bot WHERE base_url = ? AND access_key_id = ? AND vendor_id = ? AND device_id = ?',
      )
      .pluck(),
    putBot: db.prepare(
      'INSERT OR REPLACE INTO provisioned_bot (base_url, access_key_id, vendor_id, device_id, bot_id) VALUES (?, ?, ?, ?, ?)',
    ),
    getMeta: db.prepare<[string], string>('SELECT value FROM meta WHERE key = ?').pluck(),
    putMeta: db.prepare('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)'),
  };
}

/** The agent's token cache in `<stateDir>/botlink.db`; safe to share between processes. */
export class TokenStore {
  readonly path: string;
  /** Names this stateDir's locks; undefined only in a read-only open of a file older than this release. */
  readonly lockKey: string | undefined;
  private readonly readOnly: boolean;
  private db: Database.Database;
  private stmt: ReturnType<typeof prepareStatements>;

  /** Opens (creating, migrating, or moving a corrupt file aside as needed), or with `readOnly` only reads. */
  static open(stateDir: string, opts: TokenStoreOptions = {}): TokenStore {
    const path = join(stateDir, DB_FILE);
    if (opts.readOnly) {
      try {
        return new TokenStore(path, opts);
      } catch (error) {
        throw readError(path, error);
      }
    }
    let corrupt: unknown;
    try {
      return new TokenStore(path, opts);
    } catch (error) {
      if (!isCorruption(error)) throw accessError(path, error);
      corrupt = error;
    }
    let movedTo: string;
    try {
      movedTo = moveAside(path, (opts.clock ?? systemClock).wallNow());
    } catch (error) {
      throw accessError(path, error);
    }
    opts.onCorrupt?.({ movedTo, error: corrupt });
    try {
      return new TokenStore(path, opts);
    } catch (error) {
      throw accessError(path, error);
    }
  }

  private constructor(path: string, opts: TokenStoreOptions) {
    this.path = path;
    const readOnly = opts.readOnly === true;
    this.readOnly = readOnly;
    this.db = connect(path, readOnly);
    try {
      const check = this.db.pragma('quick_check', { simple: true });
      if (check !== 'ok') throw new SqliteError(`quick_check: ${String(check)}`, 'SQLITE_CORRUPT');
      if (readOnly) refuseNewer(this.db);
      else migrate(this.db, MIGRATIONS);
      // Preparing every statement proves the tables have the columns this release uses.
      this.stmt = prepareStatements(this.db);
      this.lockKey = this.stmt.getMeta.get(LOCK_KEY);
      // Converted only once the file proved usable, so a file moved aside keeps its original bytes.
      if (!readOnly) leaveWal(this.db);
    } catch (error) {
      this.db.close();
      throw error;
    }
  }

  /** The key every lock of this stateDir is named with. */
  requireLockKey(): string {
    if (this.lockKey === undefined) {
      throw new StoreError('ERR_STORE_KEY', `${this.path} holds no lock key`, 'needs-config', {
        fix: 'open it read-write once (start the daemon)',
      });
    }
    return this.lockKey;
  }

  /** The cached pair of one kind (default: the bot's, else the vendor's), without discarding anything (for status). */
  peekPair(only?: StoreIdentity['kind']): { identity: StoreIdentity; pair: TokenPair } | undefined {
    const row = only ? this.stmt.getPair.get(only) : (this.stmt.getPair.get('bot') ?? this.stmt.getPair.get('vendor'));
    if (!row) return undefined;
    const { baseUrl, accessKeyId, kind, id, accessIssuedAt, ...rest } = row;
    const pair: TokenPair = accessIssuedAt == null ? rest : { ...rest, accessIssuedAt };
    return { identity: { baseUrl, accessKeyId, kind, id }, pair };
  }

  /** The pair cached for exactly `identity`, without discarding anything (for status and token). */
  pairFor(identity: StoreIdentity): TokenPair | undefined {
    const found = this.peekPair(identity.kind);
    return found && sameIdentity(found.identity, identity) ? found.pair : undefined;
  }

  /**
   * The pair issued for `identity`; a pair of the same kind issued for any other identity is deleted
   * when the disk allows (it is never handed out either way). Reads first: a full disk still loads.
   */
  loadPair(identity: StoreIdentity): TokenPair | undefined {
    const found = this.peekPair(identity.kind);
    if (!found || sameIdentity(found.identity, identity)) return found?.pair;
    try {
      // Conditional delete: never removes a pair another process just saved for the right identity.
      this.stmt.dropOtherPair.run(identity.kind, ...identityArgs(identity));
    } catch {
      // Not deletable now (full or read-only disk): the next save for this identity replaces it.
    }
    return this.pairFor(identity);
  }

  /** Replaces the pair in one statement, hence one transaction: a crash leaves the old pair or the new. */
  savePair(identity: StoreIdentity, pair: TokenPair): void {
    const { accessToken, accessExpiresAt, refreshToken, refreshExpiresAt, issuedAt } = pair;
    const accessIssuedAt = pair.accessIssuedAt ?? null;
    this.write(() =>
      this.stmt.putPair.run(
        ...identityArgs(identity),
        accessToken,
        accessExpiresAt,
        refreshToken,
        refreshExpiresAt,
        issuedAt,
        accessIssuedAt,
      ),
    );
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
    this.write(() => this.stmt.putMeta.run(key, value));
  }

  integrityCheck(): string {
    const rows = this.db.pragma('integrity_check', { simple: false }) as { integrity_check: string }[];
    return rows.map((r) => r.integrity_check).join('\n');
  }

  close(): void {
    this.db.close();
  }

  /**
   * Runs a write. SQLite opens a file on a read-only disk read-only and keeps it so: on such a
   * refusal the connection is opened again once, since the disk may have become writable.
   */
  private write(run: () => unknown): void {
    try {
      run();
    } catch (error) {
      if (this.readOnly || !(error instanceof SqliteError && error.code.startsWith('SQLITE_READONLY'))) throw error;
      const db = connect(this.path, false);
      this.db.close();
      this.db = db;
      this.stmt = prepareStatements(db);
      run();
    }
  }
}
