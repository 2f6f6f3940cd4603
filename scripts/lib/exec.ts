import { type ChildProcess, spawn } from 'node:child_process';

export interface CliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface ExecOptions {
  /** Default: this process's environment. */
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** SIGKILL after this long, whatever it has written. Default 60 s. */
  timeoutMs?: number;
  /** SIGTERM once this holds of its stdout so far (looked at on every chunk it writes). */
  until?: (stdout: string) => boolean;
}

/**
 * How a child ended, once its output is all read: at 'close', not 'exit', where Node's docs say stdio
 * may still be open.
 */
export function closed(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve) => child.once('close', (code, signal) => resolve({ code, signal })));
}

/** Runs a command to completion, never throwing on its exit code. */
export function exec(cmd: string, args: readonly string[], opts: ExecOptions = {}): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: opts.env ?? process.env, cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let told = false;
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (!told && opts.until?.(stdout)) {
        told = true;
        child.kill('SIGTERM');
      }
    });
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.on('error', reject);
    void closed(child).then(({ code, signal }) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}
