import type Database from 'better-sqlite3';
import { messageOf } from '../../protocol/errors.js';
import { migrate } from '../../sqlite/migrate.js';
import { openSqlite } from '../../sqlite/open.js';
import { BrokerStoreError, newerSchema } from './errors.js';

/**
 * Migration i takes the file from user_version i to i + 1: append new ones, never edit old ones.
 * Times are wall-clock ms; one active key per botId and per (vendorId, deviceId) is a partial unique index.
 */
export const SQLITE_MIGRATIONS: readonly string[] = [
  `CREATE TABLE codes (
     hmac TEXT PRIMARY KEY, vendor_id TEXT NOT NULL,
     kind TEXT NOT NULL CHECK (kind IN ('plain', 'adopt', 'replace')), device_id TEXT,
     uses_left INTEGER NOT NULL CHECK (uses_left >= 0), expires_at INTEGER NOT NULL, created_at INTEGER NOT NULL
   ) STRICT;
   CREATE TABLE keys (
     key_id TEXT PRIMARY KEY, public_key TEXT NOT NULL,
     bot_id TEXT NOT NULL, device_id TEXT NOT NULL, vendor_id TEXT NOT NULL,
     state TEXT NOT NULL CHECK (state IN ('active', 'revoked')),
     reason TEXT CHECK (reason IN ('revoked', 'replaced', 'rotated')),
     created_at INTEGER NOT NULL, last_seen_at INTEGER, revoked_at INTEGER,
     CHECK ((state = 'active') = (reason IS NULL))
   ) STRICT;
   CREATE UNIQUE INDEX keys_active_bot ON keys (bot_id) WHERE state = 'active';
   CREATE UNIQUE INDEX keys_active_device ON keys (vendor_id, device_id) WHERE state = 'active';
   CREATE INDEX keys_bot ON keys (bot_id);
   CREATE INDEX keys_device ON keys (vendor_id, device_id);
   CREATE TABLE preauth (
     key_id TEXT PRIMARY KEY, public_key TEXT NOT NULL, device_id TEXT NOT NULL, vendor_id TEXT NOT NULL,
     created_at INTEGER NOT NULL, UNIQUE (vendor_id, device_id)
   ) STRICT;
   CREATE TABLE nonces (
     key_id TEXT NOT NULL, nonce TEXT NOT NULL, keep_until INTEGER NOT NULL, PRIMARY KEY (key_id, nonce)
   ) STRICT, WITHOUT ROWID;
   CREATE INDEX nonces_keep_until ON nonces (keep_until);
   CREATE TABLE rate_windows (
     bucket TEXT NOT NULL, window_start INTEGER NOT NULL, count INTEGER NOT NULL, PRIMARY KEY (bucket, window_start)
   ) STRICT, WITHOUT ROWID;
   CREATE INDEX rate_windows_start ON rate_windows (window_start);
   CREATE TABLE tokens (
     bot_id TEXT PRIMARY KEY, access_sealed BLOB NOT NULL, access_expires_at INTEGER NOT NULL,
     access_lifetime_s INTEGER NOT NULL, refresh_sealed BLOB, refresh_expires_at INTEGER, updated_at INTEGER NOT NULL
   ) STRICT;`,
  // 2: tombstones of keys dropped from the keys table (a botId keeps its last 16 retired keys), the audit,
  // and the displacements (revoke --displace) due once the last token handed out has ended.
  `CREATE TABLE tombstones (
     key_id TEXT PRIMARY KEY, public_key TEXT NOT NULL,
     state TEXT NOT NULL CHECK (state IN ('revoked', 'rejected')), at INTEGER NOT NULL
   ) STRICT;
   CREATE INDEX keys_retired ON keys (bot_id, revoked_at) WHERE state <> 'active';
   CREATE TABLE audit (
     id INTEGER PRIMARY KEY, at INTEGER NOT NULL, action TEXT NOT NULL, actor TEXT NOT NULL,
     vendor_id TEXT, device_id TEXT, bot_id TEXT, key_id TEXT, code_id TEXT, source TEXT, outcome TEXT NOT NULL,
     count INTEGER NOT NULL DEFAULT 1, fold TEXT UNIQUE
   ) STRICT;
   CREATE INDEX audit_at ON audit (at);
   CREATE TABLE displacements (bot_id TEXT PRIMARY KEY, due_at INTEGER NOT NULL) STRICT;`,
  // 3: how many times a displacement failed (the cloud away): it is tried again a minute later, a bounded number of times.
  'ALTER TABLE displacements ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;',
  // 4: each code's id (random, apart from the code: `broker codes` lists by it, `broker cancel` ends by it), codes
  // made before it given one; and the agent version each key last reported with its token requests.
  `ALTER TABLE codes ADD COLUMN id TEXT;
   UPDATE codes SET id = lower(hex(randomblob(10)));
   CREATE UNIQUE INDEX codes_id ON codes (id);
   ALTER TABLE keys ADD COLUMN agent_version TEXT;`,
  // 5: keys waiting for an operator (enrollment with no code), pinned to their first ask; a rejected key's
  // tombstone keeps its device, so `broker devices` still lists it.
  `CREATE TABLE pending (
     key_id TEXT PRIMARY KEY, public_key TEXT NOT NULL, vendor_id TEXT NOT NULL, device_id TEXT NOT NULL,
     app_id TEXT NOT NULL, type TEXT NOT NULL, name TEXT NOT NULL, source TEXT NOT NULL, source_bucket TEXT NOT NULL,
     first_asked INTEGER NOT NULL, last_asked INTEGER NOT NULL
   ) STRICT;
   CREATE INDEX pending_device ON pending (vendor_id, device_id);
   CREATE INDEX pending_source ON pending (source_bucket);
   CREATE INDEX pending_first_asked ON pending (first_asked);
   ALTER TABLE tombstones ADD COLUMN vendor_id TEXT;
   ALTER TABLE tombstones ADD COLUMN device_id TEXT;`,
  // 6: admin tokens and console sessions (HMACs only; a token's row outlives its revocation, so its name is never
  // reused), the device counts the summary reads (kept by triggers in the transactions that change a key or a
  // pre-authorisation: active keys, botIds left with none, pre-authorised keys, active keys by agent version),
  // tokens and refusals per minute (written with each audit batch, for the summary's last hour), and the audit by
  // device, by key and by action; the keys and pre-authorisations by deviceId and by botId first, in byte order
  // (a prefix search's range).
  `CREATE TABLE admin_tokens (
     name TEXT PRIMARY KEY, hmac TEXT NOT NULL UNIQUE, role TEXT NOT NULL CHECK (role IN ('viewer', 'operator')),
     created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, last_used_at INTEGER, revoked_at INTEGER
   ) STRICT;
   CREATE TABLE admin_sessions (
     hmac TEXT PRIMARY KEY, token_name TEXT NOT NULL, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL
   ) STRICT;
   CREATE INDEX admin_sessions_token ON admin_sessions (token_name);
   CREATE INDEX admin_sessions_expiry ON admin_sessions (expires_at);
   CREATE INDEX audit_bot ON audit (bot_id, at);
   CREATE INDEX audit_key ON audit (key_id, action, at);
   CREATE INDEX audit_action ON audit (action, at);
   CREATE TABLE audit_minutes (
     minute INTEGER NOT NULL, action TEXT NOT NULL, outcome TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (minute, action, outcome)
   ) STRICT, WITHOUT ROWID;
   DROP INDEX keys_device;
   CREATE INDEX keys_device ON keys (vendor_id, device_id, key_id);
   CREATE INDEX keys_device_first ON keys (device_id, vendor_id, key_id);
   CREATE INDEX preauth_device_first ON preauth (device_id, vendor_id, key_id);
   CREATE TABLE device_counts (kind TEXT NOT NULL, name TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (kind, name)) STRICT, WITHOUT ROWID;
   INSERT INTO device_counts (kind, name, n)
     SELECT 'state', 'active', COUNT(*) FROM keys WHERE state = 'active'
     UNION ALL SELECT 'state', 'revoked', COUNT(DISTINCT bot_id) - COUNT(DISTINCT CASE WHEN state = 'active' THEN bot_id END) FROM keys
     UNION ALL SELECT 'state', 'preauthorized', COUNT(*) FROM preauth;
   INSERT INTO device_counts (kind, name, n)
     SELECT 'version', COALESCE(agent_version, ''), COUNT(*) FROM keys WHERE state = 'active' GROUP BY COALESCE(agent_version, '');
   CREATE TRIGGER keys_counted_insert AFTER INSERT ON keys WHEN NEW.state = 'active' BEGIN
     UPDATE device_counts SET n = n + 1 WHERE kind = 'state' AND name = 'active';
     INSERT INTO device_counts (kind, name, n) VALUES ('version', COALESCE(NEW.agent_version, ''), 1)
       ON CONFLICT (kind, name) DO UPDATE SET n = n + 1;
     UPDATE device_counts SET n = n - 1 WHERE kind = 'state' AND name = 'revoked'
       AND EXISTS (SELECT 1 FROM keys WHERE bot_id = NEW.bot_id AND key_id <> NEW.key_id);
   END;
   CREATE TRIGGER keys_counted_retire AFTER UPDATE OF state ON keys WHEN OLD.state = 'active' AND NEW.state <> 'active' BEGIN
     UPDATE device_counts SET n = n - 1 WHERE (kind = 'state' AND name = 'active') OR (kind = 'version' AND name = COALESCE(OLD.agent_version, ''));
     UPDATE device_counts SET n = n + 1 WHERE kind = 'state' AND name = 'revoked'
       AND NOT EXISTS (SELECT 1 FROM keys WHERE bot_id = NEW.bot_id AND state = 'active');
   END;
   CREATE TRIGGER keys_counted_version AFTER UPDATE OF agent_version ON keys
     WHEN OLD.state = 'active' AND NEW.state = 'active' AND OLD.agent_version IS NOT NEW.agent_version BEGIN
     UPDATE device_counts SET n = n - 1 WHERE kind = 'version' AND name = COALESCE(OLD.agent_version, '');
     INSERT INTO device_counts (kind, name, n) VALUES ('version', COALESCE(NEW.agent_version, ''), 1)
       ON CONFLICT (kind, name) DO UPDATE SET n = n + 1;
   END;
   CREATE TRIGGER keys_counted_delete AFTER DELETE ON keys WHEN OLD.state = 'active' BEGIN
     UPDATE device_counts SET n = n - 1 WHERE (kind = 'state' AND name = 'active') OR (kind = 'version' AND name = COALESCE(OLD.agent_version, ''));
   END;
   CREATE TRIGGER preauth_counted_insert AFTER INSERT ON preauth BEGIN
     UPDATE device_counts SET n = n + 1 WHERE kind = 'state' AND name = 'preauthorized';
   END;
   CREATE TRIGGER preauth_counted_delete AFTER DELETE ON preauth BEGIN
     UPDATE device_counts SET n = n - 1 WHERE kind = 'state' AND name = 'preauthorized';
   END;`,
  // 7: rejected keys counted with the other states (their tombstones are written by operators' transactions only).
  `INSERT INTO device_counts (kind, name, n) SELECT 'state', 'rejected', COUNT(*) FROM tombstones WHERE state = 'rejected';
   CREATE TRIGGER tombstones_counted_insert AFTER INSERT ON tombstones WHEN NEW.state = 'rejected' BEGIN
     UPDATE device_counts SET n = n + 1 WHERE kind = 'state' AND name = 'rejected';
   END;
   CREATE TRIGGER tombstones_counted_delete AFTER DELETE ON tombstones WHEN OLD.state = 'rejected' BEGIN
     UPDATE device_counts SET n = n - 1 WHERE kind = 'state' AND name = 'rejected';
   END;`,
  // 8: how many keys wait per vendor, kept by triggers on every row made or dropped (a row's vendor never changes):
  // pendingMax is read in O(1) at each first ask, not counted over the vendor's rows twice.
  `CREATE TABLE pending_vendors (vendor_id TEXT PRIMARY KEY, waiting INTEGER NOT NULL) STRICT;
   INSERT INTO pending_vendors (vendor_id, waiting) SELECT vendor_id, COUNT(*) FROM pending GROUP BY vendor_id;
   CREATE TRIGGER pending_vendors_in AFTER INSERT ON pending BEGIN
     INSERT INTO pending_vendors (vendor_id, waiting) VALUES (NEW.vendor_id, 1)
       ON CONFLICT (vendor_id) DO UPDATE SET waiting = waiting + 1;
   END;
   CREATE TRIGGER pending_vendors_out AFTER DELETE ON pending BEGIN
     UPDATE pending_vendors SET waiting = waiting - 1 WHERE vendor_id = OLD.vendor_id;
   END;`,
  // 9: the devices pages list pending and rejected keys, and the pending page is a keyset page: the pending keys, the
  // rejected keys' tombstones and (a page of state=revoked, not a walk past every active key) the revoked keys, by
  // (vendor_id, device_id, key_id) and by deviceId first in byte order, as the keys are.
  `DROP INDEX pending_device;
   CREATE INDEX pending_device ON pending (vendor_id, device_id, key_id);
   CREATE INDEX pending_device_first ON pending (device_id, vendor_id, key_id);
   CREATE INDEX tombstones_rejected ON tombstones (vendor_id, device_id, key_id) WHERE state = 'rejected';
   CREATE INDEX tombstones_rejected_first ON tombstones (device_id, vendor_id, key_id) WHERE state = 'rejected';
   CREATE INDEX keys_revoked ON keys (vendor_id, device_id, key_id) WHERE state = 'revoked';
   CREATE INDEX keys_revoked_first ON keys (device_id, vendor_id, key_id) WHERE state = 'revoked';`,
  // 10: an enrolled key keeps its device's name (the enrollment's, a pending key's, a rotated key's); keys made before stay NULL.
  'ALTER TABLE keys ADD COLUMN name TEXT;',
];

