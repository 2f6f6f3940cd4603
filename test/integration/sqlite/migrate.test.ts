// src/sqlite/migrate.ts on real files: versions, one write transaction, a newer file refused, a current one opened without a write.
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../../src/native.js';
import { migrate, type Migration, schemaVersion } from '../../../src/sqlite/migrate.js';
import { useHarness } from '../../helpers/harness.js';

const { tempDir, cleanups } = useHarness();

class NewerFile extends Error {}
const newer = (version: number, known: number): Error => new NewerFile(`version ${version} > ${known}`);

function file(): string {
  return join(tempDir('botlink-sqlite-migrate-'), 'x.db');
}

function connect(path: string, options: Parameters<typeof openDatabase>[1] = {}): Database.Database {
  const db = openDatabase(path, options);
  cleanups.push(() => db.close());
  return db;
}

const version = (db: Database.Database): unknown => db.pragma('user_version', { simple: true });
const tables = (db: Database.Database): unknown =>
  db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all();

const STEPS: Migration[] = [
  'CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1)',
  (db) => {
    // A step in code: it looks at the file first.
    const rows = db.prepare('SELECT count(*) FROM a').pluck().get() as number;
    db.exec(`CREATE TABLE b (n INTEGER); INSERT INTO b VALUES (${rows})`);
  },
  'ALTER TABLE a ADD COLUMN y TEXT',
];

describe('migrate', () => {
  it('runs each step after the file’s version, in order, SQL and code alike, and records the last', () => {
    const db = connect(file());
    migrate(db, STEPS.slice(0, 1), newer);
    expect(version(db)).toBe(1);
    migrate(db, STEPS, newer);
    expect([version(db), tables(db), db.prepare('SELECT n FROM b').pluck().get()]).toEqual([3, ['a', 'b'], 1]);
    expect(db.prepare('SELECT count(*) FROM pragma_table_info(?) WHERE name = ?').pluck().get('a', 'y')).toBe(1);
    migrate(db, STEPS, newer);
    expect(db.prepare('SELECT count(*) FROM a').pluck().get()).toBe(1);
  });

  it('a step that fails leaves the file as it was: no step of the run, the version unchanged', () => {
    const db = connect(file());
    migrate(db, STEPS.slice(0, 1), newer);
    expect(() => migrate(db, [...STEPS, 'CREATE TABLE a (z)'], newer)).toThrow(/already exists/);
    expect([version(db), tables(db)]).toEqual([1, ['a']]);
  });

  it('refuses a file of a newer release with the caller’s error, before any write lock, and leaves it alone', () => {
    const path = file();
    const db = connect(path);
    db.pragma('user_version = 7');
    // Another connection holds the write lock: a refusal that waited for it would fail with SQLITE_BUSY instead.
    const holder = connect(path);
    holder.exec('BEGIN IMMEDIATE');
    db.pragma('busy_timeout = 0');
    expect(() => migrate(db, STEPS, newer)).toThrow(new NewerFile('version 7 > 3'));
    expect(() => schemaVersion(db, 3, newer)).toThrow(NewerFile);
    holder.exec('ROLLBACK');
    expect([version(db), tables(db)]).toEqual([7, []]);
  });

  it('opens a current file without a write: read-only, and while another connection holds the write lock', () => {
    const path = file();
    migrate(connect(path), STEPS, newer);
    const reader = connect(path, { readonly: true });
    migrate(reader, STEPS, newer);
    expect(schemaVersion(reader, STEPS.length, newer)).toBe(3);
    const holder = connect(path);
    holder.exec('BEGIN IMMEDIATE');
    const other = connect(path);
    other.pragma('busy_timeout = 0');
    migrate(other, STEPS, newer);
    holder.exec('ROLLBACK');
  });

  it('two openers of a new file migrate it once: the second waits for the first’s write lock, then finds it current', () => {
    const path = file();
    const first = connect(path);
    const second = connect(path);
    second.pragma('busy_timeout = 0');
    let runs = 0;
    let meanwhile: unknown;
    const steps: Migration[] = [
      (db) => {
        runs++;
        db.exec('CREATE TABLE a (x INTEGER)');
        // The second opener arrives while the first migrates: it cannot take the lock, so it cannot migrate too.
        try {
          migrate(second, steps, newer);
        } catch (err) {
          meanwhile = err;
        }
      },
    ];
    migrate(first, steps, newer);
    expect(meanwhile).toMatchObject({ code: 'SQLITE_BUSY' });
    // Had it looked just before the first committed, it would have seen 0, and under the lock it looks again.
    migrate(lookingEarly(second), steps, newer);
    migrate(second, steps, newer);
    expect([runs, version(second), tables(second)]).toEqual([1, 1, ['a']]);
  });
});

/** `db` whose first read of user_version is 0: an opener that looked before another one's migration committed. */
function lookingEarly(db: Database.Database): Database.Database {
  let looked = false;
  return new Proxy(db, {
    get(target, key) {
      if (key === 'pragma') {
        return (source: string, options?: Database.PragmaOptions) => {
          if (source === 'user_version' && !looked) {
            looked = true;
            return 0;
          }
          return target.pragma(source, options);
        };
      }
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
