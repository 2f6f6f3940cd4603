// The idle figures: agents and minimal clients connected side by side, their RSS after a minute, then
// their CPU over the next minute.
import { cpuMs, cpuTicks, rssKiB } from '../../test/helpers/procfs.js';
import type { Child } from './child.js';
import { BOTS, fetchToken, timeToConnected } from './fixture.js';
import type { LinkFixture } from './link.js';
import { sleep } from './sample.js';

/** Agent/client pairs idling side by side for the RSS and CPU figures. */
export const PAIRS = 10;
export const IDLE_MS = 60_000;

export interface Idle {
  rssKiB: { agent: number[]; floor: number[] };
  cpuMsPerMin: { agent: number[]; floor: number[] };
  /** utime + stime over the window, summed over all pairs: the coarse cross-check of the schedstat figure. */
  ticks: { agent: number; floor: number };
}

/** PAIRS agents and PAIRS minimal clients (same 20 s ping) side by side: RSS after a minute connected, then CPU over the next minute. */
export async function idle(fx: LinkFixture): Promise<Idle> {
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
    const all = [...agents, ...clients];
    await sleep(IDLE_MS);
    const rss = all.map((c) => rssKiB(c.pid));
    // The CPU window is the next minute: V8's memory reducer runs its GCs in the first ~20 s after start.
    const before = all.map((c) => [cpuMs(c.pid), cpuTicks(c.pid)] as const);
    const started = performance.now();
    await sleep(IDLE_MS);
    const minutes = (performance.now() - started) / 60_000;
    const cpu = all.map((c, i) => (cpuMs(c.pid) - before[i]![0]) / minutes);
    const ticks = all.map((c, i) => cpuTicks(c.pid) - before[i]![1]);
    return {
      rssKiB: { agent: rss.slice(0, PAIRS), floor: rss.slice(PAIRS) },
      cpuMsPerMin: { agent: cpu.slice(0, PAIRS), floor: cpu.slice(PAIRS) },
      ticks: { agent: sum(ticks.slice(0, PAIRS)), floor: sum(ticks.slice(PAIRS)) },
    };
  } finally {
    await Promise.all([...agents, ...clients].map((c) => c.stop('SIGTERM')));
  }
}

const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
