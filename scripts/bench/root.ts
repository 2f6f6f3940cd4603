// Where the benchmarks run: the repo root, which bench is the main one, scratch folders.
import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repo root: the first folder above this (bundled) file that holds a package.json. */
export const ROOT: string = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('benchmarks must run inside the botlink repo');
    dir = up;
  }
  return dir;
})();

/** scripts/bench/run.mjs names its bundle <bench>.mjs: lets link.ts export its scenarios to all.ts. */
export function isMain(bench: string): boolean {
  return basename(process.argv[1] ?? '') === `${bench}.mjs`;
}

/** A fresh folder under node_modules/.cache, so scripts and bundles written there resolve bare imports. */
export function scratchDir(prefix: string): string {
  const cache = join(ROOT, 'node_modules', '.cache');
  mkdirSync(cache, { recursive: true });
  return mkdtempSync(join(cache, `${prefix}-`));
}
