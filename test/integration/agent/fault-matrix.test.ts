import type { LookupAddress } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { CloudClient } from '../../../src/cloud/client.js';
import { systemClock } from '../../../src/clock.js';
import { LinkSupervisor, type LinkState } from '../../../src/agent/link/supervisor.js';
import type { TokenPair } from '../../../src/agent/store/token-store.js';
import { WsMessage } from '../../../src/protocol/codes.js';
import type { BrokenResponse } from '../../../src/service/faults.js';
import type { TestService, TestServiceOptions } from '../../../src/service/testing.js';
import { VOICE_CHAT_PATH } from '../../../src/protocol/conversation.js';
import { AgentKit } from '../../helpers/agent-kit.js';
import { collectUnexpected, useHarness } from '../../helpers/harness.js';
import { waitFor } from '../../helpers/wait-for.js';
import { signingSource } from '../../../src/agent/token/sign-source.js';

/**
 * Suite 1 of issue 6: every fault kind is injected into a running agent (token manager + link against
 * the reference service), then removed; the agent must come back to `connected` without a crash and
 * without losing the cached pair to a transient fault.
 */

const SECRET = 'fault-matrix-secret-5e1d';
const SEED = { accounts: [{ accessKeyId: 'AK', secretKey: SECRET, vendors: [{ vendorId: 'V1', bots: ['bot-1'] }] }] };
const FAST = { baseMs: 20, capMs: 200 };
const LINK_STATES: ReadonlySet<string> = new Set<LinkState>(['connecting', 'connected', 'backoff', 'displaced', 'stopped']);
/** A name only the injected resolver knows: the system resolver is never asked. */
const DNS_HOST = 'botlink-service.test';
/** Short enough that a refresh falls due within seconds (refresh point: a quarter of the lifetime left). */
const ACCESS_TTL_S = 3;

const internalErrors: unknown[] = [];
const unexpected = collectUnexpected();
// Checked after teardown too: a crash while stopping counts.
const { cleanups, service, tempDir } = useHarness(() => {
  expect(unexpected, 'unhandled rejections / uncaught exceptions').toEqual([]);
  expect(internalErrors, "the service's internal-error event").toEqual([]);
  internalErrors.length = 0;
});

async function startService(dbFile: string, opts: Partial<TestServiceOptions> = {}): Promise<TestService> {
  const svc = await service(SEED, { dbFile, accessTtlS: ACCESS_TTL_S, ...opts });
  svc.events.on('internal-error', (err) => internalErrors.push(err));
  return svc;
}

interface Rig {
  svc: TestService;
  readonly dbFile: string;
  readonly kit: AgentKit;
  readonly link: LinkSupervisor;
  readonly states: string[];
  readonly backoffs: { delayMs: number; reason: string }[];
  /** Every token failure, with the refresh token the store held at that instant. */
  readonly tokenFailures: { code: string; storedRefresh: string | undefined }[];
  readonly dns: { down: boolean; failed: number };
  displaced: number;
  pair(): TokenPair | undefined;
  start(): void;
}

