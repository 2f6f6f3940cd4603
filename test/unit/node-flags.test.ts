import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { NODE_FLAGS, UNIT_FILE } from '../../scripts/bench/flags.js';
import { execStartOf, parseExecStart } from '../helpers/exec-start.js';

describe("the daemon's node flags, set in systemd/botlink.service", () => {
  it("keep undici's WebAssembly parser on Liftoff: its TurboFan tier-up leaves ~9 MiB resident for good", () => {
    expect(execStartOf(readFileSync(UNIT_FILE, 'utf8')).nodeFlags).toContain('--liftoff-only');
  });

  it('are the flags every benchmark child gets, agent and baseline alike', () => {
    expect(NODE_FLAGS).toEqual(execStartOf(readFileSync(UNIT_FILE, 'utf8')).nodeFlags);
  });

  // node exits 9 on an option it does not know: a typo would fail every start of the unit.
  it('are options this node accepts', () => {
    const run = spawnSync(
      process.execPath,
      [...NODE_FLAGS, '-e', 'new WebAssembly.Module(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]))'],
      {
        encoding: 'utf8',
      },
    );
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
  });
});

describe('parseExecStart', () => {
  it('splits node, its flags, the script and its args', () => {
    expect(parseExecStart('/usr/bin/node --a --b=1 /opt/x.mjs run --config c.json')).toEqual({
      program: '/usr/bin/node',
      nodeFlags: ['--a', '--b=1'],
      script: '/opt/x.mjs',
      args: ['run', '--config', 'c.json'],
    });
    expect(parseExecStart('/usr/bin/node /opt/x.mjs').nodeFlags).toEqual([]);
  });

  it('names the problem when the command line is not node running a script', () => {
    expect(() => parseExecStart('/usr/bin/python3 x.py')).toThrow(/not "node \[--flags\] <script>/);
    expect(() => parseExecStart('/usr/bin/node --flag')).toThrow(/update parseExecStart/);
    expect(() => execStartOf('[Service]\nType=notify\n')).toThrow(/found 0/);
  });
});
