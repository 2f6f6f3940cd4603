import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { BUNDLE } from '../../../scripts/build.mjs';
import { DEFAULTS, loadConfig } from '../../../src/agent/config/config.js';
import { NO_SECRET_STAND_IN } from '../../../src/agent/config/secret.js';
import { watchdogIntervalMs } from '../../../src/agent/daemon/notify.js';
import { Exit } from '../../../src/cli/frame/exit.js';
import type { ReferenceService } from '../../../src/service/server.js';
import { useHarness } from '../../helpers/harness.js';
import { notifyListener } from '../../helpers/notify-listener.js';
import { parseUnit } from '../../helpers/unit-file.js';
import { cleanEnv } from '../../../scripts/lib/env.js';
import { parseExecStart } from '../../../scripts/lib/exec-start.js';
import { closed } from '../../../scripts/lib/exec.js';
import { requireTool } from '../../../scripts/lib/tools.js';
import { waitFor } from '../../helpers/wait-for.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const UNIT_FILE = join(ROOT, 'systemd', 'botlink.service');
const LOGROTATE_FILE = join(ROOT, 'systemd', 'botlink.logrotate');
const CONFIG_TEMPLATE = join(ROOT, 'systemd', 'config.example.json');
const SECRET = 'unit-test-secret-7f3a';
const SEED = { accounts: [{ accessKeyId: 'AK', secretKey: SECRET, vendors: [{ vendorId: 'V1', bots: ['bot-1'] }] }] };

const unit = parseUnit(readFileSync(UNIT_FILE, 'utf8'));
/** The last assignment of a key (what systemd uses for scalar settings). */
function setting(section: string, key: string): string | undefined {
  return unit.get(section)?.get(key)?.at(-1);
}
function required(section: string, key: string): string {
  const value = setting(section, key);
  if (value === undefined) throw new Error(`[${section}] ${key}= is not set in ${UNIT_FILE}`);
  return value;
}

/** A systemd time span in seconds ("30s", "2min", "120"). */
function seconds(span: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h)?$/.exec(span.trim());
  if (!m) throw new Error(`unsupported time span: ${span}`);
  const factor = { ms: 0.001, s: 1, sec: 1, m: 60, min: 60, h: 3600 }[m[2] ?? 's']!;
  return Number(m[1]) * factor;
}

/** A systemd byte size ("256M", "1G", "65536"): K, M, G are powers of 1024. */
function bytes(size: string): number {
  const m = /^(\d+)([KMG])?$/.exec(size.trim());
  if (!m) throw new Error(`unsupported byte size: ${size}`);
  return Number(m[1]) * 1024 ** ' KMG'.indexOf(m[2] ?? ' ');
}

/** Resident memory of a running process, from /proc/<pid>/status. */
function rssBytes(pid: number): number {
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  if (kb === undefined) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(kb) * 1024;
}

const { cleanups, service, tempDir } = useHarness();

