import type Database from 'better-sqlite3';
import { realpathSync } from 'node:fs';
import type { Clock } from '../../clock.js';
import { SqliteError } from '../../native.js';
import { GroupCommit } from '../../sqlite/group-commit.js';
import type { GatedChain } from './chain.js';
import type { Driver } from './driver.js';
import { KeyedChain } from './keyed-chain.js';
import type { Body, ChainResult, Op, Row } from './sql.js';
import { UniqueViolation } from './sql.js';
import { StoreUnavailable } from './errors.js';
import { SqlStore } from './sql-store.js';
import { openSqliteDatabase } from './sqlite-schema.js';
import type { BrokerStore } from './types.js';

/**
 * The broker's store on one host: a SQLite file that one broker process owns. Writes are group-committed
 * (src/sqlite/group-commit.ts): each turn's in one BEGIN IMMEDIATE transaction, so operator commands (`broker code`,
 * `broker revoke`…) that open the same file from other processes are serialised with the broker by
 * SQLite's write lock; withBotLock holds only in this process, which is why a second broker on the same
 * file is not supported (run PostgreSQL).
 */
export function openSqliteStore(path: string, clock: Pick<Clock, 'wallNow'>): BrokerStore {
  const db = openSqliteDatabase(path);
  const file = realpathSync(path);
  let locks = LOCKS.get(file);
  if (!locks) {
    locks = new KeyedChain();
    LOCKS.set(file, locks);
  }
  return new SqlStore(new SqliteDriver(db, clock, locks));
}

/** The bot locks of each file this process opened: every store on one file shares them. */
const LOCKS = new Map<string, KeyedChain>();

/** SQLite names a broken unique index by its columns; the rules know it by the schema's index names. */
const UNIQUE_INDEXES: Readonly<Record<string, string>> = {
  'keys.key_id': 'keys_pkey',
  'keys.bot_id': 'keys_active_bot',
  'keys.vendor_id, keys.device_id': 'keys_active_device',
  'preauth.key_id': 'preauth_pkey',
  'preauth.vendor_id, preauth.device_id': 'preauth_vendor_id_device_id_key',
};

/** A statement compiled once: `$n` and `{step.column}` became `?`, bound in this order. */
interface Compiled {
  statement: Database.Statement;
  order: readonly (number | string)[];
}

class SqliteDriver implements Driver {
  readonly kind = 'sqlite';
  readonly #db: Database.Database;
  readonly #clock: Pick<Clock, 'wallNow'>;
  readonly #locks: KeyedChain;
  readonly #batch: GroupCommit;
  readonly #compiled = new Map<string, Compiled>();

  constructor(db: Database.Database, clock: Pick<Clock, 'wallNow'>, locks: KeyedChain) {
    this.#db = db;
    this.#clock = clock;
    this.#locks = locks;
    this.#batch = new GroupCommit(db);
  }

