import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUNDLE } from '../../scripts/build.mjs';
import type { StatusDoc } from '../../src/agent/daemon/status.js';
import { cleanEnv } from '../../scripts/lib/env.js';
import { type CliRun, closed, type ExecOptions, exec } from '../../scripts/lib/exec.js';
import { waitFor } from './wait-for.js';

export const DAEMON_SECRET = 'daemon-test-secret-4b1d';

/** A temp dir holding config.json, the secret file, state, runtime and the log, for one device. */
export class DeviceDir {
  readonly dir: string;
  readonly configFile: string;
  readonly stateDir: string;
  readonly runtimeDir: string;
  readonly logFile: string;

  constructor(config: Record<string, unknown>, secret = DAEMON_SECRET) {
    this.dir = mkdtempSync(join(tmpdir(), 'botlink-device-'));
    this.configFile = join(this.dir, 'config.json');
    this.stateDir = join(this.dir, 'state');
    this.runtimeDir = join(this.dir, 'run');
    this.logFile = join(this.dir, 'log', 'botlink.log');
    writeFileSync(join(this.dir, 'secret-key'), `${secret}\n`, { mode: 0o600 });
    this.writeConfig(config);
  }

  writeConfig(config: Record<string, unknown>): void {
    const full = {
      accessKeyId: 'AK',
      secretKeyFile: join(this.dir, 'secret-key'),
      stateDir: this.stateDir,
      runtimeDir: this.runtimeDir,
      logFile: this.logFile,
      logLevel: 'debug',
      ...config,
    };
    writeFileSync(this.configFile, JSON.stringify(full, null, 2));
  }

  status(): StatusDoc | undefined {
    try {
      return JSON.parse(readFileSync(join(this.runtimeDir, 'status.json'), 'utf8')) as StatusDoc;
    } catch {
      return undefined;
    }
  }

  async waitForLink(state: StatusDoc['link']['state'], timeoutMs = 10_000): Promise<StatusDoc> {
    await waitFor(() => this.status()?.link.state === state, timeoutMs, `status.json link.state = ${state}`);
    return this.status()!;
  }

  log(): string {
    try {
      return readFileSync(this.logFile, 'utf8');
    } catch {
      return '';
    }
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Runs the built CLI to completion (SIGKILL after 15 s unless told otherwise); `until` as exec's. */
export function runCli(args: string[], opts: Pick<ExecOptions, 'env' | 'timeoutMs' | 'until'> = {}): Promise<CliRun> {
  return exec(process.execPath, [BUNDLE, ...args], { ...opts, env: opts.env ?? cleanEnv(), timeoutMs: opts.timeoutMs ?? 15_000 });
}

/** Starts `botlink run` as a child process, from dist/ or from a private `bundle`. */
export function startDaemon(device: DeviceDir, env: NodeJS.ProcessEnv = cleanEnv(), bundle: string = BUNDLE): DaemonProc {
  const child = spawn(process.execPath, [bundle, 'run', '--config', device.configFile], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  return new DaemonProc(child);
}

export class DaemonProc {
  readonly child: ChildProcess;
  stdout = '';
  stderr = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(child: ChildProcess) {
    this.child = child;
    child.stdout?.on('data', (d: Buffer) => (this.stdout += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (this.stderr += d.toString()));
    this.exited = closed(child);
  }

  /** Sends a signal and waits for the exit, returning how long it took. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }> {
    const started = performance.now();
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
    const result = await this.exited;
    return { ...result, ms: performance.now() - started };
  }
}
