import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenStore } from '../../src/agent/store/token-store.js';
import type { ReferenceService } from '../../src/service/server.js';
import { privateDaemonBundle, type Bundle } from '../helpers/bundle.js';
import { DAEMON_SECRET, type DaemonProc, type DeviceDir } from '../helpers/daemon-proc.js';
import { cleanEnv } from '../../scripts/lib/env.js';
import { faketimeEnv, probeNodeClocks, WRONG_CLOCKS, type WrongClock } from '../helpers/faketime.js';
import { useHarness } from '../helpers/harness.js';

/**
 * Suite 3 of issue 6: the daemon (built bundle) boots with its wall clock at 1970, −2 days or +2 days
 * (libfaketime, CLOCK_MONOTONIC left real) and must reach `connected` through the cached token, a
 * refresh, or server time, never sending a getToken timestamp outside the service's window.
 */

const BOT = 'bot-1';
const SEED_FILE = { accounts: [{ accessKeyId: 'AK', secretKey: DAEMON_SECRET, vendors: [{ vendorId: 'V1', bots: [BOT] }] }] };
/** The service's window (DESIGN §1.2) and the accuracy the agent aims for (DESIGN §4). */
const WINDOW_MS = 5 * 60_000;
const AIM_MS = 2000;
const CONNECT_TIMEOUT_MS = 15_000;

interface Outcome {
  clock: string;
  scenario: string;
  /** Spawn → status.json connected for this pid, as the test saw it. */
  bootMs: number;
  /** 'botlink starting' → 'link connected' in the daemon's own log (start-up of node excluded). */
  agentMs: number | undefined;
  getToken: number;
  refreshOk: number;
  /** Server time samples: HEAD requests, of which the agent reads only the Date. */
  samples: number;
  verdict: string | undefined;
  source: string | undefined;
  /** Server − local wall clock as the agent estimated it (status.json). */
  offsetMs: number | null;
  reconnects: number;
}

const outcomes: Outcome[] = [];
const harness = useHarness();
let bundle: Bundle;

beforeAll(async () => {
  bundle = await privateDaemonBundle('clocks-bundle-');
}, 300_000);

afterAll(() => {
  bundle?.dispose();
  if (outcomes.length === 0) return;
  const rows = outcomes.map(
    (o) =>
      `  ${o.clock.padEnd(8)} ${o.scenario.padEnd(26)} boot→connected ${String(Math.round(o.bootMs)).padStart(5)} ms ` +
      `(agent ${o.agentMs === undefined ? '?' : String(Math.round(o.agentMs)).padStart(4)} ms)  getToken ${o.getToken}  ` +
      `refresh ${o.refreshOk}  samples ${o.samples}  reconnects ${o.reconnects}  verdict ${o.verdict}/${o.source}`,
  );
  console.log(['clocks suite: wrong wall clocks at boot (requests counted per boot)', ...rows].join('\n'));
});

function service(accessTtlS: number, refreshTtlS = 3600): Promise<ReferenceService> {
  return harness.service(SEED_FILE, { accessTtlS, refreshTtlS });
}

function device(svc: ReferenceService): DeviceDir {
  return harness.device(svc, { botId: BOT });
}

/** Starts the daemon and measures spawn → `connected` as reported in status.json by this very process. */
async function bootUntilConnected(d: DeviceDir, env: NodeJS.ProcessEnv): Promise<{ proc: DaemonProc; bootMs: number }> {
  const started = performance.now();
  const proc = harness.daemon(d, env, bundle.file);
  for (;;) {
    const s = d.status();
    if (s !== undefined && s.pid === proc.child.pid && s.link.state === 'connected') return { proc, bootMs: performance.now() - started };
    if (proc.child.exitCode !== null || performance.now() - started > CONNECT_TIMEOUT_MS) {
      throw new Error(
        `no connected within ${CONNECT_TIMEOUT_MS} ms (exit ${proc.child.exitCode})\n${proc.stderr}\n${d.log().split('\n').slice(-30).join('\n')}`,
      );
    }
    await sleep(5);
  }
}

/** A correctly clocked first boot that leaves a cached pair behind, then stops cleanly; its time is the baseline. */
async function firstBoot(svc: ReferenceService, d: DeviceDir): Promise<void> {
  const before = { getToken: svc.stats.getToken.total, head: svc.stats.head.total };
  const { proc, bootMs } = await bootUntilConnected(d, cleanEnv());
  const status = d.status()!;
  expect((await proc.stop('SIGTERM')).code).toBe(0);
  outcomes.push({
    clock: 'real',
    scenario: 'first boot, no cache',
    bootMs,
    agentMs: agentBootMs(d, proc.child.pid),
    getToken: svc.stats.getToken.total - before.getToken,
    refreshOk: 0,
    samples: svc.stats.head.total - before.head,
    verdict: status.clock.verdict,
    source: status.clock.source,
    offsetMs: status.clock.offsetMs,
    reconnects: status.link.reconnects,
  });
}

/** The daemon's own view of boot → connected, from its log (both stamps on the same faked clock). */
function agentBootMs(d: DeviceDir, pid: number | undefined): number | undefined {
  const lines = d
    .log()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { pid?: number; time?: string | number; msg?: string })
    .filter((l) => l.pid === pid);
  const at = (msg: string) => {
    const t = lines.find((l) => l.msg === msg)?.time;
    return t === undefined ? undefined : typeof t === 'number' ? t : Date.parse(t);
  };
  const start = at('botlink starting');
  const connected = at('link connected');
  return start === undefined || connected === undefined ? undefined : connected - start;
}

