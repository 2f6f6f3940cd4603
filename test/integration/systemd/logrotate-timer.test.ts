import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, truncateSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { closed } from '../../../scripts/lib/exec.js';
import { useHarness } from '../../helpers/harness.js';
import { requireTool } from '../../../scripts/lib/tools.js';
import { waitFor } from '../../helpers/wait-for.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const SNIPPET = readFileSync(join(ROOT, 'systemd', 'botlink.logrotate'), 'utf8');
const TIMER_FILE = join(ROOT, 'systemd', 'botlink-logrotate.timer');
const SERVICE_FILE = join(ROOT, 'systemd', 'botlink-logrotate.service');
/** Where install.sh puts the snippet, which the service names. */
const INSTALLED_SNIPPET = '/etc/logrotate.d/botlink';
const MAXSIZE = 10 * 1024 * 1024;

const { cleanups, tempDir } = useHarness();

/** A sparse log file of `bytes`: logrotate looks at st_size only. */
function sized(path: string, bytes: number): void {
  writeFileSync(path, '');
  truncateSync(path, bytes);
}

/** Every assignment of `key` in `section` of a unit file, in order. */
function settings(file: string, section: string, key: string): string[] {
  let current = '';
  const values: string[] = [];
  for (const raw of readFileSync(file, 'utf8').split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) current = header[1]!;
    else if (current === section && line.startsWith(`${key}=`)) values.push(line.slice(key.length + 1));
  }
  return values;
}

/** The service's ExecStart as argv. */
function execStart(): string[] {
  const lines = settings(SERVICE_FILE, 'Service', 'ExecStart');
  expect(lines).toHaveLength(1);
  return lines[0]!.split(/\s+/);
}

/**
 * A scratch copy of the snippet for logs in a temp folder, a state file, and a systemctl that records the
 * postrotate call. logrotate's `daily` compares calendar days: the runs get a time zone where it is noon,
 * so a rotation "earlier today" in the state file is never yesterday, whenever the test runs.
 */
function scratch() {
  const dir = tempDir('botlink-logrotate-timer-');
  const logs = join(dir, 'logs');
  const bin = join(dir, 'bin');
  mkdirSync(logs);
  mkdirSync(bin);
  const calls = join(dir, 'systemctl-calls');
  writeFileSync(join(bin, 'systemctl'), `#!/bin/sh\necho "$*" >> '${calls}'\n`, { mode: 0o755 });
  const conf = join(dir, 'botlink');
  // logrotate refuses configs writable by group or others.
  writeFileSync(conf, SNIPPET.replace('/var/log/botlink/*.log', `${logs}/*.log`), { mode: 0o644 });
  const shiftH = 12 - new Date().getUTCHours();
  const tz = `BLT${shiftH >= 0 ? '-' : '+'}${Math.abs(shiftH)}`;
  const localNow = new Date(Date.now() + shiftH * 3_600_000);
  const stamp = `${localNow.getUTCFullYear()}-${localNow.getUTCMonth() + 1}-${localNow.getUTCDate()}-${localNow.getUTCHours()}:0:0`;
  const state = join(dir, 'status');
  const log = join(logs, 'botlink.log');
  const foreign = join(dir, 'syslog');
  writeFileSync(foreign, 'another log the daily run rotates\n');
  // 0600: logrotate does not lock a world-readable state file.
  writeFileSync(state, `logrotate state -- version 2\n"${foreign}" ${stamp}\n"${log}" ${stamp}\n`, { mode: 0o600 });
  /** The service's command, with the scratch snippet and state file (the unit uses logrotate's default state). */
  const argv = (): string[] => {
    const [cmd, ...args] = execStart();
    expect(cmd).toBe('/usr/sbin/logrotate');
    expect(args.at(-1)).toBe(INSTALLED_SNIPPET);
    return [requireTool('logrotate'), '--state', state, ...args.slice(0, -1), conf];
  };
  const env = { ...process.env, TZ: tz, PATH: `${bin}${delimiter}${process.env.PATH ?? ''}` };
  const systemctlCalls = (): string => (existsSync(calls) ? readFileSync(calls, 'utf8') : '');
  return { dir, log, state, foreign, argv, env, systemctlCalls };
}

