import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { useHarness } from '../../helpers/harness.js';
import { missingToolMessage, requireTool, TEST_TOOLS, type TestTool } from '../../../scripts/lib/tools.js';

const SCRIPT = fileURLToPath(new URL('../../../scripts/test-tools.sh', import.meta.url));
const { tempDir } = useHarness();

function script(args: string[], env: NodeJS.ProcessEnv = process.env) {
  const r = spawnSync('bash', [SCRIPT, ...args], { encoding: 'utf8', env });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('scripts/test-tools.sh and scripts/lib/tools.ts', () => {
  it('name the same tools and packages', () => {
    const r = script(['--list']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n')).toEqual(Object.entries(TEST_TOOLS).map(([tool, pkg]) => `${tool} ${pkg}`));
  });

  it('a missing tool fails its test with the tool, the script and the package', () => {
    expect(missingToolMessage('logrotate')).toBe('logrotate not found: run scripts/test-tools.sh or apt-get install logrotate');
    expect(missingToolMessage('libfaketime')).toBe('libfaketime not found: run scripts/test-tools.sh or apt-get install faketime');
    expect(missingToolMessage('systemd-analyze')).toBe('systemd-analyze not found: run scripts/test-tools.sh or apt-get install systemd');
  });

  it('finds every tool on this machine (scripts/test-tools.sh installs them)', () => {
    for (const tool of Object.keys(TEST_TOOLS) as TestTool[]) expect(requireTool(tool)).toMatch(/^\//);
  });

  it('installs nothing when every tool is present: apt-get and sudo are never called', () => {
    for (const tool of Object.keys(TEST_TOOLS) as TestTool[]) requireTool(tool);
    const bin = tempDir('botlink-test-tools-');
    const calls = join(bin, 'calls');
    for (const name of ['apt-get', 'sudo'])
      writeFileSync(join(bin, name), `#!/bin/sh\necho "${name} $*" >> '${calls}'\nexit 1\n`, { mode: 0o755 });
    const r = script([], { ...process.env, PATH: `${bin}${delimiter}${process.env.PATH ?? ''}` });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toBe(`test-tools: all present (${Object.keys(TEST_TOOLS).join(' ')})\n`);
    expect(() => readFileSync(calls, 'utf8')).toThrow(/ENOENT/);
    expect(script(['--check']).status).toBe(0);
  });

  it('refuses an unknown option with 64 and its usage', () => {
    const r = script(['--frobnicate']);
    expect(r.status).toBe(64);
    expect(r.stderr).toContain("unknown option '--frobnicate'");
    expect(r.stderr).toContain('usage: scripts/test-tools.sh');
  });
});
