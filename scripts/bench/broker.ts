// The broker's benchmarks (DESIGN §3.7, issue 25 item 8), each figure against a baseline in the same run:
//   1. tokens answered from the broker's cache, c=64, on SQLite and on PostgreSQL, vs a node:http floor doing
//      the same Ed25519 verification and nothing else (alternating rounds, medians);
//   2. a fleet's first tokens: N enrolled devices each asking once, vs a floor doing only what any broker must
//      (broker-floor.ts), with signed getToken sent straight to the same cloud beside them for the capacity
//      model (the three in turns); errors, the cloud calls in flight against their cap, the broker's RSS at the end;
//   3. the device: boot → connected with a cached token, broker mode vs signing mode;
//   4. a fleet enrolling zero-touch on PostgreSQL: first asks (202 pending) vs the cache row's floor, accepts
//      one by one, and the time from the last acceptance to every device's token (broker-pending.ts);
//   5. the admin API at 100,000 devices on PostgreSQL: devices pages and the summary through a broker's admin
//      listener vs node-postgres running the store's own statements behind node:http (broker-admin.ts);
//   6. the console's first load in headless Chromium, signed in and by the form, vs a blank page, and its bytes
//      (console-load.ts; Debian's chromium, from scripts/test-tools.sh).
// Brokers run as processes of their own from the product's bundle; the cloud and the cache row's floor in a
// forked child (--child); the fleet's floor in another, run with the broker unit's flags and environment (--floor).
//   npm run bench:broker [-- --only device|cache|fleet|pending|admin|console --device-runs N --devices N --cache-devices N --pending-devices N
//                           --admin-devices N --admin-rounds N --admin-concurrency C --console-loads N --rounds N --cell-ms MS --warm-ms MS
//                           --concurrency C --cloud-concurrency C
//                           --cloud-latency-ms MS --fleet-store sqlite|postgres --node-flags="FLAGS" --cpu-prof DIR]
// --node-flags replaces the broker unit's node flags (systemd/botlink-broker.service) for every broker: a flag
// tried before it goes into the unit. --cloud-latency-ms holds every cloud answer that long (a cloud across
// the internet rather than on loopback). --cpu-prof writes the brokers', the floor's and the child's CPU profiles into DIR.
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { type PostgresServer, startPostgresIn } from '../lib/postgres-server.js';
import { measureCache } from './broker-cache.js';
import { measureFleet } from './broker-fleet.js';
import { serveFleetFloor } from './broker-floor.js';
import { makeDevices } from './broker-load.js';
import { measurePending, pendingRows, ZERO_TOUCH_PREFIX } from './broker-pending.js';
import { adminRows, measureAdmin } from './broker-admin.js';
import { DEVICE_GOAL, measureDevice } from './broker-device.js';
import { BrokerRig, NODE_FLAGS, serveCloudAndFloor, startCloudAndFloor } from './broker-rig.js';
import { capacityModel } from './broker-capacity.js';
import { machineLine, printTable, ratioRow } from './report.js';
import { cacheRows, fleetRows, printCacheDetails, printDeviceDetails, printFleetDetails } from './broker-report.js';
import { isMain } from './root.js';
import { consoleRows, measureConsole } from './console-load.js';
import { Workspace } from './workspace.js';

const progress = (what: string): void => void process.stderr.write(`… ${what}\n`);
interface LoadOptions {
  cache: { devices: number; rounds: number; cellMs: number; warmMs: number } | undefined;
  fleet: { devices: number; store: 'sqlite' | 'postgres'; cloudConcurrency: number | undefined } | undefined;
  pending: { devices: number } | undefined;
  concurrency: number;
  cloudLatencyMs: number;
  profileFlags: string[];
}

/** Rows 1 and 2: devices' keys made ahead, the cloud and the cache row's floor in a forked child, the brokers as processes. */
async function loadRows(rig: BrokerRig, pg: PostgresServer | undefined, o: LoadOptions): Promise<string[][]> {
  const made = performance.now();
  const cacheDevices = makeDevices(o.cache?.devices ?? 0, 'cache');
  const fleetDevices = makeDevices(o.fleet?.devices ?? 0, 'fleet');
  const pendingDevices = makeDevices(o.pending?.devices ?? 0, ZERO_TOUCH_PREFIX);
  const keysS = (performance.now() - made) / 1000;
  const keyCount = cacheDevices.length + fleetDevices.length + pendingDevices.length;
  console.log(`${keyCount.toLocaleString('en-US')} Ed25519 device keys made in ${keysS.toFixed(1)} s`);
  const cf = await startCloudAndFloor(
    {
      // The zero-touch devices are new to the cloud: accepting one registers it.
      bots: [...cacheDevices, ...fleetDevices].map((d) => d.botId),
      floorKeys: [...cacheDevices, ...pendingDevices].map((d) => d.publicKey),
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
    if (o.pending) {
      const m = await measurePending(rig, cf, pendingDevices, await pg!.freshDatabase(), o.concurrency, progress);
      rows.push(...pendingRows(m, o.concurrency));
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
      'console-loads': { type: 'string', default: '30' },
      devices: { type: 'string', default: '100000' },
      'cache-devices': { type: 'string', default: '1000' },
      'pending-devices': { type: 'string', default: '10000' },
      'admin-devices': { type: 'string', default: '100000' },
      'admin-rounds': { type: 'string', default: '7' },
      'admin-concurrency': { type: 'string', default: '4' },
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
  if (only !== undefined && !['cache', 'fleet', 'device', 'pending', 'admin', 'console'].includes(only))
    throw new Error('--only takes cache, fleet, device, pending, admin or console');
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
    pending: want('pending') ? { devices: Number(values['pending-devices']) } : undefined,
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
    if (want('console')) {
      const loads = Number(values['console-loads']);
      progress(`the console's first load in headless Chromium: ${loads} fresh contexts each`);
      rows.push(...consoleRows(await measureConsole(rig, ws.bundle, loads)));
    }
    if (o.cache || o.pending || o.fleet?.store === 'postgres' || want('admin')) {
      progress('starting a throwaway PostgreSQL');
      pg = await startPostgresIn(otherUsers);
    }
    if (o.cache || o.fleet || o.pending) rows.push(...(await loadRows(rig, pg, o)));
    if (want('admin')) {
      const a = {
        devices: Number(values['admin-devices']),
        rounds: Number(values['admin-rounds']),
        concurrency: Number(values['admin-concurrency']),
      };
      const m = await measureAdmin(rig, pg!, a, progress);
      console.log(
        `admin: ${m.devices.toLocaleString('en-US')} devices filled in ${m.fillS.toFixed(1)} s; the devices pages listed all ${m.lines.toLocaleString('en-US')}`,
      );
      rows.push(...adminRows(m, a.concurrency));
    }
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
