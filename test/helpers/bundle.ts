import { build } from 'esbuild';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildBundle, scriptOptions } from '../../scripts/build.mjs';

const root = fileURLToPath(new URL('../..', import.meta.url));

export interface Bundle {
  /** The bundled module: run it as `node <file> …`. */
  file: string;
  dispose(): void;
}

/** Builds `name` into a fresh folder of node_modules/.cache, so the bundle's bare imports resolve; no folder is left on failure. */
async function intoCache(prefix: string, name: string, write: (file: string) => Promise<unknown>): Promise<Bundle> {
  const cache = join(root, 'node_modules', '.cache');
  mkdirSync(cache, { recursive: true });
  const dir = mkdtempSync(join(cache, prefix));
  const file = join(dir, name);
  try {
    await write(file);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return { file, dispose: () => rmSync(dir, { recursive: true, force: true }) };
}

/** scripts/build.mjs's bundle, built privately: dist/botlink.mjs is rewritten in place by every other test run in this checkout. */
export function privateDaemonBundle(prefix: string): Promise<Bundle> {
  return intoCache(prefix, 'botlink.mjs', (file) => buildBundle(file));
}

/** A child process's module given as TypeScript text, importing from the repo root (`./src/…`), its packages left external. */
export function bundleChild(source: string, sourcefile: string, prefix: string): Promise<Bundle> {
  return intoCache(prefix, 'child.mjs', (file) =>
    build({ ...scriptOptions(), stdin: { contents: source, resolveDir: root, loader: 'ts', sourcefile }, outfile: file }),
  );
}
