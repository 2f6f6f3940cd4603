import { createRequire } from 'node:module';
import type BetterSqlite3 from 'better-sqlite3';
import type * as UnixDgram from 'unix-dgram';

// The bundle keeps the native addons external. A static import of one would load it as the
// bundle starts, for every command; required here, each loads at its first use, so `--version`,
// `--help` and a daemon outside systemd load neither or only what they need. Resolved from the
// running file, as an import would be: node_modules beside dist/ (or src/ under the tests).
const load = createRequire(import.meta.url);

export const sqlite = (): typeof BetterSqlite3 => load('better-sqlite3') as typeof BetterSqlite3;
export const unixDgram = (): typeof UnixDgram => load('unix-dgram') as typeof UnixDgram;
