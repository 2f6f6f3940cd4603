import type Database from 'better-sqlite3';

/** One step of a schema: SQL, or code where SQL alone cannot say it (a step that must look at the file first). */
export type Migration = string | ((db: Database.Database) => void);

/** The caller's own error for a file written by a newer release: it is never migrated down or guessed at. */
export type NewerSchema = (version: number, known: number) => Error;

/** The file's schema version (its user_version), refusing one newer than the `known` last. */
export function schemaVersion(db: Database.Database, known: number, newer: NewerSchema): number {
  const version = db.pragma('user_version', { simple: true }) as number;
  if (version > known) throw newer(version, known);
  return version;
}

/**
 * Brings `db` to the last version: migration i takes it from user_version i to i + 1 (append new ones,
 * never edit old ones), all in one BEGIN IMMEDIATE, so processes opening the file together migrate it once.
 */
export function migrate(db: Database.Database, migrations: readonly Migration[], newer: NewerSchema): void {
  const known = migrations.length;
  // Judged before taking the write lock: a current file opens without a write (a full or read-only disk).
  if (schemaVersion(db, known, newer) === known) return;
  db.transaction(() => {
    // Again under the lock: another opener may have migrated it meanwhile.
    const from = schemaVersion(db, known, newer);
    for (const step of migrations.slice(from)) {
      if (typeof step === 'string') db.exec(step);
      else step(db);
    }
    if (from < known) db.pragma(`user_version = ${known}`);
  }).immediate();
}
