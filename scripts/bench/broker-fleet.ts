import { cpuMs } from '../lib/procfs.js';
import { quantile } from '../lib/stats.js';
import { type FleetFloor, startFleetFloor } from './broker-floor.js';
import {
  type BenchDevice,
  getTokenOk,
  type LoadResult,
  load,
  type Prepared,
  signedGetToken,
  signedTokenRequest,
  tokenOk,
} from './broker-load.js';
import { type BrokerRig, type CloudAndFloor, memoryMiB } from './broker-rig.js';
import { spread } from './sample.js';

/** The broker's rate over the floor's, by store. */
export const FLEET_GOALS = { SQLite: 0.6, PostgreSQL: 0.4 } as const;
export const FLEET_RSS_GOAL_MIB = 150;
/** Requests signed ahead at a time: the oldest is sent well inside the broker's 300 s window. */
const CHUNK = 10_000;
/** At least this many turns of the three paths, however few the devices. */
const MIN_ROUNDS = 10;
export const PATHS = ['straight', 'floor', 'broker'] as const;
export type Path = (typeof PATHS)[number];

export interface FleetOptions {
  concurrency: number;
  /** The broker's cloudConcurrency; undefined keeps its default. */
  cloudConcurrency: number | undefined;
  /** SQLite files in the bench folder, or two fresh PostgreSQL databases: the broker's and the floor's. */
  store: 'sqlite' | { broker: string; floor: string };
}

/** Every request of a path once: the rate over the time spent sending (signing ahead excluded). */
export interface PathResult {
  answered: number;
  rps: number;
  p50: number;
  p99: number;
  /** IQR/median of its chunks' rates. */
  spread: number;
  errors: number;
  firstError: string | undefined;
  /** CPU time per answer, in µs, of each process at work: the cloud, the server (broker or floor; 0 straight), the load generator. */
  cpuUs: CpuReading;
}

/** CPU in ms (per answer in µs, in a PathResult) of the cloud's child, the server in the path and this process. */
interface CpuReading {
  cloud: number;
  server: number;
  load: number;
}

export interface FleetMeasured {
  devices: number;
  preloadMs: number;
  /** Turns of the three paths, one chunk of devices each. */
  rounds: number;
  paths: Record<Path, PathResult>;
  cap: number;
  peakInFlight: number;
  /** Tokens the broker had to sign for at the cloud: one per device. */
  signed: number;
  rssMiB: number;
  peakRssMiB: number;
  storeKind: keyof typeof FLEET_GOALS;
}

/** One path's chunks added up. */
class Tally {
  readonly #latencies: number[] = [];
  readonly #chunkRps: number[] = [];
  readonly #cpuMs: CpuReading = { cloud: 0, server: 0, load: 0 };
  #windowMs = 0;
  #errors = 0;
  #firstError: string | undefined;

  add(r: LoadResult, before: CpuReading, after: CpuReading): void {
    for (const x of r.latencies) this.#latencies.push(x);
    for (const k of ['cloud', 'server', 'load'] as const) this.#cpuMs[k] += after[k] - before[k];
    this.#chunkRps.push(r.rps);
    this.#windowMs += r.windowMs;
    this.#errors += r.errors;
    this.#firstError ??= r.firstError;
  }

