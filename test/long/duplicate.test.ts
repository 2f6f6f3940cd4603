import { describe, expect, it } from 'vitest';
import { DISPLACED_BACKOFF } from '../../src/agent/link/options.js';
import { backoffCeiling, backoffFloor, type BackoffSettings } from '../../src/agent/token/backoff.js';
import { DAEMON_SECRET, type DaemonProc } from '../helpers/daemon-proc.js';
import { FleetAgent, SocketTimeline, sleep } from '../helpers/fleet.js';
import { useHarness } from '../helpers/harness.js';
import { waitFor } from '../helpers/wait-for.js';

const BOT = 'bot-1';
const SEED = { accounts: [{ accessKeyId: 'AK', secretKey: DAEMON_SECRET, vendors: [{ vendorId: 'V1', bots: [BOT] }] }] };
const WINDOW_MS = 3 * 60_000;
/** A displaced socket is gone once its close handshake is done: milliseconds on loopback. */
const HANDOVER_MS = 1000;
/** Between the log line of 'displaced' and the one of the next 'connecting': timer and logging latency. */
const LOG_SLACK_MS = 1000;
/**
 * A timer is armed on libuv's cached loop time, which trails the log line's Date.now() by the work done
 * since epoll returned: a little, or as long as the daemon was descheduled on a loaded machine. Small
 * beside the waits' 30 s floors, which a wrong schedule misses by seconds.
 */
const TIMER_EARLY_MS = 500;
const SHARED_BOT_ERROR = `two devices share botId ${BOT}`;

const { cleanups, service, device, daemon } = useHarness();

interface LogLine {
  /** 50 = error. */
  level: number;
  /** Wall ms. */
  time: number;
  msg: string;
  displacements?: number;
}

const LEVELS: Record<string, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 };

/** Parses pino lines of either shape: the daemon's (level label, ISO time) or a bare pino's (numbers). */
function logLines(text: string): LogLine[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => {
      const raw = JSON.parse(l) as { level: number | string; time: number | string; msg: string; displacements?: number };
      return {
        ...raw,
        level: typeof raw.level === 'number' ? raw.level : (LEVELS[raw.level] ?? 0),
        time: typeof raw.time === 'number' ? raw.time : Date.parse(raw.time),
      };
    });
}

/** Each 'link displaced' log line with the wall time of the next 'link connecting' (undefined: still waiting). */
function displacedWaits(lines: LogLine[]): { at: number; retriedAt: number | undefined }[] {
  const out: { at: number; retriedAt: number | undefined }[] = [];
  for (const line of lines) {
    if (line.msg === 'link displaced') out.push({ at: line.time, retriedAt: undefined });
    else if (line.msg === 'link connecting' && out.length > 0 && out.at(-1)!.retriedAt === undefined) out.at(-1)!.retriedAt = line.time;
  }
  return out;
}