/**
 * Opens (creating it 0600, its folder 0700, both owned as the folder above when root makes them for the
 * broker's user) the broker's database, in WAL so that readers never wait for the writer.
 * synchronous=NORMAL is the connection's default: in WAL it survives a crash of the process (kill -9)
 * whole and loses, on a power cut, only the last commits — acceptable for the writes of every request
 * (nonces, rate hits, last seen) and for saved tokens (the broker signs again), which would otherwise pay
 * an fsync each. The commits whose loss would undo a decision — a code spent, a key bound, rotated or
 * revoked — run with FULL (see `durably` in sqlite.ts). src/sqlite does the opening, migrating and group commit.
 */
export function openSqliteDatabase(path: string): Database.Database {
  let db: Database.Database | undefined;
  try {
    // Only operator commands share the file, each holding the write lock for milliseconds.
    db = openSqlite(path, { folderMode: 0o700, busyTimeoutMs: 5000, journalMode: 'WAL', synchronous: 'NORMAL' });
    migrate(db, SQLITE_MIGRATIONS, (version, known) => newerSchema(path, version, known));
    return db;
  } catch (err) {
    db?.close();
    if (err instanceof BrokerStoreError) throw err;
    const reason = (err as { code?: string }).code ?? 'error';
    throw new BrokerStoreError('ERR_STORE_ACCESS', `cannot use the broker store ${path} (${reason}: ${messageOf(err)})`, {
      cause: err,
      fix: "the store's folder must be writable by the user the broker runs as (StateDirectory= does this), on a disk with free space",
    });
  }
}
