// A fleet enrolling zero-touch (DESIGN §3.7 "Enrollment with no code", issue 35 item 6), on PostgreSQL:
//   1. every device's first code-less ask, answered 202 pending, vs the cache row's floor verifying the very
//      same signed requests (floor, broker, floor: the floors' mean is the baseline);
//   1b. every device asking once more, its key now pending (202 again, within its two a minute): the steady load
//      of a waiting fleet that polls every 60 s, vs the floor on those requests, alternated the same way;
//   2. the operator accepting them one by one, as `broker accept` does (the cloud registers each; §3.7 has no
//      bulk accept), in this process on the broker's store;
//   3. from the last acceptance until every device holds a token: each asks enroll again (200, its botId) and
//      then its first token (a cloud call per botId), at the bench's concurrency.
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { AuditTrail } from '../../src/broker/audit/trail.js';
import { acceptPending } from '../../src/broker/pending-operator.js';
import { operatorRegistrar } from '../../src/broker/registrar.js';
import { openStore } from '../../src/broker/store/open.js';
import { CloudClient } from '../../src/cloud/client.js';
import { systemClock } from '../../src/clock.js';
import { signRequest } from '../../src/protocol/device-sig.js';
import {
  ACCESS_KEY_ID,
  type BenchDevice,
  type LoadResult,
  load,
  type Prepared,
  SECRET,
  signedTokenRequest,
  tokenOk,
  VENDOR,
} from './broker-load.js';
import { quantile } from '../lib/stats.js';
import type { BrokerRig, CloudAndFloor } from './broker-rig.js';

/** Pending answers (a waiting key's repeat ask) vs the floor: issue 35's goal. */
export const PENDING_GOAL = 0.5;
/** First asks vs the floor: once in a device's life, a transaction under two locks (why 0.1×: scripts/bench/README.md, issue 35). */
export const FIRST_ASK_GOAL = 0.1;
const ENROLL_PATH = '/v1/enroll';
/** The bench's serials, and the pattern its broker lets wait. */
export const ZERO_TOUCH_PREFIX = 'zt';
const DEVICE_PATTERN = `SN-${ZERO_TOUCH_PREFIX}-[0-9]+`;

export interface PendingMeasured {
  devices: number;
  /** First asks answered 202, and the floor's rate on the same requests before and after. */
  pending: LoadResult;
  floor: [LoadResult, LoadResult];
  /** Every device's second ask, its key pending (202), and the floor's rate on those requests before and after. */
  repeat: LoadResult;
  repeatFloor: [LoadResult, LoadResult];
  accepts: { n: number; perS: number; p50: number; p99: number };
  /** From the last acceptance: every device's enroll again, then its first token. */
  toTokensMs: number;
  again: LoadResult;
  tokens: LoadResult;
}

/** Devices per address: a fleet asks from many (sites, NATs), each under pendingPerSource's default of 50. */
const DEVICES_PER_SOURCE = 40;

/**
 * The address device `i` of `n` asks from, as the bench (a trusted proxy) forwards it, in 198.18.0.0/15 (for
 * benchmarks): round robin, so the asks in flight at once come from different sites, as a fleet's would.
 */
function sourceOf(i: number, n: number): string {
  const k = i % Math.max(256, Math.ceil(n / DEVICES_PER_SOURCE));
  return `198.${18 + (k >> 16)}.${(k >> 8) & 255}.${k & 255}`;
}

/** POST /v1/enroll with no code (§3.7), signed by the device's key with a fresh nonce, from the device's own address. */
function signedAsk(device: BenchDevice, i: number, all: readonly BenchDevice[]): Prepared {
  const body = JSON.stringify({ vendorId: VENDOR, deviceId: device.deviceId, publicKey: device.publicKey });
  const authorization = signRequest(device.key, {
    method: 'POST',
    path: ENROLL_PATH,
    keyId: device.keyId,
    ts: String(Date.now()),
    nonce: randomBytes(12).toString('base64url'),
    body,
  });
  return {
    path: ENROLL_PATH,
    headers: { 'content-type': 'application/json', authorization, 'x-forwarded-for': sourceOf(i, all.length) },
    body,
  };
}

const answered = (status: number) => (s: number) => s === status;

