// Through process.getBuiltinModule, as in app-loader.ts: this module is part of the ES entry.
const { constants, closeSync, fstatSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } =
  process.getBuiltinModule('node:fs');
const { basename, dirname, join } = process.getBuiltinModule('node:path');

/**
 * V8's code cache of an application bundle, kept in the service's cache directory ($CACHE_DIRECTORY,
 * set by systemd's CacheDirectory=). Compiling the 1 MB bundle from source took 12–15 ms of a 110 ms
 * boot; from the cache V8 deserializes the bytecode instead, including every function the boot ran.
 * V8 checks version, flags and source length itself; the bundle's content id in the file name ties a
 * cache to one bundle, since two bundles of the same length would otherwise pass V8's check.
 */

const PREFIX = 'botlink-';
const SUFFIX = '.v8cache';

const nameFor = (bundleId: string): string => `${PREFIX}${process.arch}-${bundleId}${SUFFIX}`;

/** The cache file of the bundle with content id `bundleId` in `dir`, or undefined when there is no cache directory. */
export function cacheFileFor(dir: string | undefined, bundleId: string): string | undefined {
  if (!dir || !/^[0-9a-f]{8,64}$/.test(bundleId)) return undefined;
  return join(dir, nameFor(bundleId));
}

/** The cache files' names of bundles `bundleIds` (one build's bundles). */
export function cacheNames(bundleIds: readonly string[]): string[] {
  return bundleIds.map(nameFor);
}

/**
 * Reads a cache only we could have written: a cache is code, so a file or folder another user can
 * write is ignored (the bundle is then compiled from source, as with no cache at all).
 */
export function readCodeCache(file: string): Buffer | undefined {
  let fd: number | undefined;
  try {
    if (!ownedAndPrivate(statSync(dirname(file)))) return undefined;
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW);
    const st = fstatSync(fd);
    if (!st.isFile() || !ownedAndPrivate(st)) return undefined;
    return readFileSync(fd);
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

function ownedAndPrivate(st: { uid: number; mode: number }): boolean {
  const uid = process.geteuid?.();
  return (uid === undefined || st.uid === uid) && (st.mode & 0o022) === 0;
}

/**
 * Writes the cache aside and renames it into place, then removes the caches of other builds: every
 * cache but this one and those named in `keep` (the other bundles of this build). Any failure (full
 * or read-only disk) leaves things as they were: the cache only saves time.
 */
export function writeCodeCache(file: string, data: Buffer, keep: readonly string[] = []): boolean {
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    writeFileSync(tmp, data, { mode: 0o600 });
    renameSync(tmp, file);
  } catch {
    try {
      rmSync(tmp, { force: true });
    } catch {
      // the folder itself is gone or not one
    }
    return false;
  }
  const dir = dirname(file);
  const mine = basename(file);
  try {
    for (const name of readdirSync(dir)) {
      if (name !== mine && !keep.includes(name) && name.startsWith(PREFIX) && name.endsWith(SUFFIX))
        rmSync(join(dir, name), { force: true });
    }
  } catch {
    // another build's stale cache costs disk space only
  }
  return true;
}
