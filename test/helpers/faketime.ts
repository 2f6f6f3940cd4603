import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/** Debian's `faketime` package (via libfaketime) puts the preload library here on amd64. */
export const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';

/** A wrong wall clock at boot: a name for reports and the FAKETIME spec that makes it. */
export interface WrongClock {
  name: string;
  /** libfaketime spec: "+2d"/"-2d" offsets, "@…" start-at; all of them keep advancing at real speed. */
  spec: string;
  /** Roughly how far the faked wall clock is from the real one, to check the fake took hold. */
  approxOffsetMs: (realNowMs: number) => number;
}

const DAY_MS = 86_400_000;

export const WRONG_CLOCKS: readonly WrongClock[] = [
  { name: '1970', spec: '@1970-01-01 00:00:00', approxOffsetMs: (real) => -real },
  { name: '-2d', spec: '-2d', approxOffsetMs: () => -2 * DAY_MS },
  { name: '+2d', spec: '+2d', approxOffsetMs: () => 2 * DAY_MS },
];

/** Installs the `faketime` package when the library is missing (CI should have done it up front). */
export function ensureLibfaketime(): void {
  if (existsSync(LIBFAKETIME)) return;
  const install = (): boolean => spawnSync('apt-get', ['install', '-y', '--no-install-recommends', 'faketime'], { stdio: 'ignore', timeout: 120_000 }).status === 0;
  // The package lists may be missing or stale in a fresh container: refresh them only when needed.
  if (!install()) {
    execFileSync('apt-get', ['update'], { stdio: 'ignore', timeout: 180_000 });
    if (!install()) throw new Error('cannot install faketime: run `apt-get install -y faketime` as root');
  }
  if (!existsSync(LIBFAKETIME)) throw new Error(`faketime installed but ${LIBFAKETIME} is missing`);
}

/** Environment variables that give a child process `spec` as its wall clock and leave CLOCK_MONOTONIC real. */
export function faketimeEnv(spec: string): Record<string, string> {
  return { LD_PRELOAD: LIBFAKETIME, FAKETIME: spec, FAKETIME_DONT_FAKE_MONOTONIC: '1' };
}

export interface ClockProbe {
  /** Date.now() in the child minus the real Date.now() around it. */
  wallOffsetMs: number;
  /** How far the child's Date.now() advanced over a 300 ms timer. */
  wallAdvanceMs: number;
  /** How far performance.now() advanced over the same timer. */
  perfAdvanceMs: number;
  /** The child's CLOCK_MONOTONIC (process.hrtime) minus ours: about 0 when monotonic is left real. */
  monoOffsetMs: number;
}

const PROBE = `
const d0 = Date.now(), p0 = performance.now(), m0 = Number(process.hrtime.bigint() / 1000000n);
setTimeout(() => process.stdout.write(JSON.stringify({ d0, m0, wall: Date.now() - d0, perf: performance.now() - p0 })), 300);
`;

/** Runs a tiny node program under libfaketime and reports what its clocks said. */
export function probeNodeClocks(spec: string): ClockProbe {
  const realBefore = Date.now();
  const monoBefore = Number(process.hrtime.bigint() / 1_000_000n);
  const out = execFileSync(process.execPath, ['-e', PROBE], { env: { ...process.env, ...faketimeEnv(spec) }, encoding: 'utf8', timeout: 10_000 });
  const realAfter = Date.now();
  const monoAfter = Number(process.hrtime.bigint() / 1_000_000n);
  const r = JSON.parse(out) as { d0: number; m0: number; wall: number; perf: number };
  return {
    wallOffsetMs: r.d0 - (realBefore + realAfter) / 2,
    wallAdvanceMs: r.wall,
    perfAdvanceMs: r.perf,
    monoOffsetMs: r.m0 - (monoBefore + monoAfter) / 2,
  };
}
