import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../../../src/clock.js';
import { LinkSupervisor, type LinkOptions, type LinkState, type LinkStatus } from '../../../src/agent/link/supervisor.js';
import { WS_FAILURE_FIXES, WsMessage } from '../../../src/protocol/codes.js';
import { DISPLACEMENT_MARKERS } from '../../../src/service/server.js';
import { AgentKit } from '../../helpers/agent-kit.js';
import { useHarness } from '../../helpers/harness.js';
import { pongFrame } from '../../helpers/ws-peers.js';

/**
 * The link against the reference service on real time: what the service really sends is recognised.
 * Schedules, heartbeat and the edge cases of hostile peers are in test/integration/agent/link-supervisor.test.ts,
 * on a ManualClock; every ending kind is in the decision table, test/unit/agent/link-decide.test.ts.
 */

const { cleanups, service } = useHarness();

interface Backoff {
  delayMs: number;
  reason: string;
  /** The status as the backoff was announced (the link may have moved on since). */
  lastError: string | null;
  fix: string | undefined;
}

/** A link plus the token side, with every backoff it announces recorded. */
function link(url: string, wsUrl: string, opts: Partial<LinkOptions> = {}) {
  const kit = new AgentKit({ url });
  kit.tokens.start();
  const supervisor = new LinkSupervisor({
    wsUrl,
    botId: 'bot-1',
    tokens: kit.tokens,
    clock: systemClock,
    log: kit.log,
    backoff: { baseMs: 50, capMs: 400 },
    ...opts,
  });
  const backoffs: Backoff[] = [];
  supervisor.on('backoff', (b: { delayMs: number; reason: string }) => {
    const { lastError, fix } = supervisor.status;
    backoffs.push({ ...b, lastError, fix });
  });
  cleanups.push(
    () => kit.close(),
    () => supervisor.stop(),
  );
  supervisor.start();
  return { kit, supervisor, backoffs };
}

/** Resolves once the link is in `state`: at once if it is, else at the state event that enters it. */
function reaches(supervisor: LinkSupervisor, state: LinkState): Promise<void> {
  if (supervisor.status.state === state) return Promise.resolve();
  return new Promise((resolve) => {
    const on = (s: LinkStatus): void => {
      if (s.state !== state) return;
      supervisor.off('state', on);
      resolve();
    };
    supervisor.on('state', on);
  });
}

/** The first backoff from now on whose reason is `reason`. */
function backoffFor(supervisor: LinkSupervisor, reason: string): Promise<Backoff> {
  return new Promise((resolve) => {
    const on = (b: { delayMs: number; reason: string }): void => {
      if (b.reason !== reason) return;
      supervisor.off('backoff', on);
      resolve({ ...b, lastError: supervisor.status.lastError, fix: supervisor.status.fix });
    };
    supervisor.on('backoff', on);
  });
}

describe('LinkSupervisor against the reference service', () => {
  it('connects with Bearer and ?botId, converses (PING → PONG), and closes with 1000 on stop without reconnecting', async () => {
    const svc = await service();
    const { supervisor, kit } = link(svc.url, svc.wsUrl);
    await reaches(supervisor, 'connected');
    const got = pongFrame(supervisor);
    expect(supervisor.send('{"mid":"hello","contentType":"PING"}')).toBe(true);
    await got;
    expect(svc.stats.ws.perBotOpen('bot-1')).toBe(1);
    const closed = once(svc.events, 'ws-close');
    await supervisor.stop();
    await closed;
    expect(supervisor.status.state).toBe('stopped');
    expect(supervisor.send('x')).toBe(false);
    expect(svc.stats.ws.total).toBe(1);
    expect(kit.logText()).not.toContain((await kit.tokens.current()).slice(0, 20));
  });

  it('comes back after the service drops every socket, within the backoff schedule', async () => {
    const svc = await service();
    const { supervisor, backoffs } = link(svc.url, svc.wsUrl);
    await reaches(supervisor, 'connected');
    const back = once(supervisor, 'connected');
    svc.faults.dropAllSockets();
    await back;
    // The first retry after a drop spreads over attempt 2's window: [0, 4 × 50 ms).
    expect(backoffs).toEqual([expect.objectContaining({ reason: 'closed (1006)' })]);
    expect(backoffs[0]!.delayMs).toBeLessThan(200);
    expect(supervisor.status).toMatchObject({ state: 'connected', reconnects: 1, lastError: null });
  });

  it('never holds two sockets, even under rapid drops', async () => {
    const svc = await service();
    const { supervisor } = link(svc.url, svc.wsUrl, { backoff: { baseMs: 1, capMs: 5 } });
    await reaches(supervisor, 'connected');
    for (let i = 0; i < 40; i++) {
      svc.faults.dropAllSockets();
      // Drops land in every phase of the link: connecting, just open, backing off.
      await new Promise((r) => setTimeout(r, 15 + (i % 4) * 10));
    }
    await reaches(supervisor, 'connected');
    expect(svc.stats.ws.maxConcurrentPerBot).toBe(1);
    expect(svc.stats.ws.total).toBeGreaterThan(5);
  });

  it('renews a token that would expire before connecting', async () => {
    const svc = await service(undefined, { accessTtlS: 2 });
    const { supervisor, kit } = link(svc.url, svc.wsUrl, { tokenMarginMs: 300_000 });
    await reaches(supervisor, 'connected');
    // Past the 2 s token's life: only a renewed token can connect now.
    await new Promise((r) => setTimeout(r, 2200));
    const back = once(supervisor, 'connected');
    svc.faults.dropAllSockets();
    await back;
    expect(kit.tokens.snapshot().renewals.refreshed).toBeGreaterThanOrEqual(1);
    expect(supervisor.status.lastError).toBeNull();
  });
});