/** One agent wired like the daemon, with fast backoffs, an injectable resolver and (when asked) a short body timeout. */
async function rig(o: { service?: Partial<TestServiceOptions>; viaDns?: boolean; bodyTimeoutMs?: number } = {}): Promise<Rig> {
  const dir = tempDir('botlink-faults-');
  const dbFile = join(dir, 'svc.db');
  const svc = await startService(dbFile, o.service);
  const dns = { down: false, failed: 0 };
  const lookup: LookupFunction = (hostname, options, callback) => {
    setImmediate(() => {
      if (dns.down) {
        dns.failed++;
        const err = Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND', syscall: 'getaddrinfo', hostname });
        callback(err, '', 4);
      } else if (options.all) {
        callback(null, [{ address: '127.0.0.1', family: 4 }] satisfies LookupAddress[]);
      } else {
        callback(null, '127.0.0.1', 4);
      }
    });
  };
  const host = o.viaDns ? DNS_HOST : '127.0.0.1';
  const url = `http://${host}:${svc.port}`;
  const tokenFailures: Rig['tokenFailures'] = [];
  // Assigned below: the client's Date samples go to the kit built around that client.
  let kit: AgentKit;
  const api = new CloudClient({
    baseUrl: url,
    accessKeyId: 'AK',
    secretKey: { reveal: () => SECRET },
    clock: systemClock,
    onDateSample: (date, sent, received) => kit.serverTime.addSample(date, sent, received),
    // Long unless a kind needs the timeout itself: a busy machine must not add failures of its own. The
    // body's may be short: a sound answer comes whole with its headers, so only a broken one waits on it.
    connectTimeoutMs: 5000,
    headersTimeoutMs: 5000,
    bodyTimeoutMs: o.bodyTimeoutMs ?? 5000,
    ...(o.viaDns && { lookup }),
  });
  kit = new AgentKit({
    url,
    secret: SECRET,
    manager: {
      source: signingSource(api, systemClock),
      backoff: FAST,
      onChange: () => {
        const err = kit.tokens.snapshot().lastError;
        if (err) tokenFailures.push({ code: err.code, storedRefresh: kit.store.peekPair()?.pair.refreshToken });
      },
    },
  });
  const link = new LinkSupervisor({
    wsUrl: `ws://${host}:${svc.port}${VOICE_CHAT_PATH}`,
    botId: 'bot-1',
    tokens: kit.tokens,
    clock: systemClock,
    log: kit.log,
    backoff: FAST,
    displacedBackoff: { baseMs: 150, capMs: 300, jitter: 'equal' },
    connectTimeoutMs: 5000,
    ...(o.viaDns && { lookup }),
  });
  const r: Rig = {
    svc,
    dbFile,
    kit,
    link,
    states: [],
    backoffs: [],
    tokenFailures,
    dns,
    displaced: 0,
    pair: () => kit.store.peekPair()?.pair,
    start() {
      kit.tokens.start();
      link.start();
    },
  };
  link.on('state', (s: { state: string }) => r.states.push(s.state));
  link.on('backoff', (b: { delayMs: number; reason: string }) => r.backoffs.push(b));
  link.on('displaced', () => r.displaced++);
  cleanups.push(async () => {
    await link.stop();
    await kit.close();
    await api.close();
  });
  return r;
}

const isConnected = (r: Rig) => (): boolean => r.link.status.state === 'connected';

/** Connected again after the fault: at least `afterReconnects` reconnects, state machine never left its five states. */
async function expectRecovered(r: Rig, afterReconnects: number, what: string): Promise<void> {
  await waitFor(
    () => r.link.status.state === 'connected' && r.link.status.reconnects >= afterReconnects,
    10_000,
    `recovery to connected after ${what}`,
  );
  expect(r.link.status.lastError).toBeNull();
  expect(r.states.filter((s) => !LINK_STATES.has(s))).toEqual([]);
}

/** The pair cached before the fault is still the one stored, and it was never missing while the fault lasted. */
function expectPairKept(r: Rig, before: TokenPair, signedBefore: number, failuresBefore: number): void {
  expect(r.pair()?.refreshToken).toBe(before.refreshToken);
  expect(r.kit.tokens.snapshot().renewals.signed).toBe(signedBefore);
  for (const failure of r.tokenFailures.slice(failuresBefore)) expect(failure.storedRefresh).toBe(before.refreshToken);
}

async function firstConnect(r: Rig): Promise<{ before: TokenPair; signed: number; failures: number; reconnects: number }> {
  r.start();
  await waitFor(isConnected(r), 10_000, 'first connect');
  return {
    before: r.pair()!,
    signed: r.kit.tokens.snapshot().renewals.signed,
    failures: r.tokenFailures.length,
    reconnects: r.link.status.reconnects,
  };
}

const brokenAnswers = (r: Rig, route: 'getToken' | 'refreshToken'): number => r.svc.stats[route].total - r.svc.stats[route].ok;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** The client error each broken answer must surface as. */
const EXPECTED_CODE: Record<BrokenResponse, string> = {
  'http-500-html': 'ERR_HTTP_STATUS',
  'http-503-html': 'ERR_HTTP_STATUS',
  'reset-mid-body': 'ERR_NETWORK',
  'never-finish': 'ERR_TIMEOUT',
  'malformed-json': 'ERR_BAD_RESPONSE',
  'wrong-types': 'ERR_BAD_RESPONSE',
  'oversize-body': 'ERR_RESPONSE_TOO_LARGE',
};

/**
 * A broken HTTP answer, twice on each route: first on the first boot's getToken (empty store: it must
 * sign), then on a refresh the link is waiting for (the socket dropped when the token had under half its
 * life left, so reconnecting needs the renewal).
 */