/** Every timestamp the service ever received lies within its window of the real time, and near it. */
function expectTimestampsInWindow(svc: ReferenceService, fromMs: number): void {
  const until = Date.now();
  for (const ts of svc.stats.getToken.timestamps) {
    expect(ts).toMatch(/^\d{13}$/);
    const ms = Number(ts);
    expect(ms, `getToken timestamp ${new Date(ms).toISOString()} outside the window`).toBeGreaterThanOrEqual(fromMs - WINDOW_MS);
    expect(ms, `getToken timestamp ${new Date(ms).toISOString()} outside the window`).toBeLessThanOrEqual(until + WINDOW_MS);
    expect(ms, `getToken timestamp ${new Date(ms).toISOString()} far from the real time`).toBeGreaterThanOrEqual(fromMs - AIM_MS);
    expect(ms, `getToken timestamp ${new Date(ms).toISOString()} far from the real time`).toBeLessThanOrEqual(until + AIM_MS);
  }
  expect(svc.stats.getToken.byCode[1003]).toBeUndefined();
}

/** Boots under `clock`, waits for connected, stops cleanly and records what it took. */
async function wrongClockBoot(svc: ReferenceService, d: DeviceDir, clock: WrongClock, scenario: string): Promise<Outcome> {
  const before = { getToken: svc.stats.getToken.total, head: svc.stats.head.total, refreshOk: svc.stats.refreshToken.ok };
  const { proc, bootMs } = await bootUntilConnected(d, cleanEnv(faketimeEnv(clock.spec)));
  // A moment connected, so a late request (a sign with the wrong clock, say) would still be counted.
  await sleep(500);
  const status = d.status()!;
  expect(status.pid).toBe(proc.child.pid);
  expect(status.link.state).toBe('connected');
  expect((await proc.stop('SIGTERM')).code).toBe(0);
  const refreshOk = svc.stats.refreshToken.ok - before.refreshOk;
  const outcome: Outcome = {
    clock: clock.name,
    scenario,
    bootMs,
    agentMs: agentBootMs(d, proc.child.pid),
    getToken: svc.stats.getToken.total - before.getToken,
    refreshOk,
    samples: svc.stats.head.total - before.head,
    verdict: status.clock.verdict,
    source: status.clock.source,
    offsetMs: status.clock.offsetMs,
    reconnects: status.link.reconnects,
  };
  outcomes.push(outcome);
  return outcome;
}

describe.each(WRONG_CLOCKS)('wall clock $name at boot', (clock) => {
  it('libfaketime gives node that wall clock, advancing at real speed, and leaves the monotonic clock real', () => {
    const probe = probeNodeClocks(clock.spec);
    expect(Math.abs(probe.wallOffsetMs - clock.approxOffsetMs(Date.now()))).toBeLessThan(10_000);
    expect(probe.wallAdvanceMs).toBeGreaterThanOrEqual(290);
    expect(probe.wallAdvanceMs).toBeLessThan(3000);
    // Real speed: performance.now()'s span within what Date.now() (whole ms) allows around it.
    const [least, most] = probe.wallAroundPerfMs;
    expect(probe.perfAdvanceMs, JSON.stringify(probe)).toBeGreaterThanOrEqual(least - 2);
    expect(probe.perfAdvanceMs, JSON.stringify(probe)).toBeLessThanOrEqual(most + 2);
    expect(Math.abs(probe.monoOffsetMs)).toBeLessThan(10_000);
  });

  it('(a) cached valid token: connects on it, with no getToken at all', async () => {
    const svc = await service(7200);
    const d = device(svc);
    const from = Date.now();
    await firstBoot(svc, d);
    const o = await wrongClockBoot(svc, d, clock, '(a) cached valid token');
    expect(o.getToken).toBe(0);
    expect(o.refreshOk).toBe(0);
    expect(o.reconnects).toBe(0);
    expectTimestampsInWindow(svc, from);
  });

  it('(b) cached pair with an expired access token: connects through refresh, with no getToken', async () => {
    const svc = await service(3);
    const d = device(svc);
    const from = Date.now();
    await firstBoot(svc, d);
    const store = TokenStore.open(d.stateDir);
    const cached = store.peekPair()?.pair;
    store.close();
    expect(cached).toBeDefined();
    // Wait, on the real clock, until the cached access token has expired at the service; its refresh token
    // lives an hour. The agent's expiry can be up to a second early (server time from whole-second Date
    // headers): a boot fast enough to present the token within that second connects on it, no refresh.
    await sleep(Math.max(0, cached!.accessExpiresAt - Date.now() + 1300));
    expect(cached!.refreshExpiresAt - Date.now()).toBeGreaterThan(30 * 60_000);
    const o = await wrongClockBoot(svc, d, clock, '(b) expired access, refresh');
    expect(o.getToken).toBe(0);
    expect(o.refreshOk).toBeGreaterThanOrEqual(1);
    expectTimestampsInWindow(svc, from);
  });

  it('(c) no cache: connects by signing with server time after one sample', async () => {
    const svc = await service(7200);
    const d = device(svc);
    const from = Date.now();
    const o = await wrongClockBoot(svc, d, clock, '(c) no cache, server time');
    expect(o.getToken).toBe(1);
    expect(svc.stats.getToken.ok).toBe(1);
    expect(o.samples).toBeGreaterThanOrEqual(1);
    expect(o.source).toBe('server');
    // The agent knows how wrong its wall clock is: server − local ≈ minus the fake offset.
    expect(Math.abs(o.offsetMs! + clock.approxOffsetMs(Date.now()))).toBeLessThan(10_000);
    expectTimestampsInWindow(svc, from);
  });
});
