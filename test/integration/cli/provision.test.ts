import { describe, expect, it } from 'vitest';
import { DAEMON_SECRET, runCli, type DeviceDir } from '../../helpers/daemon-proc.js';
import { DAEMON_SEED, useHarness } from '../../helpers/harness.js';

const { service, device, daemon } = useHarness();

function provision(d: DeviceDir, ...flags: string[]) {
  return runCli(['provision', '--config', d.configFile, ...flags]);
}

function botIdOf(stdout: string): string | undefined {
  return stdout
    .trimEnd()
    .split('\n')
    .at(-1)
    ?.match(/^botId: (\S+)$/)?.[1];
}

describe('botlink provision', () => {
  it('registers a fresh device step by step, is idempotent, and registers again with --force', async () => {
    const svc = await service(DAEMON_SEED);
    // No botId and no vendorId: normal before provisioning, the flags supply the vendor.
    const d = device(svc, {});
    const first = await provision(d, '--vendor-id', 'V1', '--device-id', 'SN-100', '--name', 'kitchen');
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/^vendor token: /m);
    expect(first.stdout).toMatch(/^register: device SN-100 registered as \S+$/m);
    expect(first.stdout).toMatch(/^stored: botId stored in /m);
    expect(first.stdout).toMatch(/^note: the config names no botId or vendorId: set "vendorId": "V1" and "deviceId": "SN-100"/m);
    const botId = botIdOf(first.stdout);
    expect(botId).toMatch(/^bot-/);
    expect(svc.stats.register).toMatchObject({ total: 1, ok: 1 });

    const again = await provision(d, '--vendor-id', 'V1', '--device-id', 'SN-100');
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain('already provisioned');
    expect(again.stdout).not.toMatch(/^register:/m);
    expect(botIdOf(again.stdout)).toBe(botId);
    expect(svc.stats.register.total).toBe(1);
    expect(svc.stats.getToken.total).toBe(1);

    const forced = await provision(d, '--vendor-id', 'V1', '--device-id', 'SN-100', '--force');
    expect(forced.code, forced.stderr).toBe(0);
    expect(forced.stdout).toMatch(/^register: /m);
    expect(botIdOf(forced.stdout)).toBe(botId);
    expect(svc.stats.register).toMatchObject({ total: 2, ok: 2 });

    // The daemon configured for this vendor and device finds the stored botId and never registers.
    d.writeConfig({ baseUrl: svc.url, vendorId: 'V1', deviceId: 'SN-100' });
    const status = await runCli(['status', '--config', d.configFile, '--json']);
    expect(JSON.parse(status.stdout)).toMatchObject({ identity: { kind: 'bot', id: botId, provisioned: true } });
    expect(d.log()).not.toContain(DAEMON_SECRET);
  });

  it('tells that a running daemon with another botId must be restarted', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc);
    const p = daemon(d);
    await d.waitForLink('connected');
    const run = await provision(d, '--vendor-id', 'V1', '--device-id', 'SN-200');
    expect(run.code, run.stderr).toBe(0);
    const botId = botIdOf(run.stdout);
    expect(run.stdout).toContain(`note: with this config the daemon uses botId bot-1, not ${botId}`);
    expect(run.stdout).toContain(`note: the daemon (pid ${p.child.pid}) runs as bot bot-1: restart it`);
  });

  it('names the secret-key fix for a wrong secret (exit 78) and the vendor for an unknown one', async () => {
    const svc = await service(DAEMON_SEED);
    const wrong = device(svc, { vendorId: 'V1' }, 'not-the-secret');
    const run = await provision(wrong, '--vendor-id', 'V1', '--device-id', 'SN-300');
    expect(run.code).toBe(78);
    expect(run.stdout).not.toMatch(/^botId:/m);
    expect(run.stderr).toMatch(/code 1005/);
    expect(run.stderr).toMatch(/fix: check the secret-key file .* and accessKeyId "AK"/);

    const right = device(svc, { vendorId: 'V1' });
    const unknown = await provision(right, '--vendor-id', 'V9', '--device-id', 'SN-300');
    expect(unknown.code).toBe(78);
    expect(unknown.stderr).toContain('fix: vendorId "V9" not known under this access key');
    expect(svc.stats.register.total).toBe(0);
  });

  it('says it cannot reach baseUrl when the service is down (exit 69)', async () => {
    const svc = await service(DAEMON_SEED);
    await svc.close();
    const d = device(svc, {});
    const run = await provision(d, '--vendor-id', 'V1', '--device-id', 'SN-400');
    expect(run.code).toBe(69);
    expect(run.stderr).toContain(`fix: cannot reach baseUrl ${svc.url}`);
  });
});
