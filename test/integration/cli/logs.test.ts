import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { BUNDLE } from '../../../scripts/build.mjs';
import { botlinkAs } from '../../helpers/bundle.js';
import { DeviceDir, runCli } from '../../helpers/daemon-proc.js';
import { exec } from '../../../scripts/lib/exec.js';
import { cleanEnv } from '../../../scripts/lib/env.js';
import { DAEMON_SEED, useHarness } from '../../helpers/harness.js';
import { botlinkInProcess } from '../../helpers/in-process.js';
import { waitFor } from '../../helpers/wait-for.js';

/** `botlink logs` (DESIGN §3.1): the log in words, rotated generations in order, filters, -f through a rotation. */

const { cleanups, service, device, daemon, tempDir } = useHarness();
const UID = 4243;
const UTC = cleanEnv({ TZ: 'UTC' });

const entry = (time: string, level: string, msg: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ level, time, pid: 7, name: 'botlink', ...extra, msg });

/** A device dir whose log has three rotated generations (.3.gz, .2.gz, .1) and a current file torn at its end. */
function rotatedLog(): DeviceDir {
  const d = new DeviceDir({ baseUrl: 'http://127.0.0.1:9', botId: 'bot-1' });
  cleanups.push(() => d.remove());
  mkdirSync(dirname(d.logFile), { recursive: true });
  const gz = (lines: string[]) => gzipSync(`${lines.join('\n')}\n`);
  writeFileSync(`${d.logFile}.3.gz`, gz([entry('2026-11-20T08:00:00.000Z', 'info', 'botlink starting', { version: '0.1.0' })]));
  writeFileSync(
    `${d.logFile}.2.gz`,
    gz([entry('2026-11-21T09:00:00.000Z', 'warn', 'link backoff', { part: 'link', reason: 'closed (1006)' })]),
  );
  writeFileSync(`${d.logFile}.1`, `${entry('2026-11-22T10:00:00.000Z', 'debug', 'app attached', { part: 'relay', outcome: 'kept' })}\n`);
  writeFileSync(
    d.logFile,
    `${entry('2026-11-23T11:00:00.000Z', 'error', 'cannot write status.json', { runtimeDir: '/run/x' })}\n{"level":"info","time":"2026-11-23T11:00:01.000Z","ms`,
  );
  // Only logFile is read from the config: the secret is not needed, nor readable by a technician.
  rmSync(join(d.dir, 'secret-key'));
  return d;
}

describe('botlink logs', () => {
  it('prints every generation oldest first in words, and the torn last line for what it is', async () => {
    const d = rotatedLog();
    const r = await runCli(['logs', '--config', d.configFile], { env: UTC });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split('\n')).toEqual([
      '2026-11-20 08:00:00.000 INFO  botlink: botlink starting version=0.1.0',
      '2026-11-21 09:00:00.000 WARN  link: link backoff reason="closed (1006)"',
      '2026-11-22 10:00:00.000 DEBUG relay: app attached outcome=kept',
      '2026-11-23 11:00:00.000 ERROR botlink: cannot write status.json runtimeDir=/run/x',
      '(not a log entry) {"level":"info","time":"2026-11-23T11:00:01.000Z","ms',
      '',
    ]);
  });

  // In-process, so in this process's time zone: the times of its readable lines are left to the test above, in UTC.
  it('filters by --level and --since, and passes the JSON lines through with --json (in-process)', async () => {
    const d = rotatedLog();
    const warn = await botlinkInProcess(['logs', '--config', d.configFile, '--level', 'warn']);
    expect(warn).toMatchObject({ code: 0, stderr: '' });
    expect(warn.stdout).toMatch(
      /^\S+ \S+ WARN {2}link: link backoff.*\n\S+ \S+ ERROR botlink: cannot write status\.json.*\n\(not a log entry\) .*\n$/,
    );
    const since = await botlinkInProcess(['logs', '--config', d.configFile, '--since', '2026-11-22T00:00:00Z', '--json']);
    expect(since).toMatchObject({ code: 0, stderr: '' });
    expect(
      since.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).msg),
    ).toEqual(['app attached', 'cannot write status.json']);
  });

  it(`works for another user who may read the log (uid ${UID}), with no access to the secret`, async () => {
    const d = rotatedLog();
    for (const path of [d.dir, dirname(d.logFile)]) chmodSync(path, 0o755);
    for (const path of [d.configFile, `${d.logFile}.3.gz`, `${d.logFile}.2.gz`, `${d.logFile}.1`, d.logFile]) chmodSync(path, 0o644);
    chownSync(d.logFile, 0, 0);
    const r = await exec(...botlinkAs(UID, ['logs', '--config', d.configFile]), { env: UTC });
    const out = r.stdout + r.stderr;
    expect(r.code, out).toBe(0);
    expect(out).toContain('WARN  link: link backoff');
  });

  it('-f shows a drop and the reconnect of a running daemon as they happen, through a log rotation', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc, { botId: 'bot-1', logLevel: 'info', linkBackoffBaseMs: 50, linkBackoffCapMs: 200 });
    const proc = daemon(d);
    await d.waitForLink('connected');
    const child = spawn(process.execPath, [BUNDLE, 'logs', '-f', '--config', d.configFile], { env: UTC });
    cleanups.push(() => child.kill('SIGKILL'));
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    await waitFor(() => out.includes('link: link connected'), 10_000, 'the log so far');

    // logrotate's way: rename, then SIGHUP; the daemon writes its next lines to a new file.
    renameSync(d.logFile, `${d.logFile}.1`);
    proc.child.kill('SIGHUP');
    await waitFor(() => out.includes('log file reopened (SIGHUP)'), 10_000, 'the line after the rotation');
    const from = out.length;
    svc.faults.dropAllSockets();
    await waitFor(
      () => /link: link backoff[^\n]*reason=.*\n[\s\S]*link: link connected/.test(out.slice(from)),
      10_000,
      'the drop and the reconnect',
    );
    expect(out.slice(from)).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} (INFO |WARN ) link: link backoff/m);
  });
});

