import { build } from 'esbuild';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));

export interface CliBundle {
  /** The bundled CLI: run it as `node <file> <command> …`. */
  file: string;
  dispose(): void;
}

/**
 * Bundles src/cli/botlink.ts the way scripts/build.mjs does, into node_modules/.cache so the external
 * better-sqlite3 resolves, letting tests run the real command line as a child process without a build.
 */
export async function bundleCli(): Promise<CliBundle> {
  const cache = join(root, 'node_modules', '.cache');
  mkdirSync(cache, { recursive: true });
  const dir = mkdtempSync(join(cache, 'test-cli-'));
  const file = join(dir, 'botlink.mjs');
  try {
    await build({
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
    });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return { file, dispose: () => rmSync(dir, { recursive: true, force: true }) };
}
