import { describe, expect, it } from 'vitest';
import { TokenStore } from '../../../src/agent/store/token-store.js';
import { DAEMON_SECRET, runCli } from '../../helpers/daemon-proc.js';
import { DAEMON_SEED, useHarness } from '../../helpers/harness.js';
import { startScriptedServer, trickleBody, type Script } from '../../helpers/scripted-server.js';
import { connectWs } from '../../helpers/service-client.js';

const { service, device, daemon, cleanups } = useHarness();

describe('botlink token', () => {
  it('prints a token the service accepts, reuses it on the next call, and never shows the refresh token, --json included', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc.url);
    const first = await runCli(['token', '--config', d.configFile]);
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/^\S+\n$/);
    const access = first.stdout.trim();
    const ws = await connectWs(svc.wsUrl, 'bot-1', access);
    expect(ws.ok).toBe(true);
    if (ws.ok) ws.ws.close();

    const second = await runCli(['token', '--config', d.configFile]);
    expect(second).toMatchObject({ code: 0, stdout: first.stdout });
    expect(svc.stats.getToken.total).toBe(1);

    const json = await runCli(['token', '--config', d.configFile, '--json']);
    expect(json.code).toBe(0);
    const doc = JSON.parse(json.stdout) as Record<string, unknown>;
    expect(Object.keys(doc).sort()).toEqual(['accessExpiresAt', 'accessToken', 'refreshExpiresAt']);
    expect(doc.accessToken).toBe(access);
    expect(doc.accessExpiresAt).toBeGreaterThan(Date.now());
    expect(doc.refreshExpiresAt).toBeGreaterThan(Number(doc.accessExpiresAt));
    const store = TokenStore.open(d.stateDir);
    const refreshToken = store.peekPair()?.pair.refreshToken;
    store.close();
    expect(refreshToken).toMatch(/\S/);
    expect(first.stdout + second.stdout + json.stdout + json.stderr).not.toContain(refreshToken);
    const log = d.log();
    expect(log).toContain('"command":"token"');
    for (const secret of [access, refreshToken!, DAEMON_SECRET]) expect(log).not.toContain(secret);
  });

  it('hands out the cached token while the service is down', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc.url);
    const first = await runCli(['token', '--config', d.configFile]);
    expect(first.code, first.stderr).toBe(0);
    await svc.close();
    const offline = await runCli(['token', '--config', d.configFile]);
    expect(offline).toMatchObject({ code: 0, stdout: first.stdout });
  });

  it('exits 78 with the secret-key fix when the secret is wrong', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc.url, { botId: 'bot-1' }, 'not-the-secret');
    const run = await runCli(['token', '--config', d.configFile]);
    expect(run.code).toBe(78);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/1005/);
    expect(run.stderr).toMatch(/fix: .*secret-key/);
  });

  it('exits 69 at once, naming baseUrl, when the service is down', async () => {
    const svc = await service(DAEMON_SEED);
    await svc.close();
    const d = device(svc.url);
    const started = performance.now();
    const run = await runCli(['token', '--config', d.configFile]);
    expect(run.code).toBe(69);
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(run.stderr).toContain(`cannot reach baseUrl ${svc.url}`);
  });

  it.each([
    ['trickles its answer a byte at a time', trickleBody(100, 100_000, { bytes: 0 })],
    ['never answers', (() => undefined) as Script],
  ])('gives up at --timeout against a cloud that %s, and exits 69 at once', async (_name, script) => {
    const server = await startScriptedServer(script);
    cleanups.push(() => server.close());
    // Each request may take a minute: it is still in flight when the wait ends, and must not hold the exit.
    const d = device(server.url, { botId: 'bot-1', httpTimeoutMs: 60_000 });
    const run = await runCli(['token', '--config', d.configFile, '--timeout', '1'], { timeoutMs: 15_000 });
    expect(run.signal, 'killed: it hung after giving up').toBeNull();
    expect(run.code).toBe(69);
    expect(run.stdout).toBe('');
    expect(run.stderr.split('\n')[0], 'the command is named once').toBe('botlink token: no token within 1 s');
    expect(server.requests.length).toBeGreaterThan(0);
  });

  it('asks a vendor-only device to run botlink provision first (exit 78)', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc.url, { vendorId: 'V1', deviceId: 'SN-7' });
    const run = await runCli(['token', '--config', d.configFile]);
    expect(run.code).toBe(78);
    expect(run.stderr).toContain('run botlink provision first');
    expect(svc.stats.getToken.total).toBe(0);
  });

  it("uses the running daemon's token instead of signing again", async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc.url);
    daemon(d);
    await d.waitForLink('connected');
    const refreshed = svc.stats.refreshToken.ok;
    const run = await runCli(['token', '--config', d.configFile]);
    expect(run.code).toBe(0);
    expect(svc.stats.getToken.total).toBe(1);
    expect(svc.stats.refreshToken.ok).toBe(refreshed);
    const ws = await connectWs(svc.wsUrl, 'bot-1', run.stdout.trim());
    expect(ws.ok).toBe(true);
    if (ws.ok) ws.ws.close();
  });
});
