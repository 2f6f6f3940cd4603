import { spawn } from 'node:child_process';
import { chmodSync, cpSync, readFileSync, statSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { cleanEnv } from '../../../scripts/lib/env.js';
import { useHarness } from '../../helpers/harness.js';
import { requireRoot, requireTool } from '../../../scripts/lib/tools.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const { tempDir } = useHarness();

// A checkout where root naturally clones it (/root/botlink) or in any `mktemp -d` sits below a folder
// only its owner may enter: what the tests run as another uid through setpriv must not be read from it.

describe('the tests from a checkout below a 0700 folder', () => {
  it('secret.test.ts, whose children run as uid 4243 through setpriv, passes from a copy of this checkout there', async () => {
    requireRoot('this test runs a test file that switches uid');
    requireTool('setpriv');
    const parent = tempDir('botlink-0700-');
    chmodSync(parent, 0o700);
    expect(statSync(parent).mode & 0o777).toBe(0o700);
    const copy = join(parent, 'botlink');
    // The checkout's tree but its build output and git's files, and its node_modules through a symlink:
    // the copy needs no install of its own. A walk, not git ls-files: the runtimes' copies
    // (scripts/test-runtimes.sh) are git archives inside another checkout's node_modules.
    const skipped = new Set(['node_modules', '.git', 'dist'].map((name) => join(root, name)));
    cpSync(root, copy, { recursive: true, filter: (src) => !skipped.has(src) });
    symlinkSync(join(root, 'node_modules'), join(copy, 'node_modules'));

    const vitest = join(root, 'node_modules', 'vitest', 'vitest.mjs');
    const env = cleanEnv();
    for (const k of Object.keys(env)) if (k.startsWith('VITEST') || k === 'NODE_OPTIONS' || k === 'TEST') delete env[k];
    const run = await new Promise<{ code: number | null; out: string }>((resolve, reject) => {
      const child = spawn(
        process.execPath,
        [vitest, 'run', 'test/integration/agent/secret.test.ts', '--reporter=json', '--outputFile.json=report.json'],
        {
          cwd: copy,
          env,
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let out = '';
      child.stdout.on('data', (b: Buffer) => (out += b.toString()));
      child.stderr.on('data', (b: Buffer) => (out += b.toString()));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, out }));
    });
    expect(run.code, run.out).toBe(0);
    const report = JSON.parse(readFileSync(join(copy, 'report.json'), 'utf8')) as { numPassedTests: number; numFailedTests: number };
    expect(report.numFailedTests, run.out).toBe(0);
    // Among them the three that read the secret as uid 4243.
    expect(report.numPassedTests).toBeGreaterThanOrEqual(5);
  }, 120_000);
});
