// Bundles the CLI into one ESM file; the native addons (better-sqlite3, unix-dgram) stay external.
import { build } from 'esbuild';
import { chmod, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
export const BUNDLE = join(root, 'dist', 'botlink.mjs');

/** The product bundle's esbuild options, shared with the benchmarks that build variants of it. */
export function bundleOptions() {
  return {
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20.18',
    external: ['better-sqlite3', 'unix-dgram'],
    define: { __BOTLINK_BUILD_TIME__: String(Date.now()) },
    // CommonJS dependencies (pino, ws) call require() for built-ins; give the ESM bundle one.
    banner: {
      js: "#!/usr/bin/env node\nimport { createRequire as __botlinkCreateRequire } from 'node:module';\nconst require = __botlinkCreateRequire(import.meta.url);",
    },
    legalComments: 'none',
    logLevel: 'warning',
  };
}

/**
 * esbuild options for running one of this repo's TypeScript files (a benchmark, a test's child
 * process) with plain node: bundled, its packages left external so they resolve to node_modules.
 */
export function scriptOptions() {
  return { bundle: true, platform: 'node', format: 'esm', target: 'node20.18', packages: 'external', logLevel: 'warning' };
}

/** Builds the bundle; the tests' global setup calls this too, so tests always run current code. */
export async function buildBundle(outfile = BUNDLE) {
  // Written aside and renamed: a daemon spawned meanwhile never reads a half-written bundle.
  const partial = `${outfile}.${process.pid}.partial`;
  await build({ ...bundleOptions(), entryPoints: [join(root, 'src', 'cli', 'botlink.ts')], outfile: partial });
  await chmod(partial, 0o755);
  await rename(partial, outfile);
  return outfile;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildBundle();
