import { createServer, type IncomingMessage } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { WebSocketServer, type WebSocket as ServerSocket } from 'ws';
import { systemClock } from '../../src/agent/time/clock.js';
import { LinkSupervisor, MAX_CLOUD_MESSAGE_BYTES, type LinkOptions, type TokenSource } from '../../src/agent/link/supervisor.js';
import { WsMessage } from '../../src/protocol/codes.js';
import { wsFailureBody } from '../../src/protocol/wire.js';
import { createReferenceService } from '../../src/service/server.js';
import { AgentKit } from '../helpers/agent-kit.js';
import { useHarness } from '../helpers/harness.js';
import { waitFor } from '../helpers/wait-for.js';

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
    const { url, wss, close } = await rawWsServer(() => (form === 'handshake' ? wsFailureBody(WsMessage.REPEAT_SESSION) : undefined));
    cleanups.push(close);
    wss.on('connection', (s) => s.close(4000, WsMessage.REPEAT_SESSION));
    const svc = await service();
    const { supervisor, backoffs } = link(svc.url, url);
    await waitFor(() => backoffs.length > 0, 5000, 'a backoff');
    expect(supervisor.status.state).toBe('displaced');
    expect(backoffs[0]!.delayMs).toBeGreaterThanOrEqual(30_000);
  });
});

describe("the guide's displacement event: EVENT REPEAT_CLIENT_SESSION, whatever its code", () => {
  const EVENT = JSON.stringify({ code: 200, msg: 'displaced', contentType: 'EVENT', content: { eventType: 'REPEAT_CLIENT_SESSION', eventData: {} } });

  it.each(['frame', 'close-reason', 'handshake'] as const)('as a %s: displaced, with the same anti-flap backoff as code 400', async (form) => {
    const { url, wss, close } = await rawWsServer(() => (form === 'handshake' ? EVENT : undefined));
    cleanups.push(close);
    const closes: number[] = [];
    wss.on('connection', (s) => {
      s.on('close', (code) => closes.push(code));
      if (form === 'frame') s.send(EVENT);
      else s.close(4000, EVENT);
    });
    const svc = await service();
    const { supervisor, backoffs } = link(svc.url, url);
    const displaced = new Promise((resolve) => supervisor.once('displaced', resolve));
    await waitFor(() => backoffs.length > 0, 5000, 'a backoff');
    expect(supervisor.status.state).toBe('displaced');
    expect(supervisor.status.lastError).toContain('REPEAT_CLIENT_SESSION');
    expect(backoffs[0]!.delayMs).toBeGreaterThanOrEqual(30_000);
    expect(await displaced).toEqual({ count: 1 });
    // A frame is not passed on as conversation: the link closes the displaced socket itself.
    if (form === 'frame') await waitFor(() => closes.includes(1000), 5000, 'the link closing the socket with 1000');
  });

  it('passes a conversation EVENT through as a message', async () => {
    const { url, wss, close } = await rawWsServer();
    cleanups.push(close);
    const greeting = JSON.stringify({ code: 200, msg: '', contentType: 'EVENT', content: { eventType: 'CFG_BOT_EVENT', eventData: {} } });
    wss.on('connection', (s) => s.send(greeting));
    const svc = await service();
    const { supervisor } = link(svc.url, url);
    const got = await new Promise<string>((resolve) => supervisor.once('message', (d: Buffer) => resolve(d.toString())));
    expect(got).toBe(greeting);
    expect(supervisor.status.state).toBe('connected');
  });
});

describe('bounds a hostile or broken cloud', () => {
  it('gives the handshake connectTimeoutMs in total, even while a 401 body trickles in, then backs off', async () => {
    const trickle = await tricklingRefusal();
    cleanups.push(trickle.close);
    const svc = await service();
    const { supervisor, backoffs } = link(svc.url, trickle.url, { connectTimeoutMs: 500 });
    await waitFor(() => backoffs.length > 0, 10_000, 'a backoff while the body still trickles');
    expect(backoffs[0]!.reason).toContain('WebSocket handshake not complete within 500 ms');
    expect(supervisor.status.state).toBe('backoff');
    // The link hung up on the first refusal before its body was through.
    expect(await trickle.firstHangUp).toBeLessThan(trickle.bodyLength);
  });

  it('closes a socket whose cloud sends a message over the limit with 1009 and reconnects with backoff', async () => {
    const { url, wss, close } = await rawWsServer();
    cleanups.push(close);
    const closes: number[] = [];
    let connections = 0;
    wss.on('connection', (s) => {
      s.on('close', (code) => closes.push(code));
      // The first connection gets one byte too many; the second a message exactly at the limit.
      s.send(Buffer.alloc(connections++ === 0 ? MAX_CLOUD_MESSAGE_BYTES + 1 : MAX_CLOUD_MESSAGE_BYTES));
    });
    const svc = await service();
    const { supervisor, backoffs } = link(svc.url, url);
    const atLimit = new Promise<number>((resolve) => supervisor.once('message', (d: Buffer) => resolve(d.length)));
    expect(await atLimit).toBe(MAX_CLOUD_MESSAGE_BYTES);
    expect(closes).toEqual([1009]);
    expect(backoffs).toHaveLength(1);
    expect(backoffs[0]!.reason).toBe(`the cloud sent a message over ${MAX_CLOUD_MESSAGE_BYTES} bytes: closed with 1009`);
    expect(supervisor.status).toMatchObject({ state: 'connected', reconnects: 1 });
  });
});

/**
 * A loopback server that refuses every upgrade with HTTP 401 and a JSON body announced in full but
 * sent one byte every 50 ms (a minute in all), as a broken proxy or a hostile cloud might.
 */
async function tricklingRefusal() {
  const body = Buffer.from(wsFailureBody(WsMessage.UNAUTHORIZED).padEnd(1200, ' '));
  let hangUp: (bodyBytesSent: number) => void;
  const firstHangUp = new Promise<number>((resolve) => (hangUp = resolve));
  const sockets = new Set<Socket>();
  const server = createTcpServer((socket) => {
    sockets.add(socket);
    socket.once('data', () => {
      socket.write(`HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
      let sent = 0;
      const timer = setInterval(() => sent < body.length && socket.write(body.subarray(sent, ++sent)), 50);
      socket.on('close', () => {
        clearInterval(timer);
        hangUp(sent);
      });
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `ws://127.0.0.1:${port}/soulmate/voiceChat/v1`,
    bodyLength: body.length,
    /** How much of its body the first connection had been sent when the link hung up. */
    firstHangUp,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A bare ws server that never answers pings; `refuse` may answer a handshake with HTTP 400 and a body. */
async function rawWsServer(refuse?: (req: IncomingMessage) => string | undefined) {
  const server = createServer();
  const wss = new WebSocketServer({ noServer: true, autoPong: false });
  server.on('upgrade', (req, socket, head) => {
    const body = refuse?.(req);
    if (body) {
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
