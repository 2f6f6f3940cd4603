// Row 2 of the broker bench: a fleet's first tokens. Every enrolled device asks the broker once, so every
// request costs a getToken at the cloud; beside it, the same getToken signed and sent straight to the same
// cloud (half before the broker's run and half after, so neither side alone meets a fuller cloud store).
import { join } from 'node:path';
import { cpuMs } from '../lib/procfs.js';
import { quantile } from '../lib/stats.js';
import { type BenchDevice, getTokenOk, load, type Prepared, signedGetToken, signedTokenRequest, tokenOk } from './broker-load.js';
import { type BrokerRig, type CloudAndFloor, memoryMiB } from './broker-rig.js';

export const FLEET_RATE_GOAL = 0.5;
export const FLEET_RSS_GOAL_MIB = 150;
/** Requests signed ahead at a time: the oldest is sent well inside the broker's 300 s window. */
const CHUNK = 10_000;

export interface FleetOptions {
  concurrency: number;
  /** The broker's cloudConcurrency; undefined keeps its default. */
  cloudConcurrency: number | undefined;
  /** `sqlite` (a file in the bench folder) or a postgres:// URL. */
  store: string;
}

/** Every request of a phase once: the rate over the time spent sending (signing ahead excluded). */
export interface PhaseResult {
  answered: number;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  firstError: string | undefined;
  /** CPU time per answer, in µs, of each process at work: the cloud, the broker (0 when not in the path), the load generator. */
  cpuUs: { cloud: number; broker: number; load: number };
}

/** CPU so far, in ms, of the cloud's child, the broker (when there is one) and this process. */
interface CpuReading {
  cloud: number;
  broker: number;
  load: number;
}

export interface FleetMeasured {
  devices: number;
  preloadMs: number;
  direct: PhaseResult;
  broker: PhaseResult;
  cap: number;
  peakInFlight: number;
  /** Tokens the broker had to sign for at the cloud: one per device. */
  signed: number;
  rssMiB: number;
  peakRssMiB: number;
  storeKind: string;
}

type Phase = PhaseResult & { latencies: number[]; windowMs: number; cpuMs: CpuReading };

/** Sends each item's request once, `CHUNK` signed ahead at a time, with `concurrency` callers; CPU counted while sending. */
async function phase<T>(
  url: string,
  items: readonly T[],
  sign: (item: T) => Prepared,
  ok: (status: number, json: unknown) => boolean,
  concurrency: number,
  cpu: () => Promise<CpuReading>,
): Promise<Phase> {
  const latencies: number[] = [];
  let windowMs = 0;
  let errors = 0;
  let firstError: string | undefined;
  const cpuMs: CpuReading = { cloud: 0, broker: 0, load: 0 };
  for (let at = 0; at < items.length; at += CHUNK) {
    const requests = items.slice(at, at + CHUNK).map(sign);
    const before = await cpu();
    const r = await load({ url, concurrency, requests, warmMs: 0, cellMs: Infinity, ok });
    const after = await cpu();
    for (const k of ['cloud', 'broker', 'load'] as const) cpuMs[k] += after[k] - before[k];
    for (const x of r.latencies) latencies.push(x);
    windowMs += r.windowMs;
    errors += r.errors;
    firstError ??= r.firstError;
  }
  latencies.sort((a, b) => a - b);
  return summary(latencies, windowMs, errors, firstError, cpuMs);
}

function summary(latencies: number[], windowMs: number, errors: number, firstError: string | undefined, cpuMs: CpuReading): Phase {
  const per = (ms: number): number => (ms * 1000) / latencies.length;
  return {
    answered: latencies.length,
    rps: latencies.length / (windowMs / 1000),
    p50: quantile(latencies, 0.5),
    p99: quantile(latencies, 0.99),
    errors,
    firstError,
    cpuUs: { cloud: per(cpuMs.cloud), broker: per(cpuMs.broker), load: per(cpuMs.load) },
    latencies,
    windowMs,
    cpuMs,
  };
}

export async function measureFleet(
  rig: BrokerRig,
  cf: CloudAndFloor,
  devices: readonly BenchDevice[],
  o: FleetOptions,
  progress: (what: string) => void,
): Promise<FleetMeasured> {
  const store = o.store === 'sqlite' ? `sqlite:${join(rig.dir, 'fleet.db')}` : o.store;
  progress(`writing ${devices.length} enrolled devices into the fleet's store (BrokerStore.enroll)`);
  const preloadMs = await rig.preload(store, devices);
  const broker = await rig.broker({ name: 'fleet', cloud: cf.cloud, store, cloudConcurrency: o.cloudConcurrency });
  try {
    const half = Math.floor(devices.length / 2);
    const cpu = (withBroker: boolean) => async (): Promise<CpuReading> => {
      const own = process.cpuUsage();
      return { cloud: await cf.cpuMs(), broker: withBroker ? cpuMs(broker.pid) : 0, load: (own.user + own.system) / 1000 };
    };
    const direct = (part: readonly BenchDevice[]) =>
      phase(cf.cloud, part, (d) => signedGetToken(d.botId), getTokenOk, o.concurrency, cpu(false));
    progress(`getToken straight to the cloud: ${half} bots`);
    const before = await direct(devices.slice(0, half));
    progress(`first tokens through the broker: ${devices.length} devices`);
    const via = await phase(broker.url, devices, signedTokenRequest, tokenOk, o.concurrency, cpu(true));
    const memory = memoryMiB(broker.pid);
    const peakInFlight = await broker.metric('botlink_broker_cloud_in_flight_peak');
    const signed = await broker.metric('botlink_broker_tokens_issued_total', '{source="sign"}');
    progress(`getToken straight to the cloud: the other ${devices.length - half} bots`);
    const after = await direct(devices.slice(half));
    const both = [...before.latencies, ...after.latencies].sort((a, b) => a - b);
    const directCpu = { cloud: before.cpuMs.cloud + after.cpuMs.cloud, broker: 0, load: before.cpuMs.load + after.cpuMs.load };
    const directAll = summary(
      both,
      before.windowMs + after.windowMs,
      before.errors + after.errors,
      before.firstError ?? after.firstError,
      directCpu,
    );
    const strip = ({ latencies: _l, windowMs: _w, cpuMs: _c, ...r }: Phase): PhaseResult => r;
    return {
      devices: devices.length,
      preloadMs,
      direct: strip(directAll),
      broker: strip(via),
      cap: broker.config.limits.cloudConcurrency,
      peakInFlight,
      signed,
      rssMiB: memory.rss,
      peakRssMiB: memory.peak,
      storeKind: store.startsWith('sqlite:') ? 'SQLite' : 'PostgreSQL',
    };
  } finally {
    await broker.stop();
  }
}