  /** Reads run at once; writes join the turn's group commit, unsynced. */
  run<T>(body: Body<T>, mode: 'read' | 'write'): Promise<T> {
    if (mode === 'read') return answering(new Promise<T>((resolve) => resolve(this.#drive(body))));
    return answering(this.#batch.write(() => this.#drive(body), { durable: false }));
  }

  /** In the turn's transaction, in a savepoint of its own (all or nothing), unsynced. */
  batch<T>(body: Body<T>): Promise<T> {
    return answering(this.#batch.write(() => this.#drive(body), { durable: false, atomic: true }));
  }

  /** In the turn's transaction, its own writes undone unless kept, committed with synchronous=FULL. */
  decide<T>(body: Body<T>, keep: (value: T) => boolean): Promise<T> {
    return answering(this.#batch.write(() => this.#drive(body), { durable: true, keep }));
  }

  withBotLock<T>(botId: string, fn: () => Promise<T>): Promise<T> {
    return this.#locks.run(botId, fn);
  }

  async close(): Promise<void> {
    // What this turn wrote is committed first; better-sqlite3's close is idempotent: a second close does nothing.
    if (this.#db.open) this.#batch.flush();
    this.#db.close();
  }

  /** Carries out the rule's ops one by one, synchronously: SQLite has one writer, this process. */
  #drive<T>(body: Body<T>): T {
    let next = body.next();
    while (!next.done) {
      let value: unknown;
      let failure: { error: unknown } | undefined;
      try {
        value = this.#do(next.value);
      } catch (err) {
        failure = { error: uniqueViolation(err) ?? err };
      }
      next = failure === undefined ? body.next(value) : body.throw(failure.error);
    }
    return next.value;
  }

  #do(op: Op): unknown {
    switch (op.kind) {
      case 'get':
        return this.#get(op.sql, op.params, {});
      case 'all': {
        const { statement, values } = this.#bound(op.sql, op.params, {});
        return statement.all(...values);
      }
      case 'run': {
        const { statement, values } = this.#bound(op.sql, op.params, {});
        return statement.run(...values).changes;
      }
      // BEGIN IMMEDIATE already makes every write transaction wait for the one before.
      case 'lock':
        return undefined;
      case 'now':
        return this.#clock.wallNow();
      case 'chain':
        return this.#chain(op.chain, op.params);
    }
  }

  /** The read first, as it is before any step writes; then each step, given what the ones before returned. */
  #chain(c: GatedChain, params: readonly unknown[]): ChainResult {
    const read = c.read === undefined ? undefined : this.#get(c.read, params, {});
    const out: Record<string, unknown> = {};
    for (const step of c.steps) {
      const row = this.#get(step.sql, params, out);
      for (const [column, value] of Object.entries(row ?? {})) out[`${step.name}.${column}`] = value;
    }
    return { read, out };
  }

  #get(sql: string, params: readonly unknown[], out: Readonly<Record<string, unknown>>): Row | undefined {
    const { statement, values } = this.#bound(sql, params, out);
    return statement.get(...values) as Row | undefined;
  }

  /** The statement of `sql`, compiled once, and the values to run it with. */
  #bound(
    sql: string,
    params: readonly unknown[],
    out: Readonly<Record<string, unknown>>,
  ): { statement: Database.Statement; values: unknown[] } {
    let compiled = this.#compiled.get(sql);
    if (!compiled) {
      const order: (number | string)[] = [];
      // SQLite has no row locks (its one writer orders every transaction): a FOR SHARE clause goes.
      const text = sql
        .replace(/ FOR SHARE\b/g, '')
        .replace(/\$(\d+)|\{([a-z_]+\.[a-z_]+)\}/g, (_, n: string | undefined, marker: string | undefined) => {
          order.push(n === undefined ? (marker as string) : Number(n) - 1);
          return '?';
        });
      compiled = { statement: this.#db.prepare(text), order };
      this.#compiled.set(sql, compiled);
    }
    const values = compiled.order.map((o) => (typeof o === 'number' ? params[o] : (out[o] ?? null)));
    return { statement: compiled.statement, values };
  }
}

function uniqueViolation(err: unknown): UniqueViolation | undefined {
  if (!(err instanceof SqliteError) || !/^SQLITE_CONSTRAINT_(UNIQUE|PRIMARYKEY)$/.test(err.code)) return undefined;
  const columns = err.message.replace(/^UNIQUE constraint failed: /, '');
  return new UniqueViolation(UNIQUE_INDEXES[columns] ?? columns, { cause: err });
}

/** SQLite's answers that say the file cannot be used now (busy, locked, full, an I/O error, read-only), as StoreUnavailable. */
async function answering<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (err) {
    if (err instanceof SqliteError && /^SQLITE_(BUSY|LOCKED|FULL|IOERR|CANTOPEN|READONLY)/.test(err.code)) {
      throw new StoreUnavailable(`the SQLite store cannot be used now (${err.code})`, { cause: err });
    }
    throw err;
  }
}
