// The broker's benchmarks (DESIGN §3.7, issue 25 item 8), each figure against a baseline in the same run:
//   1. tokens answered from the broker's cache, c=64, on SQLite and on PostgreSQL, vs a node:http floor doing
//      the same Ed25519 verification and nothing else (alternating rounds, medians);
//   2. a fleet's first tokens: N enrolled devices each asking once, vs a floor doing only what any broker must
//      (broker-floor.ts), with signed getToken sent straight to the same cloud beside them for the capacity
//      model (the three in turns); errors, the cloud calls in flight against their cap, the broker's RSS at the end;
//   3. the device: boot → connected with a cached token, broker mode vs signing mode.
// Brokers run as processes of their own from the product's bundle; the cloud and the cache row's floor in a
// forked child (--child); the fleet's floor in another, run with the broker unit's flags and environment (--floor).
//   npm run bench:broker [-- --only device|cache|fleet --device-runs N --devices N --cache-devices N
//                           --rounds N --cell-ms MS --warm-ms MS --concurrency C --cloud-concurrency C
//                           --cloud-latency-ms MS --fleet-store sqlite|postgres --node-flags="FLAGS" --cpu-prof DIR]
// --node-flags replaces the broker unit's node flags (systemd/botlink-broker.service) for every broker: a flag
// tried before it goes into the unit. --cloud-latency-ms holds every cloud answer that long (a cloud across
// the internet rather than on loopback). --cpu-prof writes the brokers' and the child's CPU profiles into DIR.
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { median } from '../lib/stats.js';
import { type PostgresServer, startPostgresIn } from '../lib/postgres-server.js';
import { CACHE_GOALS, type CacheMeasured, type CellResult, measureCache, VARIANTS } from './broker-cache.js';
import { FLEET_GOALS, FLEET_RSS_GOAL_MIB, type FleetMeasured, measureFleet, PATHS, type Path, type PathResult } from './broker-fleet.js';
import { serveFleetFloor } from './broker-floor.js';
import { makeDevices } from './broker-load.js';
import { DEVICE_GOAL, type DeviceMeasured, measureDevice } from './broker-device.js';
import { BrokerRig, NODE_FLAGS, serveCloudAndFloor, startCloudAndFloor } from './broker-rig.js';
import { capacityModel } from './broker-capacity.js';
import { machineLine, ms, printTable, ratioRow, times, verdict } from './report.js';
import { isMain } from './root.js';
import { spread } from './sample.js';
import { Workspace } from './workspace.js';

const progress = (what: string): void => void process.stderr.write(`… ${what}\n`);
const rate = (x: number): string => (Number.isFinite(x) ? `${Math.round(x).toLocaleString('en-US')}/s` : 'n/a');
const msOf = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : 'n/a');
const pick = (rs: readonly CellResult[], k: 'rps' | 'p50' | 'p99' | 'cpuUs'): number[] => rs.map((r) => r[k]);
const lat = (rs: readonly CellResult[]): string => `p50 ${msOf(median(pick(rs, 'p50')))} · p99 ${msOf(median(pick(rs, 'p99')))} ms`;