describe('botlink-logrotate.timer: the snippet’s maxsize looked at every hour', () => {
  it('fires every hour at half past, not at boot, and starts the service of its name', () => {
    expect(settings(TIMER_FILE, 'Timer', 'OnCalendar')).toEqual(['*-*-* *:30:00']);
    expect(settings(TIMER_FILE, 'Timer', 'Persistent')).toEqual([]);
    expect(settings(TIMER_FILE, 'Timer', 'Unit')).toEqual([]);
    expect(settings(TIMER_FILE, 'Install', 'WantedBy')).toEqual(['timers.target']);
    const r = spawnSync(requireTool('systemd-analyze'), ['calendar', '--iterations=3', '*-*-* *:30:00'], {
      encoding: 'utf8',
      env: { ...process.env, TZ: 'UTC' },
    });
    expect(r.status, r.stderr).toBe(0);
    const elapses = [...r.stdout.matchAll(/(?:Next elapse|Iter\. #\d): \w+ (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC/g)].map((m) =>
      Date.parse(`${m[1]!.replace(' ', 'T')}Z`),
    );
    expect(elapses).toHaveLength(3);
    expect([elapses[1]! - elapses[0]!, elapses[2]! - elapses[1]!]).toEqual([3_600_000, 3_600_000]);
    expect(new Date(elapses[0]!).getUTCMinutes()).toBe(30);
  });

  it('passes systemd-analyze verify with no message at all, timer and service together', () => {
    requireTool('logrotate');
    const dir = tempDir('botlink-logrotate-verify-');
    for (const file of [TIMER_FILE, SERVICE_FILE]) copyFileSync(file, join(dir, file.split('/').at(-1)!));
    const r = spawnSync(
      requireTool('systemd-analyze'),
      ['verify', '--man=no', join(dir, 'botlink-logrotate.timer'), join(dir, 'botlink-logrotate.service')],
      {
        encoding: 'utf8',
        env: { ...process.env, SYSTEMD_LOG_COLOR: '0' },
      },
    );
    expect(r.status, r.stderr).toBe(0);
    expect((r.stdout + r.stderr).trim()).toBe('');
  });

  it('runs logrotate on the installed snippet only, skipped cleanly where logrotate is missing', () => {
    expect(execStart()).toEqual(['/usr/sbin/logrotate', '--wait-for-state-lock', INSTALLED_SNIPPET]);
    expect(settings(SERVICE_FILE, 'Service', 'Type')).toEqual(['oneshot']);
    expect(settings(SERVICE_FILE, 'Unit', 'ConditionFileIsExecutable')).toEqual(['/usr/sbin/logrotate']);
  });

  it('rotates a log past maxsize that was rotated earlier today, and signals the daemon', () => {
    const s = scratch();
    sized(s.log, MAXSIZE + 1024 * 1024);
    const [cmd, ...args] = s.argv();
    const r = spawnSync(cmd!, args, { encoding: 'utf8', env: s.env });
    expect(r.status, r.stderr).toBe(0);
    expect(existsSync(s.log)).toBe(false);
    expect(readFileSync(`${s.log}.1`).length).toBe(MAXSIZE + 1024 * 1024);
    expect(s.systemctlCalls()).toBe('kill --signal=HUP --kill-who=main botlink.service\n');
  });

  it('leaves a log under maxsize alone until the day is over, and keeps the daily run’s other entries in the shared state', () => {
    const s = scratch();
    writeFileSync(s.log, 'x'.repeat(4096));
    const [cmd, ...args] = s.argv();
    const r = spawnSync(cmd!, args, { encoding: 'utf8', env: s.env });
    expect(r.status, r.stderr).toBe(0);
    expect(readFileSync(s.log, 'utf8')).toHaveLength(4096);
    expect(existsSync(`${s.log}.1`)).toBe(false);
    expect(s.systemctlCalls()).toBe('');
    expect(readFileSync(s.state, 'utf8')).toContain(`"${s.foreign}" `);
  });

  it('waits for the daily run’s lock on the shared state file instead of failing', async () => {
    const s = scratch();
    sized(s.log, MAXSIZE + 1);
    // The daily run, as far as the lock goes: holds the state file's flock until its stdin closes.
    const holder = spawn(requireTool('flock'), ['--exclusive', s.state, 'sh', '-c', 'echo locked; read _'], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    cleanups.push(() => holder.kill('SIGKILL'));
    let held = '';
    holder.stdout.on('data', (b: Buffer) => (held += b.toString()));
    await waitFor(() => held.includes('locked'), 10_000, 'flock holding the state file');

    const [cmd, ...args] = s.argv();
    const withoutWait = spawnSync(
      cmd!,
      args.filter((a) => a !== '--wait-for-state-lock'),
      { encoding: 'utf8', env: s.env },
    );
    expect(withoutWait.status).not.toBe(0);
    expect(withoutWait.stderr).toContain('already locked');

    const run = spawn(cmd!, args, { env: s.env, stdio: ['ignore', 'ignore', 'pipe'] });
    cleanups.push(() => run.kill('SIGKILL'));
    let stderr = '';
    run.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const exited = closed(run).then(({ code }) => code);
    // The kernel lists a process blocked in flock() as "->" in /proc/locks.
    const waiting = () =>
      readFileSync('/proc/locks', 'utf8')
        .split('\n')
        .some((l) => l.includes('->') && l.split(/\s+/).includes(String(run.pid)));
    await waitFor(waiting, 10_000, 'logrotate waiting on the state lock');
    expect(existsSync(`${s.log}.1`)).toBe(false);

    holder.stdin.end();
    expect(await exited, stderr).toBe(0);
    expect(existsSync(`${s.log}.1`)).toBe(true);
  });
});
