import type Database from 'better-sqlite3';
// The end of this event-loop turn, not a time: it is no Clock's to give, and a manual clock must never hold a commit back.
import { setImmediate } from 'node:timers';

/** One write waiting for the end of the turn. */
interface Op {
  body(): unknown;
  /** Absent: one statement, atomic by itself. Present: the body's writes stay only when it says so (a savepoint). */
  keep: ((value: unknown) => boolean) | undefined;
  durable: boolean;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

export interface WriteOptions<T> {
  /** A decision that must outlive a power cut: the turn's commit runs with synchronous=FULL. */
  durable: boolean;
  /** For a body of several statements: whether its writes stay (false undoes them alone, the others' stand). */
  keep?: (value: T) => boolean;
}

/**
 * Group commit for the broker's SQLite store: the writes of one event-loop turn run, in the order they
 * were asked for, in one BEGIN IMMEDIATE transaction at the end of the turn, and one COMMIT makes them
 * durable together — with synchronous=FULL when any is a decision (a code spent, a key bound or
 * revoked), else NORMAL. Under load a turn holds many requests' nonces and counters, so the WAL is written
 * and, for decisions, synced once for all of them instead of once each. Each write's promise settles
 * after that commit: nothing is answered before it is stored.
 */
export class TurnBatch {
  readonly #db: Database.Database;
  readonly #s: Record<'begin' | 'commit' | 'rollback' | 'savepoint' | 'release' | 'rollbackTo', Database.Statement>;
  #ops: Op[] = [];

  constructor(db: Database.Database) {
    this.#db = db;
    this.#s = {
      begin: db.prepare('BEGIN IMMEDIATE'),
      commit: db.prepare('COMMIT'),
      rollback: db.prepare('ROLLBACK'),
      savepoint: db.prepare('SAVEPOINT op'),
      release: db.prepare('RELEASE op'),
      rollbackTo: db.prepare('ROLLBACK TO op'),
    };
  }

  write<T>(body: () => T, opts: WriteOptions<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.#ops.length === 0) setImmediate(() => this.flush());
      this.#ops.push({
        body,
        keep: opts.keep as ((value: unknown) => boolean) | undefined,
        durable: opts.durable,
        resolve: resolve as (value: unknown) => void,
        reject,
      });
    });
  }

  /** Runs and commits what is queued now (the end of a turn, or a close). */
  flush(): void {
    const ops = this.#ops;
    this.#ops = [];
    if (ops.length === 0) return;
    const durable = ops.some((op) => op.durable);
    const outcomes: { ok: boolean; value: unknown }[] = [];
    let settled = false;
    try {
      if (durable) this.#db.pragma('synchronous = FULL');
      this.#s.begin.run();
      for (const op of ops) outcomes.push(this.#run(op));
      this.#s.commit.run();
      settled = true;
    } catch (err) {
      // The transaction is lost (a failed BEGIN or COMMIT, a full disk): none of its writes happened.
      if (this.#db.inTransaction) this.#s.rollback.run();
      for (const op of ops) op.reject(err);
    } finally {
      if (durable && this.#db.open) this.#db.pragma('synchronous = NORMAL');
    }
    if (!settled) return;
    ops.forEach((op, i) => {
      const outcome = outcomes[i]!;
      if (outcome.ok) op.resolve(outcome.value);
      else op.reject(outcome.value);
    });
  }

  /** One op inside the turn's transaction; its own failure is its own, unless SQLite ended the transaction. */
  #run(op: Op): { ok: boolean; value: unknown } {
    if (op.keep === undefined) {
      try {
        const value = op.body();
        // A failure the body caught may still have ended the transaction: what follows must not autocommit.
        if (!this.#db.inTransaction) throw new Error('the batch transaction ended inside a write');
        return { ok: true, value };
      } catch (err) {
        if (!this.#db.inTransaction) throw err;
        return { ok: false, value: err };
      }
    }
    this.#s.savepoint.run();
    try {
      const value = op.body();
      if (!op.keep(value)) this.#s.rollbackTo.run();
      this.#s.release.run();
      return { ok: true, value };
    } catch (err) {
      if (!this.#db.inTransaction) throw err;
      this.#s.rollbackTo.run();
      this.#s.release.run();
      return { ok: false, value: err };
    }
  }
}
