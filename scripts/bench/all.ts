// `npm run bench`: every performance goal of the project in one run and one table, each figure
// against a baseline measured in the same run, back to back, on the same machine.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { BOOT_GOAL, bootCached, LinkFixture, RECONNECT_GOAL_MS, restartReconnect } from './link.js';
import {
  alternate,
  BOTS,
  CLOCK_TICKS_PER_S,
  cpuTicks,
  disconnect,
  fetchToken,
  machineLine,
  median,
  ms,
  printTable,
  ROOT,
  rssKiB,
  sleep,
  spread,
  timeToConnected,
  times,
  verdict,
  Workspace,
  type Child,
} from './lib.js';

const RUNS = 10;
/** Agent/client pairs idling side by side for the RSS and CPU figures. */
const PAIRS = 10;
const IDLE_MS = 60_000;
const RSS_GOAL = 1.3;
const CPU_GOAL = 2;
const SERVICE_GOAL = 0.5;

/** Boot → connected with an empty stateDir (agent signs) vs the minimal sign + fetch + ws script. */
async function bootUncached(fx: LinkFixture, n: number): Promise<{ agent: number[]; floor: number[] }> {
  const device = fx.ws.device(BOTS[1]!, fx.svc);
  const once = (start: () => Child, before = (): void => undefined) => async (): Promise<number> => {
    before();
    const { ms: took, child } = await timeToConnected(fx.svc, device.botId, start);
    await disconnect(fx.svc, device.botId, child);
    return took;
  };
  const [agent = [], floor = []] = await alternate(n, [
    once(() => fx.ws.agent(device), () => device.forgetTokens()),
    once(() => fx.ws.signingClient(fx.svc, device)),
  ]);
  return { agent, floor };
}

interface Idle {
  rssKiB: { agent: number[]; floor: number[] };
  cpuMsPerMin: { agent: number[]; floor: number[] };
}

/** PAIRS agents and PAIRS minimal clients (same 20 s ping), all connected, idle for IDLE_MS together. */
async function idle(fx: LinkFixture): Promise<Idle> {
  const agents: Child[] = [];
  const clients: Child[] = [];
  try {
    for (let i = 0; i < PAIRS; i++) {
      const agentBot = BOTS[2 + i]!;
      const clientBot = BOTS[2 + PAIRS + i]!;
      agents.push((await timeToConnected(fx.svc, agentBot, () => fx.ws.agent(fx.ws.device(agentBot, fx.svc)))).child);
      const token = await fetchToken(fx.svc, clientBot);
      clients.push((await timeToConnected(fx.svc, clientBot, () => fx.ws.client(fx.svc, clientBot, token))).child);
    }
    // Start-up work (JIT, first GCs) is over after a moment; the window measures only idling.
    await sleep(2000);
    const all = [...agents, ...clients];
    const before = all.map((c) => cpuTicks(c.pid));
    const started = performance.now();
    await sleep(IDLE_MS);
    const after = all.map((c) => cpuTicks(c.pid));
    const minutes = (performance.now() - started) / 60_000;
    const cpu = after.map((t, i) => ((t - before[i]!) * 1000) / CLOCK_TICKS_PER_S / minutes);
    const rss = all.map((c) => rssKiB(c.pid));
    return {
      rssKiB: { agent: rss.slice(0, PAIRS), floor: rss.slice(PAIRS) },
      cpuMsPerMin: { agent: cpu.slice(0, PAIRS), floor: cpu.slice(PAIRS) },
    };
  } finally {
    await Promise.all([...agents, ...clients].map((c) => c.stop('SIGTERM')));
  }
}

interface ServiceFigures {
  output: string;
  ratio: number;
  getTokenPerS: number;
  echoPerS: number;
}

