import type Database from 'better-sqlite3';
import { realpathSync } from 'node:fs';
// The end of this event-loop turn, not a time: it is no Clock's to give, and a fake clock must never hold a commit back.
import { setImmediate } from 'node:timers';
import { BotlinkError } from '../protocol/errors.js';

export interface WriteOptions<T> {
  /** A decision that must outlive a power cut: its commit runs with synchronous=FULL. */
  durable?: boolean;
  /** The body's writes stand or fall together, apart from the rest of the turn's (a savepoint): one that throws undoes its own. */
  atomic?: boolean;
  /** Whether the body's writes stay: false undoes them alone, and the body's value is still returned. Implies atomic. */
  keep?: (value: T) => boolean;
}

export interface GroupCommitHooks {
  /** Runs after each BEGIN, under the write lock: the moment to read again what other connections committed. */
  onBegin?: () => void;
}

/** One transaction of a turn, and the promise its writes wait on. */
interface Batch {
  /** Begun with synchronous raised to FULL. */
  readonly durable: boolean;
  readonly committed: Promise<void>;
  resolve(): void;
  reject(err: unknown): void;
  /** Set once the transaction failed: every later write of the turn fails with it. */
  failure?: { error: unknown };
}

/** A write() waiting for the end of the turn. */
interface Queued {
  body(): unknown;
  options: WriteOptions<unknown> | undefined;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

/** The engine of each file holding an open transaction in this process: one writer per file at a time. */
const WRITERS = new Map<string, GroupCommit>();

const DONE = Promise.resolve();

/**
 * Group commit on one SQLite connection: the writes of one event-loop turn share one BEGIN IMMEDIATE
 * transaction, committed at the turn's end (setImmediate), so the pages and the WAL they touch are written,
 * and for a durable write synced, once for all of them. run() runs its body at once, for a caller that needs
 * the value now; write() runs it at the end of the turn, back to back with the turn's other write()s in the
 * order asked, and settles after the commit. A write that must stand or fall alone runs in a savepoint.
 * Nothing a write did may be answered before its commit. A failed BEGIN or COMMIT (a full disk, another
 * process holding the lock past the busy timeout) fails every write of the turn, and the changes registered
 * with onRollback are taken back. Bodies are synchronous and never call the engine themselves.
 */
export class GroupCommit {
  readonly #db: Database.Database;
  readonly #file: string | undefined;
  readonly #onBegin: (() => void) | undefined;
  /** The connection's own synchronous level, which a durable commit raises to FULL when it is lower. */
  readonly #level: number;
  readonly #raise: boolean;
  readonly #s: Record<'begin' | 'commit' | 'rollback' | 'savepoint' | 'release' | 'rollbackTo', Database.Statement>;
  #batch: Batch | undefined;
  #queued: Queued[] = [];
  #turnEnds = false;
  /** How to take back what the open transaction changed outside SQLite (indexes in memory), newest last. */
  #undo: (() => void)[] = [];

  constructor(db: Database.Database, hooks: GroupCommitHooks = {}) {
    this.#db = db;
    this.#file = db.memory ? undefined : realpathSync(db.name);
    this.#onBegin = hooks.onBegin;
    this.#level = db.pragma('synchronous', { simple: true }) as number;
    this.#raise = this.#level < 2;
    this.#s = {
      begin: db.prepare('BEGIN IMMEDIATE'),
      commit: db.prepare('COMMIT'),
      rollback: db.prepare('ROLLBACK'),
      savepoint: db.prepare('SAVEPOINT op'),
      release: db.prepare('RELEASE op'),
      rollbackTo: db.prepare('ROLLBACK TO op'),
    };
  }

  /** Runs body now, inside the turn's transaction, and returns its value; its writes commit at the end of the turn. */
  run<T>(body: () => T, options?: WriteOptions<T>): T {
    this.#enter(options?.durable === true && this.#raise);
    return options?.atomic || options?.keep ? this.#alone(body, options.keep) : this.#joined(body);
  }

