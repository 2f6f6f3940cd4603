// The broker bench's processes: a forked child with the cloud (the reference service) and the floor
// server, each broker as a process of its own started from the product's bundle as its unit starts it,
// and devices written into a broker's store ahead of the run.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pino } from 'pino';
import { AuditTrail } from '../../src/broker/audit/trail.js';
import { type BrokerConfig, loadBrokerConfig } from '../../src/broker/config.js';
import { brokerKeys, readTokenKey } from '../../src/broker/keys.js';
import { createCode } from '../../src/broker/operator.js';
import { normaliseCode } from '../../src/broker/codes.js';
import { openStore } from '../../src/broker/store/open.js';
import { systemClock } from '../../src/clock.js';
import { parseDeviceAuthorization, publicKeyFromWire, verifyRequest } from '../../src/protocol/device-sig.js';
import { createTestService } from '../../src/service/testing.js';
import { cleanEnv } from '../lib/env.js';
import { unitStart } from '../lib/unit-start.js';
import { ACCESS_KEY_ID, type BenchDevice, SECRET, VENDOR } from './broker-load.js';
import { Child, forkSelf, setupFromParent } from './child.js';
import { ROOT } from './root.js';

const brokerUnit = unitStart(ROOT, 'botlink-broker.service');
/** The broker unit's node flags and Environment=: every broker here runs with them, and so does the fleet's floor. */
export const NODE_FLAGS = brokerUnit.nodeFlags;
export const UNIT_ENV = brokerUnit.env;

/** What the child is asked to serve: the cloud's bots, and the keys the floor server verifies with. */
interface ChildSetup {
  bots: string[];
  /** Every cloud answer is held this long: a cloud across the internet, not on loopback. */
  cloudLatencyMs: number;
  floorKeys: string[];
}

/**
 * Child: the cloud (the reference service in memory, one vendor, every bench bot seeded) and the floor:
 * node:http doing the broker's Ed25519 verification of a request — the Authorization header parsed, the
 * signature checked over the same seven lines — and nothing else. Both live until the parent goes away.
 */
export async function serveCloudAndFloor(): Promise<void> {
  const setup = await setupFromParent<ChildSetup>();
  const seed = { accounts: [{ accessKeyId: ACCESS_KEY_ID, secretKey: SECRET, vendors: [{ vendorId: VENDOR, bots: setup.bots }] }] };
  const cloud = await createTestService({ seed });
  cloud.faults.setLatencyMs(setup.cloudLatencyMs);
  const keys = new Map(setup.floorKeys.map((text) => [publicKeyFromWire(text).keyId, publicKeyFromWire(text).key]));
  const floor = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      let ok: boolean;
      try {
        const auth = parseDeviceAuthorization(req.headers.authorization);
        const key = keys.get(auth.keyId);
        ok = key !== undefined && verifyRequest(key, auth, req.method ?? '', req.url ?? '', Buffer.concat(chunks));
      } catch {
        ok = false;
      }
      const body = ok ? '{"ok":true}' : '{"code":"bad-signature"}';
      res.writeHead(ok ? 200 : 401, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
      res.end(body);
    });
  });
  await new Promise<void>((resolve) => floor.listen(0, '127.0.0.1', resolve));
  process.send!({ cloud: cloud.url, floor: `http://127.0.0.1:${(floor.address() as AddressInfo).port}` });
  process.on('message', () => process.send!(process.cpuUsage()));
  process.once('disconnect', () => {
    floor.close();
    floor.closeAllConnections();
    void cloud.close();
  });
}

export interface CloudAndFloor {
  cloud: string;
  floor: string;
  /** The child's CPU time so far (user + system), in ms. */
  cpuMs(): Promise<number>;
  close(): Promise<void>;
}

export async function startCloudAndFloor(setup: ChildSetup, execArgv: string[]): Promise<CloudAndFloor> {
  const child = await forkSelf<{ cloud: string; floor: string }>(['--child'], setup, { execArgv });
  return {
    ...child.ready,
    cpuMs: async () => {
      const used = await child.ask<NodeJS.CpuUsage>('cpu');
      return (used.user + used.system) / 1000;
    },
    close: () => child.close(),
  };
}

export interface BrokerSettings {
  name: string;
  cloud: string;
  store: string;
  /** The account secret's file; default the rig's. */
  secretKeyFile?: string;
  deviceTokensPerHour?: number;
  cloudConcurrency?: number | undefined;
  /** Further config keys (the zero-touch row's pendingEnrollment and limits). */
  extra?: Record<string, unknown>;
}

/** A `botlink broker` process: its URL, pid, and its /metrics read as numbers. */
export interface BrokerProcess {
  url: string;
  /** The admin listener's URL, when its settings give adminListen. */
  adminUrl: string | undefined;
  /** Its config file, for the operator's commands. */
  configFile: string;
  /** The config as the broker reads it (its defaults filled in). */
  config: BrokerConfig;
  pid: number;
  metric(name: string, labels?: string): Promise<number>;
  stop(): Promise<void>;
}

/** The bench's scratch folder: the account secret and token key files, broker configs and logs. */
export class BrokerRig {
  readonly secretKeyFile: string;
  readonly tokenKeyFile: string;

