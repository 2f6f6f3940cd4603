import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { WebSocketServer, type WebSocket as ServerSocket } from 'ws';
import { systemClock } from '../../src/agent/clock.js';
import { LinkSupervisor, type LinkOptions, type TokenSource } from '../../src/agent/link.js';
import { WsMessage } from '../../src/protocol/codes.js';
import { createReferenceService } from '../../src/service/server.js';
import { AgentKit, waitFor } from '../helpers/agent-kit.js';
import { useHarness } from '../helpers/harness.js';

const { cleanups, service, tempDir } = useHarness();

interface Backoff {
  delayMs: number;
  reason: string;
  /** The status's lastError as the backoff was announced (the link may have moved on since). */
  lastError: string | null;
}

/** A link plus the token side, with every backoff it announces recorded. */
function link(url: string, wsUrl: string, opts: Partial<LinkOptions> = {}, tokens?: TokenSource) {
  const kit = new AgentKit({ url });
  kit.tokens.start();
  const supervisor = new LinkSupervisor({
    wsUrl,
    botId: 'bot-1',
    tokens: tokens ?? kit.tokens,
    clock: systemClock,
    log: kit.log,
    backoff: { baseMs: 50, capMs: 400 },
    ...opts,
  });
  const backoffs: Backoff[] = [];
  supervisor.on('backoff', (b: Omit<Backoff, 'lastError'>) => backoffs.push({ ...b, lastError: supervisor.status.lastError }));
  cleanups.push(() => kit.close(), () => supervisor.stop());
  supervisor.start();
  return { kit, supervisor, backoffs };
}

const connected = (s: LinkSupervisor) => () => s.status.state === 'connected';

describe('LinkSupervisor against the reference service', () => {
  it('connects with Bearer and ?botId, echoes, and closes with 1000 on stop without reconnecting', async () => {
    const svc = await service();
    const { supervisor, kit } = link(svc.url, svc.wsUrl);
    await waitFor(connected(supervisor), 5000, 'connected');
    const got = new Promise<string>((resolve) => supervisor.once('message', (d: Buffer) => resolve(d.toString())));
    expect(supervisor.send('hello')).toBe(true);
    expect(await got).toBe('hello');
    expect(svc.stats.ws.perBotOpen('bot-1')).toBe(1);
    const closed = new Promise<void>((resolve) => svc.events.once('ws-close', () => resolve()));
    await supervisor.stop();
    await closed;
    expect(supervisor.status.state).toBe('stopped');
    expect(supervisor.send('x')).toBe(false);
    await new Promise((r) => setTimeout(r, 300));
    expect(svc.stats.ws.total).toBe(1);
    expect(kit.logText()).not.toContain((await kit.tokens.current()).slice(0, 20));
  });

  it('comes back after the service drops every socket, within the backoff schedule', async () => {
    const svc = await service();
    const { supervisor, backoffs } = link(svc.url, svc.wsUrl);
    await waitFor(connected(supervisor), 5000, 'connected');
    svc.faults.dropAllSockets();
    await waitFor(() => supervisor.status.reconnects === 1 && supervisor.status.state === 'connected', 2000, 'reconnected');
    expect(backoffs).toHaveLength(1);
    // The first retry after a drop spreads over attempt 2's window: [0, 4 × 50 ms).
    expect(backoffs[0]!.delayMs).toBeLessThan(200);
    expect(supervisor.status.reconnects).toBe(1);
  });

  it('never holds two sockets, even under rapid drops', async () => {
    const svc = await service();
    const { supervisor } = link(svc.url, svc.wsUrl, { backoff: { baseMs: 1, capMs: 5 } });
    await waitFor(connected(supervisor), 5000, 'connected');
    for (let i = 0; i < 40; i++) {
      svc.faults.dropAllSockets();
      await new Promise((r) => setTimeout(r, 15 + (i % 4) * 10));
    }
    await waitFor(connected(supervisor), 3000, 'reconnected');
    expect(svc.stats.ws.maxConcurrentPerBot).toBe(1);
    expect(svc.stats.ws.total).toBeGreaterThan(5);
  });

  it('reconnects when the service comes back on the same port after 5 s', async () => {
    const dir = tempDir('botlink-link-');
    const dbFile = join(dir, 'svc.db');
    const first = await createReferenceService({ dbFile });
    const { supervisor } = link(first.url, first.wsUrl, { backoff: { baseMs: 500, capMs: 2000 } });
    await waitFor(connected(supervisor), 5000, 'connected');
    await first.close();
    await waitFor(() => supervisor.status.state === 'backoff', 3000, 'backoff');
    await new Promise((r) => setTimeout(r, 5000));
    const second = await service(undefined, { dbFile, port: first.port });
    await waitFor(connected(supervisor), 4000, 'reconnected to the restarted service');
    expect(second.stats.getToken.total).toBe(0);
  });

  it('renews a token that would expire before connecting', async () => {
    const svc = await service(undefined, { accessTtlS: 2 });
    const { supervisor, kit } = link(svc.url, svc.wsUrl, { tokenMarginMs: 300_000 });
    await waitFor(connected(supervisor), 5000, 'connected');
    await new Promise((r) => setTimeout(r, 2200));
    svc.faults.dropAllSockets();
    await waitFor(() => supervisor.status.reconnects === 1 && supervisor.status.state === 'connected', 3000, 'reconnected');
    expect(kit.tokens.snapshot().renewals.refreshed).toBeGreaterThanOrEqual(1);
    expect(supervisor.status.lastError).toBeNull();
  });

  it('detects a peer that stops answering pings', async () => {
    const { url, wss, close } = await rawWsServer();
    cleanups.push(close);
    const sockets: ServerSocket[] = [];
    wss.on('connection', (s) => sockets.push(s));
    const svc = await service();
    const { supervisor, backoffs } = link(svc.url, url, { heartbeatIntervalMs: 200, heartbeatTimeoutMs: 150 });
    await waitFor(connected(supervisor), 5000, 'connected');
    await waitFor(() => backoffs.length > 0, 2000, 'the dead peer to be noticed');
    expect(backoffs[0]!.reason).toContain('no pong');
    expect(sockets[0]!.readyState).not.toBe(sockets[0]!.OPEN);
  });
});

