import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BUNDLE } from '../../../scripts/build.mjs';
import { runCli } from '../../helpers/daemon-proc.js';
import { cleanEnv } from '../../../scripts/lib/env.js';
import { closed } from '../../../scripts/lib/exec.js';
import { DAEMON_SEED, useHarness } from '../../helpers/harness.js';
import { botlinkInProcess } from '../../helpers/in-process.js';
import { signalAtLine } from '../../helpers/signal-probe.js';

const { cleanups, service, device, daemon } = useHarness();

/** `botlink watch` as a child process, `env` added to a clean environment: its output so far, a wait on its stdout, its exit. */
function startWatch(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [BUNDLE, 'watch', ...args], { env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  cleanups.push(() => child.kill('SIGKILL'));
  const out = { stdout: '', stderr: '' };
  const waiters: (() => void)[] = [];
  const wake = (): void => {
    for (const w of [...waiters]) w();
  };
  child.stdout.on('data', (b: Buffer) => {
    out.stdout += b.toString();
    wake();
  });
  child.stderr.on('data', (b: Buffer) => {
    out.stderr += b.toString();
    wake();
  });
  const exited = closed(child).then(({ code }) => code);
  /** Resolves once stdout matches `pattern`. */
  const shows = (pattern: RegExp): Promise<void> =>
    new Promise((resolve) => {
      const check = (): void => {
        if (!pattern.test(out.stdout)) return;
        waiters.splice(waiters.indexOf(check), 1);
        resolve();
      };
      waiters.push(check);
      check();
    });
  return { child, out, exited, shows };
}

describe('botlink watch', () => {
  it('shows the round `botlink chat` makes, in words and as JSON lines; Ctrl-C exits 0, even the instant the first line is out', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc);
    daemon(d);
    await d.waitForLink('connected');
    const words = startWatch(['--config', d.configFile]);
    const json = startWatch(['--socket', join(d.runtimeDir, 'botlink.sock'), '--json']);
    // Its handler is in place before its first line: a Ctrl-C as that line goes out is handled, not fatal.
    const quick = startWatch(['--config', d.configFile], signalAtLine('link connected', 'SIGINT'));
    await words.shows(/link connected/);
    await json.shows(/"type":"link"/);

    const chat = await runCli(['chat', '--config', d.configFile, 'hello watcher']);
    expect(chat.code, chat.stderr).toBe(0);
    await words.shows(/reply \[[^\]]+\]: you said: hello watcher\n/);
    await json.shows(/"type":"reply"/);
    expect(words.out.stdout).toMatch(/^\d\d:\d\d:\d\d\.\d{3} link connected/);
    expect(words.out.stdout).toMatch(/input \[[^\]]+\]: hello watcher\n/);

    words.child.kill('SIGINT');
    json.child.kill('SIGINT');
    expect(await words.exited, words.out.stderr).toBe(0);
    expect(await json.exited, json.out.stderr).toBe(0);
    expect(await quick.exited, quick.out.stderr).toBe(0);
    expect(quick.out.stdout).toMatch(/^\d\d:\d\d:\d\d\.\d{3} link connected[^\n]*\n$/);
    const lines = json.out.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines[0]).toMatchObject({ type: 'link', state: 'connected', at: expect.any(String) });
    const input = lines.find((l) => l['type'] === 'input');
    const reply = lines.find((l) => l['type'] === 'reply');
    expect(input).toMatchObject({ text: 'hello watcher', roundId: expect.any(String) });
    expect(reply).toEqual({ at: expect.any(String), type: 'reply', roundId: input!['roundId'], text: 'you said: hello watcher' });
    expect(Number.isNaN(Date.parse(String(reply!['at'])))).toBe(false);
  });

  it('the daemon stopping: LINK_STATE stopped, then exit 0 with a line saying so', async () => {
    const svc = await service(DAEMON_SEED);
    const d = device(svc);
    const p = daemon(d);
    await d.waitForLink('connected');
    const w = startWatch(['--config', d.configFile]);
    await w.shows(/link connected/);
    await p.stop('SIGTERM');
    expect(await w.exited, w.out.stderr).toBe(0);
    expect(w.out.stdout).toMatch(/link stopped/);
    expect(w.out.stderr).toContain('botlink watch: the botlink daemon stopped (close 1001)');
  });

  // Its usage mistakes: usage.test.ts.
  it('no daemon: exit 69 naming the socket and the fix (in-process)', async () => {
    const d = device('http://127.0.0.1:9');
    const run = await botlinkInProcess(['watch', '--config', d.configFile]);
    expect(run).toMatchObject({ code: 69, stdout: '' });
    expect(run.stderr).toContain(`no botlink local API at ${join(d.runtimeDir, 'botlink.sock')}`);
    expect(run.stderr).toContain('fix: is the daemon running?');
  });
});
