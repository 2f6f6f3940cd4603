// `node scripts/bench/run.mjs local-api`: what keep-alive buys an honest client of the local API (issue 27):
// GET /v1/status asked in a loop over the daemon's Unix socket, a connection per request against one
// connection kept open, alternating; requests/s and the daemon's CPU per request, one client and four.
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { cpuMs } from '../lib/procfs.js';
import { median } from '../lib/stats.js';
import { startService, timeToConnected } from './fixture.js';
import { machineLine, printTable } from './report.js';
import { alternate, sleep, spread } from './sample.js';
import { Workspace } from './workspace.js';

const ROUNDS = Number(process.env.BENCH_LOCAL_ROUNDS ?? 7);
/** Each sample (shorter via BENCH_LOCAL_MS while iterating). */
const SAMPLE_MS = Number(process.env.BENCH_LOCAL_MS ?? 2_000);

interface Sample {
  perSecond: number;
  daemonCpuUsPerRequest: number;
}

function get(socketPath: string, agent: Agent | false): Promise<void> {
  return new Promise((resolve, reject) => {
    // Without an agent, node says `Connection: close` itself: one connection per request.
    request({ socketPath, path: '/v1/status', agent }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`status ${res.statusCode}`))));
    })
      .on('error', reject)
      .end();
  });
}

/** `clients` loops asking for SAMPLE_MS, each on its own kept connection (keepAlive) or a new one per request. */
async function sample(socketPath: string, pid: number, clients: number, keepAlive: boolean): Promise<Sample> {
  const agents = Array.from({ length: clients }, () => (keepAlive ? new Agent({ keepAlive: true, maxSockets: 1 }) : false));
  const cpu0 = cpuMs(pid);
  const started = performance.now();
  let done = 0;
  await Promise.all(
    agents.map(async (agent) => {
      while (performance.now() - started < SAMPLE_MS) {
        await get(socketPath, agent);
        done++;
      }
    }),
  );
  const took = performance.now() - started;
  const cpu = cpuMs(pid) - cpu0;
  for (const agent of agents) if (agent) agent.destroy();
  return { perSecond: (done * 1000) / took, daemonCpuUsPerRequest: (cpu * 1000) / done };
}

async function main(): Promise<void> {
  const ws = await Workspace.create('local-api');
  const svc = await startService(join(ws.dir, 'service.db'));
  const device = ws.device('bot-1', svc);
  const { child } = await timeToConnected(svc, 'bot-1', () => ws.agent(device));
  try {
    const sock = join(device.runtimeDir, 'botlink.sock');
    await sleep(1_000);
    const rows: string[][] = [];
    for (const clients of [1, 4]) {
      const results: Sample[][] = [[], []];
      const [close = [], keep = []] = await alternate(ROUNDS, [
        async () => {
          const s = await sample(sock, child.pid, clients, false);
          results[0]!.push(s);
          return s.perSecond;
        },
        async () => {
          const s = await sample(sock, child.pid, clients, true);
          results[1]!.push(s);
          return s.perSecond;
        },
      ]);
      // alternate() discards its warm-up round; so do the CPU figures.
      for (const r of results) r.splice(0, r.length - ROUNDS);
      const cpu = (i: number): string => `${median(results[i]!.map((s) => s.daemonCpuUsPerRequest)).toFixed(0)} µs`;
      rows.push([
        `${clients} client${clients > 1 ? 's' : ''}`,
        'Connection: close',
        `${median(close).toFixed(0)}/s`,
        cpu(0),
        spread(close).toFixed(2),
      ]);
      rows.push(['', 'keep-alive', `${median(keep).toFixed(0)}/s`, cpu(1), spread(keep).toFixed(2)]);
      rows.push(['', 'keep-alive ÷ close', `${(median(keep) / median(close)).toFixed(2)}×`, '', '']);
    }
    console.log(machineLine());
    console.log(`GET /v1/status over the daemon's Unix socket, ${ROUNDS} rounds of ${SAMPLE_MS / 1000} s each, medians`);
    printTable(['clients', 'connection', 'requests', 'daemon CPU / request', 'IQR/median'], rows);
  } finally {
    await child.stop();
    await svc.close();
    ws.remove();
  }
}

await main();
