import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
} from 'node:fs';
import { dirname, join } from 'node:path';
import { inject } from 'vitest';
import { fileURLToPath } from 'node:url';
import { appFilesOf, BUNDLE, buildBundle, scriptOptions } from '../../scripts/build.mjs';
import { requireTool } from '../../scripts/lib/tools.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

export interface Bundle {
  /** The bundled module: run it as `node <file> …`. */
  file: string;
  dispose(): void;
}

/** Builds `name` into a fresh folder below `parent`, so the bundle's bare imports resolve; no folder is left on failure. */
async function into(parent: string, prefix: string, name: string, write: (file: string) => Promise<unknown>): Promise<Bundle> {
  mkdirSync(parent, { recursive: true });
  const dir = mkdtempSync(join(parent, prefix));
  const file = join(dir, name);
  try {
    await write(file);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return { file, dispose: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The checkout's node_modules/.cache: bundles there resolve their packages from the checkout. */
const cacheDir = (): string => join(root, 'node_modules', '.cache');

let shared: string | undefined;
/**
 * A folder every uid may read, for what a test runs as another user (setpriv): in the system's temp
 * folder, because the checkout may sit below a folder only its owner can enter (`/root/botlink`, or
 * any `mktemp -d`). It holds the checkout's production packages (package.json's dependencies and
 * theirs, hard-linked when the file system allows, else copied) so that a bundle below it resolves its
 * bare imports; one per test process, below the folder the global setup made and removes after the run.
 */
export function otherUsersDir(): string {
  if (shared !== undefined) return shared;
  const dir = mkdtempSync(join(inject('otherUsersRoot'), 'process-'));
  chmodSync(dir, 0o755);
  const modules = join(root, 'node_modules');
  mkdirSync(join(dir, 'node_modules'), { mode: 0o755 });
  const seen = new Set<string>();
  const visit = (name: string): void => {
    if (seen.has(name) || !existsSync(join(modules, name, 'package.json'))) return;
    seen.add(name);
    const manifest = JSON.parse(readFileSync(join(modules, name, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
      optionalDependencies?: Record<string, string>;
    };
    for (const dep of Object.keys({ ...manifest.dependencies, ...manifest.optionalDependencies })) visit(dep);
  };
  const own = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
  for (const name of Object.keys(own.dependencies ?? {})) visit(name);
  for (const name of seen) {
    const to = join(dir, 'node_modules', name);
    mkdirSync(join(to, '..'), { recursive: true, mode: 0o755 });
    try {
      execFileSync('cp', ['-al', join(modules, name), to], { stdio: 'pipe' });
    } catch {
      rmSync(to, { recursive: true, force: true });
      execFileSync('cp', ['-a', join(modules, name), to], { stdio: 'pipe' });
    }
  }
  shared = dir;
  return dir;
}

/** scripts/build.mjs's bundle, built privately: dist/botlink.mjs is rewritten in place by every other test run in this checkout. */
export function privateDaemonBundle(prefix: string): Promise<Bundle> {
  return into(cacheDir(), prefix, 'botlink.mjs', (file) => buildBundle(file));
}

let daemonCopy: string | undefined;
/**
 * dist/botlink.mjs and its application bundles (which the tests' global setup builds), copied once per
 * process where another uid can run them (otherUsersDir); the path of the copy's botlink.mjs.
 */
export function daemonBundleForOtherUsers(): string {
  if (daemonCopy !== undefined) return daemonCopy;
  const dir = mkdtempSync(join(otherUsersDir(), 'dist-'));
  chmodSync(dir, 0o755);
  const file = join(dir, 'botlink.mjs');
  copyFileSync(BUNDLE, file);
  chmodSync(file, 0o755);
  const copies = appFilesOf(file);
  appFilesOf(BUNDLE).forEach((app, i) => {
    copyFileSync(app, copies[i]!);
    chmodSync(copies[i]!, 0o644);
  });
  daemonCopy = file;
  return file;
}

/** Whether any uid may run `file`: it and every folder above it open to others. */
function openToOthers(file: string): boolean {
  for (let p = realpathSync(file); ; p = dirname(p)) {
    if ((statSync(p).mode & 0o001) === 0) return false;
    if (p === dirname(p)) return true;
  }
}

let nodeCopy: string | undefined;
/**
 * The Node binary running the tests, as a path another uid can execute: process.execPath when every
 * folder above it is open to others (a system Node), else a link or copy of it in otherUsersDir (CI's
 * Node 24 sits in root's home, which a stock kernel closes to other uids).
 */
export function nodeForOtherUsers(): string {
  if (nodeCopy !== undefined) return nodeCopy;
  nodeCopy = openToOthers(process.execPath) ? process.execPath : copyOfNode();
  return nodeCopy;
}

/** process.execPath linked or copied into otherUsersDir, as a file any uid may run. */
function copyOfNode(): string {
  const dir = mkdtempSync(join(otherUsersDir(), 'node-'));
  chmodSync(dir, 0o755);
  const file = join(dir, 'node');
  const real = realpathSync(process.execPath);
  // A link shares the binary's mode: only one others may already run is linked, and only on its file system.
  if (statSync(real).mode & 0o001) {
    try {
      linkSync(real, file);
      return file;
    } catch {
      // Another file system (EXDEV): copied below.
    }
  }
  copyFileSync(real, file);
  chmodSync(file, 0o755);
  return file;
}

/**
 * `botlink …args` as `uid` (and gid `uid`) through setpriv, in `groups` only or in none: setpriv's path
 * and its arguments, for spawn. It runs the bundle's copy that uid can reach (daemonBundleForOtherUsers),
 * never the checkout's, which may sit below a folder only root enters.
 */
export function botlinkAs(uid: number, args: readonly string[], groups: readonly number[] = []): [string, string[]] {
  const groupArgs = groups.length ? ['--groups', groups.join(',')] : ['--clear-groups'];
  const ids = ['--reuid', String(uid), '--regid', String(uid)];
  return [requireTool('setpriv'), [...ids, ...groupArgs, nodeForOtherUsers(), daemonBundleForOtherUsers(), ...args]];
}

/**
 * A child process's module given as TypeScript text, importing from the repo root (`./src/…`), its
 * packages left external. `forOtherUsers`: built into otherUsersDir, for a child another uid runs.
 */
export function bundleChild(source: string, sourcefile: string, prefix: string, opts: { forOtherUsers?: boolean } = {}): Promise<Bundle> {
  const parent = opts.forOtherUsers ? otherUsersDir() : cacheDir();
  return into(parent, prefix, 'child.mjs', async (file) => {
    await build({ ...scriptOptions(), stdin: { contents: source, resolveDir: root, loader: 'ts', sourcefile }, outfile: file });
    if (opts.forOtherUsers) chmodSync(join(file, '..'), 0o755);
  });
}
