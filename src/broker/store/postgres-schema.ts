import type { PoolClient } from 'pg';
import { newerSchema } from './errors.js';

/**
 * Migration i takes the database from version i to i + 1: append new ones, never edit old ones. The
 * tables and columns are SQLite's (sqlite-schema.ts): times BIGINT wall-clock ms, sealed tokens BYTEA.
 * One active key per botId and per (vendorId, deviceId) is a partial unique index, so two replicas
 * binding at once cannot both win.
 */
export const POSTGRES_MIGRATIONS: readonly string[] = [
  `CREATE TABLE codes (
     hmac TEXT PRIMARY KEY, vendor_id TEXT NOT NULL,
     kind TEXT NOT NULL CHECK (kind IN ('plain', 'adopt', 'replace')), device_id TEXT,
     uses_left INTEGER NOT NULL CHECK (uses_left >= 0), expires_at BIGINT NOT NULL, created_at BIGINT NOT NULL
   );
   CREATE TABLE keys (
     key_id TEXT PRIMARY KEY, public_key TEXT NOT NULL,
     bot_id TEXT NOT NULL, device_id TEXT NOT NULL, vendor_id TEXT NOT NULL,
     state TEXT NOT NULL CHECK (state IN ('active', 'revoked')),
     reason TEXT CHECK (reason IN ('revoked', 'replaced', 'rotated')),
     created_at BIGINT NOT NULL, last_seen_at BIGINT, revoked_at BIGINT,
     CHECK ((state = 'active') = (reason IS NULL))
   );
   CREATE UNIQUE INDEX keys_active_bot ON keys (bot_id) WHERE state = 'active';
   CREATE UNIQUE INDEX keys_active_device ON keys (vendor_id, device_id) WHERE state = 'active';
   CREATE INDEX keys_bot ON keys (bot_id);
   CREATE INDEX keys_device ON keys (vendor_id, device_id);
   CREATE TABLE preauth (
     key_id TEXT PRIMARY KEY, public_key TEXT NOT NULL, device_id TEXT NOT NULL, vendor_id TEXT NOT NULL,
     created_at BIGINT NOT NULL, UNIQUE (vendor_id, device_id)
   );
   CREATE TABLE nonces (
     key_id TEXT NOT NULL, nonce TEXT NOT NULL, keep_until BIGINT NOT NULL, PRIMARY KEY (key_id, nonce)
   );
   CREATE INDEX nonces_keep_until ON nonces (keep_until);
   CREATE TABLE rate_windows (
     bucket TEXT NOT NULL, window_start BIGINT NOT NULL, count INTEGER NOT NULL, PRIMARY KEY (bucket, window_start)
   );
   CREATE INDEX rate_windows_start ON rate_windows (window_start);
   CREATE TABLE tokens (
     bot_id TEXT PRIMARY KEY, access_sealed BYTEA NOT NULL, access_expires_at BIGINT NOT NULL,
     access_lifetime_s INTEGER NOT NULL, refresh_sealed BYTEA, refresh_expires_at BIGINT, updated_at BIGINT NOT NULL
   );`,
  // 2: tombstones of keys dropped from the keys table (a botId keeps its last 16 retired keys), the audit,
  // and the displacements (revoke --displace) due once the last token handed out has ended.
  `CREATE TABLE tombstones (
     key_id TEXT PRIMARY KEY, public_key TEXT NOT NULL,
     state TEXT NOT NULL CHECK (state IN ('revoked', 'rejected')), at BIGINT NOT NULL
   );
   CREATE INDEX keys_retired ON keys (bot_id, revoked_at) WHERE state <> 'active';
   CREATE TABLE audit (
     id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, at BIGINT NOT NULL, action TEXT NOT NULL, actor TEXT NOT NULL,
     vendor_id TEXT, device_id TEXT, bot_id TEXT, key_id TEXT, code_id TEXT, source TEXT, outcome TEXT NOT NULL,
     count INTEGER NOT NULL DEFAULT 1, fold TEXT UNIQUE
   );
   CREATE INDEX audit_at ON audit (at);
   CREATE TABLE displacements (bot_id TEXT PRIMARY KEY, due_at BIGINT NOT NULL);`,
  // 3: how many times a displacement failed (the cloud away): it is tried again a minute later, a bounded number of times.
  'ALTER TABLE displacements ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;',
  // 4: each code's id (random, apart from the code: `broker codes` lists by it, `broker cancel` ends by it), codes
  // made before it given one (80 bits of a random UUID's hash); and the agent version each key last reported.
  `ALTER TABLE codes ADD COLUMN id TEXT;
   UPDATE codes SET id = substr(md5(gen_random_uuid()::text), 1, 20);
   ALTER TABLE codes ALTER COLUMN id SET NOT NULL;
   CREATE UNIQUE INDEX codes_id ON codes (id);
   ALTER TABLE keys ADD COLUMN agent_version TEXT;`,
  // 5: keys waiting for an operator (enrollment with no code), pinned to their first ask; a rejected key's
  // tombstone keeps its device, so `broker devices` still lists it.
  `CREATE TABLE pending (
     key_id TEXT PRIMARY KEY, public_key TEXT NOT NULL, vendor_id TEXT NOT NULL, device_id TEXT NOT NULL,
     app_id TEXT NOT NULL, type TEXT NOT NULL, name TEXT NOT NULL, source TEXT NOT NULL, source_bucket TEXT NOT NULL,
     first_asked BIGINT NOT NULL, last_asked BIGINT NOT NULL
   );
   CREATE INDEX pending_device ON pending (vendor_id, device_id);
   CREATE INDEX pending_source ON pending (source_bucket);
   CREATE INDEX pending_first_asked ON pending (first_asked);
   ALTER TABLE tombstones ADD COLUMN vendor_id TEXT;
   ALTER TABLE tombstones ADD COLUMN device_id TEXT;`,
  // 6: how many keys wait per vendor, kept by a trigger on every row made or dropped (a row's vendor never changes):
  // pendingMax is read in O(1) at each first ask, not counted over the vendor's rows twice.
  `CREATE TABLE pending_vendors (vendor_id TEXT PRIMARY KEY, waiting BIGINT NOT NULL);
   INSERT INTO pending_vendors (vendor_id, waiting) SELECT vendor_id, COUNT(*) FROM pending GROUP BY vendor_id;
   CREATE FUNCTION pending_vendors_kept() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     IF TG_OP = 'INSERT' THEN
       INSERT INTO pending_vendors (vendor_id, waiting) VALUES (NEW.vendor_id, 1)
         ON CONFLICT (vendor_id) DO UPDATE SET waiting = pending_vendors.waiting + 1;
     ELSE
       UPDATE pending_vendors SET waiting = waiting - 1 WHERE vendor_id = OLD.vendor_id;
     END IF;
     RETURN NULL;
   END $$;
   CREATE TRIGGER pending_vendors_kept AFTER INSERT OR DELETE ON pending FOR EACH ROW EXECUTE FUNCTION pending_vendors_kept();`,
];

