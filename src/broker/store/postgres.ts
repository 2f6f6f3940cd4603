import { createHash } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import { messageOf } from '../../protocol/errors.js';
import { fusedStatement, type GatedChain } from './chain.js';
import type { Driver } from './driver.js';
import { BrokerStoreError, StoreUnavailable } from './errors.js';
import { KeyedChain } from './keyed-chain.js';
import { migratePostgres } from './postgres-schema.js';
import { type Body, type ChainResult, type Op, PLANNED_EACH_CALL, type Row, UniqueViolation } from './sql.js';
import { SqlStore } from './sql-store.js';
import type { BrokerStore } from './types.js';

export interface PostgresStoreOptions {
  /** Connections for queries and transactions (default 10). */
  poolSize?: number;
  /** Connections that hold bot locks, apart so a holder's own queries never wait behind waiters (default 10). */
  lockPoolSize?: number;
  /** The password, from storePasswordFile, so that the URL (in the config) holds none. */
  password?: string;
}

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
  const config = {
    connectionString: url,
    application_name: 'botlink-broker',
    connectionTimeoutMillis: 10_000,
    types,
    ...(opts.password !== undefined && { password: opts.password }),
  };
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
  return new SqlStore(new PostgresDriver(pool, lockPool));
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

type Q = Pick<PoolClient, 'query'>;

/** A 64-bit advisory lock key for `name` (single-key space; the schema lock uses the two-key one). */
function lockKey(name: string): string {
  return createHash('sha256').update(name).digest().readBigInt64BE(0).toString();
}

/** `n` advisory locks held to the transaction's end, in one statement. */
function lockStatement(n: number): string {
  return `SELECT ${Array.from({ length: n }, (_, i) => `pg_advisory_xact_lock($${i + 1})`).join(', ')}`;
}

const UNIQUE_VIOLATION = '23505';

/**
 * An error that says the server is not there for us now, as StoreUnavailable: the connection's own
 * (refused, reset, ended, timed out), or SQLSTATE classes 08 (connection), 53 (resources), 57 (operator
 * intervention: shutdown) and 55000 (a database not accepting connections). Anything else is a fault of ours.
 */
function unavailable(err: unknown): StoreUnavailable | undefined {
  if (err instanceof StoreUnavailable) return err;
  const { code, message } = err as { code?: unknown; message?: unknown };
  const said = typeof message === 'string' ? message : '';
  const down =
    typeof code === 'string'
      ? /^(08|53|57)/.test(code) || code === '55000' || /^E(CONNREFUSED|CONNRESET|PIPE|TIMEDOUT|HOSTUNREACH|NETUNREACH)$/.test(code)
      : /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error/.test(said);
  return down ? new StoreUnavailable(`the PostgreSQL store does not answer (${said || String(code)})`, { cause: err }) : undefined;
}

/** `work`, its failure told as StoreUnavailable when the server is not there. */
async function answering<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (err) {
    throw unavailable(err) ?? err;
  }
}

class PostgresDriver implements Driver {
  readonly kind = 'postgres';
  readonly #pool: Pool;
  readonly #lockPool: Pool;
  /** One waiter per botId per replica: the lock pool holds one connection per botId, not one per request. */
  readonly #local = new KeyedChain();
  /** Every statement under a name: PostgreSQL parses and plans it once per connection, not at every call. */
  readonly #names = new Map<string, string>();
  /** Each chain's fused statement, written once: its text is the key its prepared name is found by. */
  readonly #fused = new WeakMap<GatedChain, string>();
  #closed: Promise<void> | undefined;

  constructor(pool: Pool, lockPool: Pool) {
    this.#pool = pool;
    this.#lockPool = lockPool;
  }

  /** Each statement on whichever pooled connection is free: no transaction of its own. */
  run<T>(body: Body<T>): Promise<T> {
    return answering(this.#drive(body, this.#pool));
  }

  batch<T>(body: Body<T>): Promise<T> {
    return answering(
      this.#transact(
        (c) => this.#drive(body, c),
        () => true,
      ),
    );
  }

  decide<T>(body: Body<T>, keep: (value: T) => boolean): Promise<T> {
    return answering(this.#transact((c) => this.#drive(body, c), keep));
  }

  /**
   * pg_advisory_lock on a connection of the lock pool, held while fn runs: the server releases it when
   * the connection ends, so a replica killed while holding it frees the botId at once.
   */
  withBotLock<T>(botId: string, fn: () => Promise<T>): Promise<T> {
    return this.#local.run(botId, async () => {
      const key = lockKey(`bot:${botId}`);
      const held = await answering(checkout(this.#lockPool));
      let healthy = false;
      try {
        await answering(held.client.query('SELECT pg_advisory_lock($1)', [key]));
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

  /** Ends both pools once; a second close resolves with the first. */
  close(): Promise<void> {
    this.#closed ??= Promise.all([this.#pool.end(), this.#lockPool.end()]).then(() => undefined);
    return this.#closed;
  }

  async #drive<T>(body: Body<T>, q: Q): Promise<T> {
    let next = body.next();
    while (!next.done) {
      let value: unknown;
      let failure: { error: unknown } | undefined;
      try {
        value = await this.#do(next.value, q);
      } catch (err) {
        const e = err as { code?: string; constraint?: string };
        failure = { error: e.code === UNIQUE_VIOLATION ? new UniqueViolation(e.constraint ?? 'unknown', { cause: err }) : err };
      }
      next = failure === undefined ? body.next(value) : body.throw(failure.error);
    }
    return next.value;
  }

  async #do(op: Op, q: Q): Promise<unknown> {
    switch (op.kind) {
      case 'get':
        return (await this.#query(q, op.sql, op.params)).rows[0];
      case 'all':
        return (await this.#query(q, op.sql, op.params)).rows;
      case 'run':
        return (await this.#query(q, op.sql, op.params)).rowCount ?? 0;
      case 'lock':
        // A select list is evaluated left to right: the locks are taken in the order named.
        return void (await this.#query(q, lockStatement(op.names.length), op.names.map(lockKey)));
      case 'now':
        return ((await q.query(`SELECT ${NOW_MS} AS now`)).rows[0] as { now: number }).now;
      case 'chain':
        return this.#chain(op.chain, op.params, q);
    }
  }

  /** The chain as one statement (chain.ts): one round trip, one snapshot. */
  async #chain(c: GatedChain, params: readonly unknown[], q: Q): Promise<ChainResult> {
    let text = this.#fused.get(c);
    if (text === undefined) {
      text = fusedStatement(c);
      this.#fused.set(c, text);
    }
    const row = (await this.#query(q, text, params, c.name)).rows[0] as Row;
    const out: Record<string, unknown> = {};
    const read: Row = {};
    for (const [column, value] of Object.entries(row)) {
      if (c.outputs.includes(column)) out[column] = value;
      else read[column] = value;
    }
    return { read: c.read === undefined ? undefined : read, out };
  }

  #query(q: Q, text: string, values: readonly unknown[], name?: string): Promise<{ rows: unknown[]; rowCount: number | null }> {
    if (text.startsWith(PLANNED_EACH_CALL)) return q.query({ text, values: [...values] });
    let named = this.#names.get(text);
    if (named === undefined) {
      named = name ?? `broker-${createHash('sha256').update(text).digest('hex').slice(0, 16)}`;
      this.#names.set(text, named);
    }
    return q.query({ name: named, text, values: [...values] });
  }

  /** One transaction on one connection, committed, or rolled back whole when `keep` refuses its result. */
  async #transact<T>(body: (c: PoolClient) => Promise<T>, keep: (value: T) => boolean): Promise<T> {
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
