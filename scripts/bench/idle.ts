// The idle figures: agents that made their cloud calls (signed getToken from an empty stateDir) and
// minimal clients that made the same call, connected side by side: their RSS after a minute, then
// their CPU over the next minute. `npm run bench:idle` runs it alone, with more baselines beside.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LINK_DEFAULTS } from '../../src/agent/link/options.js';
import { cpuMs, cpuTicks, rssKiB } from '../lib/procfs.js';
import { median } from '../lib/stats.js';
import type { Child } from './child.js';
import { BOTS, fetchToken, timeToConnected, type Device } from './fixture.js';
import { NODE_FLAGS, UNIT_ENV } from './unit.js';
import { LinkFixture } from './link.js';
import { machineLine, printTable, ratioRow, times } from './report.js';
import { isMain } from './root.js';
import { sleep } from './sample.js';
import { Workspace } from './workspace.js';

/** Agent/client pairs idling side by side for the RSS and CPU figures (fewer via BENCH_IDLE_PAIRS while iterating). */
export const PAIRS = Number(process.env.BENCH_IDLE_PAIRS ?? 10);
/** Each of the two windows (shorter via BENCH_IDLE_MS while iterating). */
export const IDLE_MS = Number(process.env.BENCH_IDLE_MS ?? 60_000);
export const RSS_GOAL = 1.2;
export const CPU_GOAL = 1.5;

export interface Idle {
  rssKiB: { agent: number[]; floor: number[] };
  cpuMsPerMin: { agent: number[]; floor: number[] };
  /** utime + stime over the window, summed over all pairs: the coarse cross-check of the schedstat figure. */
  ticks: { agent: number; floor: number };
}

/** One kind of process in the idle run: how to start one connected for a bot. */
interface Group {
  name: string;
  start(fx: LinkFixture, botId: string): Promise<Child>;
}

interface Reading {
  rssKiB: number[];
  /** Anonymous memory (heaps, malloc arenas, wasm) from smaps_rollup; the rest of RSS is file pages (node, addons). */
  anonKiB: number[];
  cpuMsPerMin: number[];
  ticks: number;
}

/** The daemon as the unit runs it (Workspace.agent), from an empty stateDir: it signs getToken (and samples server time without a synced clock). */
const AGENT: Group = { name: 'agent', start: (fx, botId) => startAgent(fx, botId, (device) => fx.ws.agent(device)) };

/** The minimal client paying for the same call: sign, fetch getToken, open the WebSocket (Workspace.signingClient). */
const SIGN_FETCH: Group = {
  name: 'sign + fetch + ws',
  start: async (fx, botId) => (await timeToConnected(fx.svc, botId, () => fx.ws.signingClient(fx.svc, fx.ws.device(botId, fx.svc)))).child,
};

async function startAgent(fx: LinkFixture, botId: string, start: (device: Device) => Child): Promise<Child> {
  const device = fx.ws.device(botId, fx.svc);
  const { child } = await timeToConnected(fx.svc, botId, () => start(device));
  cloudCalls.set(child, device);
  return child;
}

/** The agent behind each child: its log must show a signed token, or the figure is not the one it claims. */
const cloudCalls = new Map<Child, Device>();

/** PAIRS agents and PAIRS minimal sign + fetch + ws clients (same ping interval) side by side: RSS after a minute, then CPU over the next minute. */
export async function idle(fx: LinkFixture): Promise<Idle> {
  const [agent, floor] = await idleGroups(fx, [AGENT, SIGN_FETCH], PAIRS);
  return asIdle(agent!, floor!);
}

function asIdle(agent: Reading, floor: Reading): Idle {
  return {
    rssKiB: { agent: agent.rssKiB, floor: floor.rssKiB },
    cpuMsPerMin: { agent: agent.cpuMsPerMin, floor: floor.cpuMsPerMin },
    ticks: { agent: agent.ticks, floor: floor.ticks },
  };
}