/** The advisory lock (two-int key space, apart from the bot and device locks) that orders schema changes. */
const SCHEMA_LOCK = 'SELECT pg_advisory_xact_lock(2077, 1)';

/**
 * Brings the database to the last version in one transaction under an advisory lock, so replicas
 * starting together migrate once and a replica never sees a half-made schema.
 */
export async function migratePostgres(client: PoolClient, where: string): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query(SCHEMA_LOCK);
    await client.query(
      'CREATE TABLE IF NOT EXISTS broker_schema (one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one), version INTEGER NOT NULL)',
    );
    const rows = (await client.query<{ version: number }>('SELECT version FROM broker_schema')).rows;
    const from = rows[0]?.version ?? 0;
    if (from > POSTGRES_MIGRATIONS.length) throw newerSchema(where, from, POSTGRES_MIGRATIONS.length);
    for (const sql of POSTGRES_MIGRATIONS.slice(from)) await client.query(sql);
    await client.query('INSERT INTO broker_schema (version) VALUES ($1) ON CONFLICT (one) DO UPDATE SET version = excluded.version', [
      POSTGRES_MIGRATIONS.length,
    ]);
    await client.query('COMMIT');
  } catch (err) {
    // A failed ROLLBACK means a lost connection, which ends the transaction anyway: the first error is the one to tell.
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
