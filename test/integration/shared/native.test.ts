import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase, SqliteError, sqliteAddon } from '../../../src/native.js';

const dir = mkdtempSync(join(tmpdir(), 'botlink-native-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('better-sqlite3 loaded by path', () => {
  it("finds the compiled addon where node-gyp and the packages put it, so the bindings package's lookup is skipped", () => {
    const addon = sqliteAddon();
    expect(addon).toMatch(/\/better-sqlite3\/build\/Release\/better_sqlite3\.node$/);
    expect(existsSync(addon ?? '')).toBe(true);
  });

  it('opens a working database through it, with the options given', () => {
    const file = join(dir, 'a.db');
    const db = openDatabase(file);
    db.exec('CREATE TABLE t (v TEXT)');
    db.prepare('INSERT INTO t VALUES (?)').run('x');
    db.close();
    const ro = openDatabase(file, { readonly: true, fileMustExist: true });
    expect(ro.prepare('SELECT v FROM t').get()).toEqual({ v: 'x' });
    expect(() => ro.exec('DELETE FROM t')).toThrow(SqliteError);
    ro.close();
    expect(() => openDatabase(join(dir, 'missing.db'), { fileMustExist: true })).toThrow();
  });
});