/** The RSS and CPU rows of the table (figure, botlink, baseline, ratio, goal, result, IQR/median). */
export function idleRows(idling: Idle): string[][] {
  return [
    ratioRow(
      `RSS after ${IDLE_MS / 1000} s connected, after a signed getToken, vs minimal sign + fetch + ws`,
      idling.rssKiB.agent,
      idling.rssKiB.floor,
      RSS_GOAL,
      mib,
    ),
    ratioRow(
      `CPU in the 2nd idle minute vs minimal sign + fetch + ws, ${LINK_DEFAULTS.heartbeatIntervalMs / 1000} s ping`,
      idling.cpuMsPerMin.agent,
      idling.cpuMsPerMin.floor,
      CPU_GOAL,
      perMin,
    ),
  ];
}

/** `pairs` processes of each group started round-robin, then RSS after a window, then CPU over the next. */
async function idleGroups(fx: LinkFixture, groups: readonly Group[], pairs: number): Promise<Reading[]> {
  const bots = BOTS.slice(2);
  if (groups.length * pairs > bots.length)
    throw new Error(`${groups.length} groups × ${pairs} pairs need more than the ${bots.length} seeded bots`);
  const children = groups.map((): Child[] => []);
  try {
    for (let i = 0; i < pairs; i++) {
      for (const [g, group] of groups.entries()) children[g]!.push(await group.start(fx, bots[i * groups.length + g]!));
    }
    await sleep(IDLE_MS);
    const rss = children.map((cs) => cs.map((c) => rssKiB(c.pid)));
    const anon = children.map((cs) => cs.map((c) => anonKiB(c.pid)));
    for (const [child, device] of cloudCalls) {
      if (children.some((cs) => cs.includes(child)) && !device.log().includes('"token signed"')) {
        throw new Error(`agent ${device.botId} shows no signed getToken in its log: its RSS would not be the steady-state figure`);
      }
    }
    // The CPU window is the next one: V8's memory reducer runs its GCs in the first ~20 s after start.
    const before = children.map((cs) => cs.map((c) => [cpuMs(c.pid), cpuTicks(c.pid)] as const));
    const started = performance.now();
    await sleep(IDLE_MS);
    const minutes = (performance.now() - started) / 60_000;
    return children.map((cs, g) => ({
      rssKiB: rss[g]!,
      anonKiB: anon[g]!,
      cpuMsPerMin: cs.map((c, i) => (cpuMs(c.pid) - before[g]![i]![0]) / minutes),
      ticks: cs.reduce((sum, c, i) => sum + cpuTicks(c.pid) - before[g]![i]![1], 0),
    }));
  } finally {
    await Promise.all(children.flat().map((c) => c.stop('SIGTERM')));
  }
}

/** Anonymous memory of a live process, in KiB. */
function anonKiB(pid: number): number {
  const match = /^Anonymous:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
  return match ? Number(match[1]) : NaN;
}

const mib = (kib: number): string => (Number.isFinite(kib) ? `${(kib / 1024).toFixed(1)} MiB` : 'n/a');
const perMin = (x: number): string => (Number.isFinite(x) ? `${x.toFixed(x < 10 ? 2 : 1)} ms/min` : 'n/a');

/** A sign + POST getToken + ws script like Workspace.signingClient's, with its fetch swapped for `post`. */
function signingVariant(fx: LinkFixture, file: string, post: string): Group {
  const fetchCall = /^const res = await fetch\(.*\);\nconst body = await res\.json\(\);$/m;
  const script = readFileSync(fx.ws.signFetchWsClient, 'utf8');
  if (!fetchCall.test(script)) throw new Error('Workspace.signingClient no longer POSTs with fetch(): update signingVariant');
  const path = join(fx.ws.dir, file);
  writeFileSync(path, script.replace(fetchCall, post));
  return {
    name: file.replace(/\.mjs$/, ''),
    start: async (_fx, botId) =>
      (await timeToConnected(fx.svc, botId, () => fx.ws.signingClient(fx.svc, fx.ws.device(botId, fx.svc), path))).child,
  };
}

const REQUEST_BODY = 'JSON.stringify({ ...params, accessSign, botId: env.BOT_ID })';

