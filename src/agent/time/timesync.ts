import { access, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import type { TimeReader } from '../../clock.js';

/** synced: a source says so; unsynced: one says not, or the wall clock is below the floor; unknown: none answered. */
export type Verdict = 'synced' | 'unsynced' | 'unknown';
export type TimeSource = 'floor' | 'timesyncd' | 'chrony' | 'timedated' | 'none';

export interface TimeSyncResult {
  verdict: Verdict;
  source: TimeSource;
  /** One human line saying what the deciding source reported. */
  detail: string;
}

export interface CommandOutput {
  code: number | null;
  stdout: string;
}

/** Runs argv with a time limit; undefined when it could not run to completion (missing, timed out). */
export type CommandRunner = (argv: readonly string[], timeoutMs: number) => Promise<CommandOutput | undefined>;

export interface TimeSyncOptions {
  clock: TimeReader;
  /** max(build time, last server-confirmed time): a wall clock below it is certainly wrong. */
  floorMs: () => number;
  syncFile?: string;
  chronyc?: readonly string[];
  timedatectl?: readonly string[];
  timeoutMs?: number;
  run?: CommandRunner;
}

export const DEFAULT_SYNC_FILE = '/run/systemd/timesync/synchronized';
export const DEFAULT_CHRONYC: readonly string[] = ['chronyc', '-c', 'tracking'];
export const DEFAULT_TIMEDATECTL: readonly string[] = ['timedatectl', 'show', '-p', 'NTPSynchronized', '--value'];
export const DEFAULT_SOURCE_TIMEOUT_MS = 2000;

/** chrony's own slewing keeps offsets tiny; a second or more means it is still converging or stuck. */
const CHRONY_MAX_OFFSET_S = 1;

// Positions in `chronyc -c tracking` (mlichvar/chrony client.c, process_cmd_tracking): 1 ref id, 2 name,
// 3 stratum, 4 ref time, 5 system time offset (s), 6 last offset, … 13 update interval, 14 leap status.
const CHRONY_FIELDS = 14;
const CHRONY_OFFSET_FIELD = 4;
const CHRONY_LEAP_FIELD = 13;
const CHRONY_LEAP_VALUES = new Set(['Normal', 'Insert second', 'Delete second', 'Not synchronised']);

type Answer = TimeSyncResult | undefined;

/**
 * The first source that answers decides, in this order: floor, timesyncd's file, chrony, timedated.
 * With `toolsAtOnce` (a first verdict, which a boot may wait on) the two tools run side by side: one
 * after the other put two process runs end to end on its way to connected (about 3 ms on a 2-core
 * x86). Otherwise timedatectl runs only when chrony did not answer: on a chrony board it would start
 * systemd-timedated over D-Bus at every check, to be ignored.
 */
export async function checkTimeSync(opts: TimeSyncOptions, toolsAtOnce = false): Promise<TimeSyncResult> {
  const run = opts.run ?? runCommand;
  const timeoutMs = opts.timeoutMs ?? DEFAULT_SOURCE_TIMEOUT_MS;
  const local = checkFloor(opts.clock, opts.floorMs()) ?? (await checkSyncFile(opts.syncFile ?? DEFAULT_SYNC_FILE));
  if (local) return local;
  const asks = [
    () => checkChrony(run, opts.chronyc ?? DEFAULT_CHRONYC, timeoutMs),
    () => checkTimedated(run, opts.timedatectl ?? DEFAULT_TIMEDATECTL, timeoutMs),
  ];
  const started = toolsAtOnce ? asks.map((ask) => ask()) : [];
  for (const [i, ask] of asks.entries()) {
    const result = await (started[i] ?? ask());
    if (result) return result;
  }
  return { verdict: 'unknown', source: 'none', detail: 'no time source answered (no timesyncd, chrony or timedated)' };
}

function checkFloor(clock: TimeReader, floorMs: number): Answer {
  const wall = clock.wallNow();
  if (wall >= floorMs) return undefined;
  return {
    verdict: 'unsynced',
    source: 'floor',
    detail: `wall clock ${new Date(wall).toISOString()} is before ${new Date(floorMs).toISOString()}`,
  };
}

async function checkSyncFile(path: string): Promise<Answer> {
  if (!(await accessible(path, constants.F_OK))) return undefined;
  return { verdict: 'synced', source: 'timesyncd', detail: `${path} exists` };
}

/**
 * fs.access as a promise, without node:fs/promises: loading that module loads readline and 20 more
 * of Node's own modules the daemon has no other use for, on its way to connected.
 */
function accessible(path: string, mode: number): Promise<boolean> {
  return new Promise((resolve) => access(path, mode, (err) => resolve(err === null)));
}

async function checkChrony(run: CommandRunner, argv: readonly string[], timeoutMs: number): Promise<Answer> {
  const out = await run(argv, timeoutMs);
  if (out?.code !== 0) return undefined;
  const tracking = parseChronyTracking(out.stdout);
  if (!tracking) return undefined;
  const { leap, offsetS } = tracking;
  const synced = leap !== 'Not synchronised' && Math.abs(offsetS) < CHRONY_MAX_OFFSET_S;
  return { verdict: synced ? 'synced' : 'unsynced', source: 'chrony', detail: `chronyc: ${leap}, offset ${offsetS} s` };
}

/** Leap status and system time offset (seconds) from `chronyc -c tracking`, or undefined if unparsable. */
export function parseChronyTracking(stdout: string): { leap: string; offsetS: number } | undefined {
  const line = stdout.split('\n').find((l) => l.trim() !== '');
  const fields = line?.trim().split(',');
  if (!fields || fields.length < CHRONY_FIELDS) return undefined;
  const offsetText = fields[CHRONY_OFFSET_FIELD] ?? '';
  const leap = fields[CHRONY_LEAP_FIELD] ?? '';
  const offsetS = Number(offsetText);
  if (offsetText.trim() === '' || !Number.isFinite(offsetS) || !CHRONY_LEAP_VALUES.has(leap)) return undefined;
  return { leap, offsetS };
}

async function checkTimedated(run: CommandRunner, argv: readonly string[], timeoutMs: number): Promise<Answer> {
  const out = await run(argv, timeoutMs);
  if (out?.code !== 0) return undefined;
  const value = out.stdout.trim();
  if (value !== 'yes' && value !== 'no') return undefined;
  return {
    verdict: value === 'yes' ? 'synced' : 'unsynced',
    source: 'timedated',
    detail: `timedatectl: NTPSynchronized=${value}`,
  };
}

/** The tools must not talk to our service manager: timedatectl reports its errors to NOTIFY_SOCKET. */
function toolEnv(): NodeJS.ProcessEnv {
  const { NOTIFY_SOCKET: _n, WATCHDOG_USEC: _u, WATCHDOG_PID: _p, ...env } = process.env;
  return env;
}

/**
 * Where `file` is: itself when it names a path, else the first executable of that name on PATH;
 * undefined when there is none. A tool that is not installed then costs no process: forking the
 * daemon only to learn that chronyc is missing took ~15 ms of its main thread at boot (2-core VM).
 */
export async function findExecutable(file: string, path = process.env.PATH ?? ''): Promise<string | undefined> {
  const dirs = path.split(delimiter).filter(Boolean);
  const candidates = file.includes('/') ? [file] : dirs.map((dir) => join(dir, file));
  for (const candidate of candidates) if (await accessible(candidate, constants.X_OK)) return candidate;
  return undefined;
}

/**
 * Default runner: execFile without a shell; SIGKILL so a hung tool cannot outlive the timeout.
 * node:child_process loads with the first tool that is there to run, not with the daemon.
 */
export const runCommand: CommandRunner = async (argv, timeoutMs) => {
  const [file, ...args] = argv;
  const found = file === undefined ? undefined : await findExecutable(file);
  if (found === undefined) return undefined;
  const { execFile } = process.getBuiltinModule('node:child_process');
  return new Promise((resolve) => {
    execFile(
      found,
      args,
      { timeout: timeoutMs, killSignal: 'SIGKILL', encoding: 'utf8', windowsHide: true, env: toolEnv() },
      (err, stdout) => {
        if (!err) resolve({ code: 0, stdout });
        else if (err.killed) resolve(undefined);
        else if (typeof err.code === 'number') resolve({ code: err.code, stdout });
        else if (err.signal) resolve({ code: null, stdout });
        else resolve(undefined);
      },
    );
  });
};
