import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { chownSync, existsSync, mkdirSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Exit } from '../../../src/cli/frame/exit.js';
import { botlinkAs } from '../../helpers/bundle.js';
import { DaemonProc, type DeviceDir } from '../../helpers/daemon-proc.js';
import { cleanEnv } from '../../../scripts/lib/env.js';
import { DAEMON_SEED, useHarness } from '../../helpers/harness.js';
import { treeOf } from '../../helpers/tree.js';
import { waitFor } from '../../helpers/wait-for.js';

/** Issue 20's LOW findings, each against a real daemon process. */

const { cleanups, service, device, daemon } = useHarness();
/** Another uid, as an operator's mistake or an older release would leave files for. */
const UID = 4243;

async function listening(d: DeviceDir): Promise<void> {
  await d.waitForLink('connected');
  await waitFor(() => d.log().includes('"local API listening"'), 10_000, 'the local API listening');
}

/** An app that opens the relay by hand, sends a close frame, and then neither answers nor hangs up. */
async function halfOpenApp(sock: string): Promise<Socket> {
  // allowHalfOpen: the daemon's FIN does not make this end hang up too.
  const s = connect({ path: sock, allowHalfOpen: true });
  cleanups.push(() => s.destroy());
  await once(s, 'connect');
  s.write(
    'GET /soulmate/voiceChat/v1 HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n' +
      `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\n\r\n`,
  );
  let got = '';
  await new Promise<void>((resolve) => {
    const on = (b: Buffer): void => {
      got += b.toString('latin1');
      if (!got.includes('LINK_STATE')) return;
      s.off('data', on);
      resolve();
    };
    s.on('data', on);
  });
  expect(got).toMatch(/^HTTP\/1\.1 101 /);
  // A masked close frame, 1000; then the app keeps its end open and stops reading.
  const mask = randomBytes(4);
  const payload = Buffer.from([0x03, 0xe8]).map((b, i) => b ^ mask[i % 4]!);
  const echoed = new Promise<void>((resolve) => {
    let tail = Buffer.alloc(0);
    const on = (b: Buffer): void => {
      tail = Buffer.concat([tail, b]);
      // The daemon's answering close frame: 1000, unmasked.
      if (!tail.includes(Buffer.from([0x88, 0x02, 0x03, 0xe8]))) return;
      s.off('data', on);
      resolve();
    };
    s.on('data', on);
  });
  s.write(Buffer.concat([Buffer.from([0x88, 0x82]), mask, payload]));
  await echoed;
  s.pause();
  return s;
}

/** Every folder and file of the device given to UID, as systemd's StateDirectory/RuntimeDirectory would. */
function giveTo(d: DeviceDir, uid: number): void {
  for (const dir of [d.stateDir, d.runtimeDir, join(d.dir, 'log')]) mkdirSync(dir, { recursive: true });
  for (const path of treeOf(d.dir)) chownSync(path, uid, uid);
}

function daemonAs(uid: number, d: DeviceDir): DaemonProc {
  const p = new DaemonProc(
    spawn(...botlinkAs(uid, ['run', '--config', d.configFile]), { env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] }),
  );
  cleanups.push(() => p.stop('SIGKILL'));
  return p;
}

/** A socket file nobody serves, left by a process that was killed (as root: this test's own uid). */
async function deadSocket(path: string): Promise<void> {
  const listener = `require('node:net').createServer().listen(${JSON.stringify(path)}, () => console.log('up'))`;
  const child = spawn(process.execPath, ['-e', listener], { stdio: ['ignore', 'pipe', 'inherit'] });
  await once(child.stdout, 'data');
  child.kill('SIGKILL');
  await once(child, 'exit');
  expect(existsSync(path)).toBe(true);
}

describe('the local API at its edges (issue 20, LOW findings)', () => {
  it('stops with 0 and removes its socket while an app is half-open (sent close, keeps its end open)', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc, { botId: 'bot-1' });
    const proc = daemon(d);
    await listening(d);
    const sock = join(d.runtimeDir, 'botlink.sock');
    await halfOpenApp(sock);
    const cloudClosed = once(svc.events, 'ws-close');
    const stopped = await proc.stop('SIGTERM');
    console.log(`stop with a half-open app: exit ${stopped.code} after ${Math.round(stopped.ms)} ms`);
    expect(stopped.code).toBe(Exit.OK);
    expect(existsSync(sock)).toBe(false);
    await cloudClosed;
    expect(d.log()).toContain('"msg":"botlink stopped"');
  });

  it('refuses a runtimeDir too long for the default socket, and a localSocket whose temporary name is too long: 78 naming the key', async () => {
    const svc = await service(DAEMON_SEED);
    const long = device(svc, { botId: 'bot-1', runtimeDir: `/tmp/${'r'.repeat(96)}` });
    const refused = await daemon(long).exited;
    expect(refused.code).toBe(Exit.CONFIG);
    const short = device(svc, { botId: 'bot-1', localSocket: `/tmp/${'d'.repeat(94)}/s` });
    const p = daemon(short);
    expect((await p.exited).code).toBe(Exit.CONFIG);
    expect(p.stderr).toMatch(/localSocket.*bound first as .*\.bl4194304, which is over 107 bytes/);
    expect(existsSync(`/tmp/${'d'.repeat(94)}`)).toBe(false);
  });

  it('names the owner of a dead socket it may not probe (EACCES), and the fix', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc, { botId: 'bot-1' });
    giveTo(d, UID);
    const sock = join(d.runtimeDir, 'botlink.sock');
    await deadSocket(sock);
    const p = daemonAs(UID, d);
    const { code } = await p.exited;
    expect(p.stderr).not.toContain('another process serves');
    expect(p.stderr).toContain(`it belongs to root (uid 0)`);
    expect(p.stderr).toContain(`sudo rm ${sock}`);
    expect(code).toBe(Exit.CONFIG);
  });

  it('a second daemon refused on the same runtimeDir leaves the live one status.json alone', async () => {
    const svc = await service(DAEMON_SEED);
    const first = device(svc, { botId: 'bot-1' });
    const live = daemon(first);
    await listening(first);
    const second = device(svc, { botId: 'bot-1', runtimeDir: first.runtimeDir });
    const refused = await daemon(second).exited;
    expect(refused.code).toBe(Exit.UNAVAILABLE);
    expect(first.status()?.pid).toBe(live.child.pid);
  });
});
