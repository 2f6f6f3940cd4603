// The child processes a benchmark starts: output kept for errors, exit as a promise, spawn-to-exit timing.
import { spawn, type ChildProcess } from 'node:child_process';
import { cleanEnv } from '../lib/env.js';
import { ROOT } from './root.js';

/** A child we started, with its output kept for error messages and its exit as a promise. */
export class Child {
  readonly proc: ChildProcess;
  readonly pid: number;
  out = '';
  readonly exited: Promise<number | null>;

  constructor(args: readonly string[], env: NodeJS.ProcessEnv = cleanEnv()) {
    this.proc = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'pipe'], cwd: ROOT });
    this.pid = this.proc.pid ?? -1;
    const keep = (d: Buffer): void => {
      if (this.out.length < 20_000) this.out += d.toString();
    };
    this.proc.stdout?.on('data', keep);
    this.proc.stderr?.on('data', keep);
    this.exited = new Promise((resolve) => this.proc.on('exit', (code, signal) => resolve(signal ? 128 : code)));
  }

  get running(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** Signals, then SIGKILLs after `graceMs`; resolves on exit. */
  async stop(signal: NodeJS.Signals = 'SIGTERM', graceMs = 5000): Promise<void> {
    if (!this.running) return;
    this.proc.kill(signal);
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

/** Milliseconds from spawn to exit of `node args` with `env` over a clean environment; throws on a nonzero exit. */
export async function timeRun(args: readonly string[], env: Record<string, string> = {}): Promise<number> {
  const started = performance.now();
  const child = new Child(args, cleanEnv(env));
  const code = await child.exited;
  const took = performance.now() - started;
  if (code !== 0) throw new Error(`node ${args.join(' ')} exited ${code}: ${child.out.slice(0, 2000)}`);
  return took;
}
