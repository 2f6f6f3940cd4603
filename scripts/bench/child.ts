// The child processes a benchmark starts: output kept for errors, exit as a promise, spawn-to-exit timing,
// and copies of the benchmark itself forked to serve something, told what over IPC.
import { fork, spawn, type ChildProcess } from 'node:child_process';
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

/** A copy of this benchmark forked to serve something: its pid, what it said it serves, and its end. */
export interface Forked<R> {
  readonly pid: number;
  /** The child's first message: what it serves (its URLs). */
  readonly ready: R;
  /** Sends `question`; resolves with the child's next message. */
  ask<T>(question: string): Promise<T>;
  /** Disconnects, on which the child closes what it serves, and waits for its exit. */
  close(): Promise<void>;
}

/**
 * Forks this benchmark's bundle (`process.argv[1]`) with `args`, `execArgv` and `env`, sends it `setup`
 * (which the child reads with `setupFromParent`), and resolves once it answers; rejects if it exits first.
 */
export async function forkSelf<R>(
  args: readonly string[],
  setup: unknown,
  o: { execArgv: readonly string[]; env?: NodeJS.ProcessEnv },
): Promise<Forked<R>> {
  const child: ChildProcess = fork(process.argv[1]!, [...args], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    execArgv: [...o.execArgv],
    ...(o.env && { env: o.env }),
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.send(setup as object);
  const ready = await new Promise<R>((resolve, reject) => {
    child.once('message', (m) => resolve(m as R));
    child.once('exit', (code) => reject(new Error(`the forked ${args.join(' ')} exited ${code}`)));
  });
  return {
    pid: child.pid ?? -1,
    ready,
    ask: <T>(question: string) =>
      new Promise<T>((resolve) => {
        child.once('message', (m) => resolve(m as T));
        child.send(question);
      }),
    async close() {
      child.disconnect();
      await exited;
    },
  };
}

/** In a child forkSelf started: the setup its parent sent. */
export function setupFromParent<S>(): Promise<S> {
  return new Promise((resolve) => process.once('message', (m) => resolve(m as S)));
}
