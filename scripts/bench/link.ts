// `npm run bench:link`: how fast the agent's WebSocket comes up from a cached token, against a
// minimal ws client given the same token, and how fast it comes back after a service restart.
import { join } from 'node:path';
import type { ReferenceService } from '../../src/service/server.js';
import { fileAppears } from '../lib/file-appears.js';
import { median } from '../lib/stats.js';
import { disconnect, nextWsEvent, startService, timeToConnected, type Device } from './fixture.js';
import { ceilingRow, machineLine, ms, printTable, ratioRow } from './report.js';
import { isMain } from './root.js';
import type { Child } from './child.js';
import { alternate, sleep, spread } from './sample.js';
import { Workspace } from './workspace.js';

export const BOOT_GOAL = 1.2;
/**
 * Alternating boots per boot row: a boot is ~50 ms, and on this shared 2-core VM one run in five or so
 * lands on a busy moment; with 10 runs a row's ratio moved by ±0.08 between back-to-back runs of one tree.
 */
export const BOOT_RUNS = 30;
export const RECONNECT_GOAL_MS = 2500;
const BOT = 'bot-1';

/** A reference service on a SQLite file and one device whose stateDir holds a valid token pair. */
export class LinkFixture {
  readonly ws: Workspace;
  readonly dbFile: string;
  svc: ReferenceService;
  readonly device: Device;
  /** The access token the agent cached, handed to the baseline client. */
  readonly token: string;

  private constructor(ws: Workspace, dbFile: string, svc: ReferenceService, device: Device, token: string) {
    this.ws = ws;
    this.dbFile = dbFile;
    this.svc = svc;
    this.device = device;
    this.token = token;
  }

  /** The first boot signs and caches a pair, and stays until it wrote the code cache; every later boot starts from both. */
  static async create(ws: Workspace): Promise<LinkFixture> {
    const dbFile = join(ws.dir, 'service.db');
    const svc = await startService(dbFile);
    const device = ws.device(BOT, svc);
    // The agent writes its code cache 5 s after its start.
    const cached = fileAppears(ws.cacheDir, '.v8cache');
    const { child } = await timeToConnected(svc, BOT, () => ws.agent(device));
    await cached;
    await disconnect(svc, BOT, child);
    return new LinkFixture(ws, dbFile, svc, device, device.cachedToken());
  }

  async close(): Promise<void> {
    await this.svc.close();
  }
}

/** Where an agent boot spends its time, per run, from its log: the three stretches sum to the boot. */
export interface BootPhases {
  /** spawn → 'botlink starting': node, the bundle, config, logger, store, instance lock. */
  load: number[];
  /** 'botlink starting' → 'link connecting': identity, token manager, link set up. */
  setUp: number[];
  /** 'link connecting' → the service sees the socket: time-sync check, token, WebSocket handshake. */
  connect: number[];
}

/** An empty record of boot phases. */
export function bootPhases(): BootPhases {
  return { load: [], setUp: [], connect: [] };
}

/**
 * One agent boot of `device`, spawn until the service accepts `botId`'s WebSocket, then stopped: its
 * milliseconds, and its three phases, from its log, pushed onto `phases`.
 */
export async function timedBoot(
  svc: ReferenceService,
  botId: string,
  device: Device,
  phases: BootPhases,
  start: () => Child,
): Promise<number> {
  const spawnedAt = Date.now();
  const { ms: took, child } = await timeToConnected(svc, botId, start);
  await disconnect(svc, botId, child);
  const at = logTimes(device.log(), child.pid);
  const starting = at.get('botlink starting') ?? NaN;
  const connecting = at.get('link connecting') ?? NaN;
  phases.load.push(starting - spawnedAt);
  phases.setUp.push(connecting - starting);
  phases.connect.push(spawnedAt + took - connecting);
  return took;
}

/** Drops the phases of alternate()'s warm-up round, which it discards from the samples: `kept` remain. */
export function dropWarmUp(phases: BootPhases, kept: number): void {
  for (const xs of Object.values(phases)) xs.splice(0, xs.length - kept);
}

