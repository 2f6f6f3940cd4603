import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { cleanEnv } from '../../../scripts/lib/env.js';
import { fileAppears } from '../../../scripts/lib/file-appears.js';
import { DAEMON_SEED, useHarness } from '../../helpers/harness.js';

const { service, device, daemon, tempDir } = useHarness();
const PRELOAD = fileURLToPath(new URL('../../helpers/module-probe.preload.cjs', import.meta.url));

/**
 * What the daemon has loaded once connected with a cached token: each module kept out of its start
 * (scripts/build.mjs's stubs, zlib's among them, src/native.ts, the time-sync and clock modules) cost
 * ~1–5 ms of every boot on Node 24 and is needed by nothing on the way to connected.
 */
describe('the daemon on its way to connected', () => {
  it("loads none of the Node modules it has no use for, and better-sqlite3's JavaScript from the bundle", async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc);
    const first = daemon(d);
    await d.waitForLink('connected');
    await first.stop();

    const dir = tempDir('botlink-modules-');
    const report = join(dir, 'modules.json');
    const p = daemon(d, cleanEnv({ NODE_OPTIONS: `--require ${PRELOAD}`, MODULE_PROBE_FILE: report }));
    await d.waitForLink('connected');
    const written = fileAppears(dir, 'modules.json');
    p.child.kill('SIGUSR2');
    await written;
    const { builtins, files } = JSON.parse(readFileSync(report, 'utf8')) as { builtins: string[]; files: string[] };

    expect(builtins).toContain('net');
    // What this Node loads for any ES module entry is no choice of ours (Node 20's ESM loader takes fs/promises).
    const bare = join(dir, 'bare.mjs');
    writeFileSync(bare, 'process.stdout.write(JSON.stringify(process.moduleLoadList));');
    const anyEntry = JSON.parse(spawnSync(process.execPath, [bare], { encoding: 'utf8', env: cleanEnv() }).stdout) as string[];
    for (const unused of [
      'worker_threads',
      'assert',
      'zlib',
      'internal/fs/promises',
      'internal/readline/interface',
      'perf_hooks',
      'http2',
      'v8',
    ]) {
      if (!anyEntry.includes(`NativeModule ${unused}`)) expect(builtins, unused).not.toContain(unused);
    }
    expect(files.filter((f) => f.includes('better-sqlite3'))).toEqual([expect.stringMatching(/better_sqlite3\.node$/)]);
  });
});
