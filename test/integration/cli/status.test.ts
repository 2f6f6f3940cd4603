import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { StatusReport } from '../../../src/cli/commands/status.js';
import { DAEMON_SECRET, runCli, type DeviceDir } from '../../helpers/daemon-proc.js';
import { DAEMON_SEED, useHarness } from '../../helpers/harness.js';
import { botlinkInProcess } from '../../helpers/in-process.js';
import { waitFor } from '../../helpers/wait-for.js';

const { cleanups, service, device, daemon } = useHarness();

/** `botlink status` in both forms, in-process (what it reads is files and locks, not this process); neither may hold a token. */
async function status(d: DeviceDir, secrets: string[] = []): Promise<{ human: string; json: StatusReport }> {
  const human = await botlinkInProcess(['status', '--config', d.configFile]);
  const json = await botlinkInProcess(['status', '--config', d.configFile, '--json']);
  expect(human.code, human.stderr).toBe(0);
  expect(json.code, json.stderr).toBe(0);
  for (const s of [...secrets, DAEMON_SECRET]) expect(human.stdout + json.stdout).not.toContain(s);
  return { human: human.stdout, json: JSON.parse(json.stdout) as StatusReport };
}

/** Both tokens, through the command scripts use. */
async function tokens(d: DeviceDir): Promise<{ accessToken: string; refreshToken: string; accessExpiresAt: number }> {
  const run = await runCli(['token', '--config', d.configFile, '--json']);
  expect(run.code, run.stderr).toBe(0);
  return JSON.parse(run.stdout) as { accessToken: string; refreshToken: string; accessExpiresAt: number };
}

describe('botlink status', () => {
  it('reads the live status.json while the daemon runs, and the database after SIGTERM', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc);
    const p = daemon(d);
    await d.waitForLink('connected');
    const t = await tokens(d);
    const secrets = [t.accessToken, t.refreshToken];

    const live = await status(d, secrets);
    expect(live.json).toMatchObject({
      pid: p.child.pid,
      daemon: { running: true, pid: p.child.pid },
      source: 'status-file',
      identity: { kind: 'bot', id: 'bot-1' },
      token: { accessExpiresAt: t.accessExpiresAt },
      link: { state: 'connected', reconnects: 0 },
      store: { persisted: true, lastError: null },
    });
    expect(live.human).not.toMatch(/^state:/m);
    expect(live.human).toMatch(new RegExp(`^daemon: +running \\(pid ${p.child.pid}\\)`, 'm'));
    expect(live.human).toMatch(/^identity: +bot bot-1/m);
    expect(live.human).toMatch(/^access: +(1h 59m|2h) left/m);
    expect(live.human).toMatch(/^refresh: +(6d 23h|7d) left/m);
    expect(live.human).toMatch(/^link: +connected since .*, 0 reconnects/m);
    expect(live.human).toMatch(/^clock: /m);
    expect(live.human).toMatch(/^last error: +none/m);

    expect((await p.stop('SIGTERM')).code).toBe(0);
    const after = await status(d, secrets);
    expect(after.json).toMatchObject({
      pid: null,
      daemon: { running: false, pid: null, lastStatus: { pid: p.child.pid, linkState: 'stopped' } },
      source: 'database',
      identity: { kind: 'bot', id: 'bot-1' },
      token: { accessExpiresAt: t.accessExpiresAt, refreshExpiresAt: expect.any(Number) },
      link: { state: 'stopped' },
    });
    expect(after.human).toMatch(/^daemon: +not running .*stopped cleanly/m);
    expect(after.human).toMatch(/^access: +(1h 59m|2h) left/m);
    // status renews nothing and the cached pair is intact.
    expect(svc.stats.getToken.total).toBe(1);
    expect(svc.stats.refreshToken.ok).toBe(0);
    expect((await tokens(d)).accessToken).toBe(t.accessToken);
  });

  it('does not report the status.json of a SIGKILLed daemon as live', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc);
    const p = daemon(d);
    await d.waitForLink('connected');
    await p.stop('SIGKILL');
    expect(d.status()?.link.state).toBe('connected');
    const { human, json } = await status(d);
    expect(json).toMatchObject({
      daemon: { running: false, pid: null, lastStatus: { pid: p.child.pid, linkState: 'connected' } },
      source: 'database',
      link: { state: 'stopped' },
      identity: { kind: 'bot', id: 'bot-1' },
    });
    expect(json.token.accessExpiresAt).toBeGreaterThan(Date.now());
    expect(human).toMatch(/^daemon: +not running .*did not stop cleanly/m);
    expect(human).not.toMatch(/running \(pid/);
    expect(human).toMatch(/^link: +stopped/m);
  });

  it('a live process that has the pid of a killed daemon is not taken for it', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc);
    const p = daemon(d);
    await d.waitForLink('connected');
    await p.stop('SIGKILL');
    // The pid reused by another program: status.json names a process that lives, but holds no lock.
    const other = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1e6)'], { stdio: 'ignore' });
    cleanups.push(() => other.kill('SIGKILL'));
    await once(other, 'spawn');
    writeFileSync(join(d.runtimeDir, 'status.json'), JSON.stringify({ ...d.status(), pid: other.pid }));
    const { json } = await status(d);
    expect(json).toMatchObject({ daemon: { running: false, pid: null, lastStatus: { pid: other.pid } }, source: 'database' });
  });

  it('shows a refusal the daemon waits on with its fix, in status.json and in the summary', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc, { botId: 'bot-1' }, 'not-the-secret');
    daemon(d);
    await waitFor(() => d.status()?.token.lastError != null, 10_000, 'status.json token.lastError');
    expect(d.status()!.token).toMatchObject({
      lastError: expect.stringMatching(/^getToken refused with code 1005/),
      fix: expect.stringMatching(/secret-key file/),
    });
    const { human, json } = await status(d, ['not-the-secret']);
    expect(json.token.fix).toMatch(/secret-key file/);
    expect(human).toMatch(/^last error: +token: getToken refused with code 1005\b.* — fix: .*secret-key file/m);
  });

  it('works before anything ran, without creating the database or touching the network', async () => {
    const d = device('http://127.0.0.1:9', { vendorId: 'V1', deviceId: 'SN-1' });
    const { human, json } = await status(d);
    expect(json).toMatchObject({
      daemon: { running: false, pid: null },
      identity: { kind: 'vendor', id: 'V1' },
      token: { accessExpiresAt: null, refreshExpiresAt: null },
      link: { state: 'stopped', since: null },
      clock: { offsetMs: null },
    });
    expect(json.daemon.lastStatus).toBeUndefined();
    expect(human).toMatch(/^daemon: +not running$/m);
    expect(human).toMatch(/^identity: +vendor V1 \(no botId yet/m);
    expect(human).toMatch(/^access: +no token cached/m);
    expect(existsSync(join(d.stateDir, 'botlink.db'))).toBe(false);
  });

  it('exits 78 naming the key when the config is bad', async () => {
    const d = device('ftp://example.com');
    const run = await botlinkInProcess(['status', '--config', d.configFile]);
    expect(run.code).toBe(78);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/^botlink status: configuration error: .*baseUrl.*\n {2}fix: fix it in /);
  });

  it('reads the config $BOTLINK_CONFIG names in the environment it is given', async () => {
    const d = device('http://127.0.0.1:9', { vendorId: 'V1', deviceId: 'SN-ENV' });
    const run = await botlinkInProcess(['status', '--json'], { BOTLINK_CONFIG: d.configFile });
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(run.stdout)).toMatchObject({ identity: { kind: 'vendor', id: 'V1' }, source: 'database' });
  });
});
