import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TokenStore } from '../../../src/agent/store/token-store.js';
import { WS_FAILURE_FIXES, WsMessage } from '../../../src/protocol/codes.js';
import { DAEMON_SECRET, runCli, type DeviceDir } from '../../helpers/daemon-proc.js';
import type { CliRun } from '../../../scripts/lib/exec.js';
import { cleanEnv } from '../../../scripts/lib/env.js';
import { DAEMON_SEED, useHarness } from '../../helpers/harness.js';
import { freePort } from '../../helpers/ports.js';
import { waitFor } from '../../helpers/wait-for.js';

const CHECKS = [
  'config',
  'secret file',
  'state dir',
  'runtime dir',
  'clock',
  'dns',
  'tcp',
  'tls',
  'broker',
  'server time',
  'getToken',
  'websocket',
  'local api',
  'database',
];
const { service, device, daemon } = useHarness();

/** Runs doctor and splits its output into the check lines (by name) and the summary. */
async function doctor(
  d: DeviceDir,
  env?: NodeJS.ProcessEnv,
): Promise<CliRun & { lines: Map<string, string>; summary: string; ms: number }> {
  const started = performance.now();
  const run = await runCli(['doctor', '--config', d.configFile], { ...(env && { env }) });
  const ms = performance.now() - started;
  const out = run.stdout.trimEnd().split('\n');
  const lines = new Map(out.slice(0, -1).map((line) => [/^(?:ok|FAIL|skip) +([^:]+):/.exec(line)?.[1] ?? line, line]));
  // The secret must never be printed, nor any token.
  expect(run.stdout + run.stderr).not.toContain(DAEMON_SECRET);
  expect(run.stdout + run.stderr).not.toMatch(/Bearer/i);
  expect([...lines.keys()]).toEqual(CHECKS);
  return { ...run, lines, summary: out.at(-1) ?? '', ms };
}

function line(lines: Map<string, string>, name: string): string {
  return lines.get(name) ?? '';
}

