// How the broker bench prints its rows: the summary table's rows of the cache and fleet figures, and each
// row's details (per-server cells, per-path CPU, the device's boots and phases).
import { median } from '../lib/stats.js';
import { CACHE_GOALS, type CacheMeasured, type CellResult, VARIANTS } from './broker-cache.js';
import type { DeviceMeasured } from './broker-device.js';
import { FLEET_GOALS, FLEET_RSS_GOAL_MIB, type FleetMeasured, PATHS, type Path, type PathResult } from './broker-fleet.js';
import { ms, printTable, times, verdict } from './report.js';
import { spread } from './sample.js';

const rate = (x: number): string => (Number.isFinite(x) ? `${Math.round(x).toLocaleString('en-US')}/s` : 'n/a');
const msOf = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : 'n/a');
const pick = (rs: readonly CellResult[], k: 'rps' | 'p50' | 'p99' | 'cpuUs'): number[] => rs.map((r) => r[k]);
const lat = (rs: readonly CellResult[]): string => `p50 ${msOf(median(pick(rs, 'p50')))} · p99 ${msOf(median(pick(rs, 'p99')))} ms`;

export function cacheRows(m: CacheMeasured, concurrency: number): string[][] {
  const floor = m.results.floor;
  return (['sqlite', 'postgres'] as const).map((v) => {
    const rs = m.results[v];
    const r = median(pick(rs, 'rps')) / median(pick(floor, 'rps'));
    return [
      `token from the broker's cache, c=${concurrency}, ${v === 'sqlite' ? 'SQLite' : 'PostgreSQL'}, vs node:http + Ed25519 verify`,
      `${rate(median(pick(rs, 'rps')))} (${lat(rs)})`,
      `${rate(median(pick(floor, 'rps')))} (${lat(floor)})`,
      times(r),
      `≥ ${CACHE_GOALS[v]}×`,
      verdict(r >= CACHE_GOALS[v]),
      `${spread(pick(rs, 'rps')).toFixed(2)} · ${spread(pick(floor, 'rps')).toFixed(2)}`,
    ];
  });
}

export function fleetRows(f: FleetMeasured, concurrency: number): string[][] {
  const { broker, floor, straight } = f.paths;
  const r = broker.rps / floor.rps;
  const goal = FLEET_GOALS[f.storeKind];
  const answers = (p: PathResult): string => `${rate(p.rps)} (p50 ${msOf(p.p50)} · p99 ${msOf(p.p99)} ms)`;
  return [
    [
      `first tokens, ${f.devices.toLocaleString('en-US')} devices once each, c=${concurrency}, ${f.storeKind}, vs the floor (verify, getToken, seal, insert)`,
      answers(broker),
      answers(floor),
      times(r),
      `≥ ${goal}×`,
      verdict(r >= goal),
      `${broker.spread.toFixed(2)} · ${floor.spread.toFixed(2)}`,
      answers(straight),
    ],
    [
      'the same: errors (broker · floor, straight)',
      String(broker.errors),
      `${floor.errors}, ${straight.errors}`,
      '—',
      '0',
      verdict(broker.errors + floor.errors + straight.errors === 0),
      '',
    ],
    [
      'the same: cloud calls in flight at most (its cap)',
      String(f.peakInFlight),
      `cap ${f.cap}`,
      '—',
      '≤ cap',
      verdict(f.peakInFlight <= f.cap && f.signed === f.devices),
      '',
    ],
    [
      'the same: broker RSS at the end (its peak)',
      `${f.rssMiB.toFixed(1)} MiB`,
      `peak ${f.peakRssMiB.toFixed(1)} MiB`,
      '—',
      `≤ ${FLEET_RSS_GOAL_MIB} MiB`,
      verdict(f.rssMiB <= FLEET_RSS_GOAL_MIB),
      '',
    ],
  ];
}

