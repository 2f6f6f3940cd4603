import { cacheFileFor, cacheNames, readCodeCache, writeCodeCache } from './code-cache.js';

// Node's modules come through process.getBuiltinModule, not ES imports: dist/botlink.mjs is an ES
// module, and an ES import of a built-in builds its namespace from every export, running the lazy
// getters (node:fs alone then loads fs/promises, readline and 30 more modules, ~5 ms of a start).
// Those only loadApp needs load there: `--version` never calls it.
const { readFileSync } = process.getBuiltinModule('node:fs');
const { dirname } = process.getBuiltinModule('node:path');

export type Main = (argv: string[]) => Promise<number>;

/** The application bundle as scripts/build.mjs wrote it: its URL and content id. */
export interface AppBundle {
  url: URL;
  id: string;
}

/** The first line scripts/build.mjs gives the application bundle. */
export const appHeader = (id: string): string => `// botlink-app ${id}\n`;

export interface LoadedApp {
  main: Main;
  /** off: no cache directory (or the file is not this build's); missing, rejected (by V8) or used. */
  cache: 'off' | 'missing' | 'rejected' | 'used';
  /** Writes the code cache of everything compiled so far; false when it could not be written. */
  saveCache(): boolean;
}

/**
 * Runs the CommonJS application bundle as Node's loader would (require, module, __filename), compiled
 * through V8's code cache in `cacheDir` when there is one (see code-cache.ts). `buildIds` are the ids
 * of every bundle of this build, whose caches saveCache() keeps (it removes other builds').
 */
export function loadApp(app: AppBundle, cacheDir: string | undefined, buildIds: readonly string[] = [app.id]): LoadedApp {
  const { isAscii } = process.getBuiltinModule('node:buffer');
  const { createRequire } = process.getBuiltinModule('node:module');
  const { fileURLToPath } = process.getBuiltinModule('node:url');
  const { Script } = process.getBuiltinModule('node:vm');
  const file = fileURLToPath(app.url);
  const code = readFileSync(file);
  // A bundle of another build (replaced while we started) must not meet this build's cache: V8 itself
  // compares only the source's length, which two builds of one tree share (the build time has 13 digits).
  const header = appHeader(app.id);
  const ours = code.subarray(0, header.length).toString('latin1') === header;
  const cacheFile = ours ? cacheFileFor(cacheDir, app.id) : undefined;
  const cachedData = cacheFile === undefined ? undefined : readCodeCache(cacheFile);
  // scripts/build.mjs makes the bundle ASCII, which latin1 copies without decoding; any other text is UTF-8.
  const source = code.toString(isAscii(code) ? 'latin1' : 'utf8');
  // scripts/build.mjs wrote the bundle as one function expression of the six parameters it is called with.
  const script = new Script(source, { filename: file, cachedData });
  const module = { exports: {} as { main?: Main } };
  script.runInThisContext()(createRequire(app.url), module, module.exports, file, dirname(file), app.url.href);
  if (typeof module.exports.main !== 'function') throw new Error(`${file} exports no main(): reinstall botlink`);
  const cache = cacheFile === undefined ? 'off' : cachedData === undefined ? 'missing' : script.cachedDataRejected ? 'rejected' : 'used';
  return {
    main: module.exports.main,
    cache,
    saveCache: () => cacheFile !== undefined && writeCodeCache(cacheFile, script.createCachedData(), cacheNames(buildIds)),
  };
}