export async function measurePending(
  rig: BrokerRig,
  cf: CloudAndFloor,
  devices: readonly BenchDevice[],
  postgresUrl: string,
  concurrency: number,
  progress: (what: string) => void,
): Promise<PendingMeasured> {
  const n = devices.length;
  const broker = await rig.broker({
    name: 'pending',
    cloud: cf.cloud,
    store: postgresUrl,
    extra: {
      pendingEnrollment: { [VENDOR]: { devicePattern: DEVICE_PATTERN } },
      // The bench stands for the proxy in front of the fleet; each device's address is its X-Forwarded-For.
      trustedProxies: ['127.0.0.1'],
      // A first ask counts toward enrollPerMinute per source (5): the fleet boots within the minute.
      enrollPerMinute: DEVICES_PER_SOURCE,
      pendingMax: Math.max(n, 10_000),
    },
  });
  try {
    const pass = (url: string, requests: Prepared[], ok: (status: number, json: unknown) => boolean): Promise<LoadResult> =>
      load({ url, concurrency, requests, warmMs: 0, cellMs: Number.POSITIVE_INFINITY, ok });
    const checked = (what: string, r: LoadResult): LoadResult => {
      if (r.errors > 0) throw new Error(`${what}: ${r.errors} errors, the first: ${r.firstError}`);
      return r;
    };
    progress(`zero-touch: ${n} first asks, between two floor passes over the same requests`);
    const asks = devices.map(signedAsk);
    const before = checked('the floor', await pass(cf.floor, asks, answered(200)));
    const pending = checked('first asks', await pass(broker.url, asks, answered(202)));
    const after = checked('the floor', await pass(cf.floor, asks, answered(200)));

    progress(`zero-touch: ${n} repeat asks of pending keys, between two floor passes over the same requests`);
    const repeats = devices.map(signedAsk);
    const repeatBefore = checked('the floor', await pass(cf.floor, repeats, answered(200)));
    const repeat = checked('repeat asks', await pass(broker.url, repeats, answered(202)));
    const repeatAfter = checked('the floor', await pass(cf.floor, repeats, answered(200)));

    progress(`zero-touch: the operator accepts ${n} keys one by one`);
    const accepts = await acceptAll(postgresUrl, cf.cloud, devices);

    progress('zero-touch: every device asks again, then for its first token');
    const lastAccepted = performance.now();
    const again = checked('enroll again', await pass(broker.url, devices.map(signedAsk), answered(200)));
    const tokens = checked('first tokens', await pass(broker.url, devices.map(signedTokenRequest), tokenOk));
    const toTokensMs = performance.now() - lastAccepted;
    return {
      devices: n,
      pending,
      floor: [before, after],
      repeat,
      repeatFloor: [repeatBefore, repeatAfter],
      accepts,
      toTokensMs,
      again,
      tokens,
    };
  } finally {
    await broker.stop();
  }
}

/** `broker accept KEYID --device-id SN` for each device in turn, on the broker's store, as its operator command does. */
async function acceptAll(postgresUrl: string, cloudUrl: string, devices: readonly BenchDevice[]): Promise<PendingMeasured['accepts']> {
  const store = await openStore(postgresUrl, { clock: systemClock });
  const cloud = new CloudClient({ baseUrl: cloudUrl, accessKeyId: ACCESS_KEY_ID, secretKey: { reveal: () => SECRET }, clock: systemClock });
  const audit = new AuditTrail({ store, log: pino({ level: 'silent' }), clock: systemClock });
  try {
    const deps = { store, register: operatorRegistrar(cloud, systemClock), now: () => systemClock.wallNow() };
    const by = { actor: 'bench', audit };
    const took: number[] = [];
    const started = performance.now();
    for (const d of devices) {
      const t = performance.now();
      await acceptPending(deps, d.keyId, d.deviceId, by);
      took.push(performance.now() - t);
    }
    const perS = devices.length / ((performance.now() - started) / 1000);
    took.sort((a, b) => a - b);
    return { n: devices.length, perS, p50: quantile(took, 0.5), p99: quantile(took, 0.99) };
  } finally {
    await audit.close();
    await cloud.close();
    await store.close();
  }
}

const rate = (x: number): string => `${Math.round(x).toLocaleString('en-US')}/s`;
const lat = (r: { p50: number; p99: number }): string => `p50 ${r.p50.toFixed(1)} · p99 ${r.p99.toFixed(1)} ms`;

/** A pass of the broker vs the mean of the floor's passes around it, as a summary row. */
function vsFloor(what: string, broker: LoadResult, floor: [LoadResult, LoadResult], goal: number): string[] {
  const floorRps = (floor[0].rps + floor[1].rps) / 2;
  const r = broker.rps / floorRps;
  return [
    what,
    `${rate(broker.rps)} (${lat(broker)})`,
    `${rate(floorRps)} (floors ${rate(floor[0].rps)}, ${rate(floor[1].rps)})`,
    `${r.toFixed(2)}×`,
    `≥ ${goal}×`,
    r >= goal ? 'PASS' : 'MISS',
    '',
  ];
}

/** The summary table's rows: pending answers and first asks vs the floor (the goals), accepts/s, and the time to every device's token. */
export function pendingRows(m: PendingMeasured, concurrency: number): string[][] {
  const fleet = m.devices.toLocaleString('en-US');
  return [
    vsFloor(
      `zero-touch: ${fleet} pending answers (a waiting key asks again → 202), c=${concurrency}, PostgreSQL, vs the cache row's floor on the same requests`,
      m.repeat,
      m.repeatFloor,
      PENDING_GOAL,
    ),
    vsFloor(`the same: ${fleet} first asks → 202 pending (a row written), vs the floor`, m.pending, m.floor, FIRST_ASK_GOAL),
    [
      `the same: ${fleet} accepts, one by one (cloud registration + binding transaction)`,
      `${rate(m.accepts.perS)} (${lat(m.accepts)})`,
      '—',
      '—',
      '—',
      '',
      '',
    ],
    [
      'the same: last acceptance → every device holds a token (enroll again, then first token)',
      `${(m.toTokensMs / 1000).toFixed(1)} s`,
      `again ${rate(m.again.rps)}, tokens ${rate(m.tokens.rps)}`,
      '—',
      '—',
      '',
      '',
    ],
  ];
}