describe('botlink doctor (the built bundle as a child process)', () => {
  it('passes every check on a good device, with exit 0, and stores no token', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc.url);
    const r = await doctor(d);
    expect(r.code).toBe(0);
    for (const l of r.lines.values()) expect(l).toMatch(/^ok {4}/);
    expect(r.summary).toBe('14 checks, 0 failed: exit 0, every check passed');
    expect(line(r.lines, 'getToken')).toMatch(/bot bot-1: token issued/);
    expect(line(r.lines, 'websocket')).toMatch(/accepted bot bot-1 .*closed with 1000/);
    expect(line(r.lines, 'tls')).toMatch(/plain http on loopback/);
    expect(svc.stats.getToken.ok).toBe(1);
    expect(svc.stats.ws.total).toBe(1);
    const store = TokenStore.open(d.stateDir);
    expect(store.peekPair()).toBeUndefined();
    store.close();
  });

  it('names secret-key when the signature is refused (1005) and skips the WebSocket', async () => {
    const svc = await service(DAEMON_SEED);
    const r = await doctor(device(svc.url, { botId: 'bot-1' }, 'not-the-secret'));
    expect(r.code).toBe(1);
    expect(line(r.lines, 'getToken')).toMatch(/^FAIL {2}getToken: .*code 1005.* — fix: .*secret-key/);
    expect(line(r.lines, 'websocket')).toMatch(/^skip {2}/);
    expect(r.summary).toBe('14 checks, 1 failed, 1 skipped: exit 1, a check failed (getToken)');
  });

  it('names botlink provision for an unknown botId (1004)', async () => {
    const svc = await service(DAEMON_SEED);
    const r = await doctor(device(svc.url, { botId: 'bot-unknown' }));
    expect(r.code).toBe(1);
    expect(line(r.lines, 'getToken')).toMatch(/^FAIL {2}getToken: .*code 1004.* — fix: .*botlink provision/);
  });

  it('fails a secret file open to others with chmod 600, exit 78, without printing it', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc.url);
    chmodSync(join(d.dir, 'secret-key'), 0o644);
    const r = await doctor(d);
    expect(r.code).toBe(78);
    expect(line(r.lines, 'config')).toMatch(/^ok {4}config: settings valid/);
    expect(line(r.lines, 'secret file')).toMatch(/^FAIL {2}secret file: .*mode 0644.* — fix: .*chmod 600/);
    expect([...r.lines.values()].slice(2).every((l) => l.startsWith('skip'))).toBe(true);
  });

  it('fails TCP fast when nothing listens, and skips the checks that need the service', async () => {
    const d = device(`http://127.0.0.1:${await freePort()}`);
    const r = await doctor(d);
    expect(r.code).toBe(1);
    expect(r.ms).toBeLessThan(10_000);
    expect(line(r.lines, 'dns')).toMatch(/^ok {4}dns: 127\.0\.0\.1 \(IP address\)/);
    expect(line(r.lines, 'tcp')).toMatch(/^FAIL {2}tcp: .*ECONNREFUSED — fix: /);
    for (const name of ['tls', 'server time', 'getToken', 'websocket']) expect(line(r.lines, name)).toMatch(/^skip {2}/);
    // With no time source here, the clock passes only when the service's time can be had.
    expect(line(r.lines, 'clock')).toMatch(/^(FAIL {2}clock: .*no server time|ok {4}clock: synced)/);
  });

  it('fails the config on the first line with exit 78 and skips the rest', async () => {
    const r = await doctor(device('ftp://example.com'));
    expect(r.code).toBe(78);
    expect(r.stdout.split('\n')[0]).toMatch(/^FAIL {2}config: "baseUrl" in .* — fix: /);
    expect([...r.lines.values()].slice(1).every((l) => l.startsWith('skip'))).toBe(true);
    expect(r.summary).toBe('14 checks, 1 failed, 13 skipped: exit 78, the configuration or its secret file cannot be used (config)');
  });

  it('fails the server time check when NTP says synced but the service is 10 min ahead', async () => {
    const svc = await service(DAEMON_SEED);
    svc.faults.shiftClockMs(10 * 60_000);
    const d = device(svc.url);
    // A timedatectl that reports NTPSynchronized=yes: a synced-looking clock that is wrong.
    const bin = join(d.dir, 'bin');
    mkdirSync(bin);
    writeFileSync(join(bin, 'timedatectl'), '#!/bin/sh\necho yes\n', { mode: 0o755 });
    const r = await doctor(d, cleanEnv({ PATH: `${bin}:${process.env.PATH ?? ''}` }));
    expect(r.code).toBe(1);
    expect(line(r.lines, 'clock')).toMatch(/^ok {4}clock: synced/);
    expect(line(r.lines, 'server time')).toMatch(
      /^FAIL {2}server time: the service clock is (59\d|60\d)\.\d s ahead of .* synced — fix: .*NTP/,
    );
    // The signing time still comes from the service, so the round trip works.
    expect(line(r.lines, 'getToken')).toMatch(/^ok {4}getToken: .*signed with the service's time/);
  });

  it("reports a running daemon's link from status.json without displacing it", async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc.url);
    const p = daemon(d);
    await d.waitForLink('connected');
    const r = await doctor(d);
    expect(line(r.lines, 'websocket')).toMatch(new RegExp(`^ok {4}websocket: daemon pid ${p.child.pid} is connected`));
    expect(r.code).toBe(0);
    expect(svc.stats.ws.displaced).toBe(0);
    expect(svc.stats.ws.total).toBe(1);
    expect(d.status()?.link.state).toBe('connected');
  });

  it("checks the running daemon's local API socket: there, mode 0660, in localGroup, and whether an app is attached", async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc.url, { botId: 'bot-1', localGroup: 4243 });
    const sock = join(d.runtimeDir, 'botlink.sock');
    const idle = await doctor(d);
    expect(line(idle.lines, 'local api')).toBe(`ok    local api: no daemon runs; botlink makes ${sock} at start (mode 0660, gid 4243)`);
    daemon(d);
    await d.waitForLink('connected');
    await waitFor(() => d.log().includes('"local API listening"'), 10_000, 'the local API listening');
    const good = await doctor(d);
    expect(line(good.lines, 'local api')).toBe(`ok    local api: ${sock}: mode 0660, gid 4243; no app attached`);
    chmodSync(sock, 0o666);
    const loose = await doctor(d);
    expect(line(loose.lines, 'local api')).toMatch(
      new RegExp(`^FAIL  local api: ${sock} has mode 0666, not 0660 — fix: .*systemctl restart botlink`),
    );
    expect(loose.code).toBe(1);
  });

  it("prints the fix the running daemon's link carries, read from status.json", async () => {
    const svc = await service(DAEMON_SEED);
    svc.faults.refuseWebSockets(WsMessage.BOT_INVALID);
    const d = device(svc.url);
    const p = daemon(d);
    await d.waitForLink('backoff');
    const r = await doctor(d);
    expect(line(r.lines, 'websocket')).toBe(
      `FAIL  websocket: daemon pid ${p.child.pid}: link backoff since ${new Date(d.status()!.link.since).toISOString()}: ` +
        `${WsMessage.BOT_INVALID} (no second socket opened: it would displace the daemon) — fix: ${WS_FAILURE_FIXES[WsMessage.BOT_INVALID]}`,
    );
    expect(r.code).toBe(1);
  });

  it('fails the database check for a corrupt file (moved aside) and for one open to others', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc.url);
    mkdirSync(d.stateDir);
    writeFileSync(join(d.stateDir, 'botlink.db'), 'not a database at all, just bytes'.repeat(200));
    const corrupt = await doctor(d);
    expect(line(corrupt.lines, 'database')).toMatch(
      /^FAIL {2}database: token database was corrupt.*\(to .*botlink\.db\.corrupt-\d+\) — fix: /,
    );
    expect(corrupt.code).toBe(1);

    chmodSync(join(d.stateDir, 'botlink.db'), 0o644);
    const loose = await doctor(d);
    expect(line(loose.lines, 'database')).toMatch(/^FAIL {2}database: .*had mode 0644/);
    const again = await doctor(d);
    expect(line(again.lines, 'database')).toMatch(/^ok {4}database: .*integrity ok, mode 0600/);
  });
});