describe('duplicate identity: two devices configured with one botId', () => {
  it('two daemons for 3 minutes: ≤ 6 displacements on the displaced schedule, both report it, one socket but for the handover', async () => {
    const svc = await service(SEED);
    const timeline = new SocketTimeline(svc, BOT);
    const displacedAt: number[] = [];
    svc.events.on('displaced', ({ botId }: { botId: string }) => {
      if (botId === BOT) displacedAt.push(performance.now());
    });
    const devices = ['first', 'second'].map(() => device(svc, { botId: BOT }));
    const procs: DaemonProc[] = [];
    const seen = devices.map(() => new Set<string>());
    const poller = setInterval(() => {
      devices.forEach((d, i) => {
        const link = d.status()?.link;
        if (link) seen[i]!.add(`${link.state} | ${link.lastError ?? ''}`);
      });
    }, 100);
    cleanups.push(() => clearInterval(poller));

    // The first device holds the botId; the second boots into it, as a cloned SD card would.
    procs.push(daemon(devices[0]!));
    await devices[0]!.waitForLink('connected', 15_000);
    const startedAt = performance.now();
    const startedWall = Date.now();
    procs.push(daemon(devices[1]!));
    await sleep(WINDOW_MS);
    const endedAt = performance.now();
    const displacements = displacedAt.filter((t) => t >= startedAt && t <= endedAt).length;
    // One instant for every service-side figure: the daemons may still displace each other while they stop.
    const socketsOpened = svc.stats.ws.total;
    const displacedTotal = svc.stats.ws.displaced;
    const overlaps = timeline.overlaps(endedAt);
    for (const p of procs) expect((await p.stop('SIGTERM')).code).toBe(0);
    clearInterval(poller);

    const agents = devices.map((d, i) => {
      // The window the service was watched for, as measured (the sleep may have overrun WINDOW_MS).
      const lines = logLines(d.log()).filter((l) => l.time <= startedWall + (endedAt - startedAt));
      const waits = displacedWaits(lines);
      const errors = lines.filter((l) => l.level === 50 && l.msg.includes(SHARED_BOT_ERROR));
      return { name: i === 0 ? 'first' : 'second', waits, errors, seen: [...seen[i]!] };
    });
    const report = {
      displacements,
      gapsS: displacedAt.slice(1).map((t, i) => +((t - displacedAt[i]!) / 1000).toFixed(1)),
      socketsOpened,
      maxOpen: timeline.maxOpen(),
      handoversMs: overlaps.map((ms) => +ms.toFixed(1)),
      perAgent: agents.map((a) => ({
        name: a.name,
        displaced: a.waits.length,
        waitsS: a.waits.map((w) => (w.retriedAt === undefined ? 'pending' : +((w.retriedAt - w.at) / 1000).toFixed(1))),
        errorLines: a.errors.length,
      })),
    };
    console.log(`duplicate report ${JSON.stringify(report)}`);

    // Waits of [30, 60) s then [60, 120) s, alternating: #1 ≈ 0, #3 < 120 s, #5 ≥ 180 s, so 3 or 4 fit.
    expect(displacements).toBeLessThanOrEqual(6);
    expect(displacements).toBeGreaterThanOrEqual(3);
    // Nobody fought: every socket after the first displaced exactly the one holder.
    expect(socketsOpened).toBe(displacedTotal + 1);
    expect(timeline.maxOpen()).toBeLessThanOrEqual(2);
    expect(overlaps).toHaveLength(displacedTotal);
    for (const ms of overlaps) expect(ms).toBeLessThan(HANDOVER_MS);

    expect(agents[0]!.waits.length + agents[1]!.waits.length).toBe(displacements);
    // The schedule guarantees the first holder two displacements (#1, #3) and the newcomer one (#2).
    expect(agents[0]!.waits.length).toBeGreaterThanOrEqual(2);
    expect(agents[1]!.waits.length).toBeGreaterThanOrEqual(1);
    for (const a of agents) {
      expect(
        a.seen.some((s) => s.startsWith('displaced | REPEAT_CLIENT_SESSION')),
        `${a.name} status.json: ${a.seen.join('; ')}`,
      ).toBe(true);
      a.waits.forEach((w, j) => {
        if (w.retriedAt === undefined) return;
        const waited = w.retriedAt - w.at;
        expect(waited, `${a.name} wait ${j + 1}`).toBeGreaterThanOrEqual(backoffFloor(j, DISPLACED_BACKOFF) - TIMER_EARLY_MS);
        expect(waited, `${a.name} wait ${j + 1}`).toBeLessThan(backoffCeiling(j, DISPLACED_BACKOFF) + LOG_SLACK_MS);
      });
      // The error line comes with the third displacement in 10 min, never before.
      expect(a.errors.length, `${a.name} error lines`).toBe(Math.max(0, a.waits.length - 2));
    }
  });

  it('on a 30× faster displaced schedule both agents reach 3 displacements and log that two devices share the botId', async () => {
    const svc = await service();
    // The production schedule divided by 30: the same code path, seconds instead of minutes.
    const fast: BackoffSettings = { baseMs: DISPLACED_BACKOFF.baseMs / 30, capMs: DISPLACED_BACKOFF.capMs / 30, jitter: 'equal' };
    const agents = [0, 1].map(() => new FleetAgent({ url: svc.url, wsUrl: svc.wsUrl, botId: BOT, link: { displacedBackoff: fast } }));
    for (const a of agents) cleanups.push(() => a.close());
    const order: number[] = [];
    agents.forEach((a, i) => {
      a.link.on('displaced', () => order.push(i));
    });

    agents[0]!.start();
    await waitFor(() => agents[0]!.connected, 10_000, 'first agent connected');
    agents[1]!.start();
    // Waits of [1, 2), [1, 2), [2, 4), [2, 4), [4, 8) s put the sixth displacement within 20 s.
    await waitFor(() => order.filter((i) => i === 1).length >= 3, 30_000, 'the second agent displaced three times');
    await Promise.all(agents.map((a) => a.link.stop()));

    expect(order.slice(0, 6)).toEqual([0, 1, 0, 1, 0, 1]);
    for (const [i, a] of agents.entries()) {
      const waits = a.events.filter((e) => e.kind === 'backoff' && e.reason.startsWith('REPEAT_CLIENT_SESSION'));
      waits.slice(0, 3).forEach((e, j) => {
        if (e.kind !== 'backoff') return;
        expect(e.delayMs).toBeGreaterThanOrEqual(backoffFloor(j, fast));
        expect(e.delayMs).toBeLessThan(backoffCeiling(j, fast));
      });
      const lines = logLines(a.kit.logText());
      const errors = lines.filter((l) => l.level === 50 && l.msg.includes(SHARED_BOT_ERROR));
      expect(errors.length, `agent ${i} error lines`).toBeGreaterThanOrEqual(1);
      expect(errors[0]!.displacements).toBe(3);
      expect(errors[0]!.msg).toBe(`REPEAT_CLIENT_SESSION: displaced 3 times in 10 min — ${SHARED_BOT_ERROR}`);
      // The reason of the displaced state, which status.json shows as lastError, says it too.
      expect(waits.some((e) => e.kind === 'backoff' && e.reason.includes(SHARED_BOT_ERROR))).toBe(true);
    }
    expect(svc.stats.ws.maxConcurrentPerBot).toBe(2);
    expect(svc.stats.ws.total).toBe(svc.stats.ws.displaced + 1);
  });
});
