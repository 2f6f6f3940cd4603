import { cpuMs } from '../lib/procfs.js';
import { type BenchDevice, load, type LoadResult, type Prepared, signedTokenRequest, tokenOk } from './broker-load.js';
import type { BrokerProcess, BrokerRig, CloudAndFloor } from './broker-rig.js';
import { alternate } from './sample.js';

export const CACHE_GOALS = { sqlite: 0.6, postgres: 0.4 } as const;
export const VARIANTS = ['floor', 'sqlite', 'postgres'] as const;
export type Variant = (typeof VARIANTS)[number];
/** Enough that no device meets its rate limit: the row measures the cache, not the limiter. */
const TOKENS_PER_HOUR = 1_000_000_000;
/** A first guess at a cell's rate, for how many requests to sign ahead of it. */
const FIRST_GUESS_RPS = 5_000;

export interface CacheOptions {
  rounds: number;
  cellMs: number;
  warmMs: number;
  concurrency: number;
}

export interface CellResult extends LoadResult {
  /** The server's CPU time per answer (warm-up included), in µs. */
  cpuUs: number;
}

export interface CacheMeasured {
  results: Record<Variant, CellResult[]>;
  preloadMs: { sqlite: number; postgres: number };
  /** Each store's first token for every device, through the cloud, before the cells: their rate. */
  primeRps: { sqlite: number; postgres: number };
  /** Requests signed while sending because those signed ahead ran out (warm-up round included). */
  signedInline: number;
}

export async function measureCache(
  rig: BrokerRig,
  cf: CloudAndFloor,
  devices: readonly BenchDevice[],
  postgresUrl: string,
  o: CacheOptions,
): Promise<CacheMeasured> {
  const stores = { sqlite: rig.sqliteStore('cache'), postgres: postgresUrl };
  const preloadMs = { sqlite: await rig.preload(stores.sqlite, devices), postgres: await rig.preload(stores.postgres, devices) };
  const brokers: Partial<Record<'sqlite' | 'postgres', BrokerProcess>> = {};
  try {
    for (const v of ['sqlite', 'postgres'] as const) {
      brokers[v] = await rig.broker({ name: `cache-${v}`, cloud: cf.cloud, store: stores[v], deviceTokensPerHour: TOKENS_PER_HOUR });
    }
    const { sqlite, postgres } = brokers as Record<'sqlite' | 'postgres', BrokerProcess>;
    const prime = async (b: BrokerProcess): Promise<number> => {
      const r = await load({
        url: b.url,
        concurrency: o.concurrency,
        requests: devices.map(signedTokenRequest),
        warmMs: 0,
        cellMs: Infinity,
        ok: tokenOk,
      });
      if (r.errors > 0) throw new Error(`priming the cache: ${r.errors} errors, the first: ${r.firstError}`);
      return r.rps;
    };
    const primeRps = { sqlite: await prime(sqlite), postgres: await prime(postgres) };

    let cursor = 0;
    const sign = (): Prepared => signedTokenRequest(devices[cursor++ % devices.length]!);
    const urls: Record<Variant, string> = { floor: cf.floor, sqlite: sqlite.url, postgres: postgres.url };
    const cpu = (v: Variant): Promise<number> => (v === 'floor' ? cf.cpuMs() : Promise.resolve(cpuMs(brokers[v]!.pid)));
    const best: Record<Variant, number> = { floor: FIRST_GUESS_RPS, sqlite: FIRST_GUESS_RPS, postgres: FIRST_GUESS_RPS };
    const results: Record<Variant, CellResult[]> = { floor: [], sqlite: [], postgres: [] };
    let signedInline = 0;
    const cell = (v: Variant) => async (): Promise<number> => {
      const ahead = Math.ceil((best[v] * 1.3 * (o.warmMs + o.cellMs)) / 1000) + 256;
      const requests = Array.from({ length: ahead }, sign);
      const cpuBefore = await cpu(v);
      const r = await load({
        url: urls[v],
        concurrency: o.concurrency,
        requests,
        more: sign,
        warmMs: o.warmMs,
        cellMs: o.cellMs,
        ok: v === 'floor' ? (status) => status === 200 : tokenOk,
      });
      const cpuUs = (((await cpu(v)) - cpuBefore) * 1000) / r.total;
      best[v] = Math.max(best[v], r.rps);
      signedInline += r.signedInline;
      results[v].push({ ...r, latencies: [], cpuUs });
      return r.rps;
    };
    await alternate(
      o.rounds,
      VARIANTS.map((v) => cell(v)),
    );
    // alternate() discards its warm-up round's values; so do we.
    for (const v of VARIANTS) results[v].shift();
    return { results, preloadMs, primeRps, signedInline };
  } finally {
    await Promise.all(Object.values(brokers).map((b) => b.stop()));
  }
}