describe('systemd/botlink.service: what the daemon needs from it', () => {
  it('is a notify service whose main process (node itself) runs the bundle with the config credential', () => {
    expect(required('Service', 'Type')).toBe('notify');
    expect(required('Service', 'NotifyAccess')).toBe('main');
    expect(required('Service', 'ExecStart')).toBe(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: systemd's own ${} specifier, not a template.
      '/usr/bin/node /opt/botlink/dist/botlink.mjs run --config ${CREDENTIALS_DIRECTORY}/config.json',
    );
    expect(unit.get('Service')!.get('LoadCredential')).toEqual([
      'config.json:/etc/botlink/config.json',
      'secret-key:/etc/botlink/secret-key',
    ]);
    // A device in broker mode has no secret file: the unit must still start (a missing source fails it).
    expect(unit.get('Service')!.get('SetCredential')).toEqual([`secret-key:${NO_SECRET_STAND_IN}`]);
    expect(required('Service', 'ExecReload')).toBe('/bin/kill -HUP $MAINPID');
  });

  it('gives the daemon exactly the directories its defaults name', () => {
    expect(required('Service', 'DynamicUser')).toBe('yes');
    expect(`/var/lib/${required('Service', 'StateDirectory')}`).toBe(DEFAULTS.stateDir);
    expect(`/run/${required('Service', 'RuntimeDirectory')}`).toBe(DEFAULTS.runtimeDir);
    expect(`/var/log/${required('Service', 'LogsDirectory')}`).toBe(dirname(DEFAULTS.logFile));
    expect(required('Service', 'ConfigurationDirectory')).toBe('botlink');
    expect(required('Service', 'UMask')).toBe('0077');
  });

  it('runs in the static botlink group, so the local API socket is born in it and its members can reach it', () => {
    expect(required('Service', 'Group')).toBe('botlink');
    // systemd refuses (EILSEQ) a dynamic user named like an existing group: the user must not be "botlink".
    const user = required('Service', 'User');
    expect(user).not.toBe('botlink');
    expect(user).toMatch(/^[a-z][a-z0-9-]*$/);
    // The group must pass through RuntimeDirectory to the socket, which is there by default.
    const mode = Number.parseInt(required('Service', 'RuntimeDirectoryMode'), 8);
    expect(mode & 0o010).toBe(0o010);
  });

  it('restarts after any exit without giving up, except on a usage error, and waits long enough to stop', () => {
    // A daemon that exits 0 on its own is as down as one that crashed.
    expect(required('Service', 'Restart')).toBe('always');
    const restartS = seconds(required('Service', 'RestartSec'));
    const intervalS = seconds(required('Unit', 'StartLimitIntervalSec'));
    const burst = Number(required('Unit', 'StartLimitBurst'));
    // Automatic restarts RestartSec apart must never reach the start limit.
    expect(Math.floor(intervalS / restartS) + 1).toBeLessThanOrEqual(burst);
    const noRestart = required('Service', 'RestartPreventExitStatus').split(/\s+/).map(Number);
    // Every start reloads the credentials, so a config fixed in /etc/botlink heals on the next restart.
    expect(noRestart).toEqual([Exit.USAGE]);
    expect(seconds(required('Service', 'TimeoutStopSec'))).toBeGreaterThanOrEqual(10);
    // Before READY: time-source checks, then vendor token, registration and bot token, each one HTTP timeout at most.
    expect(seconds(required('Service', 'TimeoutStartSec'))).toBeGreaterThanOrEqual((4 * DEFAULTS.httpTimeoutMs) / 1000);
    const watchdogS = seconds(required('Service', 'WatchdogSec'));
    expect(watchdogIntervalMs({ WATCHDOG_USEC: String(watchdogS * 1e6) })).toBeLessThanOrEqual((watchdogS * 1000) / 2);
  });

  it('orders after the network and time sync', () => {
    expect(required('Unit', 'Wants')).toContain('network-online.target');
    expect(required('Unit', 'After').split(/\s+/)).toEqual(expect.arrayContaining(['network-online.target', 'time-sync.target']));
  });

  it('keeps out the hardening that would break node or the daemon', () => {
    const service = unit.get('Service')!;
    // V8 JIT needs writable+executable memory; the board serial is in /proc/cpuinfo; the locks are
    // abstract sockets, which a private network namespace would hide from `sudo botlink …`.
    expect(service.get('MemoryDenyWriteExecute') ?? ['no']).toEqual(['no']);
    expect(service.get('ProcSubset') ?? ['all']).toEqual(['all']);
    expect(service.has('PrivateNetwork')).toBe(false);
    expect(service.has('IPAddressDeny')).toBe(false);
    expect(required('Service', 'RestrictAddressFamilies').split(/\s+/).sort()).toEqual(['AF_INET', 'AF_INET6', 'AF_UNIX']);
    expect(required('Service', 'SystemCallErrorNumber')).toBe('EPERM');
  });
});

