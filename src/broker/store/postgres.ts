import type { Pool, PoolClient } from 'pg';
import { messageOf } from '../../protocol/errors.js';
import {
  CODE_COLUMNS,
  deviceQuery,
  KEY_COLUMNS,
  keyWithTokenQuery,
  LIST_DEVICES,
  PREAUTH_COLUMNS,
  splitKeyWithToken,
  TOKEN_COLUMNS,
  verifiedSpend,
} from './columns.js';
import { BrokerStoreError } from './errors.js';
import { KeyedChain } from './keyed-chain.js';
import { addPreauthIn, enrollIn, lockKey, one, rotateIn } from './postgres-bind.js';
import { migratePostgres } from './postgres-schema.js';
import type {
  BrokerStore,
  CodeRow,
  DeviceListing,
  DeviceRow,
  EnrollCommit,
  EnrollOutcome,
  KeyRow,
  PreauthRow,
  RequestSpend,
  RotateOutcome,
  TokenRow,
  VerifiedSpend,
} from './types.js';
import { LAST_SEEN_STEP_MS } from './types.js';

export interface PostgresStoreOptions {
  /** Connections for queries and transactions (default 10). */
  poolSize?: number;
  /** Connections that hold bot locks, apart so a holder's own queries never wait behind waiters (default 10). */
  lockPoolSize?: number;
}

/** What token requests read, prepared once per connection. */
const FIND_KEY = { name: 'broker-find-key', text: `SELECT ${KEY_COLUMNS} FROM keys WHERE key_id = $1` };
const READ_TOKEN = { name: 'broker-read-token', text: `SELECT ${TOKEN_COLUMNS} FROM tokens WHERE bot_id = $1` };

/**
 * BrokerStore.spendVerified in one statement: the key is read; the nonce is inserted only while that key is
 * active with the public key the signature was verified with; the hit only when a nonce row was
 * inserted; last-seen only when that count is within the limit and a step has passed (data-modifying CTEs, each gated on the
 * one before). Every part sees one snapshot, so the key and token returned are as they were before it.
 */
const SPEND_VERIFIED = {
  name: 'broker-spend-verified',
  text: `
  WITH k AS (SELECT 1 FROM keys WHERE key_id = $1 AND state = 'active' AND public_key = $8),
  n AS (
    INSERT INTO nonces (key_id, nonce, keep_until) SELECT $1::text, $2::text, $3::bigint FROM k
    ON CONFLICT DO NOTHING RETURNING 1
  ),
  h AS (
    INSERT INTO rate_windows (bucket, window_start, count) SELECT $4::text, $5::bigint, 1 FROM n
    ON CONFLICT (bucket, window_start) DO UPDATE SET count = rate_windows.count + 1 RETURNING count
  ),
  t AS (
    UPDATE keys SET last_seen_at = $6 WHERE key_id = $1 AND (last_seen_at IS NULL OR last_seen_at <= $6::bigint - ${LAST_SEEN_STEP_MS})
    AND (SELECT count FROM h) <= $7::bigint RETURNING 1
  )
  ${keyWithTokenQuery('$1', ', (SELECT count FROM h) AS "spendCount"')}`,
};

/** The database's clock in ms: replicas with skewed clocks agree on a nonce's expiry. */
const NOW_MS = 'floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint';
const INT8_OID = 20;

/** The URL with its password hidden, for messages. */
function shown(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'the postgres URL';
  }
}

/**
 * The broker's store for any number of replicas on one PostgreSQL. Every rule that must hold across
 * replicas is decided by the database: a code's use by a conditional UPDATE in the binding transaction,
 * nonces and keyIds by primary keys, one active key per botId and device by partial unique indexes,
 * rate limits by an upsert counter, the bot lock by pg_advisory_lock. `pg` loads only here, at open.
 */