  constructor(
    readonly dir: string,
    readonly bundle: string,
    /** Node flags replacing the unit's (profiling, or a flag tried before it goes into the unit); undefined runs as the unit does. */
    readonly nodeFlags: readonly string[] | undefined,
  ) {
    // The broker's secrets and its SQLite stores in folders apart (keys.ts refuses a token key in a store's folder).
    mkdirSync(join(dir, 'keys'), { mode: 0o700 });
    mkdirSync(join(dir, 'stores'), { mode: 0o700 });
    this.secretKeyFile = join(dir, 'keys', 'secret-key');
    this.tokenKeyFile = join(dir, 'keys', 'token-key');
    writeFileSync(this.secretKeyFile, `${SECRET}\n`, { mode: 0o600 });
    writeFileSync(this.tokenKeyFile, Buffer.alloc(32, 0x5a).toString('hex'), { mode: 0o600 });
  }

  /** A SQLite store of the rig's, apart from its keys: `sqlite:<dir>/stores/<name>.db`. */
  sqliteStore(name: string): string {
    return `sqlite:${join(this.dir, 'stores', `${name}.db`)}`;
  }

  /** `botlink broker --config FILE` from the bundle; resolves once it prints its listening line. */
  async broker(s: BrokerSettings): Promise<BrokerProcess> {
    const configFile = join(this.dir, `${s.name}.json`);
    const config = {
      listen: '127.0.0.1:0',
      baseUrl: s.cloud,
      accessKeyId: ACCESS_KEY_ID,
      secretKeyFile: s.secretKeyFile ?? this.secretKeyFile,
      tokenKeyFile: this.tokenKeyFile,
      store: s.store,
      logFile: join(this.dir, `${s.name}.log`),
      // The load comes from one address standing for a fleet: allow it as many connections as the broker allows all.
      connectionsPerSource: 1024,
      ...(s.deviceTokensPerHour !== undefined && { deviceTokensPerHour: s.deviceTokensPerHour }),
      ...(s.cloudConcurrency !== undefined && { cloudConcurrency: s.cloudConcurrency }),
      ...s.extra,
    };
    writeFileSync(configFile, JSON.stringify(config));
    const child = new Child([...(this.nodeFlags ?? NODE_FLAGS), this.bundle, 'broker', '--config', configFile], cleanEnv(UNIT_ENV));
    // With adminListen, its `admin on` line follows the listening line.
    const [url, adminUrl] = await new Promise<[string, string | undefined]>((resolve, reject) => {
      let out = '';
      child.proc.stdout?.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /listening on (http:\/\/\S+)/.exec(out);
        const admin = /admin on (http:\/\/\S+)/.exec(out);
        if (m && (admin || s.extra?.['adminListen'] === undefined)) resolve([m[1]!, admin?.[1]]);
      });
      void child.exited.then((code) => reject(new Error(`broker ${s.name} exited ${code}: ${child.out}`)));
    });
    return {
      url,
      adminUrl,
      configFile,
      config: loadBrokerConfig(configFile, {}),
      pid: child.pid,
      async metric(name, labels = '') {
        const text = await (await fetch(`${url}/metrics`)).text();
        const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
        return line === undefined ? Number.NaN : Number(line.slice(line.lastIndexOf(' ') + 1));
      },
      stop: () => child.stop('SIGTERM', 20_000),
    };
  }

  /**
   * Writes `devices` into the store as enrolled, through the store's own API (BrokerStore.enroll admitted by
   * one code of as many uses, `lanes` enrollments at a time), with no broker running: the ms it took.
   * HTTP enrollment would register each device with the cloud and is rate-limited per code.
   */
  async preload(store: string, devices: readonly BenchDevice[], lanes = PRELOAD_LANES): Promise<number> {
    const started = performance.now();
    const s = await openStore(store, { clock: systemClock });
    try {
      const keys = brokerKeys(readTokenKey(this.tokenKeyFile));
      const now = Date.now();
      const audit = new AuditTrail({ store: s, log: pino({ level: 'silent' }), clock: systemClock });
      const { code } = await createCode(
        s,
        keys,
        { vendorId: VENDOR, binding: 'any-device', uses: devices.length, ttlS: 3600, kind: 'plain' },
        now,
        { actor: 'bench', audit },
      );
      await audit.close();
      const admission = { by: 'code', hmac: keys.codeHmac(normaliseCode(code)!) } as const;
      let next = 0;
      const lane = async (): Promise<void> => {
        for (let i = next++; i < devices.length; i = next++) {
          const d = devices[i]!;
          const { outcome } = await s.enroll({
            admission,
            key: { keyId: d.keyId, publicKey: d.publicKey },
            botId: d.botId,
            deviceId: d.deviceId,
            vendorId: VENDOR,
            replace: false,
            now,
          });
          if (outcome !== 'ok') throw new Error(`preloading ${d.deviceId} into ${store.replace(/:\/\/.*/, '://…')}: ${outcome}`);
        }
      };
      await Promise.all(Array.from({ length: lanes }, lane));
    } finally {
      await s.close();
    }
    return performance.now() - started;
  }
}

/** Enrollments in flight while preloading: SQLite commits each turn's together, PostgreSQL spreads them over its pool. */
const PRELOAD_LANES = 64;

/** VmRSS and VmHWM (its peak) of a live process, in MiB. */
export function memoryMiB(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, 'm').exec(status)?.[1] ?? Number.NaN);
  return { rss: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
}