describe(`systemd-analyze on the unit (.ci/run installs systemd)`, () => {
  function security(file: string) {
    const r = spawnSync(requireTool('systemd-analyze'), ['security', '--offline=yes', '--threshold=20', '--no-pager', file], {
      encoding: 'utf8',
    });
    const m = /Overall exposure level for \S+: (\d+(?:\.\d+)?)/.exec(r.stdout);
    return { status: r.status, exposure: m ? Number(m[1]) : undefined, output: r.stdout + r.stderr };
  }

  it('rates the exposure at 1.5 or lower (threshold 20 makes the command itself fail above)', () => {
    const { status, exposure, output } = security(UNIT_FILE);
    expect(exposure, output).toBeDefined();
    expect(exposure!).toBeLessThanOrEqual(1.5);
    expect(status, output).toBe(0);
  });

  it('fails the same check for an unhardened unit (the check can fail)', () => {
    const dir = tempDir('botlink-unit-');
    const bare = join(dir, 'botlink.service');
    writeFileSync(bare, '[Service]\nType=notify\nExecStart=/usr/bin/node /opt/botlink/dist/botlink.mjs run\n');
    const { status, exposure } = security(bare);
    expect(exposure!).toBeGreaterThan(2.0);
    expect(status).not.toBe(0);
  });

  /** verify checks ExecStart's program exists; a host without /usr/bin/node gets this node instead. */
  function verify(text: string): { status: number | null; output: string } {
    const dir = tempDir('botlink-verify-');
    const file = join(dir, 'botlink.service');
    writeFileSync(file, existsSync('/usr/bin/node') ? text : text.replaceAll('/usr/bin/node', process.execPath));
    const r = spawnSync(requireTool('systemd-analyze'), ['verify', '--man=no', file], {
      encoding: 'utf8',
      env: { ...process.env, SYSTEMD_LOG_COLOR: '0' },
    });
    return { status: r.status, output: (r.stdout + r.stderr).trim() };
  }

  it('passes systemd-analyze verify with no message at all', () => {
    expect(verify(readFileSync(UNIT_FILE, 'utf8'))).toEqual({ status: 0, output: '' });
  });

  it('has verify report a misspelt directive (the check can fail)', () => {
    const broken = readFileSync(UNIT_FILE, 'utf8').replace('ProtectClock=yes', 'ProtectClok=yes');
    expect(verify(broken).output).toMatch(/Unknown key 'ProtectClok'/);
  });
});

