import { describe, expect, it } from 'vitest';
import { DAEMON_SECRET } from '../helpers/daemon-proc.js';
import { POOL_CONNECTIONS } from '../../src/cloud/client.js';
import { fdTargets, SocketTimeline, sleep, splitByRemotePort } from '../helpers/fleet.js';
import { useHarness } from '../helpers/harness.js';
import { rssKiB } from '../../scripts/lib/procfs.js';
import { median } from '../../scripts/lib/stats.js';

const BOT = 'bot-1';
const SEED = { accounts: [{ accessKeyId: 'AK', secretKey: DAEMON_SECRET, vendors: [{ vendorId: 'V1', bots: [BOT] }] }] };
const RUN_MS = 5 * 60_000;
const STATUS_EVERY_MS = 100;
/** Around minute 1 and minute 5: 11 samples 2 s apart, so one GC or one renewal cannot sway the figure. */
const SAMPLES = 11;
const SAMPLE_EVERY_MS = 2000;

const harness = useHarness();

interface ProcSample {
  rssKiB: number;
  /** Descriptors but the TCP sockets to the service. */
  fds: string[];
  /** TCP sockets to the service: the WebSocket, and the HTTP pool's connections that come and go with keep-alive. */
  socketsToService: string[];
}

async function sampleProc(pid: number, servicePort: number): Promise<ProcSample[]> {
  const out: ProcSample[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const { toPort, rest } = splitByRemotePort(fdTargets(pid), servicePort);
    out.push({ rssKiB: rssKiB(pid), fds: rest, socketsToService: toPort });
    if (i < SAMPLES - 1) await sleep(SAMPLE_EVERY_MS);
  }
  return out;
}

/** Descriptors open in every sample: the steady set, without status.json.tmp or timedatectl pipes that come and go. */
function steadyFdCount(samples: ProcSample[]): number {
  return Math.min(...samples.map((s) => s.fds.length));
}

/** The targets present in every one of `lists`. */
function throughout(lists: string[][]): string[] {
  return lists.reduce((common, list) => common.filter((t) => list.includes(t)));
}

/** Target kinds ("socket", "pipe", "/path") with counts, for the report and a failure message. */
function fdKinds(fds: string[], deviceDir: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const fd of fds) {
    const kind = fd.startsWith('/') ? fd.replace(deviceDir, '<device>') : fd.replace(/\[\d+\]$/, '');
    out[kind] = (out[kind] ?? 0) + 1;
  }
  return out;
}

/** The longest stretch without a JSON PING, counted from each socket's open (a new socket starts its own interval). */
function longestQuiet(opens: number[], pings: number[], end: number): number {
  const marks = [...opens.map((t) => ({ t, open: true })), ...pings.map((t) => ({ t, open: false }))].sort((a, b) => a.t - b.t);
  let longest = 0;
  let since: number | undefined;
  for (const { t, open } of marks) {
    if (since !== undefined && !open) longest = Math.max(longest, t - since);
    since = t;
  }
  return since === undefined ? 0 : Math.max(longest, end - since);
}

