// src/sqlite/group-commit.ts on real WAL files, and the SQLite behaviour it is built on, checked rather than assumed.
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { GroupCommit, type GroupCommitHooks } from '../../../src/sqlite/group-commit.js';
import { openSqlite } from '../../../src/sqlite/open.js';
import { useHarness } from '../../helpers/harness.js';

const { tempDir, cleanups } = useHarness();

function connect(file: string, busyTimeoutMs = 1000): Database.Database {
  const db = openSqlite(file, { busyTimeoutMs, journalMode: 'WAL', synchronous: 'NORMAL' });
  cleanups.push(() => db.close());
  return db;
}

/** A WAL file with a table, an engine on it, and a second connection that sees only what is committed. */
function rig(hooks?: GroupCommitHooks) {
  const file = join(tempDir('botlink-group-commit-'), 'x.db');
  const db = connect(file);
  db.exec(`CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER);
           CREATE TABLE child (parent TEXT REFERENCES t (k) DEFERRABLE INITIALLY DEFERRED)`);
  const engine = new GroupCommit(db, hooks);
  const reader = connect(file);
  const insert = db.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
  return {
    file,
    db,
    engine,
    put: (k: string, v = 0) => insert.run(k, v),
    /** The keys another connection sees: what is committed. */
    committed: (): string[] => reader.prepare('SELECT k FROM t ORDER BY k').pluck().all() as string[],
  };
}

const level = (db: Database.Database): unknown => db.pragma('synchronous', { simple: true });
/** After the engine's end of this turn: settled promises alone do not end a turn. */
const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('the SQLite the engine is built on', () => {
  it('PRAGMA synchronous cannot change inside a transaction; set before BEGIN, it is the one that transaction runs with', () => {
    const { db } = rig();
    db.exec('BEGIN IMMEDIATE');
    expect(() => db.pragma('synchronous = FULL')).toThrow('Safety level may not be changed inside a transaction');
    expect(level(db)).toBe(1);
    db.exec('COMMIT');
    db.pragma('synchronous = FULL');
    db.exec('BEGIN IMMEDIATE');
    expect(level(db)).toBe(2);
    db.exec('COMMIT');
  });

  it('a PRAGMA synchronous takes effect when it is compiled: a prepared one run later changes nothing', () => {
    const { db } = rig();
    const full = db.prepare('PRAGMA synchronous = FULL');
    expect(level(db)).toBe(2);
    db.pragma('synchronous = NORMAL');
    full.run();
    expect(level(db)).toBe(1);
  });

  it('data_version changes for a connection when another one commits, never for its own commits', () => {
    const { db, file } = rig();
    const other = connect(file);
    const version = (c: Database.Database): unknown => c.pragma('data_version', { simple: true });
    const before = version(db);
    db.exec("INSERT INTO t VALUES ('own', 1)");
    expect(version(db)).toBe(before);
    other.exec("INSERT INTO t VALUES ('other', 1)");
    expect(version(db)).not.toBe(before);
  });

  it('a COMMIT that fails (a deferred constraint) leaves the transaction open: the engine must roll it back', () => {
    const { db } = rig();
    db.exec("BEGIN IMMEDIATE; INSERT INTO child VALUES ('nobody')");
    expect(() => db.exec('COMMIT')).toThrow(expect.objectContaining({ code: 'SQLITE_CONSTRAINT_FOREIGNKEY' }));
    expect(db.inTransaction).toBe(true);
    db.exec('ROLLBACK');
  });
});

