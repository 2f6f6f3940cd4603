import { build } from 'esbuild';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildBundle } from '../../scripts/build.mjs';

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

/**
 * Bundles src/cli/botlink.ts the way scripts/build.mjs does, external better-sqlite3 only, letting
 * tests run the real command line as a child process without a build.
 */
export function bundleCli(): Promise<Bundle> {
  return intoCache('test-cli-', 'botlink.mjs', (file) =>
    build({
      entryPoints: [join(root, 'src', 'cli', 'botlink.ts')],
      outfile: file,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20.18',
      external: ['better-sqlite3'],
      define: { __BOTLINK_BUILD_TIME__: String(Date.now()) },
      // CommonJS dependencies (pino, ws) call require() for built-ins; give the ESM bundle one.
      banner: {
        js: "import { createRequire as __botlinkCreateRequire } from 'node:module';\nconst require = __botlinkCreateRequire(import.meta.url);",
      },
      logLevel: 'warning',
    }),
  );
}

/** scripts/build.mjs's bundle, built privately: dist/botlink.mjs is rewritten in place by every other test run in this checkout. */
export function privateDaemonBundle(prefix: string): Promise<Bundle> {
  return intoCache(prefix, 'botlink.mjs', (file) => buildBundle(file));
}

/** A child process's module given as TypeScript text, importing from the repo root (`./src/…`), its packages left external. */
export function bundleChild(source: string, sourcefile: string, prefix: string): Promise<Bundle> {
  return intoCache(prefix, 'child.mjs', (file) =>
    build({
      stdin: { contents: source, resolveDir: root, loader: 'ts', sourcefile },
      outfile: file,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node20.18',
      packages: 'external',
      logLevel: 'warning',
    }),
  );
}
