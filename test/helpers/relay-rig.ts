import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import WebSocket, { type RawData } from 'ws';
import { LinkSupervisor, type LinkOptions, type LinkState, type LinkStateChange } from '../../src/agent/link/supervisor.js';
import { Relay } from '../../src/agent/local/relay.js';
import { systemClock, type Clock } from '../../src/clock.js';
import { downText } from './guide-frames.js';
import { rawWsServer } from './ws-peers.js';

export interface Frame {
  data: Buffer;
  isBinary: boolean;
}

/** Frames in arrival order; next() waits for the next one. */
export class FrameQueue {
  readonly #frames: Frame[] = [];
  #waiter: ((f: Frame) => void) | undefined;

  push(data: RawData, isBinary: boolean): void {
    const frame = { data: Buffer.from(data as Buffer), isBinary };
    const waiter = this.#waiter;
    this.#waiter = undefined;
    if (waiter) waiter(frame);
    else this.#frames.push(frame);
  }

  next(): Promise<Frame> {
    const frame = this.#frames.shift();
    if (frame) return Promise.resolve(frame);
    return new Promise((resolve) => (this.#waiter = resolve));
  }

  /** The next frame as parsed JSON (it must be text). */
  async json(): Promise<Record<string, unknown>> {
    const f = await this.next();
    if (f.isBinary) throw new Error(`expected a text frame, got ${f.data.length} binary bytes`);
    return JSON.parse(f.data.toString('utf8')) as Record<string, unknown>;
  }
}

/** The cloud's greeting as DESIGN §1.7 shows it (roundId "", mid null): what the relay keeps and replays. */
export const GREETING = downText('CFG_BOT_EVENT');

/** One cloud connection as the peer sees it: its query and every frame it got. */
export interface CloudConn {
  query: URLSearchParams;
  ws: WebSocket;
  frames: FrameQueue;
}

/** A cloud on 127.0.0.1: greets every connection, echoes frames while `echo` is on, refuses while `refusing`. */
export async function cloudPeer() {
  const state = { refusing: false, echo: true };
  const peer = await rawWsServer(() => (state.refusing ? { status: 503, body: '{"code":503,"msg":"down"}' } : undefined));
  const conns: CloudConn[] = [];
  let onConn: ((c: CloudConn) => void) | undefined;
  peer.wss.on('connection', (ws: WebSocket, req: IncomingMessage) => {
    const conn = { query: new URL(req.url ?? '/', 'http://x').searchParams, ws, frames: new FrameQueue() };
    conns.push(conn);
    ws.on('message', (data, isBinary) => {
      conn.frames.push(data, isBinary);
      if (state.echo) ws.send(data, { binary: isBinary });
    });
    ws.send(GREETING);
    onConn?.(conn);
  });
  return Object.assign(state, {
    url: peer.url,
    conns,
    close: peer.close,
    /** The connection after the `n` already seen. */
    connection(n: number): Promise<CloudConn> {
      const c = conns[n];
      if (c) return Promise.resolve(c);
      return new Promise((resolve) => {
        onConn = () => {
          if (conns.length > n) resolve(conns[n]!);
        };
      });
    },
  });
}

/** An attached app: its socket and the frames it received. */
export interface App {
  ws: WebSocket;
  frames: FrameQueue;
  closed: Promise<[number, Buffer]>;
}

/** A real link, a relay, and an HTTP server on a Unix socket in a temp dir whose upgrades go to the relay. */
export async function relayRig(opts: { cloudUrl: string; relayClock?: Clock; link?: Partial<LinkOptions>; onChange?: () => void }) {
  const dir = mkdtempSync(join(tmpdir(), 'relay-'));
  const sock = join(dir, 'botlink.sock');
  const log = pino({ level: 'silent' });
  let sessions = 0;
  const link = new LinkSupervisor({
    wsUrl: opts.cloudUrl,
    botId: 'bot-1',
    tokens: { current: async () => 'test-token', invalidate: () => undefined },
    clock: systemClock,
    log,
    backoff: { baseMs: 20, capMs: 100 },
    displacedBackoff: { baseMs: 40, capMs: 100 },
    heartbeatIntervalMs: 600_000,
    newSessionId: () => `fresh-${++sessions}`,
    ...opts.link,
  });
  const relay = new Relay({ link, clock: opts.relayClock ?? systemClock, log, ...(opts.onChange && { onChange: opts.onChange }) });
  const server = createServer((_req, res) => res.writeHead(404).end());
  server.on('upgrade', (req, socket, head) =>
    req.url?.startsWith('/v1/observe') ? relay.handleObserve(req, socket, head) : relay.handleUpgrade(req, socket, head),
  );
  server.listen(sock);
  await once(server, 'listening');
  const apps: WebSocket[] = [];

  /** Resolves at the link's next 'state' event in `state` (at once when it is there). */
  const reaches = (state: LinkState): Promise<void> =>
    link.status.state === state
      ? Promise.resolve()
      : new Promise((resolve) => {
          const on = (s: LinkStateChange): void => {
            if (s.state !== state) return;
            link.off('state', on);
            resolve();
          };
          link.on('state', on);
        });

  /** Opens an app on the relay with `query`; resolves once the upgrade is answered (open or refused). */
  const attach = async (query = '', wsOpts: WebSocket.ClientOptions = {}, path = '/soulmate/voiceChat/v1'): Promise<App> => {
    const ws = new WebSocket(`ws+unix://${sock}:${path}${query}`, { perMessageDeflate: false, ...wsOpts });
    apps.push(ws);
    const frames = new FrameQueue();
    ws.on('message', (data, isBinary) => frames.push(data, isBinary));
    ws.on('error', () => undefined);
    // Not once(): it rejects on 'error', which a refused upgrade emits.
    const closed = new Promise<[number, Buffer]>((resolve) => ws.on('close', (code, reason) => resolve([code, reason])));
    return { ws, frames, closed };
  };

  return {
    link,
    relay,
    sock,
    reaches,
    attach,
    /** Opens an observer on /v1/observe with `query`, like attach. */
    observe: (query = '') => attach(query, {}, '/v1/observe'),
    async close() {
      for (const ws of apps) ws.terminate();
      await relay.stop();
      await link.stop();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Waits until the app's frames before now were handled by the relay: a ping is answered after them. */
export async function settled(ws: WebSocket): Promise<void> {
  const pong = once(ws, 'pong');
  ws.ping();
  await pong;
}