  /**
   * Runs body at the end of the turn, in the turn's transaction, and settles once its writes are committed
   * (rejected if the body or the commit failed). Its reads and writes come after every run() of the turn.
   */
  write<T>(body: () => T, options?: WriteOptions<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#queued.push({
        body,
        options: options as WriteOptions<unknown> | undefined,
        resolve: resolve as (value: unknown) => void,
        reject,
      });
      this.#endTurnSoon();
    });
  }

  /** Whether a transaction of this turn is open (holding the write lock, its writes not yet committed). */
  get pending(): boolean {
    return this.#batch !== undefined && this.#batch.failure === undefined;
  }

  /** Resolves once everything run() wrote so far is committed; rejects if that commit failed. */
  committed(): Promise<void> {
    return this.#batch?.committed ?? DONE;
  }

  /** How to take back a change made outside SQLite beside the running write, should that write be rolled back. */
  onRollback(undo: () => void): void {
    this.#undo.push(undo);
  }

  /** Runs the waiting write()s and commits what is open, now (the end of a turn, or a close). */
  flush(): void {
    if (this.#queued.length > 0) this.#runQueued();
    const batch = this.#batch;
    if (batch && !batch.failure) this.#commit(batch);
    this.#batch = undefined;
  }

  /**
   * Back to back, not each as it was asked: SQLite's work of the turn stays in the CPU's caches (the broker's
   * cached answer took 3–4 % more CPU with each write run amid the request's own work).
   */
  #runQueued(): void {
    const queued = this.#queued;
    this.#queued = [];
    try {
      // Begun with FULL at once when any is durable, rather than split at the first durable one.
      if (queued.some((q) => q.options?.durable)) this.#enter(this.#raise);
    } catch {
      // The BEGIN failed: each write below fails with it.
    }
    for (const q of queued) {
      try {
        const value = this.run(q.body, q.options);
        this.committed().then(() => q.resolve(value), q.reject);
      } catch (err) {
        this.committed().then(() => q.reject(err), q.reject);
      }
    }
  }

  #enter(durable: boolean): void {
    const batch = this.#batch;
    if (batch?.failure) throw batch.failure.error;
    if (batch && (batch.durable || !durable)) return;
    if (batch) {
      // synchronous cannot change inside a transaction: what the turn wrote so far commits now, unsynced, the rest with FULL.
      this.#commit(batch);
      if (batch.failure) throw batch.failure.error;
    }
    this.#begin(durable);
  }

  #begin(durable: boolean): void {
    let resolve!: () => void;
    let reject!: (err: unknown) => void;
    const committed = new Promise<void>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    // A failed commit is reported to whoever awaits it; nobody awaiting is no error.
    committed.catch(() => undefined);
    const batch: Batch = { durable, committed, resolve, reject };
    this.#batch = batch;
    this.#endTurnSoon();
    try {
      this.#takeFile();
      // Never a prepared statement: SQLite sets synchronous when it compiles the PRAGMA, not when it runs it.
      if (durable) this.#db.pragma('synchronous = FULL');
      this.#s.begin.run();
      this.#onBegin?.();
    } catch (err) {
      this.#fail(batch, err);
      throw err;
    }
  }

  #endTurnSoon(): void {
    if (this.#turnEnds) return;
    this.#turnEnds = true;
    setImmediate(this.#endTurn);
  }

  readonly #endTurn = (): void => {
    try {
      this.flush();
    } finally {
      this.#turnEnds = false;
    }
  };

  /** Another engine of this process with a transaction open on the file commits it first: waiting for its lock would never end. */
  #takeFile(): void {
    if (this.#file === undefined) return;
    const holder = WRITERS.get(this.#file);
    if (holder !== undefined && holder !== this) holder.flush();
    WRITERS.set(this.#file, this);
  }

  #leaveFile(batch: Batch): void {
    if (this.#file !== undefined && WRITERS.get(this.#file) === this) WRITERS.delete(this.#file);
    if (batch.durable && this.#db.open) this.#db.pragma(`synchronous = ${this.#level}`);
  }

  #commit(batch: Batch): void {
    try {
      this.#s.commit.run();
    } catch (err) {
      this.#fail(batch, err);
      return;
    }
    this.#batch = undefined;
    this.#undo = [];
    this.#leaveFile(batch);
    batch.resolve();
  }

  /** The transaction is lost (a failed BEGIN or COMMIT, or SQLite ended it): none of its writes happened. */
  #fail(batch: Batch, err: unknown): void {
    batch.failure = { error: err };
    if (this.#db.inTransaction) this.#s.rollback.run();
    this.#leaveFile(batch);
    this.#undoTo(0);
    batch.reject(err);
  }

  /** A write without a savepoint: one statement, or writes each harmless alone should a later one throw. */
  #joined<T>(body: () => T): T {
    try {
      const value = body();
      // A failure the body caught may still have ended the transaction: what follows must not autocommit.
      if (!this.#db.inTransaction) throw ended();
      return value;
    } catch (err) {
      if (!this.#db.inTransaction) this.#fail(this.#batch!, err);
      throw err;
    }
  }

  /** A write in a savepoint: undone alone when it throws or `keep` says so. */
  #alone<T>(body: () => T, keep: ((value: T) => boolean) | undefined): T {
    const mark = this.#undo.length;
    this.#s.savepoint.run();
    try {
      const value = body();
      if (keep === undefined || keep(value)) this.#s.release.run();
      else this.#rollbackTo(mark);
      return value;
    } catch (err) {
      if (!this.#db.inTransaction) this.#fail(this.#batch!, err);
      else this.#rollbackTo(mark);
      throw err;
    }
  }

  #rollbackTo(mark: number): void {
    this.#s.rollbackTo.run();
    this.#s.release.run();
    this.#undoTo(mark);
  }

  #undoTo(mark: number): void {
    for (const undo of this.#undo.splice(mark).reverse()) undo();
  }
}

function ended(): BotlinkError {
  return new BotlinkError('ERR_INTERNAL', 'the group commit transaction ended inside a write: SQLite rolled it back', 'retry-backoff');
}