describe("botlink logs on what the daemon's user may put in its log folder (sudo botlink logs reads it as root)", () => {
  const SECRET = 'root:$6$not-for-the-log$:19000:0:99999:7:::';

  it('a symlinked generation or current file is skipped, saying so: what it points at is never printed (in-process)', async () => {
    const d = rotatedLog();
    const target = join(tempDir('botlink-secret-'), 'shadow');
    writeFileSync(target, `${entry('2026-11-21T00:00:00.000Z', 'error', SECRET)}\n`, { mode: 0o600 });
    unlinkSync(`${d.logFile}.1`);
    symlinkSync(target, `${d.logFile}.1`);
    renameSync(d.logFile, `${d.logFile}.0`);
    symlinkSync(target, d.logFile);
    const r = await botlinkInProcess(['logs', '--config', d.configFile]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).not.toContain('not-for-the-log');
    expect(r.stdout).toContain('WARN  link: link backoff');
    expect(r.stderr).toContain('botlink logs: skipping botlink.log.1: a symbolic link');
    expect(r.stderr).toContain('botlink logs: skipping botlink.log: a symbolic link');
  });

  // A child process: an open that waited on the FIFO would hang this one, where the timeout could not end it.
  it('a FIFO among the generations or as the current file is skipped at once, never waited on', async () => {
    const d = rotatedLog();
    unlinkSync(`${d.logFile}.1`);
    execFileSync('mkfifo', [`${d.logFile}.1`]);
    unlinkSync(d.logFile);
    execFileSync('mkfifo', [d.logFile]);
    const r = await runCli(['logs', '--config', d.configFile], { env: UTC, timeoutMs: 10_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('WARN  link: link backoff');
    expect(r.stderr).toContain('botlink logs: skipping botlink.log.1: a FIFO');
    expect(r.stderr).toContain('botlink logs: skipping botlink.log: a FIFO');
  });

  it('a compressed generation is inflated up to 64 MiB of text, saying where it stopped; the next files still read (in-process)', async () => {
    const d = rotatedLog();
    // 72 MiB of debug lines, then one error line past the bound: 1 MiB on disk.
    const line = `${entry('2026-11-20T09:00:00.000Z', 'debug', 'x'.repeat(950))}\n`;
    const bomb = Buffer.from(line.repeat(Math.ceil((72 * 1024 * 1024) / line.length)));
    const beyond = `${entry('2026-11-20T10:00:00.000Z', 'error', 'beyond the bound')}\n`;
    writeFileSync(`${d.logFile}.4.gz`, gzipSync(Buffer.concat([bomb, Buffer.from(beyond)])));
    const r = await botlinkInProcess(['logs', '--config', d.configFile, '--level', 'warn']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('botlink logs: stopped reading botlink.log.4.gz after 64 MiB of text: the rest of it is left out');
    expect(r.stdout).not.toContain('beyond the bound');
    expect(r.stdout).toContain('WARN  link: link backoff');
    expect(r.stdout).toContain('ERROR botlink: cannot write status.json');
  });
});