/** The bundle run as the unit's ExecStart would run it under systemd, against a reference service. */
class UnitRun {
  readonly dir: string;
  readonly credentials: string;
  readonly logFile: string;
  readonly runtimeDir: string;
  readonly child: ChildProcess;
  notes = '';
  stderr = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(svc: ReferenceService, dir: string, notifySocket: string) {
    this.dir = dir;
    // What LoadCredential= makes: private copies, mode 0400, in $CREDENTIALS_DIRECTORY.
    this.credentials = join(dir, 'credentials');
    mkdirSync(this.credentials, { mode: 0o700 });
    copyFileSync(CONFIG_TEMPLATE, join(this.credentials, 'config.json'));
    writeFileSync(join(this.credentials, 'secret-key'), `${SECRET}\n`);
    for (const f of ['config.json', 'secret-key']) chmodSync(join(this.credentials, f), 0o400);
    this.logFile = join(dir, 'log', 'botlink.log');
    this.runtimeDir = join(dir, 'run');
    const { program, nodeFlags, script, args } = parseExecStart(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: systemd's own ${} specifier, not a template.
      required('Service', 'ExecStart').replaceAll('${CREDENTIALS_DIRECTORY}', this.credentials),
    );
    expect([program, script]).toEqual(['/usr/bin/node', '/opt/botlink/dist/botlink.mjs']);
    const env = cleanEnv({
      CREDENTIALS_DIRECTORY: this.credentials,
      NOTIFY_SOCKET: notifySocket,
      WATCHDOG_USEC: String(seconds(required('Service', 'WatchdogSec')) * 1e6),
      // The template's device settings, pointed at this test's service and folders.
      BOTLINK_BASE_URL: svc.url,
      BOTLINK_ACCESS_KEY_ID: 'AK',
      BOTLINK_VENDOR_ID: 'V1',
      BOTLINK_DEVICE_ID: 'unit-test-device',
      BOTLINK_STATE_DIR: join(dir, 'state'),
      BOTLINK_RUNTIME_DIR: this.runtimeDir,
      BOTLINK_LOG_FILE: this.logFile,
    });
    this.child = spawn(process.execPath, [...nodeFlags, BUNDLE, ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    this.child.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
    this.exited = closed(this.child);
    cleanups.push(() => this.child.kill('SIGKILL'));
  }

  log(file = this.logFile): string {
    try {
      return readFileSync(file, 'utf8');
    } catch {
      return '';
    }
  }
}

async function unitRun(): Promise<{ run: UnitRun; notify: () => string }> {
  const svc = await service(SEED);
  const dir = tempDir('botlink-unit-run-');
  const listener = await notifyListener(dir, cleanups);
  const run = new UnitRun(svc, dir, listener.path);
  await waitFor(() => listener.received().includes('READY=1'), 15_000, `READY=1 (stderr: ${run.stderr})`);
  return { run, notify: listener.received };
}

describe('the unit ExecStart, run as systemd would run it', () => {
  it('reads config.json and the relative secret-key from $CREDENTIALS_DIRECTORY', () => {
    const dir = tempDir('botlink-credentials-');
    copyFileSync(CONFIG_TEMPLATE, join(dir, 'config.json'));
    writeFileSync(join(dir, 'secret-key'), SECRET, { mode: 0o400 });
    const config = loadConfig({ file: join(dir, 'config.json'), env: {} });
    expect(config.secretKeyFile).toBe(join(dir, 'secret-key'));
    expect(config.mode === 'sign' && config.secretKey.reveal()).toBe(SECRET);
    // The template states the same folders the unit creates.
    expect({ stateDir: config.stateDir, runtimeDir: config.runtimeDir, logFile: config.logFile }).toEqual({
      stateDir: DEFAULTS.stateDir,
      runtimeDir: DEFAULTS.runtimeDir,
      logFile: DEFAULTS.logFile,
    });
    // The local API socket sits in RuntimeDirectory, in the unit's Group= (the daemon's own).
    expect([config.localSocket, config.localGroup]).toEqual([join(DEFAULTS.runtimeDir, 'botlink.sock'), null]);
  });

  it('signals READY from the main pid, pings the watchdog, reopens the log on ExecReload and stops within TimeoutStopSec', async () => {
    const { run, notify } = await unitRun();
    expect(notify()).toContain(`MAINPID=${run.child.pid}`);
    expect(notify()).toContain('WATCHDOG=1');
    await waitFor(() => run.log().includes('"link connected"'), 10_000, 'link connected in the log');
    // MemoryMax must leave the connected daemon at least twice its RSS: GC slack plus a few maximal cloud messages.
    expect(bytes(required('Service', 'MemoryMax'))).toBeGreaterThanOrEqual(2 * rssBytes(run.child.pid!));

    const signal = /^\/bin\/kill -(\w+) \$MAINPID$/.exec(required('Service', 'ExecReload'))![1]!;
    renameSync(run.logFile, `${run.logFile}.1`);
    run.child.kill(`SIG${signal}` as NodeJS.Signals);
    await waitFor(() => run.log().includes('log file reopened'), 15_000, 'the log reopened after ExecReload');

    const started = performance.now();
    run.child.kill('SIGTERM');
    const { code } = await run.exited;
    expect(code, run.stderr).toBe(0);
    expect(performance.now() - started).toBeLessThan(seconds(required('Service', 'TimeoutStopSec')) * 1000);
    // The daemon may exit before the python listener has printed its last datagram.
    await waitFor(() => notify().includes('STOPPING=1'), 15_000, 'STOPPING=1');
  });
});

describe('systemd/botlink.logrotate', () => {
  const snippet = readFileSync(LOGROTATE_FILE, 'utf8');

  it('rotates the daemon log folder by renaming and signalling, never copytruncate', () => {
    expect(snippet).toContain(`${dirname(DEFAULTS.logFile)}/*.log {`);
    expect(snippet).not.toMatch(/^\s*copytruncate/m);
    expect(snippet).toMatch(/^\s*nocreate$/m);
    expect(snippet).toMatch(/postrotate\s+systemctl kill --signal=HUP --kill-who=main botlink\.service\b/);
  });

  describe('with logrotate (.ci/run installs it)', () => {
    /** logrotate ignores configs owned by another user or writable by others: run a private copy. */
    function copyFor(dir: string, text: string): string {
      const file = join(dir, 'botlink.conf');
      writeFileSync(file, text, { mode: 0o644 });
      return file;
    }

    it('accepts the snippet in debug mode, which changes nothing', () => {
      const dir = tempDir('botlink-logrotate-');
      const r = spawnSync(requireTool('logrotate'), ['-d', '-s', join(dir, 'logrotate.state'), copyFor(dir, snippet)], {
        encoding: 'utf8',
      });
      const output = r.stdout + r.stderr;
      expect(r.status, output).toBe(0);
      expect(output).toContain(`rotating pattern: ${dirname(DEFAULTS.logFile)}/*.log`);
      expect(output).not.toMatch(/^error:/m);
    });

    it('rotates a running daemon log: rename, postrotate HUP to the main pid, the daemon writes a new file', async () => {
      const logrotate = requireTool('logrotate');
      const { run } = await unitRun();
      await waitFor(() => run.log().includes('"link connected"'), 10_000, 'link connected in the log');
      const bin = join(run.dir, 'bin');
      const calls = join(run.dir, 'systemctl-calls');
      mkdirSync(bin);
      // Stands in for systemctl: the exact call the snippet makes becomes a HUP to this daemon.
      writeFileSync(
        join(bin, 'systemctl'),
        `#!/bin/sh\necho "$*" >> ${calls}\n[ "$*" = "kill --signal=HUP --kill-who=main botlink.service" ] && kill -HUP ${run.child.pid}\n`,
        { mode: 0o755 },
      );
      const conf = copyFor(run.dir, snippet.replace(`${dirname(DEFAULTS.logFile)}/*.log`, `${dirname(run.logFile)}/*.log`));
      const rotate = () =>
        spawnSync(logrotate, ['-f', '-s', join(run.dir, 'logrotate.state'), conf], {
          encoding: 'utf8',
          env: { ...process.env, PATH: `${bin}${delimiter}${process.env.PATH ?? ''}` },
        });

      const before = run.log();
      const first = rotate();
      expect(first.status, first.stderr).toBe(0);
      expect(readFileSync(calls, 'utf8')).toBe('kill --signal=HUP --kill-who=main botlink.service\n');
      expect(readFileSync(`${run.logFile}.1`, 'utf8')).toBe(before);
      await waitFor(() => run.log().includes('log file reopened'), 15_000, 'the daemon reopening its log');

      // delaycompress: the previous generation is compressed on the next rotation, not this one.
      const second = rotate();
      expect(second.status, second.stderr).toBe(0);
      expect(existsSync(`${run.logFile}.2.gz`)).toBe(true);
      expect(readFileSync(`${run.logFile}.1`, 'utf8')).toContain('log file reopened');
    });
  });
});
