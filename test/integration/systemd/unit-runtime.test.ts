import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { NODE_FLAGS, UNIT_ENV, UNIT_FILE } from '../../../scripts/bench/unit.js';
import { environmentOf, execStartOf, parseExecStart } from '../../../scripts/lib/exec-start.js';

const unitText = readFileSync(UNIT_FILE, 'utf8');

describe('how systemd/botlink.service runs node', () => {
  it("has glibc return free heap tops over 64 KiB: ~6 MiB the wasm parser's TurboFan compile left resident", () => {
    expect(environmentOf(unitText)).toEqual({ MALLOC_TRIM_THRESHOLD_: '65536' });
  });

  // Any V8 flag makes node compile its built-ins without their code cache: +26 ms on every boot.
  it('passes node no flags', () => {
    expect(execStartOf(unitText).nodeFlags).toEqual([]);
  });

  it('is how every benchmark child runs, agent and baseline alike', () => {
    expect(NODE_FLAGS).toEqual(execStartOf(unitText).nodeFlags);
    expect(UNIT_ENV).toEqual(environmentOf(unitText));
  });

  // node exits 9 on an option it does not know: a typo would fail every start of the unit.
  it('gives node only options and variables it starts with', () => {
    const run = spawnSync(process.execPath, [...NODE_FLAGS, '-e', '0'], { encoding: 'utf8', env: { ...process.env, ...UNIT_ENV } });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
  });
});

describe('parseExecStart and environmentOf', () => {
  it('split node, its flags, the script and its args', () => {
    expect(parseExecStart('/usr/bin/node --a --b=1 /opt/x.mjs run --config c.json')).toEqual({
      program: '/usr/bin/node',
      nodeFlags: ['--a', '--b=1'],
      script: '/opt/x.mjs',
      args: ['run', '--config', 'c.json'],
    });
    expect(parseExecStart('/usr/bin/node /opt/x.mjs').nodeFlags).toEqual([]);
  });

  it('read every Environment= line', () => {
    expect(environmentOf('[Service]\nEnvironment=A=1 B=\nEnvironment=C=x/y\n')).toEqual({ A: '1', B: '', C: 'x/y' });
    expect(environmentOf('[Service]\n')).toEqual({});
  });

  it('name the problem when the unit is not written as they read it', () => {
    expect(() => parseExecStart('/usr/bin/python3 x.py')).toThrow(/not "node \[--flags\] <script>/);
    expect(() => parseExecStart('/usr/bin/node --flag')).toThrow(/update parseExecStart/);
    expect(() => execStartOf('[Service]\nType=notify\n')).toThrow(/found 0/);
    expect(() => environmentOf('Environment="A=1 2"\n')).toThrow(/not an unquoted NAME=value/);
  });
});
