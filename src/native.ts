import { createRequire } from 'node:module';
import BetterSqlite3 from 'better-sqlite3';
import type * as UnixDgram from 'unix-dgram';

// The native addons load at their first use, so `--version`, `--help` and a daemon outside systemd
// load neither or only what they need. Resolved from the running file, as an import would be:
// node_modules beside dist/ (or src/ under the tests). better-sqlite3's JavaScript is in the bundle
// (compiled through its code cache, not read and compiled from a dozen files at every start: ~8 ms
// of a boot on Node 24) and loads its addon by path only when a Database opens; unix-dgram finds
// its addon with the bindings package from its own folder, so it stays external.
const load = createRequire(import.meta.url);

export const { SqliteError } = BetterSqlite3;
export const unixDgram = (): typeof UnixDgram => load('unix-dgram') as typeof UnixDgram;

/**
 * better-sqlite3's compiled addon, where node-gyp puts it and where the packages ship it. Handed to
 * the Database as its nativeBinding, it spares the lookup of the `bindings` package, which finds its
 * caller's folder from a stack trace and then tries paths with a failing require each (~4 ms of a
 * boot); undefined (that lookup, then) in a layout without it.
 */
let addonPath: string | undefined | null = null;
export function sqliteAddon(): string | undefined {
  if (addonPath === null) {
    try {
      addonPath = load.resolve('better-sqlite3/build/Release/better_sqlite3.node');
    } catch {
      addonPath = undefined;
    }
  }
  return addonPath;
}

/** A better-sqlite3 Database on `file`, its addon loaded by path. */
export function openDatabase(file: string, options: BetterSqlite3.Options = {}): BetterSqlite3.Database {
  const nativeBinding = sqliteAddon();
  return new BetterSqlite3(file, nativeBinding === undefined ? options : { ...options, nativeBinding });
}
