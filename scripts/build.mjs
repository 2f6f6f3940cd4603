// Builds dist/: botlink.mjs, a small entry, and the two application bundles it loads (through V8's
// code cache when there is a cache directory: see src/cli/loader/code-cache.ts): botlink-daemon.cjs
// for `botlink run`, botlink.cjs for every other command. The native addons' compiled .node files
// ship beside them in node_modules (NATIVE_PACKAGES).
import { build } from 'esbuild';
import { createHash } from 'node:crypto';
import { chmod, mkdir, rename, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { consolePlugin } from './lib/console-build.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
export const BUNDLE = join(root, 'dist', 'botlink.mjs');

/** The file beside an entry whose name ends in `tail` instead of `.mjs`. */
const beside = (entry, tail) => `${entry.replace(/\.mjs$/, '')}${tail}`;
/** The application bundle beside an entry: dist/botlink.mjs → dist/botlink.cjs. */
export const appFileOf = (entry) => beside(entry, '.cjs');
/** The daemon's bundle beside an entry: dist/botlink.mjs → dist/botlink-daemon.cjs. */
export const daemonFileOf = (entry) => beside(entry, '-daemon.cjs');

/**
 * Each application bundle: its source entry, and its file beside the entry. The daemon has one of its
 * own because a bundle costs its start in proportion to its size, used or not: V8 makes every
 * function declared at the bundle's top level (esbuild hoists those of every ES module there) and
 * deserializes the code cache of all of it. The daemon's holds only what `botlink run` reaches, 0.7
 * of the 1 MB (measured: 0.92–0.94× the cached boot of the one-bundle build, alternating runs).
 */
const APPS = [
  { name: 'cli', source: join(root, 'src', 'cli', 'main.ts'), fileOf: appFileOf },
  { name: 'daemon', source: join(root, 'src', 'cli', 'daemon.ts'), fileOf: daemonFileOf },
];
/** Every application bundle beside an entry: what a copy of dist/ must hold. */
export const appFilesOf = (entry) => APPS.map(({ fileOf }) => fileOf(entry));

/** The first line of the application bundle: its content id, which src/cli/loader/app-loader.ts checks before it uses a code cache. */
const appHeader = (id) => `// botlink-app ${id}\n`;

/**
 * The application bundle is one function expression, written so by the build: the loader compiles the
 * file as it reads it, where wrapping it at run time made V8 copy the 0.8 MB source once more.
 */
const wrapApp = (code) =>
  Buffer.concat([Buffer.from('(function (require, module, exports, __filename, __dirname, __botlinkAppUrl) {'), code, Buffer.from('\n})')]);

const common = { bundle: true, platform: 'node', target: 'node20.18', legalComments: 'none', logLevel: 'warning' };

/**
 * Parts of bundled packages that botlink never reaches, replaced by stubs that say so if ever they
 * are: each would load Node modules at every start that nothing else needs.
 * - undici's Client requires its HTTP/2 half as it loads, and that half requires node:http2: on Node
 *   24 ~20 ms of the first request, a signing boot's. The agent speaks HTTP/1.1 only (it never sets
 *   allowH2, so TLS never offers h2).
 * - pino's transports run in worker threads (thread-stream); botlink logs to a file or stdout through
 *   pino.destination, never a transport.
 */
const STUB_FILES = [
  {
    file: /[\\/]node_modules[\\/]undici[\\/]lib[\\/]dispatcher[\\/]client-h2\.js$/,
    contents:
      "module.exports = function connectH2() { throw new Error('botlink speaks HTTP/1.1 only: undici HTTP/2 (allowH2) is not in its bundle'); };",
  },
  {
    file: /[\\/]node_modules[\\/]pino[\\/]lib[\\/]transport\.js$/,
    contents:
      "module.exports = function transport() { throw new Error('botlink logs through pino.destination: pino transports (worker threads) are not in its bundle'); };",
  },
];
/**
 * Built-in modules that one bundled file asks for a single thing, answered by a stub (importer, module,
 * stub source): pino/lib/tools.js asks worker_threads only whether it runs on the main thread, and
 * sonic-boom asks node:assert only for one check as it closes a file. Loading either module (with
 * the ten more node:assert brings) cost ~3 ms of each start on Node 24.
 * ws's permessage-deflate requires zlib as it loads, and uses it only once the extension is
 * negotiated, which botlink never offers nor accepts (perMessageDeflate: false on every client and
 * server): its stub loads zlib at the first use, should there ever be one. Not loading it at start
 * took 0.95–0.97× of a cached boot.
 */
const STUB_BUILTINS = [
  {
    importer: /[\\/]node_modules[\\/]pino[\\/]lib[\\/]tools\.js$/,
    path: 'worker_threads',
    contents: 'module.exports = { isMainThread: true };',
  },
  {
    importer: /[\\/]node_modules[\\/]sonic-boom[\\/]index\.js$/,
    path: 'assert',
    contents: 'module.exports = function assert(ok, message) { if (!ok) throw new Error(message); };',
  },
  {
    importer: /[\\/]node_modules[\\/]ws[\\/]lib[\\/]permessage-deflate\.js$/,
    path: 'zlib',
    contents: "module.exports = new Proxy({}, { get: (_, key) => process.getBuiltinModule('node:zlib')[key] });",
  },
];

const stubs = {
  name: 'botlink-stubs',
  setup(build) {
    build.onLoad({ filter: new RegExp(STUB_FILES.map((s) => s.file.source).join('|')) }, (args) => ({
      loader: 'js',
      contents: STUB_FILES.find((s) => s.file.test(args.path)).contents,
    }));
    build.onResolve({ filter: new RegExp(`^(${STUB_BUILTINS.map((s) => s.path).join('|')})$`) }, (args) => {
      const i = STUB_BUILTINS.findIndex((s) => s.path === args.path && s.importer.test(args.importer));
      return i < 0 ? undefined : { path: String(i), namespace: 'botlink-stub' };
    });
    build.onLoad({ filter: /.*/, namespace: 'botlink-stub' }, (args) => ({
      loader: 'js',
      contents: STUB_BUILTINS[Number(args.path)].contents,
    }));
  },
};

/**
 * The packages whose compiled addon (.node) ships in node_modules beside dist/ (scripts/package copies
 * them and what they depend on). better-sqlite3's JavaScript is bundled all the same: src/native.ts
 * hands its Database the addon by path. unix-dgram's finds its addon from its own folder, so it stays
 * external.
 */
export const NATIVE_PACKAGES = ['better-sqlite3', 'unix-dgram'];

/**
 * The application bundle's esbuild options:
 * CommonJS, because V8's code cache (vm.Script) takes scripts, not modules; the entry hands it
 * `require` and the URL of its file as `import.meta.url`. Whitespace and syntax are minified, names
 * are not (stack traces in the log stay readable): without its comments the bundle is 0.8 MB instead
 * of 1.2 MB and pure ASCII (esbuild escapes the rest), so V8 holds its source in one byte a character;
 * a single non-ASCII comment made it two, 2.3 MB of heap for the life of the daemon.
 */
export function bundleOptions() {
  return {
    ...common,
    format: 'cjs',
    minifyWhitespace: true,
    minifySyntax: true,
    // The operator's console (src/console) as strings, for the broker's admin listener: only the CLI bundle reaches it.
    plugins: [stubs, consolePlugin()],
    external: ['unix-dgram'],
    define: { __BOTLINK_BUILD_TIME__: String(Date.now()), 'import.meta.url': '__botlinkAppUrl' },
  };
}

/** The entry's options: it knows each application bundle by file name and content id. */
function entryOptions(apps) {
  return { ...common, format: 'esm', banner: { js: '#!/usr/bin/env node' }, define: { __BOTLINK_APPS__: JSON.stringify(apps) } };
}

/**
 * esbuild options for running one of this repo's TypeScript files (a benchmark, a test's child
 * process) with plain node: bundled, its packages left external so they resolve to node_modules.
 */
export function scriptOptions() {
  return { ...common, format: 'esm', packages: 'external', plugins: [consolePlugin()] };
}

/** One application bundle, built in memory: its file, content id and bytes (header line first). */
async function buildApp({ source, fileOf }, outfile) {
  const file = fileOf(outfile);
  // Kept in memory, not written: the file is the bundle behind its header, written once.
  const { outputFiles } = await build({ ...bundleOptions(), entryPoints: [source], outfile: file, write: false });
  const code = wrapApp(outputFiles[0].contents);
  const id = createHash('sha256').update(code).digest('hex').slice(0, 16);
  return { path: file, file: `./${basename(file)}`, id, bytes: Buffer.concat([Buffer.from(appHeader(id)), code]) };
}

/** Builds the entry and its application bundles; the tests' global setup calls this too, so tests always run current code. */
export async function buildBundle(outfile = BUNDLE) {
  const built = await Promise.all(APPS.map((app) => buildApp(app, outfile)));
  // A fresh clone has no dist/.
  await mkdir(dirname(outfile), { recursive: true });
  // Written aside and renamed, the applications first: a process spawned meanwhile never reads half a file.
  const partial = (file) => `${file}.${process.pid}.partial`;
  for (const app of built) await writeFile(partial(app.path), app.bytes);
  const apps = Object.fromEntries(APPS.map(({ name }, i) => [name, { file: built[i].file, id: built[i].id }]));
  await build({ ...entryOptions(apps), entryPoints: [join(root, 'src', 'cli', 'loader', 'botlink.ts')], outfile: partial(outfile) });
  await chmod(partial(outfile), 0o755);
  for (const app of built) await rename(partial(app.path), app.path);
  await rename(partial(outfile), outfile);
  return outfile;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildBundle();
