import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { BUNDLE } from '../../../scripts/build.mjs';
import { wavFile } from '../../../src/cli/app/wav.js';
import { botlinkAs } from '../../helpers/bundle.js';
import { DAEMON_SECRET, type DaemonProc, type DeviceDir, runCli } from '../../helpers/daemon-proc.js';
import { type CliRun, closed, exec } from '../../../scripts/lib/exec.js';
import { cleanEnv } from '../../../scripts/lib/env.js';
import { tone } from '../../helpers/guide-cloud.js';
import { DAEMON_SEED, useHarness } from '../../helpers/harness.js';
import { botlinkInProcess } from '../../helpers/in-process.js';
import { requireTool } from '../../../scripts/lib/tools.js';
import { waitFor } from '../../helpers/wait-for.js';

const { cleanups, service, device, daemon, tempDir } = useHarness();

/** Another user, and a group it is not in, for the socket's permissions. */
const APP_UID = 4243;
const SOCKET_GID = 4250;

/** A daemon whose cloud never answers: its local API is up, its link never connects. */
async function daemonWithoutCloud(): Promise<{ d: DeviceDir; p: DaemonProc; socket: string }> {
  const svc = await service(DAEMON_SEED);
  const url = svc.url;
  await svc.close();
  const d = device(url);
  const p = daemon(d);
  const socket = join(d.runtimeDir, 'botlink.sock');
  await waitFor(() => existsSync(socket), 10_000, `the local API socket ${socket}`);
  return { d, p, socket };
}

/** `botlink chat` as APP_UID through setpriv, in `groups` only (from a copy APP_UID can read: the checkout may be closed to it). */
function chatAs(groups: number[], args: string[]): Promise<CliRun> {
  return exec(...botlinkAs(APP_UID, ['chat', ...args], groups), { env: cleanEnv() });
}

describe('botlink chat without a daemon', () => {
  // Its usage mistakes: usage.test.ts.
  it('a missing config exits 78, a turned-off local API 78 naming the key (in-process)', async () => {
    const d = device('http://127.0.0.1:9');
    const missing = await botlinkInProcess(['chat', '--config', join(d.dir, 'nope.json'), 'hi']);
    expect(missing.code, missing.stderr).toBe(78);
    d.writeConfig({ baseUrl: 'http://127.0.0.1:9', botId: 'bot-1', localSocket: '' });
    const off = await botlinkInProcess(['chat', '--config', d.configFile, 'hi']);
    expect(off).toMatchObject({ code: 78, stdout: '' });
    expect(off.stderr).toBe(
      'botlink chat: the local API is turned off (localSocket is "")\n' +
        '  fix: remove localSocket from the config, or set it to a path, and restart the daemon\n',
    );
  });

  it('--audio with a file that is not voice input: exit 65 naming the file and what it holds, before any socket (in-process)', async () => {
    const dir = tempDir('botlink-chat-wav-');
    const stereo = wavFile(Buffer.alloc(3200), 8000);
    stereo.writeUInt16LE(2, 22); // channels
    const cases: [string, Buffer | undefined, string][] = [
      [
        'stereo.wav',
        stereo,
        'stereo.wav is not voice input: it holds 8000 Hz stereo 16-bit PCM; the cloud takes 16-bit PCM mono at 16000, 24000 or 32000 Hz',
      ],
      [
        'cut.wav',
        wavFile(Buffer.alloc(3200), 16000).subarray(0, 1000),
        'cut.wav is not voice input: truncated: its audio data announces 3200 bytes, 956 are there',
      ],
      ['song.mp3', Buffer.from('ID3\x03 not a wav'), 'song.mp3 is not voice input: not a WAV file (no RIFF/WAVE header)'],
      ['none.wav', undefined, 'cannot read'],
    ];
    for (const [name, bytes, says] of cases) {
      const file = join(dir, name);
      if (bytes) writeFileSync(file, bytes);
      const run = await botlinkInProcess(['chat', '--socket', join(dir, 'no.sock'), '--audio', file]);
      expect(run.code, `${name}: ${run.stderr}`).toBe(65);
      expect(run.stderr).toContain(says);
    }
  });

  it('no socket (ENOENT) and a stale socket file (ECONNREFUSED) exit 69 naming the socket and the fix (in-process)', async () => {
    const d = device('http://127.0.0.1:9');
    const socket = join(d.runtimeDir, 'botlink.sock');
    const none = await botlinkInProcess(['chat', '--config', d.configFile, 'hello']);
    expect(none.code, none.stderr).toBe(69);
    expect(none.stderr).toContain(`no botlink local API at ${socket}`);
    expect(none.stderr).toContain('fix: is the daemon running? systemctl status botlink');

    // What a crashed daemon leaves: the file of a socket nobody listens on.
    const python = requireTool('python3');
    mkdirSync(d.runtimeDir, { recursive: true });
    const made = spawnSync(python, ['-c', 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])', socket]);
    expect(made.status, made.stderr.toString()).toBe(0);
    const stale = await botlinkInProcess(['chat', '--socket', socket, 'hello']);
    expect(stale.code, stale.stderr).toBe(69);
    expect(stale.stderr).toContain(`nothing listens on ${socket} (connection refused)`);
    expect(stale.stderr).toContain('systemctl status botlink');
  });

  it('a user outside the socket group gets EACCES: exit 69 naming the group to join', async () => {
    const dir = tempDir('botlink-chat-acl-');
    chmodSync(dir, 0o755);
    const socket = join(dir, 'botlink.sock');
    const server = createServer((c) => c.destroy());
    await new Promise<void>((resolve) => server.listen(socket, resolve));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    chownSync(socket, 0, SOCKET_GID);
    chmodSync(socket, 0o660);
    const run = await chatAs([], ['--socket', socket, 'hello']);
    expect(run.code, run.stderr).toBe(69);
    expect(run.stderr).toContain(`permission denied on ${socket}`);
    expect(run.stderr).toContain(`only root and group ${SOCKET_GID} may use it: sudo usermod -aG ${SOCKET_GID} $USER`);
  });
});