describe('the three 400 answers', () => {
  it.each(['handshake', 'frame', 'close-reason'] as const)('Unauthorized (%s): renew, reconnect at once, then back off and say why', async (form) => {
    const svc = await service();
    const { supervisor, backoffs, kit } = link(svc.url, svc.wsUrl);
    await waitFor(connected(supervisor), 5000, 'connected');
    svc.faults.refuseWebSockets(WsMessage.UNAUTHORIZED, form);
    svc.faults.dropAllSockets();
    await waitFor(() => backoffs.some((b) => b.reason.includes('Unauthorized again')), 5000, 'the second Unauthorized');
    // One plain drop, then one immediate retry after the first Unauthorized: no backoff between them.
    expect(backoffs.find((b) => b.reason.includes('Unauthorized'))?.reason).toContain('Unauthorized again');
    expect(kit.tokens.snapshot().renewals.refreshed).toBeGreaterThanOrEqual(1);
    // Read from the backoff itself: its retry may already have connected (lastError null) before the
    // frame or close refuses it again.
    expect(backoffs.find((b) => b.reason.includes('Unauthorized again'))?.lastError).toContain('account configuration');
    svc.faults.refuseWebSockets(undefined);
    await waitFor(connected(supervisor), 5000, 'connected once the service accepts again');
  });

  it.each(['handshake', 'frame', 'close-reason'] as const)('botId not found or invalid (%s): slow retry with a clear reason', async (form) => {
    const svc = await service();
    svc.faults.refuseWebSockets(WsMessage.BOT_INVALID, form);
    const { supervisor, backoffs } = link(svc.url, svc.wsUrl);
    await waitFor(() => backoffs.length > 0, 5000, 'a backoff');
    expect(backoffs[0]!.delayMs).toBe(300_000);
    expect(supervisor.status).toMatchObject({ state: 'backoff' });
    expect(supervisor.status.lastError).toContain('botlink provision');
  });

  it('REPEAT_CLIENT_SESSION as a frame: the displaced agent backs off at least 30 s', async () => {
    const svc = await service();
    const a = link(svc.url, svc.wsUrl);
    await waitFor(connected(a.supervisor), 5000, 'a connected');
    const b = link(svc.url, svc.wsUrl);
    await waitFor(() => a.supervisor.status.state === 'displaced', 5000, 'a displaced');
    expect(a.backoffs[0]!.delayMs).toBeGreaterThanOrEqual(30_000);
    expect(a.supervisor.status.lastError).toContain('REPEAT_CLIENT_SESSION');
    await waitFor(connected(b.supervisor), 5000, 'b connected');
    // The service counts a's socket until its own close event, which may come a turn after a's.
    await waitFor(() => svc.stats.ws.perBotOpen('bot-1') === 1, 2000, 'one socket open for bot-1');
  });

  it.each(['handshake', 'close-reason'] as const)('REPEAT_CLIENT_SESSION (%s) is recognised too', async (form) => {
    const { url, wss, close } = await rawWsServer((req) => (form === 'handshake' ? WsMessage.REPEAT_SESSION : undefined));
    cleanups.push(close);
    wss.on('connection', (s) => s.close(4000, WsMessage.REPEAT_SESSION));
    const svc = await service();
    const { supervisor, backoffs } = link(svc.url, url);
    await waitFor(() => backoffs.length > 0, 5000, 'a backoff');
    expect(supervisor.status.state).toBe('displaced');
    expect(backoffs[0]!.delayMs).toBeGreaterThanOrEqual(30_000);
  });
});

/** A bare ws server that never answers pings; optionally refuses handshakes with an HTTP 400 JSON body. */
async function rawWsServer(refuse?: (req: IncomingMessage) => string | undefined) {
  const server = createServer();
  const wss = new WebSocketServer({ noServer: true, autoPong: false });
  server.on('upgrade', (req, socket, head) => {
    const msg = refuse?.(req);
    if (msg) {
      const body = JSON.stringify({ code: 400, msg });
      socket.end(`HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `ws://127.0.0.1:${port}/soulmate/voiceChat/v1`,
    wss,
    close: () =>
      new Promise<void>((resolve) => {
        for (const c of wss.clients) c.terminate();
        wss.close();
        server.close(() => resolve());
      }),
  };
}
