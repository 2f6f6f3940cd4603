import { spawn, type ChildProcess } from 'node:child_process';
import { cleanEnv } from '../../scripts/lib/env.js';
import { closed } from '../../scripts/lib/exec.js';

/** A `botlink serve` child process and what it printed so far. */
export interface ServeRun {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `botlink serve` from a bundle, in our environment (no BOTLINK_* or systemd variables) plus `env`. */
export function startServe(bundleFile: string, args: string[], env: Record<string, string> = {}): ServeRun {
  return startListener(bundleFile, ['serve', ...args], env);
}

/** Starts a botlink command that prints a listening line (`serve`, `broker`) from a bundle, in cleanEnv plus `env`: a developer's shell cannot steer it. */
export function startListener(bundleFile: string, argv: string[], env: Record<string, string> = {}): ServeRun {
  const child = spawn(process.execPath, [bundleFile, ...argv], {
    env: cleanEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
  return { child, stdout: () => out, stderr: () => err, exit: closed(child) };
}

/** Waits for the listening line and returns its URL; fails if the process ends first. */
export function listening(run: ServeRun): Promise<string> {
  return new Promise((resolve, reject) => {
    const check = (): void => {
      const match = /^listening on (https?:\/\/\S+)\n/.exec(run.stdout());
      if (!match) return;
      run.child.stdout!.off('data', check);
      resolve(match[1]!);
    };
    run.child.stdout!.on('data', check);
    check();
    // `exit` settles at 'close', with all output read, even if that came before this call; once resolved, reject does nothing.
    void run.exit.then(() => {
      check();
      reject(new Error(`no listening line; stdout=${run.stdout()} stderr=${run.stderr()}`));
    });
  });
}
