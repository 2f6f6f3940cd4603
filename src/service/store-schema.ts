/** The reference service's SQLite file: its schema, how it is opened (and migrated), and its statements. */

import type Database from 'better-sqlite3';
import { BotlinkError, messageOf } from '../protocol/errors.js';
import type { Identity } from '../protocol/wire.js';
import { migrate, type Migration } from '../sqlite/migrate.js';
import { openSqlite } from '../sqlite/open.js';

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

export interface TokenRow {
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

// Tables the first schema keyed by a random value: every insert then rewrote a random page (three per getToken).
const REKEYED: readonly { table: string; columns: string; index: string }[] = [
  { table: 'tokens', columns: 'hash, kind, access_key_id, identity_kind, identity_id, expires_at', index: 'tokens_by_expiry' },
  { table: 'nonces', columns: 'access_key_id, nonce, expires_at', index: 'nonces_by_expiry' },
];

/**
 * Migration i takes the file from user_version i to i + 1: append new ones, never edit old ones.
 * Version 1 is every file of the releases before versions, all at user_version 0: empty, or holding the
 * current tables, or the first schema's (tokens and nonces keyed by a random value, maybe no refreshed),
 * whose rows move into the appended tables.
 */
export const SERVICE_MIGRATIONS: readonly Migration[] = [
  (db) => {
    db.exec(SCHEMA);
    const sqlOf = db.prepare<[string], string>("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?").pluck();
    for (const { table, columns, index } of REKEYED) {
      if (!/WITHOUT ROWID/i.test(sqlOf.get(table) ?? '')) continue;
      db.exec(`DROP INDEX ${index}; ALTER TABLE ${table} RENAME TO ${table}_v1; ${SCHEMA}`);
      db.exec(`INSERT INTO ${table} (${columns}) SELECT ${columns} FROM ${table}_v1; DROP TABLE ${table}_v1;`);
    }
  },
];

export function openServiceDb(file: string): Database.Database {
  let db: Database.Database | undefined;
  try {
    // The account secrets are in it in plain text: created 0600, and an older 0644 file is closed to others.
    db = openSqlite(
      file,
      file === ':memory:'
        ? { busyTimeoutMs: 2000 }
        : {
            busyTimeoutMs: 2000,
            journalMode: 'WAL',
            // Answers wait for COMMIT, so a killed process loses nothing; a power loss may roll back the commits since
            // the last checkpoint (≤ CHECKPOINT_MS: clients holding those tokens sign again), never corrupts.
            // FULL (an fsync per group commit) cost a third of getToken/s.
            synchronous: 'NORMAL',
            // Checkpoints (the only fsyncs under NORMAL) run on a timer instead of inside a request.
            pragmas: ['wal_autocheckpoint = 0'],
          },
    );
    migrate(db, SERVICE_MIGRATIONS, (version, known) => new ServiceDbError(file, newerRelease(version, known)));
    return db;
  } catch (err) {
    db?.close();
    throw err instanceof ServiceDbError ? err : new ServiceDbError(file, err);
  }
}

function newerRelease(version: number, known: number): Error {
  return new Error(`it has schema version ${version} but this botlink knows only up to ${known}: it was written by a newer release`);
}

/** A token's values in the column order of the tokens table (id, hash, kind, access_key_id, identity_kind, identity_id, expires_at). */
export function tokenRow(id: number, hash: string, r: TokenRecord): [number, string, TokenKind, string, Identity['kind'], string, number] {
  return [id, hash, r.kind, r.accessKeyId, r.identity.kind, r.identity.id, r.expiresAt];
}

export function prepareStatements(db: Database.Database) {
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
