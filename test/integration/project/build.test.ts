import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appFileOf, appFilesOf, buildBundle, daemonFileOf } from '../../../scripts/build.mjs';
import { cleanEnv } from '../../../scripts/lib/env.js';

/** One build for the file's tests: into a folder that does not exist yet, as in a fresh clone, which has no dist/. */
let dir: string;
let entry: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'botlink-build-'));
  entry = join(dir, 'fresh', 'dist', 'botlink.mjs');
  await buildBundle(entry);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const botlink = (...args: string[]) => spawnSync(process.execPath, [entry, ...args], { encoding: 'utf8', env: cleanEnv() });

describe('scripts/build.mjs', () => {
  it('builds into a folder that does not exist yet (a fresh clone has no dist/), and the entry loads the app', () => {
    for (const file of appFilesOf(entry)) {
      const app = readFileSync(file);
      expect(app.toString('latin1')).toMatch(/^\/\/ botlink-app [0-9a-f]{16}\n/);
      // ASCII, so V8 keeps the daemon's source in one byte a character (bundleOptions in scripts/build.mjs).
      const nonAscii = app.findIndex((byte) => byte > 0x7f);
      // undici's HTTP/2 half is left out, and node:http2 with it (the stubs plugin in scripts/build.mjs).
      expect(app.includes('node:http2')).toBe(false);
      expect(app.includes('botlink speaks HTTP/1.1 only')).toBe(true);
      // ws's permessage-deflate gets zlib at its first use, not as it loads (STUB_BUILTINS).
      expect(app.includes('require("zlib")')).toBe(false);
      // The app runs in a vm.Script without a dynamic-import callback: an import() left in it throws when reached.
      expect(app.toString('latin1')).not.toMatch(/[^\w$.]import\(/);
      expect(nonAscii, `non-ASCII at byte ${nonAscii}: ${app.subarray(Math.max(0, nonAscii - 60), nonAscii + 20).toString()}`).toBe(-1);
    }
    const help = botlink('--help');
    expect(help.status, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/^usage: botlink <command>/);
    const runHelp = botlink('run', '--help');
    expect(runHelp.status, runHelp.stderr).toBe(0);
    expect(runHelp.stdout).toMatch(/^usage: botlink run /);
  });

  it("the daemon's bundle holds what `botlink run` reaches and none of the other commands, the service or the broker", () => {
    const daemon = readFileSync(daemonFileOf(entry), 'latin1');
    const cli = readFileSync(appFileOf(entry), 'latin1');
    // esbuild names each module's initializer by its path, minified or not.
    for (const part of ['"src/service/', '"src/broker/', '"src/cli/commands/status.ts"', '"node_modules/pg/']) {
      expect(cli.includes(part), part).toBe(true);
      expect(daemon.includes(part), part).toBe(false);
    }
    expect(daemon.includes('usage: botlink run [--config FILE]')).toBe(true);
    // The operator's console (botlink:console) is the broker's: in the CLI's bundle, not the daemon's.
    expect(cli).toMatch(/console\.[0-9a-f]{12}\.js/);
    expect(daemon).not.toMatch(/console\.[0-9a-f]{12}\.js/);
    expect(daemon.length).toBeLessThan(cli.length * 0.75);
    // The entry hands `run`, and only `run`, to it: without the file, `run` fails and the CLI does not.
    rmSync(daemonFileOf(entry));
    const run = botlink('run', '--help');
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('botlink-daemon.cjs');
    const status = botlink('status', '--help');
    expect(status.status, status.stderr).toBe(0);
  });
});