/** Boot → connected with a cached token: the agent and the minimal client, alternating. */
export async function bootCached(fx: LinkFixture, n: number): Promise<{ agent: number[]; floor: number[]; phases: BootPhases }> {
  const phases = bootPhases();
  const client = async (): Promise<number> => {
    const { ms: took, child } = await timeToConnected(fx.svc, BOT, () => fx.ws.client(fx.svc, BOT, fx.token));
    await disconnect(fx.svc, BOT, child);
    return took;
  };
  const [agent = [], floor = []] = await alternate(n, [
    () => timedBoot(fx.svc, BOT, fx.device, phases, () => fx.ws.agent(fx.device)),
    client,
  ]);
  dropWarmUp(phases, agent.length);
  return { agent, floor, phases };
}

/** The first time each message was logged by process `pid`, wall-clock ms. */
function logTimes(log: string, pid: number): Map<string, number> {
  const at = new Map<string, number>();
  for (const line of log.split('\n')) {
    if (!line.startsWith('{')) continue;
    const entry = JSON.parse(line) as { time: string; msg: string; pid: number };
    if (entry.pid === pid && !at.has(entry.msg)) at.set(entry.msg, Date.parse(entry.time));
  }
  return at;
}

/**
 * A connected agent; the service closes and, `downMs` later, listens again on the same port and
 * database: milliseconds from that listen until the agent's socket is open again. A fresh agent
 * per run, so every run starts from the settled backoff of a long-connected device.
 */
export async function restartReconnect(fx: LinkFixture, n: number, downMs: number): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < n; i++) {
    const { child } = await timeToConnected(fx.svc, BOT, () => fx.ws.agent(fx.device));
    try {
      await sleep(200);
      const { port } = fx.svc;
      await fx.svc.close();
      if (downMs > 0) await sleep(downMs);
      fx.svc = await startService(fx.dbFile, port);
      const listening = performance.now();
      samples.push((await nextWsEvent(fx.svc, 'ws-open', BOT, 120_000)) - listening);
    } finally {
      await disconnect(fx.svc, BOT, child);
    }
  }
  return samples;
}

async function main(): Promise<void> {
  const runs = 10;
  const ws = await Workspace.create('link');
  const fx = await LinkFixture.create(ws);
  try {
    console.log(`botlink link benchmark — ${machineLine()}`);
    console.log(
      `loopback reference service; agent = node <bundle> run with logLevel info; boot: medians of ${BOOT_RUNS} alternating runs;` +
        ` reconnects: medians of ${runs}\n`,
    );
    const boot = await bootCached(fx, BOOT_RUNS);
    const restart = await restartReconnect(fx, runs, 0);
    const outage = await restartReconnect(fx, runs, 5000);
    printTable(
      ['figure', 'botlink', 'baseline', 'ratio', 'goal', 'result', 'IQR/median (agent · baseline)'],
      [
        ratioRow('boot → connected, cached token vs minimal ws client', boot.agent, boot.floor, BOOT_GOAL),
        ceilingRow('service restart → reconnected (from listen)', restart, RECONNECT_GOAL_MS),
        ['service down 5 s → reconnected (from listen)', ms(median(outage)), '—', '—', 'info', '', spread(outage).toFixed(2)],
      ],
    );
    const { phases } = boot;
    console.log(
      `\nagent boot, medians from its log: spawn → 'botlink starting' ${ms(median(phases.load))}` +
        ` · → 'link connecting' ${ms(median(phases.setUp))} · → socket open at the service ${ms(median(phases.connect))}`,
    );
    const list = (xs: number[]): string => xs.map((x) => x.toFixed(0)).join(' ');
    console.log(`\nsamples (ms): agent ${list(boot.agent)} | client ${list(boot.floor)}`);
    console.log(`              restart ${list(restart)} | down 5 s ${list(outage)}`);
  } finally {
    await fx.close();
    ws.remove();
  }
}

if (isMain('link')) await main();