/** service.ts runs its servers in a forked child of its own: run it as `npm run bench:service` would. */
async function serviceBench(): Promise<ServiceFigures> {
  const child = spawn(process.execPath, [join(ROOT, 'scripts', 'bench', 'run.mjs'), 'service'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  if (code !== 0) output += `\n(bench:service exited ${code})`;
  const ratio = Number(/ratio at concurrency 64: ([\d.]+)/.exec(output)?.[1] ?? NaN);
  // The row for concurrency 64 starts with echo req/s; its getToken req/s is the cell that makes the printed ratio.
  const cells = (/^\s*64\s+(.*)$/m.exec(output)?.[1] ?? '').split(/\s+/).map(Number);
  const echoPerS = cells[0] ?? NaN;
  const getTokenPerS = cells.slice(1).find((x) => Math.abs(x / echoPerS - ratio) <= 0.005) ?? NaN;
  return { output, ratio, echoPerS, getTokenPerS };
}

const kib = (x: number): string => (Number.isFinite(x) ? `${(x / 1024).toFixed(1)} MiB` : 'n/a');
const perMin = (x: number): string => (Number.isFinite(x) ? `${x.toFixed(0)} ms/min` : 'n/a');
const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
const progress = (what: string): boolean => process.stderr.write(`… ${what}\n`);

async function main(): Promise<void> {
  const began = performance.now();
  const machine = machineLine();
  const ws = await Workspace.create('all');
  const fx = await LinkFixture.create(ws);
  let figures;
  try {
    progress(`boot → connected, cached token: ${RUNS} runs each`);
    const cached = await bootCached(fx, RUNS);
    progress(`boot → connected, no cache: ${RUNS} runs each`);
    const uncached = await bootUncached(fx, RUNS);
    progress(`${PAIRS} agents and ${PAIRS} minimal clients connected and idle for ${IDLE_MS / 1000} s`);
    const idling = await idle(fx);
    progress(`service restart → reconnected: ${RUNS} runs`);
    const restart = await restartReconnect(fx, RUNS, 0);
    figures = { cached, uncached, idling, restart };
  } finally {
    await fx.close();
    ws.remove();
  }
  progress('reference service getToken/s vs node:http echo (npm run bench:service)');
  const service = await serviceBench();
  const { cached, uncached, idling, restart } = figures;

  const ratioRow = (name: string, a: number[], b: number[], goal: number): string[] => {
    const r = median(a) / median(b);
    return [name, ms(median(a)), ms(median(b)), times(r), `≤ ${goal}×`, verdict(r <= goal), `${spread(a).toFixed(2)} · ${spread(b).toFixed(2)}`];
  };
  const rss = median(idling.rssKiB.agent) / median(idling.rssKiB.floor);
  // Idle CPU comes in 10 ms ticks: the ratio of totals over all pairs is steadier than one of medians.
  const cpu = sum(idling.cpuMsPerMin.agent) / sum(idling.cpuMsPerMin.floor);
  const rows = [
    ratioRow('boot → connected, cached token vs minimal ws client', cached.agent, cached.floor, BOOT_GOAL),
    ratioRow('boot → connected, no cache vs minimal sign + fetch + ws', uncached.agent, uncached.floor, BOOT_GOAL),
    [`RSS after ${IDLE_MS / 1000} s connected vs minimal client`, kib(median(idling.rssKiB.agent)), kib(median(idling.rssKiB.floor)), times(rss), `≤ ${RSS_GOAL}×`, verdict(rss <= RSS_GOAL), ''],
    ['CPU per idle minute vs minimal client, 20 s ping', perMin(median(idling.cpuMsPerMin.agent)), perMin(median(idling.cpuMsPerMin.floor)), times(cpu), `≤ ${CPU_GOAL}×`, verdict(cpu <= CPU_GOAL), ''],
    ['service restart → reconnected (from listen)', ms(median(restart)), '—', '—', `≤ ${RECONNECT_GOAL_MS} ms`, verdict(median(restart) <= RECONNECT_GOAL_MS), spread(restart).toFixed(2)],
    [
      'reference service getToken/s vs node:http echo (64 conc.)',
      Number.isFinite(service.getTokenPerS) ? `${service.getTokenPerS}/s` : 'n/a',
      Number.isFinite(service.echoPerS) ? `${service.echoPerS}/s` : 'n/a',
      times(service.ratio),
      `≥ ${SERVICE_GOAL}×`,
      verdict(service.ratio >= SERVICE_GOAL),
      '',
    ],
  ];

  console.log(`\nbotlink benchmarks — ${machine}`);
  console.log(
    `loopback reference service; agent = node <bundle> run (logLevel info); boot figures are medians of ${RUNS} alternating runs,` +
      ` idle figures medians of ${PAIRS} agent/client pairs side by side\n`,
  );
  printTable(['figure', 'botlink', 'baseline', 'ratio', 'goal', 'result', 'IQR/median'], rows);
  const met = rows.filter((r) => r[5] === 'PASS').length;
  console.log(`\n${met} of ${rows.length} goals met; whole run ${((performance.now() - began) / 60_000).toFixed(1)} min`);
  console.log('\nbench:service output:');
  console.log(service.output.replace(/^/gm, '  ').trimEnd());
}

await main();