describe('the three 400 answers, as the reference service sends them', () => {
  it.each(['handshake', 'frame', 'close-reason'] as const)(
    'Unauthorized (%s): renew, reconnect at once, then back off and say why',
    async (form) => {
      const svc = await service();
      const { supervisor, backoffs, kit } = link(svc.url, svc.wsUrl);
      await reaches(supervisor, 'connected');
      const again = backoffFor(supervisor, 'Unauthorized again with a renewed token');
      svc.faults.refuseWebSockets(WsMessage.UNAUTHORIZED, form);
      svc.faults.dropAllSockets();
      const second = await again;
      // One plain drop, then one immediate retry after the first Unauthorized: no backoff between them.
      expect(backoffs.map((b) => b.reason)).toEqual(['closed (1006)', 'Unauthorized again with a renewed token']);
      expect(second).toMatchObject({ lastError: 'Unauthorized again with a renewed token', fix: WS_FAILURE_FIXES[WsMessage.UNAUTHORIZED] });
      expect(kit.tokens.snapshot().renewals.refreshed).toBeGreaterThanOrEqual(1);
      // Lifted before the retry's timer can fire: the next attempt is accepted.
      svc.faults.refuseWebSockets(undefined);
      await reaches(supervisor, 'connected');
      expect(supervisor.status.fix).toBeUndefined();
    },
  );

  it.each(['handshake', 'frame', 'close-reason'] as const)(
    'botId not found or invalid (%s): slow retry with a clear reason',
    async (form) => {
      const svc = await service();
      svc.faults.refuseWebSockets(WsMessage.BOT_INVALID, form);
      const { supervisor } = link(svc.url, svc.wsUrl);
      const [backoff] = (await once(supervisor, 'backoff')) as [{ delayMs: number }];
      expect(backoff.delayMs).toBe(300_000);
      expect(supervisor.status).toMatchObject({
        state: 'backoff',
        lastError: 'botId not found or invalid',
        fix: WS_FAILURE_FIXES[WsMessage.BOT_INVALID],
      });
    },
  );

  it.each(DISPLACEMENT_MARKERS)('REPEAT_CLIENT_SESSION (%s marker): the displaced agent backs off at least 30 s', async (marker) => {
    const svc = await service(undefined, { displacementMarker: marker });
    const a = link(svc.url, svc.wsUrl);
    await reaches(a.supervisor, 'connected');
    const displaced = once(a.supervisor, 'displaced');
    const backoff = backoffFor(a.supervisor, 'REPEAT_CLIENT_SESSION: another connection holds this botId');
    const aClosed = once(svc.events, 'ws-close');
    const b = link(svc.url, svc.wsUrl);
    expect((await displaced)[0]).toEqual({ count: 1 });
    expect((await backoff).delayMs).toBeGreaterThanOrEqual(30_000);
    expect(a.supervisor.status.state).toBe('displaced');
    await reaches(b.supervisor, 'connected');
    await aClosed;
    expect(svc.stats.ws.perBotOpen('bot-1')).toBe(1);
  });
});
