import { execFileSync } from 'node:child_process';
import { D } from './time.js';
import { requireTool } from '../../scripts/lib/tools.js';

/** A wrong wall clock at boot: a name for reports and the FAKETIME spec that makes it. */
export interface WrongClock {
  name: string;
  /** libfaketime spec: "+2d"/"-2d" offsets, "@…" start-at; all of them keep advancing at real speed. */
  spec: string;
  /** Roughly how far the faked wall clock is from the real one, to check the fake took hold. */
  approxOffsetMs: (realNowMs: number) => number;
}

export const WRONG_CLOCKS: readonly WrongClock[] = [
  { name: '1970', spec: '@1970-01-01 00:00:00', approxOffsetMs: (real) => -real },
  { name: '-2d', spec: '-2d', approxOffsetMs: () => -2 * D },
  { name: '+2d', spec: '+2d', approxOffsetMs: () => 2 * D },
];

/** Environment variables that give a child process `spec` as its wall clock and leave CLOCK_MONOTONIC real; fails naming the fix without libfaketime. */
export function faketimeEnv(spec: string): Record<string, string> {
  return { LD_PRELOAD: requireTool('libfaketime'), FAKETIME: spec, FAKETIME_DONT_FAKE_MONOTONIC: '1' };
}

export interface ClockProbe {
  /** Date.now() in the child minus the real Date.now() around it. */
  wallOffsetMs: number;
  /** How far the child's Date.now() advanced over a 300 ms timer. */
  wallAdvanceMs: number;
  /** How far performance.now() advanced over the same timer. */
  perfAdvanceMs: number;
  /**
   * The least and the most Date.now() can have advanced over the span performance.now() measured: each
   * end of it is read between two Date.now()s, so a pause of the child there widens this, not the error.
   */
  wallAroundPerfMs: [number, number];
  /** The child's CLOCK_MONOTONIC (process.hrtime) minus ours: about 0 when monotonic is left real. */
  monoOffsetMs: number;
}

const PROBE = `
const d0 = Date.now(), p0 = performance.now(), d0b = Date.now(), m0 = Number(process.hrtime.bigint() / 1000000n);
setTimeout(() => {
  const d1 = Date.now(), p1 = performance.now(), d1b = Date.now();
  process.stdout.write(JSON.stringify({ d0, m0, wall: d1 - d0, perf: p1 - p0, around: [d1 - d0b, d1b - d0] }));
}, 300);
`;

/** Runs a tiny node program under libfaketime and reports what its clocks said. */
export function probeNodeClocks(spec: string): ClockProbe {
  const realBefore = Date.now();
  const monoBefore = Number(process.hrtime.bigint() / 1_000_000n);
  const out = execFileSync(process.execPath, ['-e', PROBE], {
    env: { ...process.env, ...faketimeEnv(spec) },
    encoding: 'utf8',
    timeout: 10_000,
  });
  const realAfter = Date.now();
  const monoAfter = Number(process.hrtime.bigint() / 1_000_000n);
  const r = JSON.parse(out) as { d0: number; m0: number; wall: number; perf: number; around: [number, number] };
  return {
    wallOffsetMs: r.d0 - (realBefore + realAfter) / 2,
    wallAdvanceMs: r.wall,
    perfAdvanceMs: r.perf,
    wallAroundPerfMs: r.around,
    monoOffsetMs: r.m0 - (monoBefore + monoAfter) / 2,
  };
}
