// Readings of a live process from Linux's /proc: memory and CPU time.
import { existsSync, readdirSync, readFileSync } from 'node:fs';

/** VmRSS of a live process, in KiB. */
export function rssKiB(pid: number): number {
  const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!match) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(match[1]);
}

/** Linux reports utime/stime in USER_HZ, 100 on every architecture botlink targets. */
export const CLOCK_TICKS_PER_S = 100;

/** utime + stime of a live process (all its threads), in clock ticks. */
export function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may hold spaces; fields after its closing parenthesis are fixed.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

/**
 * CPU time of a live process in ms at nanosecond resolution: the sum over its threads of
 * /proc/<pid>/task/<tid>/schedstat, since an idle minute is often less than one 10 ms tick.
 * Falls back to ticks on kernels without schedstat.
 */
export function cpuMs(pid: number): number {
  if (!existsSync(`/proc/${pid}/schedstat`)) return (cpuTicks(pid) * 1000) / CLOCK_TICKS_PER_S;
  let ns = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // the thread ended since the listing
    }
  }
  return ns / 1e6;
}