export function printCacheDetails(m: CacheMeasured, rounds: number, cellMs: number, warmMs: number): void {
  console.log(
    `\nRow 1: POST /v1/token answered from the cache; ${rounds} alternating rounds of ${cellMs} ms cells after ${warmMs} ms warm-up;` +
      ` requests signed ahead (${m.signedInline} signed while sending). Devices written into the stores in` +
      ` ${(m.preloadMs.sqlite / 1000).toFixed(1)} s (SQLite) and ${(m.preloadMs.postgres / 1000).toFixed(1)} s (PostgreSQL);` +
      ` their first tokens through the cloud at ${rate(m.primeRps.sqlite)} and ${rate(m.primeRps.postgres)}.`,
  );
  printTable(
    ['server', 'req/s', 'IQR/median', 'p50 ms', 'p99 ms', 'server CPU µs/req', 'errors'],
    VARIANTS.map((v) => {
      const rs = m.results[v];
      return [
        v,
        rate(median(pick(rs, 'rps'))),
        spread(pick(rs, 'rps')).toFixed(2),
        msOf(median(pick(rs, 'p50'))),
        msOf(median(pick(rs, 'p99'))),
        median(pick(rs, 'cpuUs')).toFixed(0),
        String(rs.reduce((a, r) => a + r.errors, 0)),
      ];
    }),
  );
  const firstError = VARIANTS.map((v) => m.results[v].find((r) => r.firstError)?.firstError).find((e) => e !== undefined);
  if (firstError !== undefined) console.log(`first error: ${firstError}`);
}

export function printFleetDetails(f: FleetMeasured): void {
  console.log(
    `\nRow 2: ${f.devices.toLocaleString('en-US')} devices written into the ${f.storeKind} store in ${(f.preloadMs / 1000).toFixed(1)} s` +
      ` (BrokerStore.enroll, admitted by one code of as many uses); ${f.signed} tokens signed at the cloud by the broker;` +
      ` the three paths in ${f.rounds} turns, each turn's devices once on each.`,
  );
  const us = (x: number): string => (x > 0 ? x.toFixed(0) : '—');
  const names: Record<Path, string> = { straight: 'straight to the cloud', floor: 'through the floor', broker: 'through the broker' };
  printTable(
    ['path', 'answers', 'rate', 'IQR/median', 'p50 ms', 'p99 ms', 'CPU µs/answer: cloud', 'server', 'load generator'],
    PATHS.map((path) => {
      const r = f.paths[path];
      return [
        names[path],
        String(r.answered),
        rate(r.rps),
        r.spread.toFixed(2),
        msOf(r.p50),
        msOf(r.p99),
        us(r.cpuUs.cloud),
        us(r.cpuUs.server),
        us(r.cpuUs.load),
      ];
    }),
  );
  const server = (path: Path): number => f.paths[path].cpuUs.server;
  console.log(
    `server CPU per answer, floor / broker: ${(server('floor') / server('broker')).toFixed(2)} — what the rates' ratio comes to` +
      " where each server's one thread is the bound, as on a quiet machine (other load moves the rates more than their CPU;" +
      " PostgreSQL's own CPU is not counted).",
  );
  for (const path of PATHS) {
    const first = f.paths[path].firstError;
    if (first !== undefined) console.log(`first error ${names[path]}: ${first}`);
  }
}

export function printDeviceDetails(d: DeviceMeasured): void {
  const list = (xs: number[]): string => xs.map((x) => x.toFixed(0)).join(' ');
  console.log(
    `\nRow 3: agent boots (node <bundle> run, the unit's flags and environment), ms: broker mode ${list(d.broker)} | signing mode ${list(d.signing)}`,
  );
  for (const mode of ['broker', 'signing'] as const) {
    const p = d.phases[mode];
    console.log(
      `  ${mode} mode, medians from its log: spawn → 'botlink starting' ${ms(p.load)} · → 'link connecting' ${ms(p.setUp)} · → socket open ${ms(p.connect)}`,
    );
  }
}
