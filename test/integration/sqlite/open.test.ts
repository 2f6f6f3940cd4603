// src/sqlite/open.ts on real files: the folder and file modes, their owner under root, and the caller's settings.
import { chmodSync, chownSync, existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../../src/native.js';
import { openSqlite, type SqliteOpenOptions } from '../../../src/sqlite/open.js';
import { useHarness } from '../../helpers/harness.js';

const { tempDir, cleanups } = useHarness();

function open(path: string, options: SqliteOpenOptions = { busyTimeoutMs: 1000, journalMode: 'WAL' }): Database.Database {
  const db = openSqlite(path, options);
  cleanups.push(() => db.close());
  return db;
}

/** A write, so that WAL's side files exist. */
function write(db: Database.Database): void {
  db.exec('CREATE TABLE IF NOT EXISTS t (v TEXT); INSERT INTO t VALUES (1)');
}

const mode = (path: string): number => statSync(path).mode & 0o777;

describe('openSqlite', () => {
  it('makes the folders with their mode and the file 0600 before SQLite, even under umask 0; the WAL files take its mode', () => {
    const dir = join(tempDir('botlink-sqlite-open-'), 'a', 'b');
    const file = join(dir, 'x.db');
    const umask = process.umask(0);
    try {
      write(open(file, { folderMode: 0o700, busyTimeoutMs: 1000, journalMode: 'WAL' }));
    } finally {
      process.umask(umask);
    }
    expect([mode(join(dir, '..')), mode(dir)]).toEqual([0o700, 0o700]);
    expect(readdirSync(dir).sort()).toEqual(['x.db', 'x.db-shm', 'x.db-wal']);
    for (const f of readdirSync(dir)) expect(mode(join(dir, f)).toString(8), f).toBe('600');
  });

  it('without folderMode the folder must exist: nothing is made', () => {
    const dir = join(tempDir('botlink-sqlite-open-'), 'missing');
    expect(() => open(join(dir, 'x.db'))).toThrow(expect.objectContaining({ code: 'ENOENT' }));
    expect(existsSync(dir)).toBe(false);
  });

  it("takes the group and other bits off an existing file and its side files, and keeps the owner's", () => {
    const file = join(tempDir('botlink-sqlite-open-'), 'x.db');
    // An older release's file, its WAL files kept by a connection still open.
    const older = openDatabase(file);
    cleanups.push(() => older.close());
    older.pragma('journal_mode = WAL');
    write(older);
    chmodSync(file, 0o744);
    chmodSync(`${file}-wal`, 0o664);
    chmodSync(`${file}-shm`, 0o604);
    write(open(file));
    expect([file, `${file}-wal`, `${file}-shm`].map((f) => mode(f).toString(8))).toEqual(['700', '600', '600']);
  });

  it('read-only: makes no folder and no file, and changes neither the mode nor the journal of one that exists', () => {
    const dir = tempDir('botlink-sqlite-open-');
    const file = join(dir, 'x.db');
    expect(() => open(join(dir, 'new', 'x.db'), { readOnly: true, folderMode: 0o700, busyTimeoutMs: 1000 })).toThrow(
      /directory does not exist/,
    );
    expect(() => open(file, { readOnly: true, busyTimeoutMs: 1000 })).toThrow(expect.objectContaining({ code: 'SQLITE_CANTOPEN' }));
    expect(readdirSync(dir)).toEqual([]);
    const writer = openDatabase(file);
    write(writer);
    writer.close();
    chmodSync(file, 0o644);
    const db = open(file, { readOnly: true, busyTimeoutMs: 1000 });
    expect(db.prepare('SELECT count(*) FROM t').pluck().get()).toBe(1);
    expect(() => write(db)).toThrow(expect.objectContaining({ code: 'SQLITE_READONLY' }));
    expect([mode(file), db.pragma('journal_mode', { simple: true })]).toEqual([0o644, 'delete']);
  });

  it("sets the caller's busy timeout, journal, synchronous and further pragmas; :memory: touches no disk", () => {
    const file = join(tempDir('botlink-sqlite-open-'), 'x.db');
    const db = open(file, { busyTimeoutMs: 1234, journalMode: 'WAL', synchronous: 'NORMAL', pragmas: ['wal_autocheckpoint = 0'] });
    const read = (name: string): unknown => db.pragma(name, { simple: true });
    expect([read('busy_timeout'), read('journal_mode'), read('synchronous'), read('wal_autocheckpoint')]).toEqual([1234, 'wal', 1, 0]);
    const other = open(file, { busyTimeoutMs: 0, synchronous: 'FULL' });
    expect([other.pragma('journal_mode', { simple: true }), other.pragma('synchronous', { simple: true })]).toEqual(['wal', 2]);
    const memory = open(':memory:', { busyTimeoutMs: 10, journalMode: 'WAL' });
    write(memory);
    expect(existsSync(':memory:')).toBe(false);
  });

  it('run as root for another user, makes the folders, the file and its WAL files that folder owner’s', () => {
    if (process.geteuid?.() !== 0) throw new Error('this test checks what a root-run command creates: run it as root');
    const top = tempDir('botlink-sqlite-open-');
    chownSync(top, 4242, 4343);
    const dir = join(top, 'state', 'nested');
    const file = join(dir, 'x.db');
    write(open(file, { folderMode: 0o700, busyTimeoutMs: 1000, journalMode: 'WAL' }));
    const made = [join(top, 'state'), dir, file, `${file}-wal`, `${file}-shm`];
    for (const path of made) expect(statSync(path), path).toMatchObject({ uid: 4242, gid: 4343 });
  });
});
