import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Lease, LeaseClaim, TokenStore } from './store.js';

/** A process named so that a reused pid (same boot or after a reboot) is never mistaken for it. */
export interface ProcessIdentity {
  pid: number;
  /** /proc/sys/kernel/random/boot_id: pids restart at every boot. */
  bootId: string;
  /** Field 22 of /proc/<pid>/stat (clock ticks after boot): a reused pid has a later one. */
  startTime: number;
}

/** Where the kernel's process facts are read; tests point these at a fake tree. */
export interface ProcPaths {
  procRoot: string;
  bootIdFile: string;
}

export const systemProcPaths: ProcPaths = Object.freeze({
  procRoot: '/proc',
  bootIdFile: '/proc/sys/kernel/random/boot_id',
});

export function readBootId(paths: ProcPaths = systemProcPaths): string {
  return readFileSync(paths.bootIdFile, 'utf8').trim();
}

/** Start time of a running process, or undefined when it is gone or only a zombie is left. */
function readStartTime(pid: number, paths: ProcPaths): number | undefined {
  let stat: string;
  try {
    stat = readFileSync(join(paths.procRoot, String(pid), 'stat'), 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) may hold spaces and parentheses; the fields after its last ')' do not.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const state = fields[0];
  const startTime = Number(fields[19]);
  if (state === 'Z' || state === 'X' || !Number.isSafeInteger(startTime)) return undefined;
  return startTime;
}

/** The identity of a running process, or undefined when it does not run. */
export function processIdentity(pid: number, paths: ProcPaths = systemProcPaths): ProcessIdentity | undefined {
  const startTime = readStartTime(pid, paths);
  return startTime === undefined ? undefined : { pid, bootId: readBootId(paths), startTime };
}

export function selfIdentity(paths: ProcPaths = systemProcPaths): ProcessIdentity {
  const self = processIdentity(process.pid, paths);
  if (!self) throw new Error(`cannot read ${join(paths.procRoot, String(process.pid), 'stat')}: /proc is required`);
  return self;
}

/** True only when this boot runs a process with that pid that started at that time. */
export function isAlive(holder: ProcessIdentity, paths: ProcPaths = systemProcPaths): boolean {
  if (holder.bootId !== readBootId(paths)) return false;
  return readStartTime(holder.pid, paths) === holder.startTime;
}

/** CLOCK_MONOTONIC in ms: one timeline for every process of this boot, untouched by wall-clock steps. */
export function bootMonoNow(): number {
  return Number(process.hrtime.bigint() / 1_000_000n);
}

function ownerOf(self: ProcessIdentity): string {
  return `daemon:${self.pid}`;
}

/** Records `self` as the one daemon of the store's stateDir unless another live daemon already is. */
export function claimInstance(store: TokenStore, self: ProcessIdentity): LeaseClaim {
  return store.acquireLease('instance', ownerOf(self), self);
}

export function releaseInstance(store: TokenStore, self: ProcessIdentity): void {
  store.releaseLease('instance', ownerOf(self), self);
}

/** The daemon running on this stateDir, if any; a row left by a killed daemon does not count. */
export function runningDaemon(store: TokenStore): Lease | undefined {
  return store.liveLease('instance');
}