  result(): PathResult {
    const n = this.#latencies.length;
    const per = (ms: number): number => (ms * 1000) / n;
    const sorted = this.#latencies.sort((a, b) => a - b);
    return {
      answered: n,
      rps: n / (this.#windowMs / 1000),
      p50: quantile(sorted, 0.5),
      p99: quantile(sorted, 0.99),
      spread: spread(this.#chunkRps),
      errors: this.#errors,
      firstError: this.#firstError,
      cpuUs: { cloud: per(this.#cpuMs.cloud), server: per(this.#cpuMs.server), load: per(this.#cpuMs.load) },
    };
  }
}

/** Where a path sends its requests, how each is signed, whether an answer is a success, and whose CPU it costs. */
interface Target {
  url: string;
  pid: number | undefined;
  sign: (device: BenchDevice) => Prepared;
  ok: (status: number, json: unknown) => boolean;
}

export async function measureFleet(
  rig: BrokerRig,
  cf: CloudAndFloor,
  devices: readonly BenchDevice[],
  o: FleetOptions,
  progress: (what: string) => void,
): Promise<FleetMeasured> {
  const stores = o.store === 'sqlite' ? { broker: rig.sqliteStore('fleet'), floor: rig.sqliteStore('floor') } : o.store;
  progress(`writing ${devices.length} enrolled devices into the fleet's store (BrokerStore.enroll)`);
  const preloadMs = await rig.preload(stores.broker, devices);
  // The floor keeps each token as the broker does, only for a key its store holds active: its store holds the fleet too.
  await rig.preload(stores.floor, devices);
  const broker = await rig.broker({ name: 'fleet', cloud: cf.cloud, store: stores.broker, cloudConcurrency: o.cloudConcurrency });
  const cap = broker.config.limits.cloudConcurrency;
  let floor: FleetFloor | undefined;
  try {
    floor = await startFleetFloor({
      cloud: cf.cloud,
      store: stores.floor,
      tokenKeyFile: rig.tokenKeyFile,
      cloudConnections: cap,
      devices,
      nodeFlags: rig.nodeFlags,
    });
    const targets: Record<Path, Target> = {
      straight: { url: cf.cloud, pid: undefined, sign: (d) => signedGetToken(d.botId), ok: getTokenOk },
      floor: { url: floor.url, pid: floor.pid, sign: signedTokenRequest, ok: tokenOk },
      broker: { url: broker.url, pid: broker.pid, sign: signedTokenRequest, ok: tokenOk },
    };
    const { paths, rounds } = await takeTurns(targets, cf, devices, o.concurrency, progress);
    const memory = memoryMiB(broker.pid);
    return {
      devices: devices.length,
      preloadMs,
      rounds,
      paths,
      cap,
      peakInFlight: await broker.metric('botlink_broker_cloud_in_flight_peak'),
      signed: await broker.metric('botlink_broker_tokens_issued_total', '{source="sign"}'),
      rssMiB: memory.rss,
      peakRssMiB: memory.peak,
      storeKind: o.store === 'sqlite' ? 'SQLite' : 'PostgreSQL',
    };
  } finally {
    await Promise.all([floor?.close(), broker.stop()]);
  }
}

/** Each device once on every path: chunk after chunk, each chunk on the three paths, the first of them rotating. */
async function takeTurns(
  targets: Record<Path, Target>,
  cf: CloudAndFloor,
  devices: readonly BenchDevice[],
  concurrency: number,
  progress: (what: string) => void,
): Promise<{ paths: Record<Path, PathResult>; rounds: number }> {
  const reading = async (pid: number | undefined): Promise<CpuReading> => {
    const own = process.cpuUsage();
    return { cloud: await cf.cpuMs(), server: pid === undefined ? 0 : cpuMs(pid), load: (own.user + own.system) / 1000 };
  };
  const tallies: Record<Path, Tally> = { straight: new Tally(), floor: new Tally(), broker: new Tally() };
  const size = Math.min(CHUNK, Math.ceil(devices.length / MIN_ROUNDS));
  const rounds = Math.ceil(devices.length / size);
  progress(`${devices.length} first tokens on each path (straight, floor, broker): ${rounds} turns of ${size} devices`);
  for (let round = 0; round < rounds; round++) {
    const part = devices.slice(round * size, (round + 1) * size);
    for (let k = 0; k < PATHS.length; k++) {
      const path = PATHS[(round + k) % PATHS.length]!;
      const t = targets[path];
      const requests = part.map(t.sign);
      const before = await reading(t.pid);
      const r = await load({ url: t.url, concurrency, requests, warmMs: 0, cellMs: Infinity, ok: t.ok });
      tallies[path].add(r, before, await reading(t.pid));
    }
  }
  return { paths: { straight: tallies.straight.result(), floor: tallies.floor.result(), broker: tallies.broker.result() }, rounds };
}
