import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, chmodSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appFileOf } from '../../../scripts/build.mjs';
import { type AppBundle, appHeader } from '../../../src/cli/loader/app-loader.js';
import { cacheFileFor, cacheNames, writeCodeCache } from '../../../src/cli/loader/code-cache.js';
import { type Bundle, bundleChild, privateDaemonBundle } from '../../helpers/bundle.js';
import { cleanEnv } from '../../../scripts/lib/env.js';
import { fileAppears } from '../../../scripts/lib/file-appears.js';
import { useHarness } from '../../helpers/harness.js';

const { tempDir } = useHarness();

let bundle: Bundle;
let loader: Bundle;
let app: AppBundle;

/** Loads the app in a process of its own (V8 keeps scripts it compiled once, cache or not) and says how. */
const LOADER = `
import { loadApp } from './src/cli/loader/app-loader.ts';
const [url, id, dir, save] = process.argv.slice(2);
const loaded = loadApp({ url: new URL(url), id }, dir || undefined);
const saved = save === 'save' ? loaded.saveCache() : undefined;
process.stdout.write(JSON.stringify({ cache: loaded.cache, saved, version: await loaded.main(['--version']) }));
`;

beforeAll(async () => {
  bundle = await privateDaemonBundle('code-cache-');
  loader = await bundleChild(LOADER, 'load-app.ts', 'code-cache-loader-');
  const file = appFileOf(bundle.file);
  const code = readFileSync(file);
  // The id is of what follows the header line: the bundle as scripts/build.mjs wrapped it.
  const id = createHash('sha256')
    .update(code.subarray(code.indexOf('\n') + 1))
    .digest('hex')
    .slice(0, 16);
  app = { url: pathToFileURL(file), id };
  expect(code.subarray(0, 40).toString()).toMatch(new RegExp(`^${appHeader(id)}`));
});
afterAll(() => {
  bundle.dispose();
  loader.dispose();
});

function load(a: AppBundle, dir: string | undefined, save = false): { cache: string; saved?: boolean; version: number } {
  const r = spawnSync(process.execPath, [loader.file, a.url.href, a.id, dir ?? '', save ? 'save' : ''], {
    env: cleanEnv(),
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`loader exited ${r.status}: ${r.stderr}`);
  return JSON.parse(r.stdout.slice(r.stdout.indexOf('{')));
}

/** A folder only this user can write, as systemd makes CacheDirectory=. */
function cacheDir(): string {
  const dir = join(tempDir('botlink-cache-'), 'cache');
  mkdirSync(dir, { mode: 0o700 });
  return dir;
}

describe('the application bundle through V8 code cache', () => {
  it('without a cache directory: compiled from source, nothing written', () => {
    expect(load(app, undefined, true)).toEqual({ cache: 'off', saved: false, version: 0 });
  });

  it('the first start writes the cache, the next one uses it, and its main() runs', () => {
    const dir = cacheDir();
    expect(load(app, dir, true)).toEqual({ cache: 'missing', saved: true, version: 0 });
    expect(readdirSync(dir)).toEqual([`botlink-${process.arch}-${app.id}.v8cache`]);
    expect(load(app, dir)).toEqual({ cache: 'used', version: 0 });
  });

  it('a damaged cache is rejected by V8 and written again', () => {
    const dir = cacheDir();
    const file = cacheFileFor(dir, app.id)!;
    writeFileSync(file, Buffer.alloc(4096, 7), { mode: 0o600 });
    expect(load(app, dir, true)).toEqual({ cache: 'rejected', saved: true, version: 0 });
    expect(load(app, dir).cache).toBe('used');
  });

  it('a cache another user could have written is code nobody vouches for: ignored', () => {
    const dir = cacheDir();
    load(app, dir, true);
    const file = cacheFileFor(dir, app.id)!;
    expect(load(app, dir).cache).toBe('used');
    chmodSync(file, 0o620);
    expect(load(app, dir).cache).toBe('missing');
    chmodSync(file, 0o600);
    chmodSync(dir, 0o777);
    expect(load(app, dir).cache).toBe('missing');
  });

  it("a bundle that is not the entry's build never meets the cache, even one of the same length", () => {
    const dir = cacheDir();
    load(app, dir, true);
    const file = fileURLToPath(app.url);
    const other = file.replace(/\.cjs$/, '-other.cjs');
    const code = readFileSync(file, 'latin1');
    writeFileSync(other, code.replace(appHeader(app.id), appHeader('0123456789abcdef')), 'latin1');
    expect(readFileSync(other).length).toBe(readFileSync(file).length);
    expect(load({ ...app, url: pathToFileURL(other) }, dir).cache).toBe('off');
  });

  it("writing removes other builds' caches; a read-only folder costs the cache, never an error", () => {
    const dir = cacheDir();
    const stale = cacheFileFor(dir, '0123456789abcdef')!;
    writeFileSync(stale, 'old build');
    expect(writeCodeCache(cacheFileFor(dir, app.id)!, Buffer.from('x'))).toBe(true);
    expect(readdirSync(dir)).toEqual([`botlink-${process.arch}-${app.id}.v8cache`]);
    chmodSync(dir, 0o500);
    // Root writes anywhere: a file in the folder's place makes the write fail for every user.
    const blocked = join(dir, 'not-a-dir');
    appendFileSync(blocked, '');
    expect(writeCodeCache(join(blocked, 'botlink-x.v8cache'), Buffer.from('x'))).toBe(false);
    chmodSync(dir, 0o700);
  });

  it("writing keeps the caches of this build's other bundles (the daemon's and the CLI's share a folder)", () => {
    const dir = cacheDir();
    const sibling = 'fedcba9876543210';
    const stale = '0123456789abcdef';
    for (const id of [sibling, stale]) writeFileSync(cacheFileFor(dir, id)!, 'cache');
    expect(writeCodeCache(cacheFileFor(dir, app.id)!, Buffer.from('x'), cacheNames([app.id, sibling]))).toBe(true);
    expect(readdirSync(dir).sort()).toEqual(cacheNames([app.id, sibling]).sort());
  });

  it('a long-lived command (serve) with $CACHE_DIRECTORY writes the cache a few seconds after it started', async () => {
    const dir = cacheDir();
    const written = fileAppears(dir, '.v8cache');
    const child = spawn(process.execPath, [bundle.file, 'serve', '--port', '0'], {
      env: cleanEnv({ CACHE_DIRECTORY: dir }),
      stdio: 'ignore',
    });
    try {
      expect(await written).toBe(`botlink-${process.arch}-${app.id}.v8cache`);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
