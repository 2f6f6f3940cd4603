// Runs a TypeScript benchmark from this folder: bundles it with esbuild into a temp file, then
// executes it with plain node, so benchmarks measure the same code the product runs.
import { build } from 'esbuild';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { scriptOptions } from '../build.mjs';

const [name, ...args] = process.argv.slice(2);
if (!name) {
  console.error('usage: node scripts/bench/run.mjs <name> [args]   (runs scripts/bench/<name>.ts)');
  process.exit(64);
}
const here = fileURLToPath(new URL('.', import.meta.url));
// Inside the repo so the bundle's bare imports (ws, undici, …) resolve to node_modules.
const cache = join(here, '..', '..', 'node_modules', '.cache');
mkdirSync(cache, { recursive: true });
const dir = mkdtempSync(join(cache, 'bench-'));
const outfile = join(dir, `${name}.mjs`);
try {
  await build({ ...scriptOptions(), entryPoints: [join(here, `${name}.ts`)], outfile });
  const result = spawnSync(process.execPath, [outfile, ...args], { stdio: 'inherit', cwd: process.cwd() });
  process.exitCode = result.status ?? 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