describe('botlink chat through a running daemon', () => {
  it('prints the reply as it streams and exits 0; --json gives {reply, roundId, ms}', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc);
    daemon(d);
    await d.waitForLink('connected');
    const run = await runCli(['chat', '--config', d.configFile, 'hello', 'botlink']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe('you said: hello botlink\n');
    expect(run.stderr).toContain('botlink chat: link connected');

    const json = await runCli(['chat', '--config', d.configFile, '--json', 'again']);
    expect(json.code, json.stderr).toBe(0);
    const result = JSON.parse(json.stdout) as { reply: string; roundId: string; ms: number };
    expect(result).toEqual({ reply: 'you said: again', roundId: expect.any(String), ms: expect.any(Number) });
    expect(result.roundId).not.toBe('');
    expect(run.stdout + run.stderr + json.stdout + json.stderr).not.toContain(DAEMON_SECRET);
  });

  // Waits on the reference service speaking the guide (issue 17): free-mode VAD, ASR IS_FINAL, TTS as PCM.
  it('--audio: a spoken second and silence get what the service heard and its reply; the saved reply plays (sox)', async () => {
    const sox = requireTool('sox');
    const svc = await service(DAEMON_SEED);
    const d = device(svc);
    daemon(d);
    await d.waitForLink('connected');
    const dir = tempDir('botlink-chat-audio-');
    const wav = join(dir, 'hello.wav');
    writeFileSync(wav, wavFile(tone(16000, 1000, 440, 0.3), 16000));
    const out = join(dir, 'reply.wav');
    const run = await runCli(['chat', '--config', d.configFile, '--timeout', '12', '--audio', wav, '--save-reply', out], {
      timeoutMs: 20_000,
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^heard: \S.*\nreply: \S.*\n$/);
    expect(run.stderr).toContain(`botlink chat: saved the reply's audio to ${out}`);
    const info = (flag: string): string => spawnSync(sox, ['--i', flag, out], { encoding: 'utf8' }).stdout.trim();
    expect(info('-t')).toBe('wav');
    expect(info('-r')).toBe('16000');
    expect(info('-c')).toBe('1');
    expect(info('-b')).toBe('16');
    expect(Number(info('-D'))).toBeGreaterThan(0.1);
  }, 30_000);

  it('another app attached: exit 69 with the 409 and what to do', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc);
    daemon(d);
    await d.waitForLink('connected');
    const socket = join(d.runtimeDir, 'botlink.sock');
    const app = new WebSocket(`ws+unix://${socket}:/soulmate/voiceChat/v1`);
    cleanups.push(() => app.terminate());
    await new Promise((resolve, reject) => {
      app.once('message', resolve);
      app.once('error', reject);
    });
    const run = await runCli(['chat', '--config', d.configFile, 'hello']);
    expect(run.code, run.stderr).toBe(69);
    expect(run.stderr).toContain(`another app is attached to botlink's relay at ${socket} (HTTP 409`);
    expect(run.stderr).toContain('fix: botlink serves one app at a time');
  });

  it('a link that never connects: exit 1 at --timeout, naming the state it waited in', async () => {
    const { d } = await daemonWithoutCloud();
    const run = await runCli(['chat', '--config', d.configFile, '--timeout', '2', 'hello']);
    expect(run.code, run.stderr).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/botlink chat: link (connecting|backoff)/);
    expect(run.stderr).toMatch(/no reply within 2 s \(link (connecting|backoff)/);
  });

  it('a cloud drop during the round: exit 1, the round is lost, the link state named', async () => {
    // Round frames a minute apart: the reply is still coming when the service drops the socket.
    const svc = await service(DAEMON_SEED, { roundDelayMs: 60_000 });
    svc.events.on('ws-message', ({ data }: { data: Buffer }) => {
      if (data.toString().includes('mid-round')) svc.faults.dropAllSockets();
    });
    const d = device(svc);
    daemon(d);
    await d.waitForLink('connected');
    const run = await runCli(['chat', '--config', d.configFile, 'mid-round']);
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain('botlink chat: the cloud link went backoff during the round: its reply is lost');
    expect(run.stderr).toContain('fix: botlink status tells how the cloud link stands; then run botlink chat again');
  });

  it('the daemon stopping while chat waits: exit 69, the daemon stopped', async () => {
    const { d, p } = await daemonWithoutCloud();
    const chat = spawn(process.execPath, [BUNDLE, 'chat', '--config', d.configFile, 'hello'], {
      env: cleanEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    cleanups.push(() => chat.kill('SIGKILL'));
    let stderr = '';
    const waiting = new Promise<void>((resolve) =>
      chat.stderr.on('data', (b: Buffer) => {
        stderr += b.toString();
        if (stderr.includes('botlink chat: link')) resolve();
      }),
    );
    const exited = closed(chat).then(({ code }) => code);
    await waiting; // attached, and told the link's state
    await p.stop('SIGTERM');
    const run = { code: await exited, stderr };
    expect(run.code, run.stderr).toBe(69);
    expect(run.stderr).toContain('botlink chat: link stopped');
    expect(run.stderr).toContain('the botlink daemon stopped (close 1001)');
  });
});