export async function openPostgresStore(url: string, opts: PostgresStoreOptions = {}): Promise<BrokerStore> {
  const { default: pg } = await import('pg');
  // BIGINT columns are ms since 1970: far inside a double's exact integers.
  const types = {
    getTypeParser: ((oid: number, format?: string) =>
      oid === INT8_OID ? Number : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
  };
  const config = { connectionString: url, application_name: 'botlink-broker', connectionTimeoutMillis: 10_000, types };
  const pool = new pg.Pool({ ...config, max: opts.poolSize ?? 10 });
  const lockPool = new pg.Pool({ ...config, max: opts.lockPoolSize ?? 10 });
  // An idle connection that dies (a restarted server, a terminated backend) is dropped; the next query opens another.
  for (const p of [pool, lockPool]) p.on('error', () => undefined);
  try {
    const client = await checkout(pool);
    try {
      await migratePostgres(client.client, shown(url));
      client.done(true);
    } catch (err) {
      client.done(false);
      throw err;
    }
  } catch (err) {
    await Promise.all([pool.end(), lockPool.end()]);
    if (err instanceof BrokerStoreError) throw err;
    throw new BrokerStoreError('ERR_STORE_ACCESS', `cannot use the broker store at ${shown(url)} (${messageOf(err)})`, {
      cause: err,
      fix: 'check the store URL, that the server is reachable from this host, and that its user may create tables in the database',
    });
  }
  return new PostgresStore(pool, lockPool);
}

/**
 * A connection taken from `pool` with a listener for its 'error' event (a lost connection is told to
 * the query that was running; unheard, the event would end the process); `done(healthy)` gives it back,
 * or destroys it when it may be broken.
 */
async function checkout(pool: Pool): Promise<{ client: PoolClient; done(healthy: boolean): void }> {
  const client = await pool.connect();
  const ignore = (): void => undefined;
  client.on('error', ignore);
  return {
    client,
    done(healthy) {
      client.off('error', ignore);
      client.release(!healthy);
    },
  };
}

class PostgresStore implements BrokerStore {
  readonly kind = 'postgres';
  readonly #pool: Pool;
  readonly #lockPool: Pool;
  /** One waiter per botId per replica: the lock pool holds one connection per botId, not one per request. */
  readonly #local = new KeyedChain();
  #closed: Promise<void> | undefined;

  constructor(pool: Pool, lockPool: Pool) {
    this.#pool = pool;
    this.#lockPool = lockPool;
  }

  async now(): Promise<number> {
    return (await one<{ now: number }>(this.#pool, `SELECT ${NOW_MS} AS now`, []))!.now;
  }

  async addCode(row: CodeRow): Promise<void> {
    await this.#pool.query(
      'INSERT INTO codes (hmac, vendor_id, kind, device_id, uses_left, expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
      [row.hmac, row.vendorId, row.kind, row.deviceId, row.usesLeft, row.expiresAt, row.createdAt],
    );
  }

  findCode(hmac: string): Promise<CodeRow | undefined> {
    return one(this.#pool, `SELECT ${CODE_COLUMNS} FROM codes WHERE hmac = $1`, [hmac]);
  }

  findKey(keyId: string): Promise<KeyRow | undefined> {
    return one(this.#pool, FIND_KEY, [keyId]);
  }

  findPreauth(keyId: string): Promise<PreauthRow | undefined> {
    return one(this.#pool, `SELECT ${PREAUTH_COLUMNS} FROM preauth WHERE key_id = $1`, [keyId]);
  }

  addPreauth(rows: readonly PreauthRow[]): Promise<{ added: number } | { conflict: string }> {
    return this.#transact(
      (c) => addPreauthIn(c, rows),
      (result) => 'added' in result,
    );
  }

  findDeviceByDeviceId(vendorId: string, deviceId: string): Promise<DeviceRow | undefined> {
    return one(this.#pool, deviceQuery('vendor_id = $1 AND device_id = $2'), [vendorId, deviceId]);
  }

  findDeviceByBotId(botId: string): Promise<DeviceRow | undefined> {
    return one(this.#pool, deviceQuery('bot_id = $1'), [botId]);
  }

  async isPreauthorized(vendorId: string, deviceId: string): Promise<boolean> {
    return (await one(this.#pool, 'SELECT 1 FROM preauth WHERE vendor_id = $1 AND device_id = $2', [vendorId, deviceId])) !== undefined;
  }

  async useNonce(keyId: string, nonce: string, keepUntil: number): Promise<boolean> {
    const r = await this.#pool.query('INSERT INTO nonces (key_id, nonce, keep_until) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [
      keyId,
      nonce,
      keepUntil,
    ]);
    return r.rowCount === 1;
  }

  async spendVerified(r: RequestSpend): Promise<VerifiedSpend> {
    const row = await one<Record<string, unknown>>(this.#pool, SPEND_VERIFIED, [
      r.keyId,
      r.nonce,
      r.keepUntil,
      r.bucket,
      r.windowStart,
      r.now,
      r.limit,
      r.publicKey,
    ]);
    const { spendCount, ...rest } = row ?? {};
    // The statement wrote only for a key that may spend: its count is null then only for a nonce seen before.
    return verifiedSpend(splitKeyWithToken(row && rest), r.publicKey, () =>
      spendCount === null ? { replayed: true } : { replayed: false, count: spendCount as number },
    );
  }

  enroll(commit: EnrollCommit): Promise<EnrollOutcome> {
    return this.#transact(
      (c) => enrollIn(c, commit),
      (outcome) => outcome === 'ok',
    );
  }

  rotate(oldKeyId: string, newKey: { keyId: string; publicKey: string }, now: number): Promise<RotateOutcome> {
    return this.#transact(
      (c) => rotateIn(c, oldKeyId, newKey, now),
      (outcome) => outcome === 'ok',
    );
  }

  revoke(botId: string, now: number): Promise<number> {
    return this.#transact(async (c) => {
      const revoked = await c.query(
        "UPDATE keys SET state = 'revoked', reason = 'revoked', revoked_at = $1 WHERE bot_id = $2 AND state = 'active'",
        [now, botId],
      );
      await c.query('DELETE FROM preauth WHERE (vendor_id, device_id) IN (SELECT vendor_id, device_id FROM keys WHERE bot_id = $1)', [
        botId,
      ]);
      await c.query('DELETE FROM tokens WHERE bot_id = $1', [botId]);
      return revoked.rowCount ?? 0;
    });
  }

  async listDevices(): Promise<DeviceListing[]> {
    return (await this.#pool.query(LIST_DEVICES)).rows as DeviceListing[];
  }

  async hit(bucket: string, windowStart: number): Promise<number> {
    const row = await one<{ count: number }>(
      this.#pool,
      'INSERT INTO rate_windows (bucket, window_start, count) VALUES ($1, $2, 1) ' +
        'ON CONFLICT (bucket, window_start) DO UPDATE SET count = rate_windows.count + 1 RETURNING count',
      [bucket, windowStart],
    );
    return row!.count;
  }

  readToken(botId: string): Promise<TokenRow | undefined> {
    return one(this.#pool, READ_TOKEN, [botId]);
  }

  async writeToken(row: TokenRow): Promise<void> {
    await this.#pool.query(
      'INSERT INTO tokens (bot_id, access_sealed, access_expires_at, access_lifetime_s, refresh_sealed, refresh_expires_at, updated_at) ' +
        'VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (bot_id) DO UPDATE SET access_sealed = excluded.access_sealed, ' +
        'access_expires_at = excluded.access_expires_at, access_lifetime_s = excluded.access_lifetime_s, ' +
        'refresh_sealed = excluded.refresh_sealed, refresh_expires_at = excluded.refresh_expires_at, updated_at = excluded.updated_at',
      [row.botId, row.accessSealed, row.accessExpiresAt, row.accessLifetimeS, row.refreshSealed, row.refreshExpiresAt, row.updatedAt],
    );
  }

  /**
   * pg_advisory_lock on a connection of the lock pool, held while fn runs: the server releases it when
   * the connection ends, so a replica killed while holding it frees the botId at once.
   */
  withBotLock<T>(botId: string, fn: () => Promise<T>): Promise<T> {
    return this.#local.run(botId, async () => {
      const key = lockKey(`bot:${botId}`);
      const held = await checkout(this.#lockPool);
      let healthy = false;
      try {
        await held.client.query('SELECT pg_advisory_lock($1)', [key]);
        try {
          return await fn();
        } finally {
          // A connection lost meanwhile took the lock with it; fn's own outcome stands.
          healthy = await held.client.query('SELECT pg_advisory_unlock($1)', [key]).then(
            () => true,
            () => false,
          );
        }
      } finally {
        held.done(healthy);
      }
    });
  }

  async sweep(windowsBefore: number): Promise<void> {
    await this.#pool.query(`DELETE FROM nonces WHERE keep_until < ${NOW_MS}`);
    await this.#pool.query('DELETE FROM rate_windows WHERE window_start < $1', [windowsBefore]);
  }

  /** Ends both pools once; a second close resolves with the first. */
  close(): Promise<void> {
    this.#closed ??= Promise.all([this.#pool.end(), this.#lockPool.end()]).then(() => undefined);
    return this.#closed;
  }

  /** One transaction on one connection, committed, or rolled back whole when `keep` refuses its result. */
  async #transact<T>(body: (c: PoolClient) => Promise<T>, keep: (value: T) => boolean = () => true): Promise<T> {
    const held = await checkout(this.#pool);
    let healthy = false;
    try {
      await held.client.query('BEGIN');
      let value: T;
      try {
        value = await body(held.client);
      } catch (err) {
        healthy = await held.client.query('ROLLBACK').then(
          () => true,
          () => false,
        );
        throw err;
      }
      await held.client.query(keep(value) ? 'COMMIT' : 'ROLLBACK');
      healthy = true;
      return value;
    } finally {
      held.done(healthy);
    }
  }
}
