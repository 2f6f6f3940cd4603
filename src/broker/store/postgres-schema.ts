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
  // 6: admin tokens and console sessions (HMACs only; a token's row outlives its revocation, so its name is never
  // reused), the device counts the summary reads (kept by triggers in the transactions that change a key or a
  // pre-authorisation: active keys, botIds left with none, pre-authorised keys, active keys by agent version),
  // tokens and refusals per minute (written with each audit batch, for the summary's last hour), and the audit by
  // device, by key and by action; the keys and pre-authorisations by deviceId and by botId first, in byte order
  // (a prefix search's range).
  `CREATE TABLE admin_tokens (
     name TEXT PRIMARY KEY, hmac TEXT NOT NULL UNIQUE, role TEXT NOT NULL CHECK (role IN ('viewer', 'operator')),
     created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL, last_used_at BIGINT, revoked_at BIGINT
   );
   CREATE TABLE admin_sessions (
     hmac TEXT PRIMARY KEY, token_name TEXT NOT NULL, created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL
   );
   CREATE INDEX admin_sessions_token ON admin_sessions (token_name);
   CREATE INDEX admin_sessions_expiry ON admin_sessions (expires_at);
   CREATE INDEX audit_bot ON audit (bot_id, at);
   CREATE INDEX audit_key ON audit (key_id, action, at);
   CREATE INDEX audit_action ON audit (action, at);
   CREATE TABLE audit_minutes (
     minute BIGINT NOT NULL, action TEXT NOT NULL, outcome TEXT NOT NULL, n BIGINT NOT NULL, PRIMARY KEY (minute, action, outcome)
   );
   DROP INDEX keys_device;
   CREATE INDEX keys_device ON keys (vendor_id, device_id, key_id);
   CREATE INDEX keys_device_first ON keys (device_id COLLATE "C", vendor_id, key_id);
   CREATE INDEX keys_bot_first ON keys (bot_id COLLATE "C");
   CREATE INDEX preauth_device_first ON preauth (device_id COLLATE "C", vendor_id, key_id);
   CREATE TABLE device_counts (kind TEXT NOT NULL, name TEXT NOT NULL, n BIGINT NOT NULL, PRIMARY KEY (kind, name));
   INSERT INTO device_counts (kind, name, n)
     SELECT 'state', 'active', COUNT(*) FROM keys WHERE state = 'active'
     UNION ALL SELECT 'state', 'revoked', COUNT(DISTINCT bot_id) - COUNT(DISTINCT CASE WHEN state = 'active' THEN bot_id END) FROM keys
     UNION ALL SELECT 'state', 'preauthorized', COUNT(*) FROM preauth;
   INSERT INTO device_counts (kind, name, n)
     SELECT 'version', COALESCE(agent_version, ''), COUNT(*) FROM keys WHERE state = 'active' GROUP BY COALESCE(agent_version, '');
   CREATE FUNCTION device_counts_add(k TEXT, nm TEXT, d BIGINT) RETURNS void LANGUAGE sql AS
     'INSERT INTO device_counts (kind, name, n) VALUES (k, nm, d) ON CONFLICT (kind, name) DO UPDATE SET n = device_counts.n + d';
   CREATE FUNCTION keys_counted() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     IF TG_OP = 'INSERT' THEN
       IF NEW.state = 'active' THEN
         PERFORM device_counts_add('state', 'active', 1);
         PERFORM device_counts_add('version', COALESCE(NEW.agent_version, ''), 1);
         IF EXISTS (SELECT 1 FROM keys WHERE bot_id = NEW.bot_id AND key_id <> NEW.key_id) THEN
           PERFORM device_counts_add('state', 'revoked', -1);
         END IF;
       END IF;
     ELSIF TG_OP = 'DELETE' THEN
       IF OLD.state = 'active' THEN
         PERFORM device_counts_add('state', 'active', -1);
         PERFORM device_counts_add('version', COALESCE(OLD.agent_version, ''), -1);
       END IF;
     ELSIF OLD.state = 'active' AND NEW.state <> 'active' THEN
       PERFORM device_counts_add('state', 'active', -1);
       PERFORM device_counts_add('version', COALESCE(OLD.agent_version, ''), -1);
       IF NOT EXISTS (SELECT 1 FROM keys WHERE bot_id = NEW.bot_id AND state = 'active') THEN
         PERFORM device_counts_add('state', 'revoked', 1);
       END IF;
     ELSIF OLD.state = 'active' AND NEW.state = 'active' AND OLD.agent_version IS DISTINCT FROM NEW.agent_version THEN
       PERFORM device_counts_add('version', COALESCE(OLD.agent_version, ''), -1);
       PERFORM device_counts_add('version', COALESCE(NEW.agent_version, ''), 1);
     END IF;
     RETURN NULL;
   END $$;
   CREATE TRIGGER keys_counted AFTER INSERT OR DELETE OR UPDATE OF state, agent_version ON keys
     FOR EACH ROW EXECUTE FUNCTION keys_counted();
   CREATE FUNCTION preauth_counted() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     PERFORM device_counts_add('state', 'preauthorized', CASE WHEN TG_OP = 'INSERT' THEN 1 ELSE -1 END);
     RETURN NULL;
   END $$;
   CREATE TRIGGER preauth_counted AFTER INSERT OR DELETE ON preauth FOR EACH ROW EXECUTE FUNCTION preauth_counted();`,
  // 7: rejected keys counted with the other states (their tombstones are written by operators' transactions only).
  `INSERT INTO device_counts (kind, name, n) SELECT 'state', 'rejected', COUNT(*) FROM tombstones WHERE state = 'rejected';
   CREATE FUNCTION tombstones_counted() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     IF TG_OP = 'INSERT' THEN
       IF NEW.state = 'rejected' THEN PERFORM device_counts_add('state', 'rejected', 1); END IF;
       RETURN NEW;
     END IF;
     IF OLD.state = 'rejected' THEN PERFORM device_counts_add('state', 'rejected', -1); END IF;
     RETURN OLD;
   END $$;
   CREATE TRIGGER tombstones_counted AFTER INSERT OR DELETE ON tombstones FOR EACH ROW EXECUTE FUNCTION tombstones_counted();`,
  // 8: how many keys wait per vendor, kept by a trigger on every row made or dropped (a row's vendor never changes):
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
  // 9: the devices pages list pending and rejected keys, and the pending page is a keyset page: the pending keys, the
  // rejected keys' tombstones and (a page of state=revoked, not a walk past every active key) the revoked keys, by
  // (vendor_id, device_id, key_id) and by deviceId first in byte order, as the keys are.
  `DROP INDEX pending_device;
   CREATE INDEX pending_device ON pending (vendor_id, device_id, key_id);
   CREATE INDEX pending_device_first ON pending (device_id COLLATE "C", vendor_id, key_id);
   CREATE INDEX tombstones_rejected ON tombstones (vendor_id, device_id, key_id) WHERE state = 'rejected';
   CREATE INDEX tombstones_rejected_first ON tombstones (device_id COLLATE "C", vendor_id, key_id) WHERE state = 'rejected';
   CREATE INDEX keys_revoked ON keys (vendor_id, device_id, key_id) WHERE state = 'revoked';
   CREATE INDEX keys_revoked_first ON keys (device_id COLLATE "C", vendor_id, key_id) WHERE state = 'revoked';`,
  // 10: an enrolled key keeps its device's name (the enrollment's, a pending key's, a rotated key's); keys made before stay NULL.
  'ALTER TABLE keys ADD COLUMN name TEXT;',
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
