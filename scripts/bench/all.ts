// `npm run bench`: every performance goal of the project in one run and one table, each figure
// against a baseline measured in the same run, back to back, on the same machine.
import { BOOT_GOAL, BOOT_RUNS, bootCached, LinkFixture, RECONNECT_GOAL_MS, restartReconnect } from './link.js';
import { CLOCK_TICKS_PER_S } from '../lib/procfs.js';
import { median } from '../lib/stats.js';
import type { Child } from './child.js';
import { IDLE_MS, idle, idleRows, PAIRS } from './idle.js';
import { BOTS, disconnect, timeToConnected } from './fixture.js';
import { ceilingRow, machineLine, ms, printTable, ratioRow } from './report.js';
import { alternate } from './sample.js';
import { relayRows } from './relay.js';
import { serviceRows } from './service.js';
import { startupRows } from './startup.js';
import { Workspace } from './workspace.js';

const RUNS = 10;

/** Boot → connected with an empty stateDir (agent signs) vs the minimal sign + fetch + ws script. */
async function bootUncached(fx: LinkFixture, n: number): Promise<{ agent: number[]; floor: number[] }> {
  const device = fx.ws.device(BOTS[1]!, fx.svc);
  const once =
    (start: () => Child, before = (): void => undefined) =>
    async (): Promise<number> => {
      before();
      const { ms: took, child } = await timeToConnected(fx.svc, device.botId, start);
      await disconnect(fx.svc, device.botId, child);
      return took;
    };
  const [agent = [], floor = []] = await alternate(n, [
    once(
      () => fx.ws.agent(device),
      () => device.forgetTokens(),
    ),
    once(() => fx.ws.signingClient(fx.svc, device)),
  ]);
  return { agent, floor };
}

const progress = (what: string): boolean => process.stderr.write(`… ${what}\n`);

/** The agent's figures, on one workspace removed afterwards. */
async function agentFigures() {
  const ws = await Workspace.create('all');
  const fx = await LinkFixture.create(ws);
  try {
    progress(`boot → connected, cached token: ${BOOT_RUNS} runs each`);
    const cached = await bootCached(fx, BOOT_RUNS);
    progress(`boot → connected, no cache: ${BOOT_RUNS} runs each`);
    const uncached = await bootUncached(fx, BOOT_RUNS);
    progress(`${PAIRS} agents and ${PAIRS} minimal sign + fetch + ws clients connected and idle for ${(2 * IDLE_MS) / 1000} s`);
    const idling = await idle(fx);
    progress(`service restart → reconnected: ${RUNS} runs`);
    const restart = await restartReconnect(fx, RUNS, 0);
    return { cached, uncached, idling, restart };
  } finally {
    await fx.close();
    ws.remove();
  }
}

async function main(): Promise<void> {
  const began = performance.now();
  const machine = machineLine();
  const { cached, uncached, idling, restart } = await agentFigures();
  progress('reference service getToken/s vs node:http echo (npm run bench:service)');
  const service = await serviceRows();
  progress('relay data path vs a bare forwarder (npm run bench:relay)');
  const relay = await relayRows();
  progress('`botlink --version` vs `node -e 0` (npm run bench:startup)');
  const startup = await startupRows();

  const rows = [
    ratioRow('boot → connected, cached token vs minimal ws client', cached.agent, cached.floor, BOOT_GOAL),
    ratioRow('boot → connected, no cache vs minimal sign + fetch + ws', uncached.agent, uncached.floor, BOOT_GOAL),
    ...idleRows(idling),
    ceilingRow('service restart → reconnected (from listen)', restart, RECONNECT_GOAL_MS),
    ...service.rows,
    ...relay,
    ...startup,
  ];

  console.log(`\nbotlink benchmarks — ${machine}`);
  console.log(
    `loopback reference service; agent = node <bundle> run (logLevel info); boot figures are medians of ${BOOT_RUNS} alternating runs,` +
      ` idle figures medians of ${PAIRS} agent/client pairs side by side\n`,
  );
  printTable(['figure', 'botlink', 'baseline', 'ratio', 'goal', 'result', 'IQR/median'], rows);
  const goals = rows.filter((r) => r[4] !== 'info');
  const met = goals.filter((r) => r[5] === 'PASS').length;
  console.log(`\n${met} of ${goals.length} goals met; whole run ${((performance.now() - began) / 60_000).toFixed(1)} min`);
  const { phases } = cached;
  console.log(
    `agent boot with a cached token, medians from its log: spawn → 'botlink starting' ${ms(median(phases.load))}` +
      ` · → 'link connecting' ${ms(median(phases.setUp))} · → socket open at the service ${ms(median(phases.connect))}`,
  );
  console.log(
    `idle CPU from /proc/<pid>/task/*/schedstat; cross-check /proc/<pid>/stat: ${idling.ticks.agent} ticks for the ${PAIRS} agents,` +
      ` ${idling.ticks.floor} for the ${PAIRS} clients (1 tick = ${1000 / CLOCK_TICKS_PER_S} ms)`,
  );
  console.log('\nbench:service output:');
  console.log(service.output.replace(/^/gm, '  ').trimEnd());
}

await main();