async function brokenHttp(kind: BrokenResponse): Promise<void> {
  const r = await rig(kind === 'never-finish' ? { bodyTimeoutMs: 600 } : {});
  r.svc.faults.nextResponses(kind, 2, '/auth/getToken');
  const { before, signed, failures, reconnects } = await firstConnect(r);
  expect(brokenAnswers(r, 'getToken')).toBe(2);
  expect(r.svc.stats.getToken.ok).toBe(1);
  expect(r.tokenFailures.map((f) => f.code)).toEqual([EXPECTED_CODE[kind], EXPECTED_CODE[kind]]);

  r.svc.faults.nextResponses(kind, 2, '/auth/refreshToken');
  await waitFor(() => before.accessExpiresAt - Date.now() < (ACCESS_TTL_S * 1000) / 2 - 100, 5000, 'the token to pass half its life');
  r.svc.faults.dropAllSockets();
  await expectRecovered(r, reconnects + 1, kind);
  expect(brokenAnswers(r, 'refreshToken')).toBe(2);
  expect(r.svc.stats.refreshToken.ok).toBeGreaterThanOrEqual(1);
  expect(r.tokenFailures.slice(failures).map((f) => f.code)).toEqual([EXPECTED_CODE[kind], EXPECTED_CODE[kind]]);
  expectPairKept(r, before, signed, failures);
}

