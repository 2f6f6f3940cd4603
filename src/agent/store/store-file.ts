import type Database from 'better-sqlite3';
import { existsSync, renameSync } from 'node:fs';
import { SqliteError } from '../../native.js';
import { BotlinkError, messageOf, type BotlinkErrorOptions, type RetryClass } from '../../protocol/errors.js';
import { migrate as migrateSchema, type Migration, type NewerSchema, schemaVersion } from '../../sqlite/migrate.js';
import { openSqlite, SIDE_FILES } from '../../sqlite/open.js';

// The token store's file: schema versions, opening, and what goes wrong with the disk under it.

type StoreErrorCode = 'ERR_STORE_VERSION' | 'ERR_STORE_ACCESS' | 'ERR_STORE_RECOVERY' | 'ERR_STORE_CORRUPT' | 'ERR_STORE_KEY';

/** The token store cannot be used: the message names the path, `fix` what to do. */
export class StoreError extends BotlinkError {
  constructor(code: StoreErrorCode, message: string, retry: RetryClass, options?: BotlinkErrorOptions) {
    super(code, message, retry, options);
  }
}

/** Migration i takes the schema from user_version i to i + 1: append new ones, never edit old ones. */
export const MIGRATIONS: readonly Migration[] = [
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
  // v4: the locks are abstract sockets named with a random key only readers of this file know; leases are gone.
  `INSERT OR IGNORE INTO meta (key, value) VALUES ('lockKey', lower(hex(randomblob(16))));
   DROP TABLE leases;`,
];

/** A file written by a newer release: never migrated down or guessed at. */
function newerRelease(db: Database.Database): NewerSchema {
  return (version, known) =>
    new StoreError(
      'ERR_STORE_VERSION',
      `${db.name} has schema version ${version} but this botlink knows only up to ${known}: it was written by a newer release`,
      'fatal',
      { fix: 'upgrade botlink, or move the file aside to start with an empty token cache' },
    );
}

/** Brings `db` to the last version of `migrations` (src/sqlite/migrate.ts); a newer file is a StoreError. */
export function migrate(db: Database.Database, migrations: readonly Migration[]): void {
  migrateSchema(db, migrations, newerRelease(db));
}

/** For a read-only open, which migrates nothing: a file of a newer release is refused all the same. */
export function refuseNewer(db: Database.Database): void {
  schemaVersion(db, MIGRATIONS.length, newerRelease(db));
}

/** Errors that mean the file's contents are unusable (as opposed to the file being unreachable). */
export function isCorruption(error: unknown): boolean {
  if (!(error instanceof SqliteError)) return false;
  return error.code === 'SQLITE_NOTADB' || error.code.startsWith('SQLITE_CORRUPT') || error.code === 'SQLITE_ERROR';
}

export function accessError(path: string, error: unknown): StoreError {
  if (error instanceof StoreError) return error;
  const reason = (error as { code?: string }).code ?? String(error);
  return new StoreError('ERR_STORE_ACCESS', `cannot use the token store ${path} (${reason}: ${messageOf(error)})`, 'needs-config', {
    cause: error,
    fix:
      'stateDir must be a directory that the user botlink runs as can write (create it, chown it to that user, chmod 0700) ' +
      'on a writable disk with free space',
  });
}

/** Why a read-only open failed; the file is left exactly as it was. */
export function readError(path: string, error: unknown): StoreError {
  if (error instanceof StoreError) return error;
  const reason = (error as { code?: string }).code ?? String(error);
  const detail = `${reason}: ${messageOf(error)}`;
  if (reason === 'SQLITE_READONLY_ROLLBACK') {
    return new StoreError(
      'ERR_STORE_RECOVERY',
      `the token store ${path} holds a write a crash interrupted (${detail}); a reader cannot roll it back. The daemon ` +
        'does when it next opens the file (systemd restarts it within seconds)',
      'retry-soon',
      { cause: error, fix: 'ask again once the daemon has restarted' },
    );
  }
  if (reason === 'SQLITE_NOTADB' || reason.startsWith('SQLITE_CORRUPT')) {
    return new StoreError(
      'ERR_STORE_CORRUPT',
      `the token store ${path} is damaged (${detail}); it was left as it is. The daemon moves it aside and starts ` +
        'with an empty cache when it next starts',
      'fatal',
      { cause: error, fix: 'restart the daemon: systemctl restart botlink' },
    );
  }
  return new StoreError('ERR_STORE_ACCESS', `cannot read the token store ${path} (${detail})`, 'needs-config', {
    cause: error,
    fix: 'run this as root or as the user botlink runs as',
  });
}

/** A hot rollback journal belongs to its database: moved with it, the copy stays consistent. */
export function moveAside(path: string, wallMs: number): string {
  const movedTo = `${path}.corrupt-${wallMs}`;
  for (const suffix of ['', ...SIDE_FILES]) if (existsSync(path + suffix)) renameSync(path + suffix, movedTo + suffix);
  return movedTo;
}

/**
 * Earlier releases used WAL, whose readers need a -shm file: none can be created on a full disk
 * (SQLITE_IOERR_SHMSIZE) or a read-only one (SQLITE_CANTOPEN), so the cached token became unreadable.
 * A rollback journal is read with no extra file. Only possible while no other connection is open.
 */
export function leaveWal(db: Database.Database): void {
  if (db.pragma('journal_mode', { simple: true }) !== 'wal') return;
  db.pragma('busy_timeout = 0');
  try {
    db.pragma('journal_mode = DELETE');
  } catch {
    // Another process has it open: a later opener converts it.
  } finally {
    db.pragma('busy_timeout = 5000');
  }
}

/** stateDir made 0700 and the file 0600 before SQLite sees them (src/sqlite/open.ts); a reader changes nothing. */
export function connect(path: string, readOnly: boolean): Database.Database {
  return openSqlite(path, readOnly ? { readOnly, busyTimeoutMs: 5000 } : { folderMode: 0o700, busyTimeoutMs: 5000, synchronous: 'FULL' });
}