describe('soak: the daemon for 5 minutes with 5 s access and 30 s refresh tokens', () => {
  it('renews all the time, keeps the link up ≥ 99 %, and grows neither RSS (< 3 % once settled) nor descriptors', async () => {
    const svc = await harness.service(SEED, { accessTtlS: 5, refreshTtlS: 30 });
    const timeline = new SocketTimeline(svc, BOT);
    // The guide's keepalive with no app attached: the JSON PINGs the service gets, and when each socket opened.
    const jsonPings: number[] = [];
    const opens: number[] = [];
    svc.events.on('ws-open', () => opens.push(performance.now()));
    svc.events.on('ws-message', ({ data, isBinary }: { data: Buffer; isBinary: boolean }) => {
      if (!isBinary && (JSON.parse(data.toString('utf8')) as { contentType?: unknown }).contentType === 'PING')
        jsonPings.push(performance.now());
    });
    const device = harness.device(svc, { botId: BOT });
    const daemon = harness.daemon(device);
    const pid = daemon.child.pid!;
    const startedAt = performance.now();

    const states: { t: number; state: string }[] = [];
    const poller = setInterval(() => {
      const link = device.status()?.link;
      if (link) states.push({ t: performance.now(), state: link.state });
    }, STATUS_EVERY_MS);
    harness.cleanups.push(() => clearInterval(poller));

    const at = (ms: number) => sleep(startedAt + ms - performance.now());
    const half = ((SAMPLES - 1) * SAMPLE_EVERY_MS) / 2;
    await at(60_000 - half);
    const minute1 = await sampleProc(pid, svc.port);
    await at(3 * 60_000 - half);
    const minute3 = await sampleProc(pid, svc.port);
    await at(RUN_MS - 2 * half);
    const minute5 = await sampleProc(pid, svc.port);
    const endedAt = performance.now();
    clearInterval(poller);
    const reconnects = device.status()?.link.reconnects;
    expect((await daemon.stop('SIGTERM')).code).toBe(0);

    const firstOpen = timeline.changes[0]?.t;
    expect(firstOpen).toBeDefined();
    const availability = timeline.availability(firstOpen!, endedAt);
    const firstConnected = states.findIndex((s) => s.state === 'connected');
    const sampled = states.slice(firstConnected);
    const statusAvailability = sampled.filter((s) => s.state === 'connected').length / sampled.length;
    const rss1 = median(minute1.map((s) => s.rssKiB));
    const rss3 = median(minute3.map((s) => s.rssKiB));
    const rss5 = median(minute5.map((s) => s.rssKiB));
    const fds1 = steadyFdCount(minute1);
    const fds5 = steadyFdCount(minute5);
    const report = {
      runS: +((endedAt - startedAt) / 1000).toFixed(1),
      refreshes: svc.stats.refreshToken.ok,
      refreshRequestsNotOk: svc.stats.refreshToken.total - svc.stats.refreshToken.ok,
      serverTimeSamples: svc.stats.head.total,
      clockSource: device.status()?.clock.source,
      signs: svc.stats.getToken.ok,
      reSigns: svc.stats.getToken.ok - 1,
      getTokenByCode: svc.stats.getToken.byCode,
      socketsOpened: svc.stats.ws.total,
      linkReconnects: reconnects,
      availability: +(availability * 100).toFixed(3),
      statusAvailability: +(statusAvailability * 100).toFixed(3),
      statusSamples: sampled.length,
      rssKiB: {
        minute1: rss1,
        minute3: rss3,
        minute5: rss5,
        growthPct: +((rss5 / rss1 - 1) * 100).toFixed(2),
        growth3to5Pct: +((rss5 / rss3 - 1) * 100).toFixed(2),
      },
      fds: {
        minute1: { steady: fds1, max: Math.max(...minute1.map((s) => s.fds.length)) },
        minute5: { steady: fds5, max: Math.max(...minute5.map((s) => s.fds.length)) },
        kinds: fdKinds(minute5.find((s) => s.fds.length === fds5)!.fds, device.dir),
        socketsToServiceMax: Math.max(...[...minute1, ...minute5].map((s) => s.socketsToService.length)),
        socketsToServiceThroughout: throughout([...minute1, ...minute5].map((s) => s.socketsToService)).length,
      },
      timeToConnectedMs: Math.round(firstOpen! - startedAt),
      jsonPings: jsonPings.length,
      longestQuietMs: Math.round(longestQuiet(opens, jsonPings, endedAt)),
    };
    console.log(`soak report ${JSON.stringify(report)}`);

    expect(svc.stats.refreshToken.ok).toBeGreaterThanOrEqual(50);
    expect(svc.stats.getToken.ok - 1).toBeGreaterThanOrEqual(8);
    expect(Object.keys(svc.stats.getToken.byCode)).toEqual(['0']);
    expect(availability).toBeGreaterThanOrEqual(0.99);
    expect(statusAvailability).toBeGreaterThanOrEqual(0.99);
    // Minute 1 is still warming up (V8's heap and code grow ~6 MiB to minute 3, then settle: 9-10 % over the
    // whole run, under 1 % from minute 3 to 5 here). A leak shows where it has settled; any large growth overall.
    expect(rss5 / rss3 - 1).toBeLessThan(0.03);
    expect(rss5 / rss1 - 1).toBeLessThan(0.2);
    // Every 30 s from the socket's last frame up: never 35 s without one while no app is attached.
    expect(jsonPings.length).toBeGreaterThanOrEqual(8);
    expect(report.longestQuietMs).toBeLessThanOrEqual(35_000);
    // Sockets to the service are not counted by sampling: a keep-alive socket is open for most of each
    // 3.75 s refresh period, so 11 samples 2 s apart can all see it at one minute and not the other. At
    // most the pool's are open at once beside the WebSocket, and only the WebSocket lives from minute 1 to
    // minute 5 (the service closes an HTTP connection idle for 5 s; the pool closes it after 3 s).
    expect(report.fds.socketsToServiceMax).toBeLessThanOrEqual(1 + POOL_CONNECTIONS);
    expect(report.fds.socketsToServiceThroughout).toBeLessThanOrEqual(1);
    expect(
      fds5,
      JSON.stringify({ minute1: fdKinds(minute1.find((s) => s.fds.length === fds1)!.fds, device.dir), minute5: report.fds.kinds }),
    ).toBeLessThanOrEqual(fds1);
  });
});