const KINDS: [string, () => Promise<void>][] = [
  [
    'getToken 1006 bursts: at first boot, and at a re-sign that must not drop the pair in use',
    async () => {
      const r = await rig({ service: { accessTtlS: 2, refreshTtlS: 4 } });
      r.svc.faults.failNextGetToken(3);
      const { before, failures, reconnects } = await firstConnect(r);
      expect(r.svc.stats.getToken.byCode[1006]).toBe(3);
      expect(r.tokenFailures.map((f) => f.code)).toEqual(['ERR_CLOUD_1006', 'ERR_CLOUD_1006', 'ERR_CLOUD_1006']);
      // The refresh token reaches its re-sign point (a seventh of 4 s left) about 3.4 s after issue.
      r.svc.faults.failNextGetToken(4);
      // Judged on the agent's side: the service counts its answer before the agent has stored it.
      await waitFor(() => r.kit.tokens.snapshot().renewals.signed === 2, 8000, 'the re-sign after the burst');
      expect(r.svc.stats.getToken.ok).toBe(2);
      expect(r.svc.stats.getToken.byCode[1006]).toBe(7);
      const during = r.tokenFailures.slice(failures);
      expect(during.map((f) => f.code)).toEqual(['ERR_CLOUD_1006', 'ERR_CLOUD_1006', 'ERR_CLOUD_1006', 'ERR_CLOUD_1006']);
      for (const failure of during) expect(failure.storedRefresh).toBe(before.refreshToken);
      expect(r.pair()?.refreshToken).not.toBe(before.refreshToken);
      r.svc.faults.dropAllSockets();
      await expectRecovered(r, reconnects + 1, 'the burst');
    },
  ],
  ['HTTP 500 with an HTML body', () => brokenHttp('http-500-html')],
  ['HTTP 503 with an HTML body', () => brokenHttp('http-503-html')],
  ['connection reset mid-body', () => brokenHttp('reset-mid-body')],
  ['a response that never finishes (client timeout)', () => brokenHttp('never-finish')],
  ['malformed JSON', () => brokenHttp('malformed-json')],
  ['a JSON body with wrong types', () => brokenHttp('wrong-types')],
  ['a body over the 64 KiB limit', () => brokenHttp('oversize-body')],
  [
    'connection refused: the service stops, then comes back on the same port with the same database',
    async () => {
      // A longer life than the other kinds: the link's first reconnects must still find a token with
      // half its life left (so they reach the closed port), even on a machine that stalls for a second.
      const r = await rig({ service: { accessTtlS: 2 * ACCESS_TTL_S } });
      const { before, signed, failures, reconnects } = await firstConnect(r);
      const port = r.svc.port;
      await r.svc.close();
      // The retrying link soon wants a token with more life left: that renewal meets the closed port too.
      await waitFor(() => r.tokenFailures.slice(failures).some((f) => f.code === 'ERR_NETWORK'), 10_000, 'a refused refresh');
      await waitFor(() => r.backoffs.some((b) => b.reason.includes('ECONNREFUSED')), 3000, 'a refused reconnect');
      r.svc = await startService(r.dbFile, { port });
      await expectRecovered(r, reconnects + 1, 'the restart');
      expect(r.svc.stats.getToken.total).toBe(0);
      expect(r.svc.stats.refreshToken.ok).toBeGreaterThanOrEqual(1);
      expectPairKept(r, before, signed, failures);
    },
  ],
  [
    'WebSocket 1006 bursts: ten abnormal closures in quick succession',
    async () => {
      const r = await rig();
      const { before, signed, failures, reconnects } = await firstConnect(r);
      for (let i = 1; i <= 10; i++) {
        await waitFor(isConnected(r), 5000, `connected before drop ${i}`);
        r.svc.faults.dropAllSockets();
        await waitFor(() => r.link.status.reconnects >= reconnects + i, 5000, `drop ${i} noticed`);
      }
      await expectRecovered(r, reconnects + 10, 'the burst');
      expect(r.backoffs.slice(-10).every((b) => b.reason.includes('1006'))).toBe(true);
      expect(r.svc.stats.ws.maxConcurrentPerBot).toBe(1);
      expectPairKept(r, before, signed, failures);
    },
  ],
  [
    'WebSocket dropped every second, four times, while tokens refresh',
    async () => {
      const r = await rig();
      const { before, signed, failures, reconnects } = await firstConnect(r);
      for (let i = 1; i <= 4; i++) {
        await sleep(1000);
        r.svc.faults.dropAllSockets();
        await expectRecovered(r, reconnects + i, `drop ${i}`);
      }
      expect(r.svc.stats.ws.total).toBe(5);
      expect(r.kit.tokens.snapshot().renewals.refreshed).toBeGreaterThanOrEqual(1);
      expectPairKept(r, before, signed, failures);
    },
  ],
  [
    'Unauthorized at the WebSocket handshake, then the service accepts again',
    async () => {
      const r = await rig();
      const { before, signed, failures, reconnects } = await firstConnect(r);
      r.svc.faults.refuseWebSockets(WsMessage.UNAUTHORIZED, 'handshake');
      r.svc.faults.dropAllSockets();
      await waitFor(() => r.backoffs.some((b) => b.reason.includes('Unauthorized again')), 5000, 'the second Unauthorized');
      // The refused token was handed back: the manager renewed it by refreshing, not by signing.
      expect(r.kit.tokens.snapshot().renewals.refreshed).toBeGreaterThanOrEqual(1);
      r.svc.faults.refuseWebSockets(undefined);
      await expectRecovered(r, reconnects + 3, 'Unauthorized');
      expectPairKept(r, before, signed, failures);
    },
  ],
  [
    'REPEAT_CLIENT_SESSION: a second connection for the same botId, which then goes away',
    async () => {
      const r = await rig();
      const { before, signed, failures, reconnects } = await firstConnect(r);
      const intruder = new WebSocket(`${r.svc.wsUrl}?botId=bot-1`, {
        headers: { Authorization: `Bearer ${await r.kit.tokens.current()}` },
      });
      intruder.on('error', () => undefined);
      await waitFor(() => r.displaced === 1 && r.link.status.state === 'displaced', 5000, 'the agent displaced');
      expect(r.link.status.lastError).toContain('REPEAT_CLIENT_SESSION');
      intruder.close();
      await expectRecovered(r, reconnects + 1, 'the intruder left');
      expect(r.svc.stats.ws.displaced).toBeGreaterThanOrEqual(1);
      expect(r.svc.stats.ws.perBotOpen('bot-1')).toBe(1);
      expectPairKept(r, before, signed, failures);
    },
  ],
  [
    'DNS failure (ENOTFOUND), then the name resolves again',
    async () => {
      // A longer life, as for connection refused: the reconnects must not wait on a renewal first.
      const r = await rig({ viaDns: true, service: { accessTtlS: 2 * ACCESS_TTL_S } });
      r.dns.down = true;
      r.start();
      // First boot: signing needs the HTTP connection, which needs the name.
      await waitFor(() => r.tokenFailures.filter((f) => f.code === 'ERR_DNS').length >= 2, 5000, 'two failed lookups');
      expect(r.link.status.state).toBe('connecting');
      expect(r.svc.stats.getToken.total).toBe(0);
      r.dns.down = false;
      await waitFor(isConnected(r), 5000, 'connected once DNS is back');
      const before = r.pair()!;
      const signed = r.kit.tokens.snapshot().renewals.signed;
      const failures = r.tokenFailures.length;
      const reconnects = r.link.status.reconnects;
      // With a cached pair: every WebSocket connection resolves the name afresh.
      const failedLookups = r.dns.failed;
      r.dns.down = true;
      r.svc.faults.dropAllSockets();
      await waitFor(() => r.backoffs.filter((b) => b.reason.includes('ENOTFOUND')).length >= 2, 5000, 'two failed reconnects');
      expect(r.dns.failed).toBeGreaterThan(failedLookups);
      r.dns.down = false;
      await expectRecovered(r, reconnects + 3, 'DNS came back');
      expectPairKept(r, before, signed, failures);
    },
  ],
];

describe('fault matrix: each fault injected, removed, and the agent back to connected', () => {
  it('covers at least 12 kinds', () => {
    expect(KINDS.length).toBeGreaterThanOrEqual(12);
  });

  it.each(KINDS)('%s', async (_name, run) => {
    // Each kind's own checks are expectations: a kind that checked nothing would fail here.
    expect.hasAssertions();
    await run();
  });
});