function cacheRows(m: CacheMeasured, concurrency: number): string[][] {
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

function fleetRows(f: FleetMeasured, concurrency: number): string[][] {
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

function printCacheDetails(m: CacheMeasured, rounds: number, cellMs: number, warmMs: number): void {
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

function printFleetDetails(f: FleetMeasured): void {
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
  for (const path of PATHS) {
    const first = f.paths[path].firstError;
    if (first !== undefined) console.log(`first error ${names[path]}: ${first}`);
  }
}

function printDeviceDetails(d: DeviceMeasured): void {
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

interface LoadOptions {
  cache: { devices: number; rounds: number; cellMs: number; warmMs: number } | undefined;
  fleet: { devices: number; store: 'sqlite' | 'postgres'; cloudConcurrency: number | undefined } | undefined;
  concurrency: number;
  cloudLatencyMs: number;
  profileFlags: string[];
}

/** Rows 1 and 2: devices' keys made ahead, the cloud and the cache row's floor in a forked child, the brokers as processes. */
async function loadRows(rig: BrokerRig, pg: PostgresServer | undefined, o: LoadOptions): Promise<string[][]> {
  const made = performance.now();
  const cacheDevices = makeDevices(o.cache?.devices ?? 0, 'cache');
  const fleetDevices = makeDevices(o.fleet?.devices ?? 0, 'fleet');
  const keysS = (performance.now() - made) / 1000;
  console.log(`${(cacheDevices.length + fleetDevices.length).toLocaleString('en-US')} Ed25519 device keys made in ${keysS.toFixed(1)} s`);
  const cf = await startCloudAndFloor(
    {
      bots: [...cacheDevices, ...fleetDevices].map((d) => d.botId),
      floorKeys: cacheDevices.map((d) => d.publicKey),
      cloudLatencyMs: o.cloudLatencyMs,
    },
    o.profileFlags,
  );
  if (o.cloudLatencyMs > 0) console.log(`every cloud answer held ${o.cloudLatencyMs} ms (--cloud-latency-ms)`);
  const rows: string[][] = [];
  try {
    if (o.cache) {
      const c = { ...o.cache, concurrency: o.concurrency };
      progress(`tokens from the cache: ${cacheDevices.length} devices, ${c.rounds} rounds of floor, SQLite and PostgreSQL`);
      const m = await measureCache(rig, cf, cacheDevices, await pg!.freshDatabase(), c);
      printCacheDetails(m, c.rounds, c.cellMs, c.warmMs);
      rows.push(...cacheRows(m, o.concurrency));
    }
    if (o.fleet) {
      const store = o.fleet.store === 'sqlite' ? 'sqlite' : { broker: await pg!.freshDatabase(), floor: await pg!.freshDatabase() };
      const f = await measureFleet(
        rig,
        cf,
        fleetDevices,
        { concurrency: o.concurrency, cloudConcurrency: o.fleet.cloudConcurrency, store },
        progress,
      );
      printFleetDetails(f);
      rows.push(...fleetRows(f, o.concurrency));
      console.log(`\n${capacityModel(f)}`);
    }
  } finally {
    await cf.close();
  }
  return rows;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      only: { type: 'string' },
      'device-runs': { type: 'string', default: '20' },
      devices: { type: 'string', default: '100000' },
      'cache-devices': { type: 'string', default: '1000' },
      rounds: { type: 'string', default: '10' },
      'cell-ms': { type: 'string', default: '1000' },
      'warm-ms': { type: 'string', default: '300' },
      concurrency: { type: 'string', default: '64' },
      'cloud-concurrency': { type: 'string' },
      'cloud-latency-ms': { type: 'string', default: '0' },
      'fleet-store': { type: 'string', default: 'sqlite' },
      'node-flags': { type: 'string' },
      'cpu-prof': { type: 'string' },
    },
  });
  const only = values.only;
  if (only !== undefined && !['cache', 'fleet', 'device'].includes(only)) throw new Error('--only takes cache, fleet or device');
  const fleetStore = values['fleet-store'];
  if (fleetStore !== 'sqlite' && fleetStore !== 'postgres') throw new Error('--fleet-store takes sqlite or postgres');
  const profileFlags = values['cpu-prof'] ? ['--cpu-prof', '--cpu-prof-interval', '100', '--cpu-prof-dir', values['cpu-prof']] : [];
  const nodeFlags =
    values['node-flags'] === undefined && profileFlags.length === 0
      ? undefined
      : [...(values['node-flags'] ?? '').split(/\s+/).filter((f) => f !== ''), ...profileFlags];
  const want = (row: string): boolean => only === undefined || only === row;
  const o: LoadOptions = {
    cache: want('cache')
      ? {
          devices: Number(values['cache-devices']),
          rounds: Number(values.rounds),
          cellMs: Number(values['cell-ms']),
          warmMs: Number(values['warm-ms']),
        }
      : undefined,
    fleet: want('fleet')
      ? {
          devices: Number(values.devices),
          store: fleetStore,
          cloudConcurrency: values['cloud-concurrency'] === undefined ? undefined : Number(values['cloud-concurrency']),
        }
      : undefined,
    concurrency: Number(values.concurrency),
    cloudLatencyMs: Number(values['cloud-latency-ms']),
    profileFlags,
  };

  console.log(machineLine());
  console.log(
    nodeFlags === undefined
      ? `brokers run as systemd/botlink-broker.service runs them (node flags: ${NODE_FLAGS.join(' ') || 'none'})`
      : `brokers run with node flags ${nodeFlags.join(' ')}, not the unit's`,
  );
  const ws = await Workspace.create('broker');
  const rig = new BrokerRig(ws.dir, ws.bundle, nodeFlags);
  // A folder PostgreSQL's own user (nobody) may enter, as test/global-setup.ts makes for the tests.
  const otherUsers = mkdtempSync(join(tmpdir(), 'botlink-bench-pg-'));
  chmodSync(otherUsers, 0o755);
  let pg: PostgresServer | undefined;
  try {
    const rows: string[][] = [];
    // First, on a machine not yet warm from the load rows: boots are what a busy machine disturbs most.
    if (want('device')) {
      const runs = Number(values['device-runs']);
      progress(`boot → connected with a cached token, broker mode vs signing mode: ${runs} runs each`);
      const d = await measureDevice(ws, rig, runs);
      printDeviceDetails(d);
      rows.push(ratioRow('device: boot → connected, cached token, broker mode vs signing mode', d.broker, d.signing, DEVICE_GOAL));
    }
    if (o.cache || o.fleet?.store === 'postgres') {
      progress('starting a throwaway PostgreSQL');
      pg = await startPostgresIn(otherUsers);
    }
    if (o.cache || o.fleet) rows.push(...(await loadRows(rig, pg, o)));
    console.log('');
    printTable(['figure', 'botlink', 'baseline', 'ratio', 'goal', 'result', 'IQR/median', 'straight to the cloud'], rows);
  } finally {
    await pg?.stop();
    rmSync(otherUsers, { recursive: true, force: true });
    ws.remove();
  }
}

/** What a copy of this bench forked with a role serves; without one it is the bench. */
const ROLES = new Map([
  ['--child', serveCloudAndFloor],
  ['--floor', serveFleetFloor],
]);
if (isMain('broker')) await (ROLES.get(process.argv[2] ?? '') ?? main)();
