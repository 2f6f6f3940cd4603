import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { cleanEnv } from '../../scripts/lib/env.js';
import { closed } from '../../scripts/lib/exec.js';

/** The repository root: the child imports `ws` from its node_modules. */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * An app as a real one runs, in a process of its own: attaches to the relay, prints its first frame,
 * and in 'stall' mode stops reading right after it (ws.pause) until a line on stdin resumes it.
 */
const SCRIPT = `
import WebSocket from 'ws';
const [socket, mode] = process.argv.slice(1);
const ws = new WebSocket('ws+unix://' + socket + ':/soulmate/voiceChat/v1', { perMessageDeflate: false });
ws.once('message', (data, binary) => {
  console.log('first ' + (binary ? '<binary>' : data.toString()));
  if (mode === 'stall') {
    ws.pause();
    console.log('paused');
  }
});
process.stdin.on('data', () => ws.resume());
ws.on('error', (err) => console.log('error ' + err.message));
ws.on('close', (code) => {
  console.log('closed ' + code);
  process.exit(0);
});
`;

/** A child app process; waits on its stdout lines, never on time. */
export class AppChild {
  readonly child: ChildProcess;
  readonly lines: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly #waiters = new Set<() => void>();
  #stderr = '';
  /** Set at 'close', when its output is all read ('exit' may come before the last of it). */
  #closed = false;

  constructor(socketPath: string, mode: 'read' | 'stall') {
    this.child = spawn(process.execPath, ['--input-type=module', '-e', SCRIPT, socketPath, mode], {
      cwd: ROOT,
      env: cleanEnv(),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let partial = '';
    this.child.stdout?.on('data', (d: Buffer) => {
      const parts = (partial + d.toString()).split('\n');
      partial = parts.pop() ?? '';
      this.lines.push(...parts);
      this.#wake();
    });
    this.child.stderr?.on('data', (d: Buffer) => (this.#stderr += d.toString()));
    this.exited = closed(this.child).then((ended) => {
      this.#closed = true;
      this.#wake();
      return ended;
    });
  }

  /** The first stdout line matching `re`; fails if the child exits before printing one. */
  async line(re: RegExp): Promise<string> {
    for (;;) {
      const found = this.lines.find((l) => re.test(l));
      if (found !== undefined) return found;
      if (this.#closed) {
        throw new Error(`the app exited before a line matching ${re}; stdout: ${this.lines.join('\n')}; stderr: ${this.#stderr}`);
      }
      await new Promise<void>((resolve) => {
        const wake = (): void => {
          this.#waiters.delete(wake);
          resolve();
        };
        this.#waiters.add(wake);
      });
    }
  }

  /** Lets a stalled app read again. */
  resume(): void {
    this.child.stdin?.write('resume\n');
  }

  kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<unknown> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
    return this.exited;
  }

  #wake(): void {
    for (const wake of this.#waiters) wake();
  }
}