describe('GroupCommit', () => {
  it('runs each write at once, in order, in one transaction per turn that another connection sees whole at its end', async () => {
    let begun = 0;
    const r = rig({ onBegin: () => void begun++ });
    expect(r.engine.run(() => r.put('a').changes)).toBe(1);
    expect(r.engine.run(() => r.db.prepare('SELECT count(*) FROM t').pluck().get())).toBe(1);
    const written = r.engine.write(() => r.put('b').changes, { durable: false });
    const turn = r.engine.committed();
    expect([r.committed(), begun, r.db.inTransaction, r.engine.pending]).toEqual([[], 1, true, true]);
    expect(await written).toBe(1);
    await turn;
    expect([r.committed(), begun, r.db.inTransaction, r.engine.pending]).toEqual([['a', 'b'], 1, false, false]);
    r.engine.run(() => r.put('c'));
    await r.engine.committed();
    expect([r.committed(), begun]).toEqual([['a', 'b', 'c'], 2]);
  });

  it('write() runs its body at the end of the turn, back to back with the others, after the turn’s run()s', async () => {
    const r = rig();
    const order: string[] = [];
    const count = r.db.prepare('SELECT count(*) FROM t').pluck();
    const first = r.engine.write(() => {
      order.push('write 1');
      return count.get();
    });
    r.engine.run(() => {
      order.push('run');
      r.put('a');
    });
    const second = r.engine.write(() => order.push('write 2'), { durable: false });
    expect(order).toEqual(['run']);
    expect(await first).toBe(1);
    await second;
    expect([order, r.committed()]).toEqual([['run', 'write 1', 'write 2'], ['a']]);
  });

  it('onBegin runs under the write lock, after BEGIN', () => {
    let inside: boolean | undefined;
    const r = rig({
      onBegin: () => {
        inside = r.db.inTransaction;
      },
    });
    r.engine.run(() => r.put('a'));
    expect(inside).toBe(true);
  });

  it('an atomic write that throws is undone alone, with what it registered in onRollback; the turn commits the rest', async () => {
    const r = rig();
    const memory = new Set<string>();
    const remember = (k: string): void => {
      r.put(k);
      memory.add(k);
      r.engine.onRollback(() => memory.delete(k));
    };
    r.engine.run(() => remember('kept'), { atomic: true });
    expect(() =>
      r.engine.run(
        () => {
          remember('undone-1');
          remember('undone-2');
          throw new Error('refused');
        },
        { atomic: true },
      ),
    ).toThrow('refused');
    // Without a savepoint, what a write did before it threw stays.
    expect(() =>
      r.engine.run(() => {
        r.put('joined');
        r.put('kept');
      }),
    ).toThrow(expect.objectContaining({ code: 'SQLITE_CONSTRAINT_PRIMARYKEY' }));
    await r.engine.committed();
    expect([r.committed(), [...memory]]).toEqual([['joined', 'kept'], ['kept']]);
  });

  it('keep: false undoes the write alone and still hands back its value; a body that throws rejects alone', async () => {
    const r = rig();
    const results = await Promise.allSettled([
      r.engine.write(() => r.put('first').changes, { durable: false }),
      r.engine.write(
        () => {
          r.put('refused');
          return 'no';
        },
        { durable: false, keep: (v) => v === 'yes' },
      ),
      r.engine.write(() => r.put('first'), { durable: false }),
      r.engine.write(
        () => {
          r.put('kept');
          return 'yes';
        },
        { durable: false, keep: (v) => v === 'yes' },
      ),
    ]);
    expect(results.map((x) => (x.status === 'fulfilled' ? x.value : (x.reason as { code: string }).code))).toEqual([
      1,
      'no',
      'SQLITE_CONSTRAINT_PRIMARYKEY',
      'yes',
    ]);
    expect(r.committed()).toEqual(['first', 'kept']);
  });

  it('a durable write commits with synchronous=FULL; the connection is back at its own level after', async () => {
    const r = rig();
    const seen: unknown[] = [];
    await Promise.all([
      r.engine.write(() => seen.push(level(r.db)), { durable: true }),
      r.engine.write(() => seen.push(level(r.db)), { durable: false }),
    ]);
    expect([seen, level(r.db)]).toEqual([[2, 2], 1]);
    await r.engine.write(() => seen.push(level(r.db)), { durable: false });
    expect(seen[2]).toBe(1);
  });

  it('write()s of a turn begin it FULL when any is durable; a durable run() after others splits the turn', async () => {
    const r = rig();
    const seen: unknown[] = [];
    const saw = (): number => seen.push(level(r.db));
    await Promise.all([r.engine.write(saw, { durable: false }), r.engine.write(saw, { durable: true })]);
    expect(seen.splice(0)).toEqual([2, 2]);
    r.engine.run(() => {
      r.put('a');
      saw();
    });
    r.engine.run(
      () => {
        r.put('b');
        saw();
      },
      { durable: true },
    );
    // What came before the durable write is committed already, unsynced.
    expect(r.committed()).toEqual(['a']);
    const after = r.engine.write(() => {
      r.put('c');
      saw();
    });
    await after;
    expect([seen, r.committed(), level(r.db)]).toEqual([[1, 2, 2], ['a', 'b', 'c'], 1]);
  });

  it('a failed COMMIT fails every write of the turn, stores none, and takes back every onRollback, newest first', async () => {
    const r = rig();
    const undone: string[] = [];
    const writes = [
      r.engine.write(() => r.db.prepare("INSERT INTO child VALUES ('nobody')").run(), { durable: true }),
      r.engine.write(
        () => {
          r.put('a');
          return r.engine.onRollback(() => undone.push('a'));
        },
        { durable: false },
      ),
      r.engine.write(
        () => {
          r.put('b');
          return r.engine.onRollback(() => undone.push('b'));
        },
        { durable: false, keep: () => true },
      ),
    ];
    const results = await Promise.allSettled(writes);
    expect(results.map((x) => x.status === 'rejected' && (x.reason as { code: string }).code)).toEqual(
      Array(3).fill('SQLITE_CONSTRAINT_FOREIGNKEY'),
    );
    await expect(r.engine.committed()).resolves.toBeUndefined();
    expect([r.committed(), undone, r.db.inTransaction, level(r.db)]).toEqual([[], ['b', 'a'], false, 1]);
    await r.engine.write(() => r.put('next'), { durable: false });
    expect(r.committed()).toEqual(['next']);
  });

  it('a failed BEGIN (another process holds the lock past the busy timeout) fails the whole turn with that one error', async () => {
    const r = rig();
    r.db.pragma('busy_timeout = 0');
    const holder = connect(r.file);
    holder.exec('BEGIN IMMEDIATE');
    let error: unknown;
    try {
      r.engine.run(() => r.put('a'));
    } catch (err) {
      error = err;
    }
    expect([error, r.engine.pending]).toMatchObject([{ code: 'SQLITE_BUSY' }, false]);
    holder.exec('ROLLBACK');
    // The lock is free now, yet this turn's writes fail as its first did, without a second BEGIN.
    const late = r.engine.write(() => r.put('b'), { durable: false });
    expect(() => r.engine.run(() => r.put('c'))).toThrow(error as Error);
    await expect(late).rejects.toBe(error);
    await nextTurn();
    await r.engine.write(() => r.put('d'), { durable: false });
    expect(r.committed()).toEqual(['d']);
  });

  it('a transaction SQLite ended inside a write fails that write and the rest of the turn; nothing autocommits', async () => {
    const r = rig();
    const undone: string[] = [];
    const earlier = r.engine.write(
      () => {
        r.put('a');
        return r.engine.onRollback(() => undone.push('a'));
      },
      { durable: false },
    );
    const ending = r.engine.write(
      () => {
        // What a caught SQLITE_FULL can do: the whole transaction is rolled back under the body.
        r.db.exec('ROLLBACK');
        r.put('b');
      },
      { durable: false },
    );
    const later = r.engine.write(() => r.put('c'), { durable: false });
    const results = await Promise.allSettled([earlier, ending, later]);
    expect(results.map((x) => x.status === 'rejected' && (x.reason as { code: string }).code)).toEqual(Array(3).fill('ERR_INTERNAL'));
    // 'b' was written in autocommit after the rollback (the body's own doing), and is all the file holds.
    expect([r.committed(), undone, r.db.inTransaction]).toEqual([['b'], ['a'], false]);
    await nextTurn();
    await r.engine.write(() => r.put('d'), { durable: false });
    expect(r.committed()).toEqual(['b', 'd']);
  });

  it('two engines on one file in this process write in one turn without waiting for each other’s lock', async () => {
    const r = rig();
    const db2 = connect(r.file, 0);
    r.db.pragma('busy_timeout = 0');
    const other = new GroupCommit(db2);
    const put2 = db2.prepare('INSERT INTO t (k, v) VALUES (?, 0)');
    for (const [i, k] of ['a', 'b', 'c', 'd'].entries()) {
      if (i % 2) other.run(() => put2.run(k), { durable: true });
      else r.engine.run(() => r.put(k));
    }
    await Promise.all([r.engine.committed(), other.committed()]);
    expect(r.committed()).toEqual(['a', 'b', 'c', 'd']);
  });

  it('flush() commits at once (a close), settling the writes', async () => {
    const r = rig();
    const written = r.engine.write(() => r.put('a').changes, { durable: true });
    r.engine.flush();
    expect([r.committed(), level(r.db)]).toEqual([['a'], 1]);
    r.db.close();
    expect(await written).toBe(1);
  });
});
