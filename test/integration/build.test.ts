import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { appFileOf, buildBundle } from '../../scripts/build.mjs';
import { cleanEnv } from '../../scripts/lib/env.js';
import { useHarness } from '../helpers/harness.js';

const { tempDir } = useHarness();

describe('scripts/build.mjs', () => {
  it('builds into a folder that does not exist yet (a fresh clone has no dist/), and the entry loads the app', async () => {
    const entry = join(tempDir('botlink-build-'), 'fresh', 'dist', 'botlink.mjs');
    await buildBundle(entry);
    const app = readFileSync(appFileOf(entry));
    expect(app.toString('latin1')).toMatch(/^\/\/ botlink-app [0-9a-f]{16}\n/);
    // ASCII, so V8 keeps the daemon's source in one byte a character (bundleOptions in scripts/build.mjs).
    const nonAscii = app.findIndex((byte) => byte > 0x7f);
    // undici's HTTP/2 half is left out, and node:http2 with it (the stubs plugin in scripts/build.mjs).
    expect(app.includes('node:http2')).toBe(false);
    expect(app.includes('botlink speaks HTTP/1.1 only')).toBe(true);
    // The app runs in a vm.Script without a dynamic-import callback: an import() left in it throws when reached.
    expect(app.toString('latin1')).not.toMatch(/[^\w$.]import\(/);
    expect(nonAscii, `non-ASCII at byte ${nonAscii}: ${app.subarray(Math.max(0, nonAscii - 60), nonAscii + 20).toString()}`).toBe(-1);
    const help = spawnSync(process.execPath, [entry, '--help'], { encoding: 'utf8', env: cleanEnv() });
    expect(help.status, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/^usage: botlink <command>/);
  });
});
