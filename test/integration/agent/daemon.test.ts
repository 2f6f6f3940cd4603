import { existsSync, readFileSync, renameSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DAEMON_SECRET } from '../../helpers/daemon-proc.js';
import { cleanEnv } from '../../../scripts/lib/env.js';
import { DAEMON_SEED, useHarness } from '../../helpers/harness.js';
import { notifyListener } from '../../helpers/notify-listener.js';
import { freePort } from '../../helpers/ports.js';
import { waitFor } from '../../helpers/wait-for.js';

const { cleanups, service, device, daemon, tempDir } = useHarness();

describe('botlink run (the built bundle as a child process)', () => {
  it('reaches connected, stops on SIGTERM with exit 0 in under 5 s, and restarts without signing', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc);
    const first = daemon(d);
    const status = await d.waitForLink('connected');
    expect(status).toMatchObject({ pid: first.child.pid, identity: { kind: 'bot', id: 'bot-1' }, clock: { trusted: true } });
    expect(status.token.accessExpiresAt).toBeGreaterThan(Date.now());
    const stopped = await first.stop('SIGTERM');
    expect(stopped.code).toBe(0);
    expect(stopped.ms).toBeLessThan(5000);
    expect(d.status()?.link.state).toBe('stopped');
    expect(svc.stats.getToken.ok).toBe(1);

    daemon(d);
    await waitFor(() => d.status()?.link.state === 'connected' && d.status()?.pid !== first.child.pid, 10_000, 'second boot connected');
    expect(svc.stats.getToken.total).toBe(1);
    const log = d.log();
    expect(log).not.toContain(DAEMON_SECRET);
    expect(log).toContain('link connected');
  });

  it('refuses a second instance on the same stateDir with a clear message', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc);
    daemon(d);
    await d.waitForLink('connected');
    const second = daemon(d);
    const result = await second.exited;
    expect(result.code).toBe(69);
    expect(second.stderr).toMatch(
      /another botlink daemon \(pid \d+\) already runs .*\n {2}fix: stop it first \(systemctl stop botlink\)\n/,
    );
  });

  it('reopens its log file on SIGHUP (logrotate renames, then signals)', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc);
    const p = daemon(d);
    await d.waitForLink('connected');
    renameSync(d.logFile, `${d.logFile}.1`);
    p.child.kill('SIGHUP');
    await waitFor(() => existsSync(d.logFile) && d.log().includes('log file reopened'), 15_000, 'a new log file');
    // The rotated file kept what came before; the new one starts at the reopen.
    expect(readFileSync(`${d.logFile}.1`, 'utf8')).toContain('"msg":"botlink starting"');
    expect(readFileSync(`${d.logFile}.1`, 'utf8')).not.toContain('log file reopened');
  });

  it('provisions itself from vendorId and deviceId, stores the botId, then connects as that bot', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc, { vendorId: 'V1', deviceId: 'SN-0042' });
    const p = daemon(d);
    const status = await d.waitForLink('connected');
    expect(status.identity.kind).toBe('bot');
    expect(svc.stats.register.ok).toBe(1);
    await p.stop();
    daemon(d);
    await waitFor(() => d.status()?.link.state === 'connected' && d.status()?.pid !== p.child.pid, 10_000, 'second boot');
    expect(svc.stats.register.total).toBe(1);
  });

  it('stays up with the cloud unreachable and no NOTIFY_SOCKET, retries, and connects once the cloud appears', async () => {
    const port = await freePort();
    const d = device(`http://127.0.0.1:${port}`, { botId: 'bot-1', tokenBackoffBaseMs: 100, tokenBackoffCapMs: 400 });
    const p = daemon(d);
    // Three failed attempts: the first retry and one after it, each a line that names its next wait.
    const retries = () => (d.log().match(/"retryInMs"/g) ?? []).length;
    await Promise.race([
      waitFor(() => retries() >= 3, 15_000, 'three failed attempts in the log'),
      p.exited.then(({ code, signal }) => {
        throw new Error(`the daemon exited (code ${code}, signal ${signal}) while the cloud was away:\n${d.log()}`);
      }),
    ]);
    await service(DAEMON_SEED, { port });
    const status = await d.waitForLink('connected', 15_000);
    expect(status.pid).toBe(p.child.pid);
  });

  it('speaks sd_notify: READY=1, STATUS and WATCHDOG=1 on a real datagram socket, STOPPING=1 at the end', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc);
    const { path, received } = await notifyListener(tempDir('botlink-notify-'), cleanups);
    const p = daemon(d, cleanEnv({ NOTIFY_SOCKET: path, WATCHDOG_USEC: '400000' }));
    await waitFor(() => received().includes('READY=1'), 10_000, 'READY=1');
    await waitFor(() => (received().match(/WATCHDOG=1/g) ?? []).length >= 3, 15_000, 'watchdog pings');
    expect(received()).toMatch(/STATUS=\S+/);
    await p.stop();
    await waitFor(() => received().includes('STOPPING=1'), 15_000, 'STOPPING=1');
  });
});
