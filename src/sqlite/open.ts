import type Database from 'better-sqlite3';
import { chmodSync, closeSync, existsSync, openSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { openDatabase } from '../native.js';
import { giveToFolderOwner, makeFolders } from '../ownership.js';

/** What each store chooses for its file; what goes wrong is thrown as it is, for the caller to word as its own error. */
export interface SqliteOpenOptions {
  /** Only reads: nothing is created, tightened or set up, and the file must exist. */
  readOnly?: boolean;
  /** Makes the file's folder (and those above it) with this mode when missing; without it the folder must exist. */
  folderMode?: number;
  /** How long a statement waits for another connection's lock. */
  busyTimeoutMs: number;
  journalMode?: 'WAL' | 'DELETE';
  synchronous?: 'NORMAL' | 'FULL';
  /** Further settings, each set in order after those (`wal_autocheckpoint = 0`). */
  pragmas?: readonly string[];
}

/** The files SQLite keeps beside a database: the rollback journal, or WAL's log and its index. */
export const SIDE_FILES = ['-journal', '-wal', '-shm'] as const;

/** Opens the SQLite database at `path` (`:memory:` touches no disk) with the caller's settings. */
export function openSqlite(path: string, options: SqliteOpenOptions): Database.Database {
  if (!options.readOnly && path !== ':memory:') prepareFile(path, options.folderMode);
  const db = openDatabase(path, options.readOnly ? { readonly: true, fileMustExist: true } : {});
  try {
    db.pragma(`busy_timeout = ${options.busyTimeoutMs}`);
    if (options.journalMode) db.pragma(`journal_mode = ${options.journalMode}`);
    if (options.synchronous) db.pragma(`synchronous = ${options.synchronous}`);
    for (const pragma of options.pragmas ?? []) db.pragma(pragma);
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

/**
 * Created 0600 before SQLite sees it, and owned as its folder when root makes it for another user: SQLite
 * gives the side files it creates the database's mode (and, under root, its owner), so no byte of it is
 * ever readable by others, even for a moment. Files an older release left open to others are closed.
 */
function prepareFile(path: string, folderMode: number | undefined): void {
  if (folderMode !== undefined) makeFolders(dirname(path), folderMode);
  if (!existsSync(path)) {
    closeSync(openSync(path, 'a', 0o600));
    giveToFolderOwner(path);
  }
  tighten(path);
  for (const suffix of SIDE_FILES) tighten(path + suffix);
}

function tighten(file: string): void {
  try {
    const mode = statSync(file).mode & 0o777;
    if ((mode & 0o077) !== 0) chmodSync(file, mode & 0o700);
  } catch {
    // Absent, on a read-only disk, or another user's: whether the file can be used is SQLite's to say.
  }
}