/** Baselines beside the row's, for the report: how much of the figure is the HTTP stack each would pick. */
function baselines(fx: LinkFixture): Group[] {
  // V8 refuses a code cache written under other flags: the --liftoff-only agent gets one of its own.
  const liftoffCache = join(fx.ws.dir, 'cache-liftoff-only');
  mkdirSync(liftoffCache, { mode: 0o700 });
  const agentWith = (o: Parameters<Workspace['agent']>[1]) => (fxx: LinkFixture, botId: string) =>
    startAgent(fxx, botId, (device) => fxx.ws.agent(device, o));
  return [
    signingVariant(
      fx,
      'sign-undici-ws.mjs',
      "const { default: Pool } = await import('undici/lib/dispatcher/pool.js');\nconst { default: request } = await import('undici/lib/api/api-request.js');\n" +
        `const res = await request.call(new Pool(env.BASE_URL, { connections: 4 }), { path: '/auth/getToken', method: 'POST', headers: { 'content-type': 'application/json' }, body: ${REQUEST_BODY} });\nconst body = await res.body.json();`,
    ),
    signingVariant(
      fx,
      'sign-http-ws.mjs',
      "const { request } = await import('node:http');\n" +
        `const body = await new Promise((resolve, reject) => { const req = request(env.BASE_URL + '/auth/getToken', { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => { let t = ''; res.setEncoding('utf8'); res.on('data', (d) => (t += d)); res.on('end', () => resolve(JSON.parse(t))); }); req.on('error', reject); req.end(${REQUEST_BODY}); });`,
    ),
    {
      name: 'ws only (no HTTP call)',
      start: async (fxx, botId) => {
        const token = await fetchToken(fxx.svc, botId);
        return (await timeToConnected(fxx.svc, botId, () => fxx.ws.client(fxx.svc, botId, token))).child;
      },
    },
    { name: "agent without the unit's Environment=", start: agentWith({ env: {} }) },
    // The alternative the unit does not take: it avoids the TurboFan compile, but costs every boot node's built-in code cache.
    { name: 'agent, node --liftoff-only', start: agentWith({ flags: [...NODE_FLAGS, '--liftoff-only'], cacheDir: liftoffCache }) },
  ];
}

async function main(): Promise<void> {
  const pairs = Number(process.env.BENCH_IDLE_PAIRS ?? 3);
  const ws = await Workspace.create('idle');
  const fx = await LinkFixture.create(ws);
  try {
    // The other baselines only while the seeded bots go round; more pairs measure the row's two alone.
    const all = [AGENT, SIGN_FETCH, ...baselines(fx)];
    const groups = all.length * pairs <= BOTS.length - 2 ? all : all.slice(0, 2);
    process.stderr.write(`… ${groups.length} groups × ${pairs} connected and idle for ${(2 * IDLE_MS) / 1000} s\n`);
    const readings = await idleGroups(fx, groups, pairs);
    const [agent, floor] = readings;
    console.log(`\nbotlink idle figures — ${machineLine()}`);
    console.log(
      `every process runs as the unit runs the daemon: ${['node', ...NODE_FLAGS].join(' ')} with ${JSON.stringify(UNIT_ENV)}, but where its name says; medians of ${pairs} each\n`,
    );
    printTable(
      ['process', 'RSS', 'anonymous', 'file pages', 'RSS ratio', 'CPU 2nd window', 'CPU ratio'],
      readings.map((r, g) => [
        groups[g]!.name,
        mib(median(r.rssKiB)),
        mib(median(r.anonKiB)),
        mib(median(r.rssKiB.map((x, i) => x - r.anonKiB[i]!))),
        times(median(agent!.rssKiB) / median(r.rssKiB)),
        perMin(median(r.cpuMsPerMin)),
        times(median(agent!.cpuMsPerMin) / median(r.cpuMsPerMin)),
      ]),
    );
    console.log('');
    printTable(['figure', 'botlink', 'baseline', 'ratio', 'goal', 'result', 'IQR/median'], idleRows(asIdle(agent!, floor!)));
  } finally {
    await fx.close();
    ws.remove();
  }
}

if (isMain('idle')) await main();
